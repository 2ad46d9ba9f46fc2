#pragma once
#include <string>

namespace redlock::detail {
// 20 bytes from getrandom(2) as 40 lowercase hex characters. Aborts only if the kernel has no
// entropy source at all (no safe fallback exists for lock tokens).
[[nodiscard]] std::string make_token();
// True for 40 lowercase hex characters; other clients' tokens are accepted elsewhere, this only
// checks our own format.
[[nodiscard]] bool looks_like_token(std::string_view s) noexcept;
}  // namespace redlock::detail
