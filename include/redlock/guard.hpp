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
                           // Errc::no_quorum (a majority of the nodes is down, or no extension
                           // succeeded before the renew deadline: it cannot be kept),
                           // Errc::expired (the local deadline passed before an extend succeeded,
                           // after a hold limit stopped the extending)
  std::string message;
  std::vector<NodeOutcome> nodes;  // per-node record of the last extend, if any
};

// Extensions are failing (delivered through HoldOptions::on_renew_failing): the lock is still
// held, and the watchdog keeps trying until the renew deadline.
struct RenewFailure {
  std::error_code reason;  // of the extend that failed (Errc::no_quorum, Errc::expired)
  std::string message;
  std::vector<NodeOutcome> nodes;  // per-node record of that extend
  Millis give_up_in{0};            // until the renew deadline, when the hold gives up
};

// Where a hold stands (Guard::state()).
enum class HoldState {
  none,           // a default-constructed, moved-from or released Guard
  held,           // held, and the last extension (if any) succeeded
  renew_failing,  // held, but the last extension failed: the hold gives up at the renew deadline
                  // unless one succeeds before
  lost,           // lost (Guard::lost() says why) or past its local deadline
};

struct HoldOptions {
  bool auto_extend = false;            // keep extending while held (the watchdog)
  std::optional<Millis> extend_every;  // default: ttl / 3
  std::optional<Millis> max_hold;      // stop extending after this long in total
  std::optional<int> max_extensions;   // stop extending after this many extends
  // Runs exactly once, on the I/O thread, when the lock is lost while still held (never after
  // release()). Must not block and must not call blocking Client functions.
  std::function<void(const LossInfo&)> on_lost;

  // The renew deadline (client-go's RenewDeadline). When no extension has succeeded for this
  // long since the lock was taken or last extended, the hold gives up: on_lost runs (Errc::
  // no_quorum) with ttl - renew_deadline of the validity still left, the holder's time to stop
  // its work before another may take the lock. It does not release: the lock stays on the nodes
  // until the holder releases (Guard's destructor), once its work has stopped, or until it
  // expires; a release now would let the next holder start while this one is still stopping.
  // Default: halfway between extend_every and the ttl (2/3 of the ttl with the default
  // extend_every). Must be above extend_every and at most the ttl (the ttl: give up only at the
  // validity deadline). An extension in flight at the renew deadline is waited for (at most
  // node_timeout, never past the validity deadline), and a lock handed to Engine::hold() after its
  // renew deadline gets one extension tried. Not applied once max_hold or max_extensions stopped
  // the extending: the loss then comes at the validity deadline (Errc::expired).
  std::optional<Millis> renew_deadline;
  // Runs on the I/O thread when an extension fails while the lock is still held (a timeout, an
  // error reply, no quorum for another reason than a majority down): at most once per run of
  // failures, that is once, then again only after an extension succeeded in between. Never after
  // on_lost or release(). A failure that loses the lock at once (the token gone, a majority down)
  // goes to on_lost only. Must not block and must not call blocking Client functions.
  std::function<void(const RenewFailure&)> on_renew_failing;
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

// Why a hold with `options` of a lock of `ttl` cannot be kept (extend_every not in (0, ttl),
// renew_deadline not in (extend_every, ttl]), naming the value, or nullopt. Client::lock refuses
// exactly this (Errc::invalid_argument) before anything is sent, as check_acquire.
[[nodiscard]] REDLOCK_API std::optional<std::string> check_hold(Millis ttl,
                                                                const HoldOptions& options);

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
  // Its nodes() is empty: a held lock keeps no per-node record (it would be most of the memory
  // a held lock costs). The acquisition's is on the AcquireResult (Client::try_lock; the Error
  // that a failed Client::lock throws carries a failure's), a failing or lost extension's on its
  // RenewFailure or LossInfo.
  [[nodiscard]] Lock lock() const;
  // The loss, once the lock was lost; nullopt while held or after a release.
  [[nodiscard]] std::optional<LossInfo> lost() const;
  // How many extensions the watchdog has made.
  [[nodiscard]] int extensions() const noexcept;
  // Where the hold stands: held, renew_failing (extensions are failing: take on no new work),
  // lost; none once released.
  [[nodiscard]] HoldState state() const noexcept;
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
