#pragma once
// The watchdog of one held lock (Engine::hold): one timer on the loop, due at the next extension
// or at the local deadline, whichever comes first.

#include <memory>

#include "engine/impl.hpp"

namespace redlock {

[[nodiscard]] Engine::HoldId start_hold(Engine::Impl& e, const Lock& lock,
                                        const HoldOptions& options,
                                        Engine::ExtendedCallback on_extended,
                                        Engine::LostCallback on_lost);

class HoldOp final : public std::enable_shared_from_this<HoldOp> {
 public:
  HoldOp(Engine::Impl& e, Engine::HoldId id, Lock lock, const HoldOptions& o, Millis period,
         Engine::ExtendedCallback on_extended, Engine::LostCallback on_lost);
  void start();
  // No callback runs after this.
  void stop();

 private:
  [[nodiscard]] bool limit_reached() const;
  void arm();
  void on_timer();
  void on_extend(ExtendResult r);
  void lose(Errc why, std::string message, std::vector<NodeOutcome> nodes);

  Engine::Impl& e_;
  Engine::HoldId id_;
  Lock lock_;
  HoldOptions options_;
  Millis period_;
  Engine::ExtendedCallback on_extended_;
  Engine::LostCallback on_lost_;
  std::unique_ptr<net::Timer> timer_;
  BootClock::time_point started_{};
  BootClock::time_point next_extend_{};
  int extensions_ = 0;
  bool extending_ = false;
  bool stopped_ = false;
};

}  // namespace redlock
