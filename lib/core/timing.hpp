#pragma once
// How long things wait, in one place: the watchdog's schedule of a hold, and the deadline of a
// replicated vote. Pure functions (no I/O), shared by the engine, the nodes and the checks the
// public API makes before anything is sent.

#include <optional>
#include <string>

#include "redlock/guard.hpp"
#include "redlock/options.hpp"

namespace redlock::detail {

// ---- holding a lock (HoldOptions) ---------------------------------------------------------------

struct HoldSchedule {
  Millis extend_every;    // an extension is due this long after the last success
  Millis renew_deadline;  // no success for this long: the hold gives up (signals the loss)
};

// The schedule of a hold of a lock of `ttl`. extend_every defaults to ttl/3 (Redisson's watchdog).
// renew_deadline defaults to halfway between the first extension and the ttl: half of what is
// left after the first try is for retrying, the other half is the holder's time to stop before
// the lock may be someone else's. With the default extend_every that is 2/3 of the ttl, the ratio
// of client-go's leader election (RenewDeadline 10 s of a 15 s lease). nullopt, with `why` naming
// the bad value, when extend_every is not in (0, ttl) or renew_deadline not in (extend_every, ttl]
// (a renew deadline at the ttl gives up only at the validity deadline, as without one).
// With auto_extend, also when the ttl is below min_auto_extended_ttl.
[[nodiscard]] std::optional<HoldSchedule> hold_schedule(Millis ttl, const HoldOptions& options,
                                                        std::string& why);
// The shortest ttl a hold extends automatically: a round to five nodes takes a few ms, and an
// extension every ttl / 3 must fit several of them before the lock runs out (below this the
// watchdog would mostly report losses). `redlock-cli run` always extends, so its --ttl has it.
inline constexpr Millis min_auto_extended_ttl{30};

// ---- replicated votes (Options::min_replicas, NodeAddress::min_replicas) ----------------------

// Redis and Valkey notice that a WAIT has timed out only on their next server cron tick, every
// 1000/hz ms (hz 10 by default): measured on Redis 7.0, `WAIT 1 25` on a master without replicas
// answers after 82-100 ms and `WAIT 1 100` after 100-200 ms.
inline constexpr Millis server_cycle{100};

struct ReplicaWait {
  int replicas = 0;     // WAIT for this many replicas after each write that gives a vote; 0: off
  Millis timeout{0};    // WAIT's own timeout
  Millis allowance{0};  // how much later than node_timeout the vote's answer may come
};

// The replicated votes of the vote at `address` under `options`: the address's own min_replicas
// when it has one (?min_replicas=N), else Options::min_replicas; replica_timeout, by default half
// of node_timeout. The answer of such a vote comes after the write's round trip, WAIT's timeout and
// the server's tick that ends it: its deadline is node_timeout + replica_timeout + server_cycle,
// so that a node without enough replicas says so (NOREPLICAS) instead of timing out.
[[nodiscard]] ReplicaWait replica_wait(const Options& options, const NodeAddress& address);
// Whether any vote waits for replicas.
[[nodiscard]] bool any_replicated(const Options& options);

}  // namespace redlock::detail
