#include "engine/attempt_deadlines.hpp"

namespace redlock {

AttemptDeadlines::Next AttemptDeadlines::at(BootClock::time_point now, bool in_reach,
                                            bool retry_follows, Millis retry_delay) {
  constexpr auto never = BootClock::time_point::max();
  if (in_reach) {
    if (!watch_validity_) return {};
    if (now >= validity_gone_) return {Step::expired, {}};
    return {Step::wait, validity_gone_};
  }
  if (!reason_until_) {
    reason_until_ =
        retry_follows ? now + std::chrono::duration_cast<BootClock::duration>(retry_delay) : never;
  } else if (*reason_until_ != never && now >= *reason_until_) {
    if (retry_follows) return {Step::failed, {}};
    reason_until_ = never;  // the wait ended meanwhile: this is the last attempt, it waits for them
  }
  if (*reason_until_ == never) return {};
  return {Step::wait, *reason_until_};
}

}  // namespace redlock
