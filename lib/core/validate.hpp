#pragma once
// Checks of options and arguments: pure functions, shared by the Engine, the C API and the CLI
// (check_options / check_acquire in options.hpp are made of them). Each check is made here once:
// the Engine refuses what these find, and the CLI asks them before anything is sent, naming the
// flag a bad value came from.

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

// The bad argument of one call, named by what it is, with the reason: "resources", "ttl",
// "wait", "retry_count", "identity", "mode", "fence", "fair", "heartbeat_ttl", "token". The
// public checks give the reason alone (check_acquire); the CLI reports it under its flag.
//
// An acquisition (start_acquire refuses these): resources, ttl (positive, at most max_ttl, longer
// than its drift allowance), the election's identity, and how the lock kinds combine.
[[nodiscard]] std::optional<OptionsProblem> find_acquire_problem(
    const std::vector<std::string>& resources, const AcquireOptions& options, double drift_factor,
    std::string_view key_prefix);
// The same with every setting of the client that bears on it: also a ttl above its declared
// max_ttl (field "ttl").
[[nodiscard]] std::optional<OptionsProblem> find_acquire_problem(
    const std::vector<std::string>& resources, const AcquireOptions& options,
    const Options& client);
// A held lock named by its resources and token (release, extend): a token ("token": empty, or
// one of a lock over another number of resources) and the resources.
[[nodiscard]] std::optional<OptionsProblem> find_token_problem(
    const std::vector<std::string>& resources, std::string_view token, std::string_view key_prefix);
// An extension (start_extend refuses these): the lock's, then its new ttl, checked as an
// acquisition's ttl is.
[[nodiscard]] std::optional<OptionsProblem> find_extend_problem(
    const std::vector<std::string>& resources, std::string_view token, Millis ttl,
    const Options& client);

}  // namespace redlock::detail
