#pragma once
#include <string>
#include <string_view>

namespace redlock::detail {
// SHA-1 as 40 lowercase hex characters: what Redis uses to name a script for EVALSHA.
[[nodiscard]] std::string sha1_hex(std::string_view data);
}  // namespace redlock::detail
