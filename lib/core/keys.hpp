#pragma once
// Where each lock kind keeps its state (the public layout is redlock/keys.hpp): short names for
// the lock kinds' code.

#include <string>
#include <string_view>

#include "redlock/keys.hpp"

namespace redlock::detail::keys {

[[nodiscard]] inline std::string fence(std::string_view key) {
  return derived_key(key, KeyRole::fence);
}
[[nodiscard]] inline std::string readers(std::string_view key) {
  return derived_key(key, KeyRole::readers);
}
[[nodiscard]] inline std::string writer_waiting(std::string_view key) {
  return derived_key(key, KeyRole::writer_waiting);
}
[[nodiscard]] inline std::string ticket(std::string_view key) {
  return derived_key(key, KeyRole::ticket);
}
[[nodiscard]] inline std::string queue(std::string_view key) {
  return derived_key(key, KeyRole::queue);
}
[[nodiscard]] inline std::string heartbeats(std::string_view key) {
  return derived_key(key, KeyRole::heartbeats);
}
// The channel waiters of `key` listen on (a channel name, not a key).
[[nodiscard]] inline std::string wake(std::string_view key) {
  return derived_key(key, KeyRole::wake);
}
// Set while someone listens on wake(key): releases publish only then.
[[nodiscard]] inline std::string waiting(std::string_view key) {
  return derived_key(key, KeyRole::waiting);
}
// Fair waiters' registered tokens, for a release to hand the lock to the first of them.
[[nodiscard]] inline std::string handoff(std::string_view key) {
  return derived_key(key, KeyRole::handoff);
}

// An election's leader record: who holds the lock key as leader, and its term.
[[nodiscard]] inline std::string leader(std::string_view key) {
  return derived_key(key, KeyRole::leader);
}

}  // namespace redlock::detail::keys
