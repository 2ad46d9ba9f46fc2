#pragma once
// Secrets in memory: a password is overwritten before its memory goes back to the allocator, so
// that a later heap dump, core file or use-after-free read finds zeros instead of it.

#include <string.h>  // explicit_bzero (glibc): a plain memset before free may be optimized away

#include <string>

namespace redlock::detail {

// Overwrites the bytes of `s`, then empties it. For a password copy that is about to be dropped.
inline void wipe(std::string& s) noexcept {
  explicit_bzero(s.data(), s.size());
  s.clear();
}

}  // namespace redlock::detail
