// lock.hpp: the Lock value (BootClock::now lives in core/clock.cpp, where every layer reaches it).
#include "redlock/lock.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <string>

#include "core/quorum.hpp"
#include "engine/lock_builder.hpp"

namespace redlock {

Millis LockBuilder::time_left(BootClock::time_point deadline) noexcept {
  const auto left = deadline - BootClock::now();
  if (left <= BootClock::duration::zero()) return Millis{0};
  return std::chrono::duration_cast<Millis>(left);
}

Millis Lock::remaining() const noexcept { return LockBuilder::time_left(deadline_); }

Lock Lock::from_token(std::vector<std::string> resources, std::string token, LockMode mode) {
  Lock l;
  l.mode_ = mode;
  l.resources_ = std::move(resources);
  l.token_ = std::move(token);
  l.deadline_ = BootClock::time_point::max();
  return l;
}

namespace {

// Ttls of the nodes that store one token; nullopt: no expiry.
using Ttls = std::vector<std::optional<Millis>>;

// How long a quorum still stores it: the quorum-th longest ttl (nullopt, the longest, for none).
std::optional<Millis> quorum_ttl(Ttls ttls, int quorum) {
  std::sort(ttls.begin(), ttls.end(), [](const auto& a, const auto& b) {
    if (!a || !b) return !a && b;  // no expiry first
    return *a > *b;
  });
  return ttls[static_cast<std::size_t>(quorum - 1)];
}

}  // namespace

StatusVerdict status_verdict(const StatusResult& status) {
  StatusVerdict v;
  v.nodes = static_cast<int>(status.nodes.size());
  if (v.nodes == 0) return v;  // nothing was asked (a closed engine): unknown
  const int quorum = detail::quorum_of(v.nodes);
  std::map<std::string, Ttls> tokens, readers;
  bool stored = false;  // anything at all: a lock key (of any type) or a reader's entry
  for (const auto& n : status.nodes) {
    if (!n.up || !n.detail.empty()) continue;  // no answer, or one that could not be read
    ++v.answered;
    if (n.value) tokens[*n.value].push_back(n.pttl);
    stored = stored || (!n.type.empty() && n.type != "none") || n.reader_count > 0;
    for (const auto& r : n.readers) readers[r.token].push_back(r.remaining);
  }
  const auto most = [](const std::map<std::string, Ttls>& m) {
    std::size_t k = 0;
    for (const auto& [token, ttls] : m) k = std::max(k, ttls.size());
    return static_cast<int>(k);
  };
  v.holding = std::max(most(tokens), most(readers));
  // A quorum of one token: at most one token can have it (two quorums share a node).
  for (const auto& [token, ttls] : tokens) {
    if (static_cast<int>(ttls.size()) < quorum) continue;
    v.kind = StatusVerdict::Kind::held;
    v.token = token;
    v.holding = static_cast<int>(ttls.size());
    v.remaining = quorum_ttl(ttls, quorum);
    return v;
  }
  for (const auto& [token, ttls] : readers) {
    if (static_cast<int>(ttls.size()) < quorum) continue;
    const auto left = quorum_ttl(ttls, quorum);
    if (v.readers == 0 || (v.remaining && left && *left > *v.remaining)) v.remaining = left;
    ++v.readers;
    v.kind = StatusVerdict::Kind::held;
  }
  if (v.kind == StatusVerdict::Kind::held) return v;
  if (v.holding + (v.nodes - v.answered) >= quorum) {
    v.kind = StatusVerdict::Kind::unknown;  // the silent nodes could complete a quorum
  } else {
    v.kind = stored ? StatusVerdict::Kind::partly_held : StatusVerdict::Kind::free;
  }
  return v;
}

}  // namespace redlock
