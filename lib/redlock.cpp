// redlock.hpp
#include "redlock/redlock.hpp"

namespace redlock {

const char* version() noexcept { return REDLOCK_VERSION; }

}  // namespace redlock
