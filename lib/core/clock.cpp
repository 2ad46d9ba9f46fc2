// BootClock (declared in redlock/lock.hpp) at the bottom of the house: every layer reads it, so
// its code lives in core/, which every layer may reach (issue 42 item 6: arrows only downwards).
// Pure: a system call, no I/O library.
#include <time.h>

#include "redlock/lock.hpp"

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

}  // namespace redlock
