#pragma once
// The restart guard (algorithm.md, hazard 6) of one server, as a value: a server that restarted
// may have lost the lock keys it granted (no persistence), so its votes do not count until the
// longest ttl in use has passed since it came back. Pure: fed with what INFO said and when.

#include <optional>
#include <string>

#include "core/info.hpp"
#include "redlock/lock.hpp"

namespace redlock::detail {

class RestartGuard {
 public:
  struct Policy {
    Millis quarantine{0};  // how long a restarted server gives no vote
    Millis min_uptime{0};  // a server younger than this gives no vote (0: off)
    bool durable = false;  // appendonly + appendfsync always: the guard is off
  };

  // What INFO said at a (re)connect, read at `now`. Returns a warning to log when this shows a
  // restart (the run_id changed since the last connect).
  std::optional<std::string> observe(const ServerInfo& info, BootClock::time_point now,
                                     const Policy& policy);

  // INFO server could not be read at a (re)connect (`why`: what the server answered, or that it
  // did not). The guard cannot tell a restart then, so while it is on (a quarantine or a minimum
  // uptime, and not durable) it fails closed: the server gives no vote, with `why` as the reason,
  // until observe() reads INFO again.
  void unreadable(std::string why);
  [[nodiscard]] bool readable() const noexcept { return unreadable_.empty(); }

  // The server was promoted from replica to master at `at` or later (a failover): asynchronous
  // replication may have lost lock keys it never received, so its votes wait out the quarantine
  // from then, as after a restart. `durable` does not turn this off: a replica that never got the
  // key has nothing to replay. `why` says how it was learned. The latest promotion counts.
  void promoted(BootClock::time_point at, std::string why);

  // Why a vote from this server must not count at `now`, or nullopt. `durable` turns off the
  // restart part only; `quarantine` is the one in force now (it grows with the ttls in use), and
  // 0 turns the promotion part off too. With INFO unreadable, the guard is on when not durable
  // and the quarantine or `min_uptime` is above 0.
  [[nodiscard]] std::optional<std::string> exclusion(BootClock::time_point now, bool durable,
                                                     Millis quarantine,
                                                     Millis min_uptime = Millis{0}) const;

  [[nodiscard]] const std::string& run_id() const noexcept { return run_id_; }

 private:
  void extend_to(BootClock::time_point until, std::string why);

  std::string run_id_;
  std::string unreadable_;  // why INFO could not be read at the last connect; empty when it was
  std::optional<BootClock::time_point> until_;  // restarts: computed when seen
  std::string reason_;
  std::optional<BootClock::time_point> promoted_at_;
  std::string promoted_why_;
};

// When a server that a discovery source named at `named_at` became master, at the latest, plus
// `grace`: the source said it took its role `ago_ms` before it answered (Sentinel's
// role-reported-time), so the promotion was then or earlier. `ago_ms` is bounded to 0..
// max_reported_seconds first (parse_sentinel_master() refuses anything else), so the arithmetic
// cannot overflow whatever the server said.
[[nodiscard]] BootClock::time_point promoted_at_latest(BootClock::time_point named_at,
                                                       long long ago_ms, Millis grace);

}  // namespace redlock::detail
