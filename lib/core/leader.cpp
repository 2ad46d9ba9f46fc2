// The value types of a leader read (redlock/leader.hpp): the checks and comparisons that go with
// them. Pure.

#include "redlock/leader.hpp"

#include "core/validate.hpp"

namespace redlock {

std::optional<std::string> check_identity(std::string_view id) {
  if (id.empty()) return "identity is empty";
  if (id.size() > max_identity_bytes) {
    return "identity " + detail::quoted(id.substr(0, 32)) + "... of " + std::to_string(id.size()) +
           " bytes is longer than the limit of " + std::to_string(max_identity_bytes);
  }
  for (unsigned char c : id) {
    if (c < 0x20 || c == 0x7f) return "identity " + detail::quoted(id) + " has a control character";
  }
  return std::nullopt;
}

bool same_leadership(const LeaderResult& a, const LeaderResult& b) noexcept {
  if (static_cast<bool>(a.error) != static_cast<bool>(b.error)) return false;
  if (a.error) return true;
  if (a.leader.has_value() != b.leader.has_value()) return false;
  return !a.leader || a.leader->term == b.leader->term;
}

}  // namespace redlock
