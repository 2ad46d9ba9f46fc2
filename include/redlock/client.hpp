#pragma once
// The thread-safe client for services: one I/O thread runs an Engine; any thread may call.
//
// Many threads may call at once; their commands share one connection per node (pipelined).
// Blocking calls must not be made from inside an async callback (those run on the I/O thread):
// they fail with Errc::invalid_argument instead of deadlocking.
// Threads: asynchronous callbacks, a Guard's and an Observation's callbacks and Options::logger
// run on the I/O thread only. (A blocking call made while the client is quiet, with no other call
// in flight, no watchdog and no observer, runs the client's loop on the calling thread for its
// own duration: no hand-off to the I/O thread and back. A message logged meanwhile is handed to
// the I/O thread, and logged before the call returns.)

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
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

  // Every blocking operation comes twice (docs/api.md): `f(...)` throws redlock::Error, which
  // carries the error code, the message and the per-node record; `try_f(...)` never throws and
  // returns that record (the result the async twin `f_async` delivers): `try_` means "does not
  // throw" here, not "does not wait" as in std::mutex. Both forms of an acquisition try as
  // AcquireOptions say: until `wait` has passed, else `retry_count` more attempts (0: try once).

  // The one way to take a lock and hold it: the Guard releases it when destroyed, extends it
  // automatically when `options.hold.auto_extend`, and reports a loss through
  // `options.hold.on_lost`. try_lock() returns an empty Guard and the record on failure.
  [[nodiscard]] Guard lock(std::vector<std::string> resources, const LockOptions& options = {});
  [[nodiscard]] std::pair<Guard, AcquireResult> try_lock(std::vector<std::string> resources,
                                                         const LockOptions& options = {});

  // A lock as a plain value, which nothing releases for you: for a lock that outlives this
  // scope or this process (redlock-cli acquire hands its token to the shell; `Lock::from_token`
  // brings it back to extend or release it).
  [[nodiscard]] Lock acquire(std::vector<std::string> resources,
                             const AcquireOptions& options = {});
  [[nodiscard]] AcquireResult try_acquire(std::vector<std::string> resources,
                                          const AcquireOptions& options = {});
  // On success `lock` gets its new deadline (try_extend: the result's lock has it).
  void extend(Lock& lock, Millis ttl);
  [[nodiscard]] ExtendResult try_extend(const Lock& lock, Millis ttl);
  void release(const Lock& lock);
  [[nodiscard]] ReleaseResult try_release(const Lock& lock);

  // What every node stores for `resource` (status_verdict() sums it up). A read: never throws;
  // a node that could not be read says so in its own record.
  [[nodiscard]] StatusResult status(std::string_view resource);

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
