#pragma once
// How long things wait, in one place: the watchdog's schedule of a hold, the limits of a
// connection, and the deadline of a replicated vote. Pure functions (no I/O), shared by the engine,
// the nodes and the checks the public API makes before anything is sent.

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
// With auto_extend, also when the ttl is below min_auto_extended_ttl. `problem` names the field at
// fault ("ttl", "extend_every", "renew_deadline"; validate.hpp's convention).
[[nodiscard]] std::optional<HoldSchedule> hold_schedule(Millis ttl, const HoldOptions& options,
                                                        OptionsProblem& problem);
// The hold's check alone (check_hold() is its reason): nullopt when hold_schedule() has one.
[[nodiscard]] std::optional<OptionsProblem> find_hold_problem(Millis ttl,
                                                              const HoldOptions& options);
// The shortest ttl a hold extends automatically: a round to five nodes takes a few ms, and an
// extension every ttl / 3 must fit several of them before the lock runs out (below this the
// watchdog would mostly report losses). `redlock-cli run` always extends, so its --ttl has it.
inline constexpr Millis min_auto_extended_ttl{30};

// ---- connections: every multiple of node_timeout / connect_timeout, derived here ------------

// A connection whose oldest command has gone unanswered this long is dropped and reconnected, so a
// paused or silent server cannot make the pipeline (and memory) grow without bound. Ten node
// deadlines: a command is already no vote after one, and a server that answers late but answers
// (a loaded machine) keeps its connection; at least a second, so that a short node_timeout does not
// turn a garbage collection pause into reconnect churn.
[[nodiscard]] Millis command_stall_limit(const Options& options) noexcept;
// How long close() lets commands already queued (a release, a rollback written just before the
// client is destroyed) be answered: two node deadlines, the time one more round would have had.
[[nodiscard]] Millis drain_limit(const Options& options) noexcept;
// A connection that asks where the servers are (a sentinel, a cluster node for its slot map): it
// answers within a few connect deadlines or is replaced by the next one; at least a second.
[[nodiscard]] Millis discovery_stall_limit(const Options& options) noexcept;
// A command queued while its connection is still being set up waits for the connect too: its
// deadline is moved on by the connect deadline, so that a fresh client's first call is not a
// certain timeout (a handshake is one more round trip before it).
[[nodiscard]] Millis allowance_while_connecting(Millis connect_timeout) noexcept;
// RFC 8305's Connection Attempt Delay: how long a connect attempt has alone before the next
// address's starts beside it. 250 ms as curl and Go, but a quarter of the connect deadline when
// that is shorter (the library's default deadline is 250 ms), so that several addresses fit in it.
[[nodiscard]] Millis connection_attempt_delay(Millis connect_timeout) noexcept;
// A waiting writer's mark (read-write locks) must outlive the sleep between its attempts (twice the
// longest sleep, plus a round), but not a writer that gave up or died: readers are held back only
// while a writer is really trying. At least half a second.
[[nodiscard]] Millis writer_mark_ttl(const Options& options) noexcept;
// A hold whose extension was uncertain (timeouts, error replies) tries again after two node
// deadlines (the failed round's own time again, so retries do not pile onto a slow server), or a
// tenth of the extension interval when that is longer, until its renew deadline.
[[nodiscard]] Millis extend_retry_after(Millis node_timeout, Millis extend_every) noexcept;

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
