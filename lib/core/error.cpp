// error.hpp: the redlock error category and the per-node state names.

#include "redlock/error.hpp"

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

}  // namespace redlock
