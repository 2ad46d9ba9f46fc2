#pragma once
// The value types an acquisition hands out: Lock and the result records of every operation.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "redlock/error.hpp"
#include "redlock/export.hpp"
#include "redlock/options.hpp"

namespace redlock {

// A monotonic clock that keeps counting while the machine is suspended (CLOCK_BOOTTIME on Linux).
// Validity is always computed on this clock: never wall time, never a per-loop cached time.
struct REDLOCK_API BootClock {
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<BootClock>;
  static constexpr bool is_steady = true;
  [[nodiscard]] static time_point now() noexcept;
};

// A held (or once held) lock. A plain value: copying it does not copy ownership on the nodes,
// and destroying it releases nothing (use Guard for that). Thread-compatible.
class REDLOCK_API Lock {
 public:
  Lock() = default;

  [[nodiscard]] const std::vector<std::string>& resources() const noexcept { return resources_; }
  [[nodiscard]] const std::string& token() const noexcept { return token_; }
  [[nodiscard]] Millis ttl() const noexcept { return ttl_; }
  // Validity computed when the lock was taken or last extended.
  [[nodiscard]] Millis validity() const noexcept { return validity_; }
  // Local deadline: t1 + ttl - drift of the last successful acquire/extend. Never later than the
  // nodes' own expiry.
  [[nodiscard]] BootClock::time_point deadline() const noexcept { return deadline_; }
  // Time left before the deadline, zero when passed. Work that must stay exclusive has to
  // finish before this reaches zero; a process pause can outlast it (see fencing).
  [[nodiscard]] Millis remaining() const noexcept;
  [[nodiscard]] bool empty() const noexcept { return token_.empty(); }
  [[nodiscard]] int votes() const noexcept { return votes_; }
  [[nodiscard]] int node_count() const noexcept { return node_count_; }
  [[nodiscard]] std::optional<std::uint64_t> fence() const noexcept { return fence_; }
  [[nodiscard]] LockMode mode() const noexcept { return mode_; }
  // Fair locks: the ticket that fixed this holder's place in the queue.
  [[nodiscard]] std::optional<std::uint64_t> ticket() const noexcept { return ticket_; }
  // The per-node record of the acquire or extend that made this value (empty for a Guard's
  // snapshot, and for a lock rebuilt from a token).
  [[nodiscard]] const std::vector<NodeOutcome>& nodes() const noexcept { return nodes_; }
  // Whether releasing it wakes waiters (Options::wake_ups) however soon it is released: true for
  // a fair lock, for one whose acquisition found it held elsewhere first (so others likely wait
  // too), for one that was extended (held long enough for waiters to come: an auto-extended job),
  // and for one rebuilt from a token (nothing is known). An uncontended, never extended lock wakes
  // waiters once it has been held for a short while (10 ms from its attempt: waiters may have come
  // meanwhile); released sooner, its release is the documented compare-and-delete alone, and a
  // waiter that came in those milliseconds notices the release by polling.
  [[nodiscard]] bool wakes_waiters() const noexcept { return wakes_waiters_; }

  // Rebuilds a lock from a token handed over from another process (the CLI's
  // `release RESOURCE TOKEN`). Its local deadline is unknown, so `deadline()` is the far future
  // and only the nodes decide whether an extend or release succeeds.
  [[nodiscard]] static Lock from_token(std::vector<std::string> resources, std::string token,
                                       LockMode mode = LockMode::exclusive);

