#pragma once
// Checks of options and arguments: pure functions, shared by the Engine, the C API and the CLI
// (through check_options / check_acquire in options.hpp).

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "redlock/options.hpp"

namespace redlock::detail {

inline constexpr std::size_t max_resource_bytes = 1 << 20;

[[nodiscard]] std::optional<std::string> check_resources(const std::vector<std::string>& resources);
[[nodiscard]] std::optional<std::string> check_ttl(Millis ttl, double drift_factor);

}  // namespace redlock::detail
