#pragma once
// Where each lock kind keeps its state: the lock key is the resource (plus the client's key
// prefix), so locks interoperate with other Redlock clients; the extra state of the advanced
// kinds lives in keys derived from it (README, "Key layout").

#include <string>
#include <string_view>

#include "redlock/fencing.hpp"

namespace redlock::detail::keys {

// Fencing: the counter behind Lock::fence().
[[nodiscard]] inline std::string fence(std::string_view key) {
  return std::string(key) + std::string(fence_key_suffix);
}
// Read-write locks: readers (a sorted set token -> expiry) and a waiting writer's mark.
[[nodiscard]] inline std::string readers(std::string_view key) {
  return std::string(key) + ":readers";
}
[[nodiscard]] inline std::string writer_waiting(std::string_view key) {
  return std::string(key) + ":writer_waiting";
}
// Fair locks: the ticket counter, the queue (waiter -> ticket) and the waiters' heartbeats.
[[nodiscard]] inline std::string ticket(std::string_view key) {
  return std::string(key) + ":ticket";
}
[[nodiscard]] inline std::string queue(std::string_view key) { return std::string(key) + ":queue"; }
[[nodiscard]] inline std::string heartbeats(std::string_view key) {
  return std::string(key) + ":queue:heartbeats";
}

}  // namespace redlock::detail::keys