 private:
  friend class LockBuilder;
  std::vector<std::string> resources_;
  std::string token_;
  Millis ttl_{0};
  Millis validity_{0};
  BootClock::time_point deadline_{};
  int votes_ = 0;
  int node_count_ = 0;
  std::optional<std::uint64_t> fence_;
  LockMode mode_ = LockMode::exclusive;
  std::optional<std::uint64_t> ticket_;
  std::vector<NodeOutcome> nodes_;
  bool wakes_waiters_ = true;
  BootClock::time_point taken_at_{};  // the start of the attempt that took it
  // A fair lock its own ticket round granted: the waiter it was taken as, whose heartbeat and
  // registration its release clears.
  std::string handed_waiter_;
};

struct AcquireResult {
  std::error_code error;           // empty on success
  std::string message;             // human explanation of `error`
  Lock lock;                       // meaningful only on success
  std::vector<NodeOutcome> nodes;  // per-node record of the last attempt
  int attempts = 0;
  [[nodiscard]] explicit operator bool() const noexcept { return !error; }
};

struct ExtendResult {
  std::error_code error;
  std::string message;
  Lock lock;  // the lock with its new deadline on success; unchanged otherwise
  std::vector<NodeOutcome> nodes;
  [[nodiscard]] explicit operator bool() const noexcept { return !error; }
};

struct ReleaseResult {
  std::error_code error;  // empty if at least one node deleted the key
  std::string message;
  int deleted = 0;      // nodes where our token was found and deleted
  int not_held = 0;     // nodes that answered but did not hold our token
  int unreachable = 0;  // down, timed out or answered an error
  std::vector<NodeOutcome> nodes;
  [[nodiscard]] explicit operator bool() const noexcept { return !error; }
};

// What one node stores for a resource (`status`).
// What one node stores for a resource (`status`): the lock key, and the state of the other lock
// kinds on it (redlock/keys.hpp). Lists are the first `status_list_limit` entries; the counts are
// all of them.
struct NodeKeyState {
  struct Reader {
    std::string token;
    Millis remaining{0};  // until this reader's entry expires (server time)
  };
  struct Waiter {
    std::string id;  // the waiter's id (fair locks), not a lock token
    std::uint64_t ticket = 0;
  };

  std::string node;
  bool up = false;
  std::string detail;  // error text when not up or the read failed
  // Where the key lives behind this vote: "slot 866 on 10.0.0.5:7002" (a Redis Cluster vote),
  // "master 10.0.0.5:6380" (a Sentinel vote); empty for a standalone master.
  std::string where;
  // What the server can run beyond the basic commands, as probed at its current connection
  // ("scripts, SET IFEQ, DELIFEQ"; "not probed (scripts)" before the probe was answered or when
  // it was refused). See Options::commands.
  std::string capabilities;
  std::optional<std::string> value;  // the stored token, nullopt when no key
  std::optional<Millis> pttl;        // remaining ttl on the node, nullopt when no key/no expiry
  std::string type;                  // Redis type of the key ("string", "none", "hash", ...)
  // Read locks: the readers whose entries have not expired.
  std::size_t reader_count = 0;
  std::vector<Reader> readers;
  // Read-write locks: a writer waiting for the readers to leave (its id), which holds off new
  // readers.
  std::optional<std::string> writer_waiting;
  // Fair locks: the queue in ticket order.
  std::size_t queue_length = 0;
  std::vector<Waiter> queue;
  // The counters, when they exist.
  std::optional<std::uint64_t> fence;
  std::optional<std::uint64_t> ticket;
  // Wake-ups: how many clients (each with one or more waiters) listen for this resource's
  // releases on this node. Waiters of other Redlock clients, or with wake-ups off, are not seen;
  // nor are fair waiters (a release names them on their own client's channel): see the queue.
  std::size_t listening_clients = 0;
};

// How many readers and queued waiters a NodeKeyState lists.
inline constexpr int status_list_limit = 16;

struct StatusResult {
  std::vector<NodeKeyState> nodes;
};

// What a status read says about the lock as a whole, from the nodes that answered
// (redlock-cli status's first line). Held means what a holder needs: one token on a quorum.
struct StatusVerdict {
  enum class Kind {
    held,  // one token is stored on a quorum of the nodes (a read lock: one reader's entry is)
    free,  // a quorum answered, and none of them stores anything for the resource
    // Something is stored, but no token is on a quorum, and none could be even if every node
    // that did not answer had it: no holder can believe it holds the lock (it needs a quorum),
    // and no acquisition succeeds until those keys are released or expire. What an acquisition
    // in flight, a rollback not yet done, keys expiring one by one or a contended split leave.
    partly_held,
    unknown,  // too few answers to tell: the silent nodes could make a quorum for a token
  };
  Kind kind = Kind::unknown;
  std::string token;  // held: the token a quorum stores; empty when held by readers
  int readers = 0;    // held by readers: how many readers have their entry on a quorum
  int holding = 0;    // nodes storing the token (readers: the most for one reader); for
                      // partly_held and unknown the most that store any one token
  int answered = 0;   // nodes that answered the read
  int nodes = 0;      // nodes asked
  // held: until fewer than a quorum store it, by the ttls the nodes reported (the quorum-th
  // longest), if no one extends it; nullopt for a key without expiry. Not set otherwise.
  std::optional<Millis> remaining;
};

// The verdict on `status` (Client::status, Engine::status). Pure: no I/O.
[[nodiscard]] REDLOCK_API StatusVerdict status_verdict(const StatusResult& status);

}  // namespace redlock
