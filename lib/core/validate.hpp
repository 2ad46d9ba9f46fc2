#pragma once
// Checks of options and arguments: pure functions, shared by the Engine, the C API and the CLI
// (through check_options / check_acquire in options.hpp).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redlock/options.hpp"

namespace redlock::detail {

inline constexpr std::size_t max_resource_bytes = 1 << 20;

// Non-empty, distinct, at most 1 MiB each, and none whose key (with `key_prefix`) has the form of
// the library's own derived keys (redlock/keys.hpp).
[[nodiscard]] std::optional<std::string> check_resources(const std::vector<std::string>& resources,
                                                         std::string_view key_prefix = {});
[[nodiscard]] std::optional<std::string> check_ttl(Millis ttl, double drift_factor);
// A value the user gave, for an error message: in single quotes, control bytes as \xNN so that
// they cannot mess up a terminal.
[[nodiscard]] std::string quoted(std::string_view s);
// A ttl above the client's declared Options::max_ttl: the restart quarantine, which lasts
// max_ttl + drift, would end before keys taken with it expire.
[[nodiscard]] std::optional<std::string> check_declared_ttl(Millis ttl, const Options& client);
// A token that names its number of resources (token.hpp) must come with exactly that many.
[[nodiscard]] std::optional<std::string> check_token_resources(std::string_view token,
                                                               std::size_t resources);

}  // namespace redlock::detail
