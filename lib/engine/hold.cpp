#include "engine/hold.hpp"

#include <algorithm>

#include "core/quorum.hpp"
#include "core/timing.hpp"
#include "engine/lock_builder.hpp"
#include "engine/operation.hpp"

namespace redlock {

namespace {

std::string ms_text(BootClock::duration d) {
  return std::to_string(std::chrono::duration_cast<Millis>(d).count()) + " ms";
}

// The public Engine::hold's three callbacks as a listener the hold owns.
class CallbackListener final : public HoldListener {
 public:
  CallbackListener(Engine::ExtendedCallback on_extended, Engine::LostCallback on_lost,
                   Engine::RenewFailingCallback on_renew_failing)
      : on_extended_(std::move(on_extended)),
        on_lost_(std::move(on_lost)),
        on_renew_failing_(std::move(on_renew_failing)) {}
  void on_extended(const Lock& extended) override {
    if (on_extended_) on_extended_(extended);
  }
  void on_lost(const LossInfo& info) override {
    if (on_lost_) on_lost_(info);
  }
  void on_renew_failing(const RenewFailure& failure) override {
    if (on_renew_failing_) on_renew_failing_(failure);
  }

 private:
  Engine::ExtendedCallback on_extended_;
  Engine::LostCallback on_lost_;
  Engine::RenewFailingCallback on_renew_failing_;
};

Engine::HoldId start_hold_with(Engine::Impl& e, std::shared_ptr<const Lock> lock,
                               const HoldOptions& options, std::weak_ptr<HoldListener> listener,
                               std::shared_ptr<HoldListener> owned) {
  if (e.closing_ || !lock || lock->empty() || lock->ttl() <= Millis{0}) return 0;
  OptionsProblem why;
  const auto schedule = detail::hold_schedule(lock->ttl(), options, why);
  if (!schedule) return 0;
  const Engine::HoldId id = e.next_hold_id_++;
  auto h = std::make_shared<HoldOp>(e, id, std::move(lock), options, *schedule, std::move(listener),
                                    std::move(owned));
  e.holds_.emplace(id, h);
  h->start();
  return id;
}

}  // namespace

Engine::HoldId start_hold(Engine::Impl& e, const Lock& lock, const HoldOptions& options,
                          Engine::ExtendedCallback on_extended, Engine::LostCallback on_lost,
                          Engine::RenewFailingCallback on_renew_failing) {
  // The caller keeps its lock; the hold keeps a copy without the per-node record.
  auto own = std::make_shared<Lock>(lock);
  LockBuilder::drop_nodes(*own);
  auto listener = std::make_shared<CallbackListener>(std::move(on_extended), std::move(on_lost),
                                                     std::move(on_renew_failing));
  std::weak_ptr<HoldListener> weak = listener;
  return start_hold_with(e, std::move(own), options, std::move(weak), std::move(listener));
}

Engine::HoldId start_hold(Engine::Impl& e, std::shared_ptr<const Lock> lock,
                          const HoldOptions& options, std::weak_ptr<HoldListener> listener) {
  return start_hold_with(e, std::move(lock), options, std::move(listener), nullptr);
}

HoldOp::HoldOp(Engine::Impl& e, Engine::HoldId id, std::shared_ptr<const Lock> lock,
               const HoldOptions& o, detail::HoldSchedule schedule,
               std::weak_ptr<HoldListener> listener, std::shared_ptr<HoldListener> owned_listener)
    : e_(e),
      id_(id),
      lock_(std::move(lock)),
      deadline_(lock_->deadline()),
      limits_{o.max_extensions, o.max_hold},
      schedule_(schedule),
      listener_(std::move(listener)),
      owned_listener_(std::move(owned_listener)) {
  // The hold tells its listener; the callbacks of the options are the Guard's.
  started_ = BootClock::now();
  // The first extension is due one period after the lock was taken or last extended (its
  // deadline is that moment + ttl - drift), not one period after hold() was called: a lock
  // handed to hold() late would otherwise reach its deadline before any extension was tried.
  const auto taken = deadline_ - std::chrono::duration_cast<BootClock::duration>(lock_->ttl());
  next_extend_ =
      std::min(started_ + schedule_.extend_every,
               taken + std::chrono::duration_cast<BootClock::duration>(schedule_.extend_every));
}

void HoldOp::start() { arm(); }

void HoldOp::stop() {
  if (stopped_) return;
  stopped_ = true;
  due_ = BootClock::time_point::max();
  e_.hold_stopped();
}

void HoldOp::fire() {
  due_ = BootClock::time_point::max();
  on_timer();
}

bool HoldOp::limit_reached() const {
  if (limits_.max_extensions && extensions_ >= *limits_.max_extensions) return true;
  if (limits_.max_hold && BootClock::now() - started_ >= *limits_.max_hold) return true;
  return false;
}

BootClock::time_point HoldOp::give_up_at() const {
  // deadline = t1 + ttl - drift, so this is t1 + renew_deadline - drift: the drift makes it a
  // little earlier, the side of caution, as it does for the deadline itself.
  return deadline_ -
         std::chrono::duration_cast<BootClock::duration>(lock_->ttl() - schedule_.renew_deadline);
}

void HoldOp::arm() {
  if (stopped_) return;
  auto due = deadline_;
  // While an extension is in flight its answer decides (on_extend arms again).
  if (!limit_reached() && !extending_) due = std::min({due, give_up_at(), next_extend_});
  if (due == due_) return;  // already in the shared timer's heap for that time
  due_ = due;
  e_.arm_hold(id_, due);
}

void HoldOp::on_timer() {
  if (stopped_) return;
  const auto now = BootClock::now();
  if (now >= deadline_) {
    lose(Errc::expired,
         limit_reached() ? "the hold limit stopped the extensions and the lock expired"
                         : "the local deadline passed before an extension succeeded",
         {});
    return;
  }
  // Not while an extension is in flight (its answer, at most node_timeout away, may keep the
  // lock), nor before one was tried (a lock handed to hold() late gets one try).
  if (!limit_reached() && !extending_ && tried_ && now >= give_up_at()) {
    give_up();
    return;
  }
  if (!extending_ && !limit_reached() && now >= next_extend_) {
    extending_ = true;
    tried_ = true;
    auto self = shared_from_this();
    Lock current = *lock_;  // for the extension only: its deadline is ours
    LockBuilder::set_deadline(current, deadline_);
    start_extend(e_, std::move(current), lock_->ttl(),
                 [self](ExtendResult r) { self->on_extend(std::move(r)); });
  }
  arm();
}

void HoldOp::on_extend(ExtendResult r) {
  extending_ = false;
  if (stopped_) return;
  if (r) {
    // Only the deadline changes: the lock the holder's threads may be reading stays as it is.
    deadline_ = r.lock.deadline();
    ++extensions_;
    last_failure_.reset();
    // About +-10 % so locks taken together do not all extend in the same loop iteration.
    const auto period = schedule_.extend_every;
    next_extend_ = BootClock::now() + period - period / 10 + e_.jitter(period / 5);
    if (auto l = listener_.lock()) l->on_extended(r.lock);
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
    // Uncertain (timeouts, error replies): try again soon, until the renew deadline.
    const auto retry = detail::extend_retry_after(e_.options_.node_timeout, schedule_.extend_every);
    next_extend_ = BootClock::now() + retry;
    e_.log(LogLevel::warning,
           "extending '" + lock_->resources().front() + "' failed: " + r.message + "; retrying");
    const bool first = !last_failure_;
    last_failure_ = std::make_unique<ExtendResult>(std::move(r));
    auto l = listener_.lock();
    if (first && l) {
      const auto left = give_up_at() - BootClock::now();
      l->on_renew_failing(RenewFailure{last_failure_->error, last_failure_->message,
                                       last_failure_->nodes,
                                       std::max(Millis{0}, std::chrono::floor<Millis>(left))});
    }
  }
  arm();
}

void HoldOp::give_up() {
  std::string message = "no extension succeeded within the renew deadline (" +
                        ms_text(schedule_.renew_deadline) + " of the " + ms_text(lock_->ttl()) +
                        " ttl); " + ms_text(deadline_ - BootClock::now()) +
                        " of the validity left to stop";
  if (last_failure_) {
    message += "; the last extension: " + last_failure_->message;
  } else {
    // (Only when extend_every is close to renew_deadline: the jittered next extension was due
    // after it. An extension in flight is waited for, see on_timer.)
    message += "; no extension was due since the last one succeeded";
  }
  auto nodes = last_failure_ ? std::move(last_failure_->nodes) : std::vector<NodeOutcome>{};
  e_.log(LogLevel::warning, "giving up '" + lock_->resources().front() + "': " + message);
  lose(Errc::no_quorum, std::move(message), std::move(nodes));
}

void HoldOp::lose(Errc why, std::string message, std::vector<NodeOutcome> nodes) {
  ++e_.metrics_.lost;
  auto l = listener_.lock();
  auto owned = std::move(owned_listener_);  // l may be it
  auto self = shared_from_this();           // stop() may drop the engine's reference
  e_.holds_.erase(id_);
  stop();
  if (l) l->on_lost(LossInfo{make_error_code(why), std::move(message), std::move(nodes)});
}

// The shared timer: set for the earliest due time of any hold (or earlier); on firing, each hold
// due by then fires once, and it is set again for the next.

bool Engine::Impl::hold_due_current(const DueHeap::Entry& entry) const {
  auto it = holds_.find(entry.id);
  return it != holds_.end() && it->second->due_at(entry.due);
}

void Engine::Impl::arm_hold(Engine::HoldId id, BootClock::time_point due) {
  if (closing_) return;
  hold_dues_.push(due, id);
  // Each re-arm leaves the old entry behind until its time (an extension in flight arms the
  // deadline, its answer an earlier time; about three a hold within a ttl): past one per hold,
  // drop them all at once (amortized: at least holds_.size() pushes between two prunes), so the
  // heap stays under two entries a hold (32 bytes) instead of growing to four.
  if (hold_dues_.size() > 2 * holds_.size() + 64)
    hold_dues_.prune([this](const DueHeap::Entry& en) { return hold_due_current(en); });
  if (due < hold_timer_due_) set_hold_timer(due);
}

void Engine::Impl::hold_stopped() {
  if (closing_) return;
  const auto next =
      hold_dues_.earliest([this](const DueHeap::Entry& en) { return hold_due_current(en); });
  if (!next) {
    // No hold left to wait for: the loop is not kept running for nothing.
    if (hold_timer_) hold_timer_->stop();
    hold_timer_due_ = BootClock::time_point::max();
  } else if (*next > hold_timer_due_) {
    set_hold_timer(*next);
  }
}

void Engine::Impl::set_hold_timer(BootClock::time_point due) {
  if (!hold_timer_) hold_timer_ = std::make_unique<net::Timer>(loop_, [this] { on_hold_timer(); });
  const auto now = BootClock::now();
  const auto wait = due > now ? std::chrono::ceil<Millis>(due - now) : Millis{0};
  hold_timer_due_ = due;
  hold_timer_->start(static_cast<std::uint64_t>(wait.count()));
}

void Engine::Impl::on_hold_timer() {
  hold_timer_due_ = BootClock::time_point::max();
  const DueHeap::IsCurrent current = [this](const DueHeap::Entry& en) {
    return hold_due_current(en);
  };
  std::vector<DueHeap::Entry> due;
  due.swap(holds_due_);
  hold_dues_.take_due(BootClock::now(), current, due);
  for (const auto& en : due) {
    // An earlier one's callback may have stopped this one (or the engine).
    auto it = holds_.find(en.id);
    if (it == holds_.end() || !it->second->due_at(en.due)) continue;
    auto h = it->second;  // a loss drops the engine's reference
    h->fire();
  }
  due.clear();
  holds_due_.swap(due);
  if (closing_) return;
  // (The timer may fire a little early by the loop's cached time: then nothing was due yet.)
  if (const auto next = hold_dues_.earliest(current); next && *next < hold_timer_due_)
    set_hold_timer(*next);
}

}  // namespace redlock
