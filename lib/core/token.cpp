#include "core/token.hpp"

#include <pthread.h>
#include <sys/random.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>

namespace redlock::detail {

namespace {

void fill_random(unsigned char* out, std::size_t size) {
  std::size_t got = 0;
  while (got < size) {
    ssize_t n = getrandom(out + got, size - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::abort();  // a predictable token would silently break mutual exclusion
    }
    got += static_cast<std::size_t>(n);
  }
}

// Bumped in every child of a fork(): a child must never hand out the bytes its parent buffered
// (both would make the same tokens), so a buffer filled before the fork is thrown away.
std::atomic<unsigned> fork_generation{0};

// Random bytes from the kernel, 4 KiB per getrandom() call rather than 20 bytes per token (one
// syscall per ~200 tokens; it showed in profiles of the acquire path). Per thread, so no lock.
struct RandomPool {
  unsigned char bytes[4096];
  std::size_t used = sizeof bytes;
  unsigned generation = 0;

  void take(unsigned char* out, std::size_t n) {
    const unsigned now = fork_generation.load(std::memory_order_relaxed);
    if (generation != now || sizeof bytes - used < n) {
      fill_random(bytes, sizeof bytes);
      used = 0;
      generation = now;
    }
    std::memcpy(out, bytes + used, n);
    std::memset(bytes + used, 0, n);  // a token's bytes do not stay behind in the pool
    used += n;
  }
};

}  // namespace

std::string make_token() {
  static std::once_flag at_fork;
  std::call_once(at_fork, [] {
    pthread_atfork(nullptr, nullptr,
                   [] { fork_generation.fetch_add(1, std::memory_order_relaxed); });
  });
  thread_local RandomPool pool;
  unsigned char bytes[20];
  pool.take(bytes, sizeof bytes);
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
