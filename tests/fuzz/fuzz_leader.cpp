// Fuzz target: the nodes' answers to read_leader (the leader record beside an election's lock
// key), through the reader, into classify_leader() and the tally that picks the leader over a
// quorum, decide_leader() (core/election.hpp). In-process: no server, no socket.
//
// Input: byte 0 % 7 + 1 is the number of nodes asked; then what the nodes sent (RESP), one reply
// per node in order; a node whose reply is missing did not answer. Invariants (checked on the
// replies independently):
// - a row is an answer exactly when the reply is an array of 6 elements;
// - its term is the 4th element when that is an integer 0..2^63-1 or a text of 1-18 decimal
//   digits, else 0 (not settled); the pttl and the age are integers 0..max_ttl, else absent;
// - a leader is named exactly when one (token, term, id) is stored with the lock key's token, a
//   settled term and a valid identity (check_identity's rule, checked here byte by byte: 1-256
//   bytes, no control character) on a quorum of the nodes asked; its validity and age are the
//   quorum-th largest of those nodes' pttls and ages; no_quorum exactly when nobody is named and
//   the nodes that did not answer could still make up a quorum; the same whatever the nodes'
//   order;
// - a result is the same leadership as itself (same_leadership).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/election.hpp"
#include "fuzz_check.hpp"
#include "net/reader.hpp"
#include "redlock/error.hpp"

using namespace redlock;
using namespace redlock::detail;
using redlock::net::Reader;

namespace {

std::optional<std::uint64_t> settled_term(const Reply& r) {
  if (r.type == Reply::Type::integer) {
    if (r.integer <= 0) return std::nullopt;
    return static_cast<std::uint64_t>(r.integer);
  }
  if (r.type != Reply::Type::string || r.str.empty() || r.str.size() > 18) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : r.str) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (v == 0) return std::nullopt;
  return v;
}

std::optional<Millis> bounded_ms(const Reply& r) {
  if (r.type != Reply::Type::integer || r.integer < 0 || r.integer > max_ttl.count())
    return std::nullopt;
  return Millis{r.integer};
}

bool valid_identity(const Reply& r) {
  if (r.type != Reply::Type::string || r.str.empty() || r.str.size() > 256) return false;
  return std::none_of(r.str.begin(), r.str.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c < 0x20 || c == 0x7f;
  });
}

Millis quorum_th(std::vector<Millis> v, int quorum) {
  std::sort(v.begin(), v.end(), std::greater<>());
  return v[static_cast<std::size_t>(quorum - 1)];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const int nodes = data[0] % 7 + 1;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string what = fuzz::show(bytes.substr(0, 300));
  std::vector<Reply> replies;
  Reader reader;
  if (reader.feed(bytes.data(), bytes.size())) {
    while (static_cast<int>(replies.size()) < nodes && reader.next() == Reader::Next::reply)
      replies.push_back(reader.reply());
  }

  std::vector<LeaderRow> rows(static_cast<std::size_t>(nodes));
  // (token, term, id) -> pttls and ages of the nodes that store it as leader (the model).
  std::map<std::tuple<std::string, std::uint64_t, std::string>,
           std::pair<std::vector<Millis>, std::vector<Millis>>>
      stored;
  int answered = 0;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    const Reply& r = replies[i];
    const LeaderRow row = classify_leader(r);
    rows[i] = row;
    const bool shaped = r.type == Reply::Type::array && r.elements.size() == 6;
    FUZZ_CHECK(row.answered == shaped, what);
    if (!shaped) continue;
    ++answered;
    const auto& e = r.elements;
    FUZZ_CHECK(row.term == settled_term(e[3]).value_or(0), what + ": term");
    FUZZ_CHECK(row.pttl == bounded_ms(e[1]), what + ": pttl");
    FUZZ_CHECK(row.since == bounded_ms(e[4]), what + ": since");
    const bool lock_is_text = e[0].type == Reply::Type::string;
    const bool token_is_text = e[2].type == Reply::Type::string;
    if (lock_is_text && token_is_text && e[0].str == e[2].str && settled_term(e[3]) &&
        valid_identity(e[5])) {
      auto& s = stored[{e[2].str, *settled_term(e[3]), e[5].str}];
      s.first.push_back(bounded_ms(e[1]).value_or(Millis{0}));
      s.second.push_back(bounded_ms(e[4]).value_or(Millis{0}));
    }
  }

  const int quorum = nodes / 2 + 1;
  std::size_t most = 0;
  const std::tuple<std::string, std::uint64_t, std::string>* winner = nullptr;
  for (const auto& [key, s] : stored) {
    most = std::max(most, s.first.size());
    if (static_cast<int>(s.first.size()) >= quorum) winner = &key;
  }

  const LeaderResult res = decide_leader(rows);
  FUZZ_CHECK(res.nodes == nodes && res.answered == answered, what + ": counts");
  FUZZ_CHECK(same_leadership(res, res), what + ": not the same as itself");
  if (winner != nullptr) {
    const auto& s = stored.at(*winner);
    FUZZ_CHECK(!res.error && res.leader.has_value(), what + ": a quorum's leader not named");
    FUZZ_CHECK(res.leader->id == std::get<2>(*winner), what + ": id " + fuzz::show(res.leader->id));
    FUZZ_CHECK(res.leader->term == std::get<1>(*winner), what + ": term");
    FUZZ_CHECK(res.leader->validity == quorum_th(s.first, quorum), what + ": validity");
    FUZZ_CHECK(res.leader->since == quorum_th(s.second, quorum), what + ": since");
  } else {
    FUZZ_CHECK(!res.leader.has_value(),
               what + ": leader " + fuzz::show(res.leader ? res.leader->id : std::string()) +
                   " named without a quorum storing a valid record");
    const bool could = static_cast<int>(most) + (nodes - answered) >= quorum;
    FUZZ_CHECK((res.error == Errc::no_quorum) == could, what + ": no_quorum");
    FUZZ_CHECK(!res.error || res.error == Errc::no_quorum, what + ": error");
  }

  // The nodes' order does not matter.
  std::vector<LeaderRow> reversed(rows.rbegin(), rows.rend());
  const LeaderResult again = decide_leader(reversed);
  FUZZ_CHECK(same_leadership(res, again) && res.error == again.error, what + ": order");
  if (res.leader) FUZZ_CHECK(again.leader && again.leader->id == res.leader->id, what + ": order");
  return 0;
}
