#include "core/token.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstdlib>
#include <string_view>

namespace redlock::detail {

std::string make_token() {
  unsigned char bytes[20];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::abort();  // a predictable token would silently break mutual exclusion
    }
    got += static_cast<std::size_t>(n);
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(40, '0');
  for (std::size_t i = 0; i < sizeof bytes; ++i) {
    out[2 * i] = hex[bytes[i] >> 4];
    out[2 * i + 1] = hex[bytes[i] & 15];
  }
  return out;
}

bool looks_like_token(std::string_view s) noexcept {
  if (s.size() != 40) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string token_for(std::string random_token, std::size_t resources) {
  if (resources > 1) random_token += "-" + std::to_string(resources);
  return random_token;
}

std::optional<std::size_t> token_resources(std::string_view token) noexcept {
  if (token.size() < 42 || !looks_like_token(token.substr(0, 40)) || token[40] != '-')
    return std::nullopt;
  std::size_t n = 0;
  for (char c : token.substr(41)) {
    if (c < '0' || c > '9' || n > 1'000'000) return std::nullopt;
    n = n * 10 + static_cast<std::size_t>(c - '0');
  }
  return n >= 2 ? std::optional<std::size_t>(n) : std::nullopt;
}

}  // namespace redlock::detail
