// The verdict of a status read (status_verdict, redlock-cli status's first line), without servers.
#include <doctest/doctest.h>

#include "redlock/lock.hpp"

using namespace redlock;
using namespace std::chrono_literals;

namespace {
NodeKeyState row(std::optional<std::string> value, std::optional<Millis> pttl = 10s,
                 bool up = true) {
  NodeKeyState n;
  n.up = up;
  if (!up) n.detail = "not connected";
  n.value = std::move(value);
  n.pttl = n.value ? pttl : std::nullopt;
  n.type = n.value ? "string" : "none";
  return n;
}
NodeKeyState down() { return row(std::nullopt, std::nullopt, false); }
StatusVerdict judge(std::vector<NodeKeyState> nodes) {
  return status_verdict(StatusResult{std::move(nodes)});
}
using K = StatusVerdict::Kind;
}  // namespace

TEST_CASE("status verdict: held means one token on a quorum") {
  auto v = judge({row("A", 9s), row("A", 5s), row("A", 7s), row(std::nullopt), down()});
  CHECK(v.kind == K::held);
  CHECK(v.token == "A");
  CHECK(v.holding == 3);
  CHECK(v.answered == 4);
  CHECK(v.nodes == 5);
  // Until fewer than a quorum (3) have it: the third longest ttl.
  CHECK(v.remaining == 5s);
  v = judge({row("A", 9s), row("A", std::nullopt), row("A", std::nullopt)});
  CHECK(v.remaining == std::nullopt);  // two keys without expiry are a quorum of 3 for ever
  v = judge({row("A", 9s), row("A", std::nullopt), row("B")});
  CHECK(v.remaining == 9s);
  // Held with a majority down counts: the answers alone make the quorum.
  CHECK(judge({row("A"), row("A"), row("A"), down(), down()}).kind == K::held);
}

TEST_CASE("status verdict: free, partly held, and no quorum to tell") {
  CHECK(judge({row(std::nullopt), row(std::nullopt), row(std::nullopt)}).kind == K::free);
  CHECK(judge({row(std::nullopt), row(std::nullopt), down()}).kind == K::free);
  // Every node down, or too few answers: the silent ones could hold a token on a quorum.
  CHECK(judge({down(), down(), down()}).kind == K::unknown);
  CHECK(judge({row(std::nullopt), down(), down()}).kind == K::unknown);
  CHECK(judge({}).kind == K::unknown);
  // A quorum holds different tokens: no holder; one down node could not change that.
  auto v = judge({row("A"), row("A"), row("B"), row("B"), row(std::nullopt)});
  CHECK(v.kind == K::partly_held);
  CHECK(v.holding == 2);
  CHECK(judge({row("A"), row(std::nullopt), row(std::nullopt), row(std::nullopt), down()}).kind ==
        K::partly_held);
  // ... but two down nodes could both have A: a quorum of 3.
  CHECK(judge({row("A"), row(std::nullopt), row(std::nullopt), down(), down()}).kind == K::unknown);
  CHECK(judge({row("A"), row("A"), row("B"), row("B"), down()}).kind == K::unknown);
  // A key of another type is not free.
  auto other = row(std::nullopt);
  other.type = "hash";
  CHECK(judge({other, row(std::nullopt), row(std::nullopt)}).kind == K::partly_held);
  // A node that answered something unreadable is not an answer.
  auto garbled = row(std::nullopt);
  garbled.detail = "unexpected reply";
  CHECK(judge({garbled, garbled, row(std::nullopt)}).kind == K::unknown);
}

TEST_CASE("status verdict: a read lock is held when a reader's entry is on a quorum") {
  auto reader = [](std::vector<std::pair<std::string, Millis>> entries) {
    auto n = row(std::nullopt);
    n.reader_count = entries.size();
    for (auto& [t, left] : entries) n.readers.push_back({t, left});
    return n;
  };
  auto v = judge(
      {reader({{"r1", 4s}, {"r2", 8s}}), reader({{"r1", 5s}, {"r2", 9s}}), reader({{"r2", 1s}})});
  CHECK(v.kind == K::held);
  CHECK(v.token.empty());
  CHECK(v.readers == 2);
  CHECK(v.holding == 3);
  CHECK(v.remaining == 8s);  // r2 keeps a quorum longest: its second longest entry
  CHECK(judge({reader({{"r1", 4s}}), row(std::nullopt), row(std::nullopt)}).kind == K::partly_held);
}
