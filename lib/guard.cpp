// Guard: RAII ownership of a held lock (guard.hpp).

#include "core/timing.hpp"
#include "guard_state.hpp"

namespace redlock {

std::optional<std::string> check_hold(Millis ttl, const HoldOptions& options) {
  if (auto p = detail::find_hold_problem(ttl, options)) return std::move(p->reason);
  return std::nullopt;
}

Guard::Guard() noexcept = default;
Guard::Guard(std::shared_ptr<State> state) noexcept : state_(std::move(state)) {}
Guard::Guard(Guard&&) noexcept = default;
Guard& Guard::operator=(Guard&& other) noexcept {
  if (this != &other) {
    release();
    state_ = std::move(other.state_);
  }
  return *this;
}
Guard::~Guard() { release(); }

bool Guard::owns() const noexcept { return state_ && state_->owns(); }
Millis Guard::remaining() const noexcept { return state_ ? state_->remaining() : Millis{0}; }
Lock Guard::lock() const { return state_ ? state_->lock() : Lock{}; }
std::optional<LossInfo> Guard::lost() const { return state_ ? state_->lost() : std::nullopt; }
int Guard::extensions() const noexcept { return state_ ? state_->extensions() : 0; }
HoldState Guard::state() const noexcept { return state_ ? state_->state() : HoldState::none; }
int Guard::hold_count() const noexcept { return state_ ? state_->holders() : 0; }

ReleaseResult Guard::release() noexcept {
  if (!state_) return {};
  auto st = std::move(state_);
  return st->release_one(st);
}

}  // namespace redlock
