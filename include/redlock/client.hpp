#pragma once
// The thread-safe client for services: one I/O thread runs an Engine; any thread may call.
//
// Many threads may call at once; their commands share one connection per node (pipelined).
// Blocking calls must not be made from inside an async callback (those run on the I/O thread):
// they fail with Errc::invalid_argument instead of deadlocking.

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "redlock/engine.hpp"
#include "redlock/export.hpp"
#include "redlock/guard.hpp"
#include "redlock/lock.hpp"
#include "redlock/options.hpp"

namespace redlock {

class REDLOCK_API Client {
 public:
  // Starts the I/O thread and begins connecting. Throws std::invalid_argument on bad options.
  explicit Client(Options options);
  // Fails pending operations with Errc::shutdown and joins the I/O thread. Never throws.
  // It does not release held locks: they expire after their ttl (use Guard to release).
  // Safe on the I/O thread too (a callback that owns the Client), and while a Guard is being
  // released inside a callback: the shutdown is then finished by a short-lived thread of its own
  // once the callback has returned, and this returns without waiting for it.
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Blocking, never throws; the result says what happened on every node.
  [[nodiscard]] AcquireResult try_acquire(std::vector<std::string> resources,
                                          const AcquireOptions& options = {});
  [[nodiscard]] ExtendResult try_extend(const Lock& lock, Millis ttl);
  [[nodiscard]] ReleaseResult try_release(const Lock& lock);
  [[nodiscard]] StatusResult status(std::string_view resource);

  // Blocking, std::filesystem style: the first throws redlock::Error (with the per-node record),
  // the second sets `ec` and returns an empty Lock on failure.
  [[nodiscard]] Lock acquire(std::string_view resource, const AcquireOptions& options = {});
  [[nodiscard]] Lock acquire(std::string_view resource, const AcquireOptions& options,
                             std::error_code& ec);
  // On success `lock` gets its new deadline.
  void extend(Lock& lock, Millis ttl);
  void extend(Lock& lock, Millis ttl, std::error_code& ec);
  void release(const Lock& lock);
  void release(const Lock& lock, std::error_code& ec) noexcept;

  // Takes a lock and holds it: the Guard releases it when destroyed, extends it automatically
  // when `options.hold.auto_extend`, and reports a loss through `options.hold.on_lost`.
  // The first throws redlock::Error; the second sets `ec` and returns an empty Guard.
  [[nodiscard]] Guard lock(std::vector<std::string> resources, const LockOptions& options = {});
  [[nodiscard]] Guard lock(std::vector<std::string> resources, const LockOptions& options,
                           std::error_code& ec);
  // Like lock(), never throws: the result has the per-node record on failure.
  [[nodiscard]] std::pair<Guard, AcquireResult> try_lock(std::vector<std::string> resources,
                                                         const LockOptions& options = {});

  // Asynchronous: the callback runs exactly once, on the I/O thread.
  void acquire_async(std::vector<std::string> resources, AcquireOptions options,
                     Engine::AcquireCallback cb);
  void extend_async(Lock lock, Millis ttl, Engine::ExtendCallback cb);
  void release_async(Lock lock, Engine::ReleaseCallback cb);

  [[nodiscard]] int quorum() const noexcept;
  // A snapshot of the counters and histograms; render with to_prometheus(). Blocks briefly.
  [[nodiscard]] Metrics metrics() const;
  [[nodiscard]] const Options& options() const noexcept;

 private:
  friend class Guard;
  friend class Election;
  class REDLOCK_HIDDEN Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace redlock
