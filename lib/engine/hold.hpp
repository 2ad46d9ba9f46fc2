#pragma once
// The watchdog of one held lock (Engine::hold): due at the next extension, at the renew deadline
// or at the local deadline, whichever comes first, on the timer all the holds share.

#include <memory>
#include <optional>

#include "core/timing.hpp"
#include "engine/impl.hpp"
#include "engine/lock_builder.hpp"

namespace redlock {

// Who hears of a hold: one object rather than three callbacks (each a std::function with its own
// heap block), called on the loop's thread. `on_extended` gets the extended lock for the call
// only: a listener the hold only points to (Guard::State) keeps its lease (LockBuilder::Lease)
// beside the lock it shares with the hold, which never changes; one the hold owns (the public
// Engine::hold's callbacks) hands the whole lock on.
class HoldListener {
 public:
  virtual void on_extended(const Lock& extended) = 0;
  virtual void on_lost(const LossInfo& info) = 0;
  virtual void on_renew_failing(const RenewFailure& failure) = 0;

 protected:
  ~HoldListener() = default;
};

// The library's own way into an Engine (Client, Guard): what the public header does not offer.
class EngineAccess {
 public:
  static Engine::Impl& impl(Engine& e) { return *e.impl_; }
};

[[nodiscard]] Engine::HoldId start_hold(Engine::Impl& e, const Lock& lock,
                                        const HoldOptions& options,
                                        Engine::ExtendedCallback on_extended,
                                        Engine::LostCallback on_lost,
                                        Engine::RenewFailingCallback on_renew_failing);
// The holder's lock is shared, not copied: `lock` is never changed by anyone after this call (an
// extension changes the hold's deadline, and the listener's lease). No listener call after it
// expires.
[[nodiscard]] Engine::HoldId start_hold(Engine::Impl& e, std::shared_ptr<const Lock> lock,
                                        const HoldOptions& options,
                                        std::weak_ptr<HoldListener> listener);

// What stops the extending (HoldOptions::max_extensions, max_hold): all a hold keeps of its
// options.
struct HoldLimits {
  std::optional<int> max_extensions;
  std::optional<Millis> max_hold;
};

class HoldOp final : public std::enable_shared_from_this<HoldOp> {
 public:
  HoldOp(Engine::Impl& e, Engine::HoldId id, std::shared_ptr<const Lock> lock, const HoldOptions& o,
         detail::HoldSchedule schedule, std::weak_ptr<HoldListener> listener,
         std::shared_ptr<HoldListener> owned_listener);
  void start();
  // No callback runs after this.
  void stop();
  // Whether the hold is armed for `due` (the shared timer's entry for it is not outdated).
  [[nodiscard]] bool due_at(BootClock::time_point due) const { return !stopped_ && due_ == due; }
  // The shared timer reached the time it was armed for.
  void fire();

 private:
  [[nodiscard]] bool limit_reached() const;
  // When the hold gives up unless an extension succeeds first: the renew deadline counted from
  // the current lock's start, i.e. with ttl - renew_deadline of its validity left.
  [[nodiscard]] BootClock::time_point give_up_at() const;
  void arm();
  void on_timer();
  void on_extend(ExtendResult r);
  void give_up();
  void lose(Errc why, std::string message, std::vector<NodeOutcome> nodes);

  Engine::Impl& e_;
  Engine::HoldId id_;
  // The current lock, the holder's own (a listener the hold points to), or without its per-node
  // record (an owned listener's: never read here).
  std::shared_ptr<const Lock> lock_;
  BootClock::time_point deadline_;  // lock_'s, then the last extension's (its ttl stays)
  HoldLimits limits_;
  detail::HoldSchedule schedule_;
  std::weak_ptr<HoldListener> listener_;
  std::shared_ptr<HoldListener> owned_listener_;              // the public Engine::hold's callbacks
  BootClock::time_point due_ = BootClock::time_point::max();  // armed for; max: not armed
  BootClock::time_point started_{};
  BootClock::time_point next_extend_{};
  // Since the last success; cleared by one. On the heap: a held lock rarely has one.
  std::unique_ptr<ExtendResult> last_failure_;
  int extensions_ = 0;
  bool extending_ = false;
  bool tried_ = false;  // an extension was started (the renew deadline waits for one)
  bool stopped_ = false;
};

}  // namespace redlock
