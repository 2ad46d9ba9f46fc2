#pragma once
// Umbrella header for the C++ API.
#include "redlock/client.hpp"
#include "redlock/election.hpp"
#include "redlock/engine.hpp"
#include "redlock/error.hpp"
#include "redlock/export.hpp"
#include "redlock/fencing.hpp"
#include "redlock/guard.hpp"
#include "redlock/keys.hpp"
#include "redlock/leader.hpp"
#include "redlock/lock.hpp"
#include "redlock/metrics.hpp"
#include "redlock/options.hpp"

namespace redlock {
[[nodiscard]] REDLOCK_API const char* version() noexcept;
}
