// error.hpp: the redlock error category and the per-node state names.

#include "redlock/error.hpp"

#include <algorithm>
#include <string_view>

#include "core/server_text.hpp"

namespace redlock {

namespace {

class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "redlock"; }
  std::string message(int ev) const override {
    switch (static_cast<Errc>(ev)) {
      case Errc::contended:
        return "held by someone else";
      case Errc::no_quorum:
        return "no quorum: too many nodes down, timing out or failing";
      case Errc::expired:
        return "validity used up";
      case Errc::not_held:
        return "not held by this token";
      case Errc::invalid_argument:
        return "invalid argument";
      case Errc::cancelled:
        return "cancelled";
      case Errc::shutdown:
        return "shut down";
      case Errc::refused:
        return "refused by the nodes' configuration (credentials, permissions or TLS)";
    }
    return "unknown redlock error";
  }
};

}  // namespace

const std::error_category& category() noexcept {
  static const Category c;
  return c;
}

std::error_code make_error_code(Errc e) noexcept { return {static_cast<int>(e), category()}; }

const char* to_string(NodeState s) noexcept {
  switch (s) {
    case NodeState::ok:
      return "ok";
    case NodeState::held_by_other:
      return "held-by-other";
    case NodeState::not_held:
      return "not-held";
    case NodeState::timeout:
      return "timeout";
    case NodeState::down:
      return "down";
    case NodeState::error:
      return "error";
    case NodeState::excluded:
      return "excluded";
    case NodeState::pending:
      return "pending";
    case NodeState::auth_failed:
      return "auth-failed";
  }
  return "?";
}

namespace {

// The states whose records carry a reason worth a line (a timeout, a pending answer, a grant or a
// refusal say all there is in their name).
bool has_reason(NodeState s) {
  return s == NodeState::down || s == NodeState::error || s == NodeState::excluded ||
         s == NodeState::auth_failed;
}

// One cause, said alike on every node: an exclusion's countdown "(1234 ms left)" is left out.
std::string_view reason_of(std::string_view detail) {
  constexpr std::string_view tail = " ms left)";
  if (!detail.ends_with(tail)) return detail;
  const auto open = detail.rfind(" (");
  if (open == std::string_view::npos) return detail;
  const auto digits = detail.substr(open + 2, detail.size() - tail.size() - open - 2);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos)
    return detail;
  return detail.substr(0, open);
}

// What a server said is shown as server text (bounded, escaped, echoes stripped): the detail
// may carry a reply's own words.
std::string cut(std::string_view reason) { return detail::server_text(reason, 120); }

}  // namespace

std::string summarize(const std::vector<NodeOutcome>& nodes) {
  struct Reason {
    std::string_view text;
    int count;
    const NodeOutcome* first;
  };
  std::string out;
  std::vector<Reason> reasons;
  for (int s = 0; s <= static_cast<int>(NodeState::auth_failed); ++s) {
    const auto state = static_cast<NodeState>(s);
    int n = 0;
    reasons.clear();
    for (const auto& o : nodes) {
      if (o.state != state) continue;
      ++n;
      if (!has_reason(state) || o.detail.empty()) continue;
      const auto r = reason_of(o.detail);
      auto it = std::find_if(reasons.begin(), reasons.end(),
                             [&](const Reason& x) { return x.text == r; });
      if (it == reasons.end()) {
        reasons.push_back({r, 1, &o});
      } else {
        ++it->count;
      }
    }
    if (n == 0) continue;
    if (!out.empty()) out += ", ";
    out += std::to_string(n) + " " + to_string(state);
    if (reasons.empty()) continue;
    // The most common reason; of equals, the first seen (the lowest node).
    const Reason* best = &reasons.front();
    for (const auto& r : reasons) best = r.count > best->count ? &r : best;
    if (best->count == n) {
      out += ": " + cut(best->text);
    } else if (best->count > 1) {
      out += " (" + std::to_string(best->count) + " of them: " + cut(best->text) + ")";
    } else {
      out += " (" + best->first->node + ": " + cut(best->text) + (n > 1 ? "; ...)" : ")");
    }
  }
  return out;
}

}  // namespace redlock
