#include "engine/hold.hpp"

#include <algorithm>

#include "core/quorum.hpp"
#include "engine/operation.hpp"

namespace redlock {

Engine::HoldId start_hold(Engine::Impl& e, const Lock& lock, const HoldOptions& options,
                          Engine::ExtendedCallback on_extended, Engine::LostCallback on_lost) {
  if (e.closing_ || lock.empty() || lock.ttl() <= Millis{0}) return 0;
  const Millis period = options.extend_every.value_or(lock.ttl() / 3);
  if (period <= Millis{0} || period >= lock.ttl()) return 0;
  const Engine::HoldId id = e.next_hold_id_++;
  auto h = std::make_shared<HoldOp>(e, id, lock, options, period, std::move(on_extended),
                                    std::move(on_lost));
  e.holds_.emplace(id, h);
  h->start();
  return id;
}

HoldOp::HoldOp(Engine::Impl& e, Engine::HoldId id, Lock lock, const HoldOptions& o, Millis period,
               Engine::ExtendedCallback on_extended, Engine::LostCallback on_lost)
    : e_(e),
      id_(id),
      lock_(std::move(lock)),
      options_(o),
      period_(period),
      on_extended_(std::move(on_extended)),
      on_lost_(std::move(on_lost)) {
  started_ = BootClock::now();
  // The first extension is due one period after the lock was taken or last extended (its
  // deadline is that moment + ttl - drift), not one period after hold() was called: a lock
  // handed to hold() late would otherwise reach its deadline before any extension was tried.
  const auto taken =
      lock_.deadline() - std::chrono::duration_cast<BootClock::duration>(lock_.ttl());
  next_extend_ = std::min(started_ + period_,
                          taken + std::chrono::duration_cast<BootClock::duration>(period_));
}

void HoldOp::start() {
  timer_ = std::make_unique<net::Timer>(e_.loop_, [this] { on_timer(); });
  arm();
}

void HoldOp::stop() {
  if (stopped_) return;
  stopped_ = true;
  timer_.reset();
}

bool HoldOp::limit_reached() const {
  if (options_.max_extensions && extensions_ >= *options_.max_extensions) return true;
  if (options_.max_hold && BootClock::now() - started_ >= *options_.max_hold) return true;
  return false;
}

void HoldOp::arm() {
  if (stopped_) return;
  auto due = lock_.deadline();
  if (!extending_ && !limit_reached()) due = std::min(due, next_extend_);
  const auto now = BootClock::now();
  const auto wait = due > now ? std::chrono::ceil<Millis>(due - now) : Millis{0};
  timer_->start(static_cast<std::uint64_t>(wait.count()));
}

void HoldOp::on_timer() {
  if (stopped_) return;
  const auto now = BootClock::now();
  if (now >= lock_.deadline()) {
    lose(Errc::expired,
         limit_reached() ? "the hold limit stopped the extensions and the lock expired"
                         : "the local deadline passed before an extension succeeded",
         {});
    return;
  }
  if (!extending_ && !limit_reached() && now >= next_extend_) {
    extending_ = true;
    auto self = shared_from_this();
    start_extend(e_, lock_, lock_.ttl(), [self](ExtendResult r) { self->on_extend(std::move(r)); });
  }
  arm();
}

void HoldOp::on_extend(ExtendResult r) {
  extending_ = false;
  if (stopped_) return;
  if (r) {
    lock_ = std::move(r.lock);
    ++extensions_;
    // About +-10 % so locks taken together do not all extend in the same loop iteration.
    next_extend_ = BootClock::now() + period_ - period_ / 10 + e_.jitter(period_ / 5);
    if (on_extended_) on_extended_(lock_);
  } else if (r.error == Errc::not_held) {
    // The nodes no longer have our token: extending again would never succeed, and re-acquiring
    // silently would hide the gap from the holder.
    lose(Errc::not_held, r.message, std::move(r.nodes));
    return;
  } else if (std::count_if(r.nodes.begin(), r.nodes.end(), [](const NodeOutcome& o) {
               return o.state == NodeState::down || o.state == NodeState::auth_failed;
             }) > e_.n() - detail::quorum_of(e_.n())) {
    // A majority of the nodes is gone (or refuses us): no extension can succeed, so say so now
    // rather than at the deadline; stopping early is the safe side for the holder.
    lose(Errc::no_quorum, r.message, std::move(r.nodes));
    return;
  } else {
    // Uncertain (timeouts, error replies): try again soon, while the deadline allows.
    const auto retry = std::max(e_.options_.node_timeout * 2, period_ / 10);
    next_extend_ = BootClock::now() + retry;
    e_.log(LogLevel::warning,
           "extending '" + lock_.resource() + "' failed: " + r.message + "; retrying");
  }
  arm();
}

void HoldOp::lose(Errc why, std::string message, std::vector<NodeOutcome> nodes) {
  ++e_.metrics_.lost;
  auto cb = std::move(on_lost_);
  auto self = shared_from_this();  // stop() may drop the engine's reference
  e_.holds_.erase(id_);
  stop();
  if (cb) cb(LossInfo{make_error_code(why), std::move(message), std::move(nodes)});
}

}  // namespace redlock
