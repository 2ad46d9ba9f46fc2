#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace redlock::detail {
// 20 bytes from getrandom(2) as 40 lowercase hex characters. Aborts only if the kernel has no
// entropy source at all (no safe fallback exists for lock tokens).
[[nodiscard]] std::string make_token();
// True for 40 lowercase hex characters; other clients' tokens are accepted elsewhere, this only
// checks our own format.
[[nodiscard]] bool looks_like_token(std::string_view s) noexcept;

// The token of a lock over several resources carries their number: "<40 hex>-<n>". So a release
// or extend given a token with fewer (or other) resources than its lock has is refused instead of
// leaving the rest held (lock_token_resources). A single-resource token stays 40 hex characters:
// the wire format other Redlock clients share.
[[nodiscard]] std::string token_for(std::string random_token, std::size_t resources);
// The number of resources a token names: n for "<40 hex>-<n>", nullopt for any other token.
[[nodiscard]] std::optional<std::size_t> token_resources(std::string_view token) noexcept;
}  // namespace redlock::detail
