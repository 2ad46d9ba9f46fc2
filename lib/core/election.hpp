#pragma once
// Leader election, the pure part: the checks of a campaign, and what a quorum of leader reads
// (kinds.hpp: read_leader) says about who leads. The leader kind itself is in kinds.cpp.
//
// Why the fence is the term: the leader's acquire script grows the name's fence counter on every
// node that grants, and before anyone is leader the write-back raises the counter to the maximum
// `f` on a quorum (settle_leader). Two quorums share a node, so the next leader's increment runs
// on a node already at `f` or above: terms grow strictly from leader to leader, also across the
// plain fenced locks of the same name, which share the counter (docs/design.md, "Leader
// election"). Like fences, this holds while the nodes keep their counters (appendfsync always).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/reply.hpp"
#include "redlock/error.hpp"
#include "redlock/leader.hpp"
#include "redlock/options.hpp"

namespace redlock::detail {

// One node's answer to read_leader().
struct LeaderRow {
  bool answered = false;  // a reply of the expected shape came
  std::optional<std::string> lock_value;
  std::optional<Millis> pttl;        // of the lock key; nullopt without a key or an expiry
  std::optional<std::string> token;  // the record's
  std::uint64_t term = 0;            // 0: not settled (or no record)
  std::optional<Millis> since;       // how long ago the record was written, by that node's clock
  std::string id;
  // Not answered: the node's record of why ("timeout", "AUTH failed: ...", an error reply), so
  // that a read without a quorum says what the user has to fix, and a read refused by this
  // client's configuration on too many nodes is Errc::refused (no retry helps), as acquire's is.
  NodeOutcome failure;
};

// What a node's reply to read_leader() says (answered false for any other shape).
[[nodiscard]] LeaderRow classify_leader(const Reply& r);

// Who leads, from one row per node asked: the identity (a valid one: check_identity()) whose
// record carries the lock key's token and the same settled term on a quorum of the nodes; nobody
// when no identity holds on a quorum and none could with the nodes that did not answer; no_quorum
// otherwise.
[[nodiscard]] LeaderResult decide_leader(const std::vector<LeaderRow>& rows);

// The checks check_acquire() adds for LockMode::leader (and for an identity given with another
// mode), naming the bad value: the field is "identity" for the identity itself, "mode" for what
// an election cannot be combined with.
[[nodiscard]] std::optional<OptionsProblem> check_election(std::size_t resources,
                                                           const AcquireOptions& o);

}  // namespace redlock::detail
