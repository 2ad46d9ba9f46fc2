#include "core/restart_guard.hpp"

namespace redlock::detail {

std::optional<std::string> RestartGuard::observe(const ServerInfo& info, BootClock::time_point now,
                                                 const Policy& policy) {
  std::optional<std::string> warning;
  // uptime is rounded down: the server came back at most `uptime` seconds ago.
  const auto came_up = now - std::chrono::seconds(info.uptime_seconds);
  auto extend_to = [&](BootClock::time_point until, std::string why) {
    if (!until_ || until > *until_) {
      until_ = until;
      reason_ = std::move(why);
    }
  };
  if (!policy.durable) {
    if (!run_id_.empty() && info.run_id != run_id_) {
      extend_to(came_up + policy.quarantine, "restart guard: server restarted (run_id changed)");
      warning =
          "server restarted (run_id changed); its votes are excluded until one max ttl has passed";
    }
    if (policy.min_uptime > Millis{0}) {
      const auto until = came_up + policy.min_uptime;
      if (until > now) {
        extend_to(until, "restart guard: uptime " + std::to_string(info.uptime_seconds) +
                             " s is below the minimum uptime");
      }
    }
  }
  run_id_ = info.run_id;
  return warning;
}

std::optional<std::string> RestartGuard::exclusion(BootClock::time_point now, bool durable) const {
  if (durable || !until_ || now >= *until_) return std::nullopt;
  const auto left = std::chrono::duration_cast<Millis>(*until_ - now).count();
  return reason_ + " (" + std::to_string(left) + " ms left)";
}

}  // namespace redlock::detail
