#pragma once
// When an undecided attempt stops waiting for its answers (AcquireOp). Usually never: it decides
// as soon as the outcome is known, and every answer comes by its node's deadline. Two exceptions:
// - Its validity is used up (detail::validity_used_up_at): no quorum can make it a lock any more,
//   so it fails then as expired, rather than at a node's deadline, which a node_timeout not much
//   smaller than the ttl puts later.
// - It can no longer win (the grants plus the answers still out fall short of a quorum): the
//   answers still out could only tell why (a refusal more makes it contention, not no quorum).
//   When another attempt follows anyway, that is worth at most the retry delay, not a stalled
//   node's whole deadline, which could outlast the caller's wait (a 10 s node_timeout held a 2 s
//   wait for 10 s, and the grant it had with it). The last attempt waits for them, so the caller
//   is told which failure it was.
// Bookkeeping only, no I/O and no clock of its own: the attempt says what time it is
// (tests/unit/test_attempt_deadlines.cpp).

#include <optional>

#include "redlock/lock.hpp"
#include "redlock/options.hpp"

namespace redlock {

class AttemptDeadlines {
 public:
  // A new attempt: no grant at or after `validity_gone` is a lock, and its last answer is due by
  // `latest_answer` at the latest (a node's deadline).
  void begin(BootClock::time_point validity_gone, BootClock::time_point latest_answer) noexcept {
    validity_gone_ = validity_gone;
    watch_validity_ = validity_gone < latest_answer;
    reason_until_.reset();
  }

  // An attempt that can still win and whose answers all come before its validity is used up
  // needs nothing of this (the usual case: the caller need not read the clock).
  [[nodiscard]] bool idle(bool in_reach) const noexcept { return in_reach && !watch_validity_; }

  enum class Step {
    wait,     // for the answers (or until ask_again)
    expired,  // the validity is used up: fail as expired
    failed,   // out of reach, and the answers that would tell why are not worth more time
  };
  struct Next {
    Step step = Step::wait;
    std::optional<BootClock::time_point> ask_again;  // with wait: when to ask again at the latest
  };
  // What the undecided attempt does at `now` (an answer came, or the timer fired). `in_reach`: a
  // quorum is still possible; `retry_follows`: another attempt would follow a failure at `now`.
  [[nodiscard]] Next at(BootClock::time_point now, bool in_reach, bool retry_follows,
                        Millis retry_delay);

 private:
  BootClock::time_point validity_gone_{};
  bool watch_validity_ = false;
  // Out of reach: until when the answers that tell why are awaited (max: until they come).
  std::optional<BootClock::time_point> reason_until_;
};

}  // namespace redlock
