#pragma once
// The quorum engine on the caller's own libuv loop.
//
// Thread-safety: none. Every member function must be called on the loop's thread, and every
// callback runs on that thread, exactly once, never from inside the call that started it.
// Use redlock::Client for a thread-safe object with its own I/O thread.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "redlock/export.hpp"
#include "redlock/guard.hpp"
#include "redlock/leader.hpp"
#include "redlock/lock.hpp"
#include "redlock/metrics.hpp"
#include "redlock/options.hpp"

struct uv_loop_s;

namespace redlock {

class REDLOCK_API Engine {
 public:
  using AcquireCallback = std::function<void(AcquireResult)>;
  using ExtendCallback = std::function<void(ExtendResult)>;
  using ReleaseCallback = std::function<void(ReleaseResult)>;
  using StatusCallback = std::function<void(StatusResult)>;
  using HoldId = std::uint64_t;
  using ExtendedCallback = std::function<void(const Lock&)>;
  using LostCallback = std::function<void(const LossInfo&)>;
  using RenewFailingCallback = std::function<void(const RenewFailure&)>;
  using LeaderCallback = std::function<void(LeaderResult)>;
  using ObserveId = std::uint64_t;
  using ChangeCallback = std::function<void(const LeaderResult&)>;

  // Starts connecting to every node (non-blocking). Throws std::invalid_argument when the options
  // are unusable (no nodes, a zero timeout, ...), naming the bad value.
  Engine(uv_loop_s* loop, Options options);
  // Closes if not closed yet. The loop must then run until its handles are closed
  // (uv_run returns); memory is freed in the last close callback, as libuv requires.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Takes one lock over `resources` (one token; all-or-nothing on each node).
  void acquire(std::vector<std::string> resources, AcquireOptions options, AcquireCallback cb);
  // Resets the expiry of `lock` to `ttl` on every node that still holds its token.
  void extend(const Lock& lock, Millis ttl, ExtendCallback cb);
  // Compare-and-delete on every node. Idempotent.
  void release(const Lock& lock, ReleaseCallback cb);
  // Reads what every node stores for `resource`.
  void status(std::string resource, StatusCallback cb);

  // The watchdog: extends `lock` every `options.extend_every` (default ttl/3) with its own ttl,
  // on this loop (a timer, no thread), until stop_hold(), a loss, or a limit of `options`.
  // `on_extended` runs after each successful extension with the lock's new deadline. `on_lost`
  // runs at most once: when an extend finds the token gone (not_held), when a majority of the
  // nodes is down or no extend succeeded before the renew deadline (no_quorum), or when the local
  // deadline passes after a limit stopped the extending (expired). `on_renew_failing` runs once
  // per run of failed extends (HoldOptions::on_renew_failing). It never re-acquires, and it never
  // releases. No callback runs after stop_hold() or close().
  // `options.on_lost` and `options.on_renew_failing` are ignored here (use the parameters).
  // Returns 0 and calls nothing when the options are unusable (extend_every not below the ttl,
  // renew_deadline not between extend_every and the ttl) or the engine is closed.
  [[nodiscard]] HoldId hold(const Lock& lock, const HoldOptions& options,
                            ExtendedCallback on_extended, LostCallback on_lost,
                            RenewFailingCallback on_renew_failing = {});
  void stop_hold(HoldId id);

  // Leader election (redlock/election.hpp). A campaign is acquire() with LockMode::leader and an
  // identity (its lock's fence() is the term), held with hold().
  // Who leads `name`: its record read from every node (LeaderResult says how to read it).
  void leader(std::string name, LeaderCallback cb);
  // Watches who leads `name`: `on_change` runs with the first read and then with every read that
  // tells something else (same_leadership()), until stop_observe() or close(). Reads come every
  // `poll`, and sooner when a node says the leader may have changed (a release or a new term
  // publishes on the record's channel, with wake-ups on): such a message is only a hint to read,
  // which anyone who may PUBLISH can send; only the read's replies say who leads. Returns 0 and
  // calls nothing when `poll` is not positive or the engine is closed.
  [[nodiscard]] ObserveId observe(std::string name, Millis poll, ChangeCallback on_change);
  void stop_observe(ObserveId id);

  // Fails every pending operation with Errc::shutdown, closes the connections and then calls
  // `on_closed` (once). Later calls fail with Errc::shutdown.
  void close(std::function<void()> on_closed = {});

  [[nodiscard]] const Options& options() const noexcept;
  [[nodiscard]] int quorum() const noexcept;
  // A snapshot of the counters and histograms (see metrics.hpp and to_prometheus()).
  [[nodiscard]] Metrics metrics() const;

  class REDLOCK_HIDDEN Impl;

 private:
  friend class EngineAccess;  // the library's own way in (lib/engine/hold.hpp)
  Impl* impl_;                // owned; frees itself once its handles are closed
};

}  // namespace redlock
