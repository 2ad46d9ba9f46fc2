// lock.hpp: the boot-time clock and the Lock value.
#include "redlock/lock.hpp"

#include <time.h>

#include <string>

namespace redlock {

BootClock::time_point BootClock::now() noexcept {
  timespec ts{};
#ifdef CLOCK_BOOTTIME
  clock_gettime(CLOCK_BOOTTIME, &ts);
#else
  clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
  return time_point(duration(static_cast<rep>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec));
}

Millis Lock::remaining() const noexcept {
  auto left = deadline_ - BootClock::now();
  if (left <= BootClock::duration::zero()) return Millis{0};
  return std::chrono::duration_cast<Millis>(left);
}

Lock Lock::from_token(std::vector<std::string> resources, std::string token, LockMode mode) {
  Lock l;
  l.mode_ = mode;
  l.resources_ = std::move(resources);
  l.token_ = std::move(token);
  l.deadline_ = BootClock::time_point::max();
  return l;
}

}  // namespace redlock
