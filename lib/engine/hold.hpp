#pragma once
// The watchdog of one held lock (Engine::hold): due at the next extension, at the renew deadline
// or at the local deadline, whichever comes first, on the timer all the holds share.

#include <memory>
#include <optional>

#include "core/timing.hpp"
#include "engine/impl.hpp"

namespace redlock {

struct HoldCallbacks {
  Engine::ExtendedCallback on_extended;
  Engine::LostCallback on_lost;
  Engine::RenewFailingCallback on_renew_failing;
};

[[nodiscard]] Engine::HoldId start_hold(Engine::Impl& e, const Lock& lock,
                                        const HoldOptions& options,
                                        Engine::ExtendedCallback on_extended,
                                        Engine::LostCallback on_lost,
                                        Engine::RenewFailingCallback on_renew_failing);

// What stops the extending (HoldOptions::max_extensions, max_hold): all a hold keeps of its
// options.
struct HoldLimits {
  std::optional<int> max_extensions;
  std::optional<Millis> max_hold;
};

class HoldOp final : public std::enable_shared_from_this<HoldOp> {
 public:
  HoldOp(Engine::Impl& e, Engine::HoldId id, Lock lock, const HoldOptions& o,
         detail::HoldSchedule schedule, HoldCallbacks callbacks);
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
  Lock lock_;  // without its per-node record (the holder's copy has it): never read here
  HoldLimits limits_;
  detail::HoldSchedule schedule_;
  HoldCallbacks callbacks_;
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
