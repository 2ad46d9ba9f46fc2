#pragma once
// How many more attempts one acquisition may make (AcquireOp): a number of retries, or a wait
// whose end bounds when an attempt may start (algorithm.md, Acquire, step 6), the last attempt at
// that end. Bookkeeping only, no I/O and no clock of its own: the acquisition says what time it
// is, so the rules are tested without servers (tests/unit/test_attempt_budget.cpp).

#include <optional>

#include "redlock/lock.hpp"
#include "redlock/options.hpp"

namespace redlock {

class AttemptBudget {
 public:
  AttemptBudget() = default;
  // `retries` more attempts after the first; or, with `wait_until`, as many as start before it.
  AttemptBudget(int retries, std::optional<BootClock::time_point> wait_until)
      : retries_left_(retries), wait_until_(wait_until) {}

  // Whether an attempt that failed at `now` may be followed by another. With a wait, not once its
  // end has passed, nor after the attempt that a sleep cut to its end led to: the loop's timers
  // count whole milliseconds and can fire a fraction of one early, and that attempt, failing just
  // before the end, would otherwise be followed by a 1 ms sleep and one attempt more.
  [[nodiscard]] bool more_tries(BootClock::time_point now) const;

  // An attempt failed at `now` and another follows (more_tries): the sleep before it, `sleep` (what
  // the retry policy chose) cut to the end of the wait. Uses up one retry.
  [[nodiscard]] Millis sleep_before_next(BootClock::time_point now, Millis sleep);

  // A wake-up ends the sleep early: the attempt it starts comes before the end of the wait.
  void woken_early() { next_is_last_ = false; }

 private:
  int retries_left_ = 0;
  std::optional<BootClock::time_point> wait_until_;
  bool next_is_last_ = false;  // the sleep now (or the last one) was cut to the wait's end
};

}  // namespace redlock
