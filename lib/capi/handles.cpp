// The C API's handle registry and shared helpers (handles.hpp).

#include "capi/handles.hpp"

namespace redlock::capi {

// Never destroyed: a client the program did not free must not be torn down (joining its I/O
// thread) by static destructors at exit, possibly while another thread still uses it.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

thread_local int in_loss_callback = 0;

int code_of(std::error_code ec) noexcept {
  if (!ec) return REDLOCK_OK;
  if (ec.category() != redlock::category()) return REDLOCK_E_INTERNAL;
  switch (static_cast<redlock::Errc>(ec.value())) {
    case redlock::Errc::contended:
      return REDLOCK_E_CONTENDED;
    case redlock::Errc::no_quorum:
      return REDLOCK_E_NO_QUORUM;
    case redlock::Errc::expired:
      return REDLOCK_E_EXPIRED;
    case redlock::Errc::not_held:
      return REDLOCK_E_NOT_HELD;
    case redlock::Errc::invalid_argument:
      return REDLOCK_E_INVALID;
    case redlock::Errc::cancelled:
      return REDLOCK_E_CANCELLED;
    case redlock::Errc::shutdown:
      return REDLOCK_E_SHUTDOWN;
    case redlock::Errc::refused:
      return REDLOCK_E_REFUSED;
  }
  return REDLOCK_E_INTERNAL;
}

int finish(ResultObj* res, int code, std::string message, std::vector<redlock::NodeOutcome> nodes,
           int attempts) {
  if (res) {
    res->code = code;
    res->message = std::move(message);
    res->nodes = std::move(nodes);
    res->attempts = attempts;
  }
  return code;
}

bool resolve_detail(redlock_result* detail, std::shared_ptr<ResultObj>& out) {
  if (!detail) return true;
  out = find<ResultObj>(detail);
  return out != nullptr;
}

redlock::HoldOptions hold_options(const AcquireOptionsObj& ao) {
  redlock::HoldOptions hold;
  hold.auto_extend = ao.auto_extend;
  hold.extend_every = ao.extend_every;
  if (ao.auto_extend && ao.on_lost) {
    hold.on_lost = [fn = ao.on_lost, user = ao.user](const redlock::LossInfo& info) {
      ++in_loss_callback;
      fn(user, code_of(info.reason), info.message.c_str());
      --in_loss_callback;
    };
  }
  return hold;
}

bool to_millis(std::uint64_t ms, Millis& out) {
  if (ms > static_cast<std::uint64_t>(std::numeric_limits<Millis::rep>::max())) return false;
  out = Millis{static_cast<Millis::rep>(ms)};
  return true;
}

}  // namespace redlock::capi
