#pragma once
// Holding a lock: RAII ownership, automatic extension (watchdog), loss notification, reentrancy.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include "redlock/export.hpp"
#include "redlock/lock.hpp"
#include "redlock/options.hpp"

namespace redlock {

// Why a held lock stopped being held (delivered once through HoldOptions::on_lost).
struct LossInfo {
  std::error_code reason;  // Errc::not_held (the nodes no longer have our token),
                           // Errc::no_quorum (a majority of the nodes is down: it cannot be kept),
                           // Errc::expired (the local deadline passed before an extend succeeded)
  std::string message;
  std::vector<NodeOutcome> nodes;  // per-node record of the last extend, if any
};

struct HoldOptions {
  bool auto_extend = false;            // keep extending while held (the watchdog)
  std::optional<Millis> extend_every;  // default: ttl / 3
  std::optional<Millis> max_hold;      // stop extending after this long in total
  std::optional<int> max_extensions;   // stop extending after this many extends
  // Runs exactly once, on the I/O thread, when the lock is lost while still held (never after
  // release()). Must not block and must not call blocking Client functions.
  std::function<void(const LossInfo&)> on_lost;
  // Reentrancy: the same owner taking a resource it already holds through the same Client gets
  // the held lock back with a count, and no network I/O; only the last release reaches the nodes.
  // The owner is `owner` when set, else the calling thread. A reentrant request must ask for what
  // the held lock is: the same mode, a fence or auto-extension only if the held lock has them;
  // otherwise it fails with Errc::invalid_argument (no upgrade from read to write is offered).
  bool reentrant = false;
  std::optional<std::string> owner;
};

struct LockOptions {
  AcquireOptions acquire;
  HoldOptions hold;
};

class Client;

// Move-only owner of a held lock. Its destructor releases it (bounded by node_timeout, nodes down
// included) and never throws. Thread-safe: any thread may query or release.
class REDLOCK_API Guard {
 public:
  Guard() noexcept;
  Guard(Guard&&) noexcept;
  Guard& operator=(Guard&&) noexcept;
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
  ~Guard();

  // True while held: acquired, not released, not lost, and its local deadline not passed.
  [[nodiscard]] bool owns() const noexcept;
  [[nodiscard]] explicit operator bool() const noexcept { return owns(); }
  // Time left before the local deadline (moves forward with every successful extension).
  [[nodiscard]] Millis remaining() const noexcept;
  // A snapshot of the lock (token, deadline, fence ...). Empty for a default-constructed Guard.
  [[nodiscard]] Lock lock() const;
  // The loss, once the lock was lost; nullopt while held or after a release.
  [[nodiscard]] std::optional<LossInfo> lost() const;
  // How many extensions the watchdog has made.
  [[nodiscard]] int extensions() const noexcept;
  // Reentrant holds: how many holds share this lock (1 when not reentrant).
  [[nodiscard]] int hold_count() const noexcept;
  // Stops the watchdog and releases on the nodes (for a reentrant lock: only the last holder
  // does). Idempotent; never throws. Returns what the nodes said (empty when nothing was sent).
  ReleaseResult release() noexcept;

  class REDLOCK_HIDDEN State;

 private:
  friend class Client;
  explicit Guard(std::shared_ptr<State> state) noexcept;
  std::shared_ptr<State> state_;
};

}  // namespace redlock
