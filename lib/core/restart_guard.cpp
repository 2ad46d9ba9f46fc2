#include "core/restart_guard.hpp"

#include <algorithm>

namespace redlock::detail {

std::optional<std::string> RestartGuard::observe(const ServerInfo& info, BootClock::time_point now,
                                                 const Policy& policy) {
  std::optional<std::string> warning;
  // uptime is rounded down: the server came back at most `uptime` seconds ago. Bounded (as
  // parse_server_info() bounds it) before the arithmetic: an overflow here is undefined.
  const long long uptime = std::clamp(info.uptime_seconds, 0LL, max_reported_seconds);
  const auto came_up = now - std::chrono::seconds(uptime);
  if (!policy.durable) {
    if (!run_id_.empty() && info.run_id != run_id_) {
      extend_to(came_up + policy.quarantine, "restart guard: server restarted (run_id changed)");
      warning =
          "server restarted (run_id changed); its votes are excluded until one max ttl has passed";
    }
    if (policy.min_uptime > Millis{0}) {
      const auto until = came_up + policy.min_uptime;
      if (until > now) {
        extend_to(until, "restart guard: uptime " + std::to_string(uptime) +
                             " s is below the minimum uptime");
      }
    }
  }
  run_id_ = info.run_id;
  unreadable_.clear();
  return warning;
}

void RestartGuard::unreadable(std::string why) { unreadable_ = std::move(why); }

void RestartGuard::extend_to(BootClock::time_point until, std::string why) {
  if (!until_ || until > *until_) {
    until_ = until;
    reason_ = std::move(why);
  }
}

BootClock::time_point promoted_at_latest(BootClock::time_point named_at, long long ago_ms,
                                         Millis grace) {
  const long long ago = std::clamp(ago_ms, 0LL, max_reported_seconds * 1000);
  return named_at - Millis{ago} + grace;
}

void RestartGuard::promoted(BootClock::time_point at, std::string why) {
  if (promoted_at_ && *promoted_at_ > at) return;
  promoted_at_ = at;
  promoted_why_ = std::move(why);
}

namespace {

std::string with_time_left(const std::string& why, BootClock::duration left) {
  return why + " (" + std::to_string(std::chrono::ceil<Millis>(left).count()) + " ms left)";
}

}  // namespace

std::optional<std::string> RestartGuard::exclusion(BootClock::time_point now, bool durable,
                                                   Millis quarantine, Millis min_uptime) const {
  // A check the user asked for fails closed (algorithm.md, hazard 11): not knowing whether the
  // server restarted is not a reason to count its vote.
  if (!unreadable_.empty() && !durable && (quarantine > Millis{0} || min_uptime > Millis{0}))
    return unreadable_;
  // A quarantine of 0 turns the guard off (a restart_quarantine of 0), whatever `at` says.
  if (promoted_at_ && quarantine > Millis{0} && now < *promoted_at_ + quarantine) {
    return with_time_left("restart guard: " + promoted_why_, *promoted_at_ + quarantine - now);
  }
  if (durable || !until_ || now >= *until_) return std::nullopt;
  return with_time_left(reason_, *until_ - now);
}

}  // namespace redlock::detail
