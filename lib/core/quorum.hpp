#pragma once
// Quorum decisions and validity arithmetic: pure functions, no I/O, unit-tested without servers.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "redlock/error.hpp"
#include "redlock/lock.hpp"

namespace redlock::detail {

[[nodiscard]] constexpr int quorum_of(int nodes) noexcept { return nodes / 2 + 1; }

// Votes of one attempt so far.
struct Tally {
  int nodes = 0;    // N
  int ok = 0;       // granted (acquired / extended)
  int refused = 0;  // held by someone else (acquire) or token not there (extend)
  int failed = 0;   // down, timeout, error reply, excluded vote
  [[nodiscard]] int pending() const noexcept { return nodes - ok - refused - failed; }
};

enum class Decision { undecided, quorum, impossible };

// Decides as soon as the outcome is known: a quorum of grants, or so few grants plus pending
// answers that a quorum can no longer happen and its reason (failure_reason) can no longer
// change (where some nodes failed and enough answers are pending to be refusals that rule a
// quorum out by themselves, it waits for them).
[[nodiscard]] Decision decide(const Tally& t) noexcept;

// The grants plus the answers still pending fall short of a quorum: the round has failed,
// whether or not decide() can tell why yet.
[[nodiscard]] inline bool out_of_reach(const Tally& t) noexcept {
  return t.ok + t.pending() < quorum_of(t.nodes);
}

// Why an impossible attempt failed: `refusal` (contended / not_held) when refusals alone rule
// out a quorum, otherwise no_quorum.
[[nodiscard]] Errc failure_reason(const Tally& t, Errc refusal) noexcept;

// "at least " where answers were still pending when a round was decided (the counts in its
// message are of the answers in by then), else "".
[[nodiscard]] std::string at_least(const Tally& t);

// drift = ttl * drift_factor + 2 ms (Redis expires with 1 ms precision), rounded up to 1 us.
[[nodiscard]] std::chrono::microseconds drift(Millis ttl, double drift_factor) noexcept;

struct Validity {
  std::chrono::microseconds validity;  // ttl - elapsed - drift (may be negative)
  BootClock::time_point deadline;      // t1 + ttl - drift: never later than the nodes' expiry
  bool ok;                             // validity > min_validity
};

// `t1` is read before the first command of the attempt is sent, `t2` when the decision is made.
[[nodiscard]] Validity compute_validity(Millis ttl, double drift_factor, Millis min_validity,
                                        BootClock::time_point t1,
                                        BootClock::time_point t2) noexcept;

// From when on an attempt sent at `t1` can no longer give a lock: compute_validity(..., t1, t2)
// is not ok for any t2 at or after it (t1 + ttl - drift - min_validity), whatever a quorum says.
[[nodiscard]] BootClock::time_point validity_used_up_at(Millis ttl, double drift_factor,
                                                        Millis min_validity,
                                                        BootClock::time_point t1) noexcept;

// The largest of the counter values that nodes returned from their INCR (a fence, a queue
// ticket), and how many returned exactly that value: those nodes' counters already stand at it.
// Where they are a quorum, the write-back round that would raise a quorum to the maximum has
// nothing left to do (any later quorum meets one of them, and its INCR there gives more).
class CounterMax {
 public:
  void add(std::uint64_t value) noexcept {
    if (value > max_) {
      max_ = value;
      at_max_ = 1;
    } else if (value == max_) {
      ++at_max_;
    }
  }
  void reset() noexcept { *this = CounterMax{}; }
  [[nodiscard]] std::uint64_t value() const noexcept { return max_; }
  [[nodiscard]] bool on_quorum(int nodes) const noexcept {
    return max_ > 0 && at_max_ >= quorum_of(nodes);
  }

 private:
  std::uint64_t max_ = 0;
  int at_max_ = 0;
};

// Whether node record `o` is a refusal of this client's configuration, which no retry fixes: its
// credentials or database (auth-failed), a permission its ACL user lacks (NOPERM, also when the
// restart guard could not read INFO), or TLS (the server's certificate failed verification, or
// the server refused ours with an alert about it).
[[nodiscard]] bool refused_by_configuration(const NodeOutcome& o);

// Why a round that cannot reach a quorum failed: as failure_reason(tally, refusal), and
// Errc::refused when the nodes that refused this client's configuration rule out a quorum by
// themselves (more of them than a quorum can spare): then no retry can help.
[[nodiscard]] Errc failure_reason(const Tally& t, const std::vector<NodeOutcome>& nodes,
                                  Errc refusal);

}  // namespace redlock::detail
