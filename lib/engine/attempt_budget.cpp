#include "engine/attempt_budget.hpp"

#include <algorithm>

namespace redlock {

bool AttemptBudget::more_tries(BootClock::time_point now) const {
  if (!wait_until_) return retries_left_ > 0;
  return now < *wait_until_ && !next_is_last_;
}

Millis AttemptBudget::sleep_before_next(BootClock::time_point now, Millis sleep) {
  if (!wait_until_) {
    --retries_left_;
    return sleep;
  }
  const Millis left = std::max(Millis{0}, std::chrono::ceil<Millis>(*wait_until_ - now));
  next_is_last_ = sleep >= left;
  return next_is_last_ ? left : sleep;
}

}  // namespace redlock
