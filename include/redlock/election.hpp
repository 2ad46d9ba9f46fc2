#pragma once
// Leader election over the same quorum as the locks (docs/guide.md, "Electing a leader").
//
//   redlock::Election election(client, "billing-primary");
//   auto leadership = election.campaign(hostname);      // blocks until leader
//   write_with_fence(resource, leadership.term());      // the term fences what the leader writes
//   if (!leadership.is_leader()) stop_work();           // lost: stop at once
//
// A leader holds the election's lock: the plain Redlock key named after the election (so a lock
// of another client on that name still excludes), and beside it, written by the same script on
// each node, expiring, extended and deleted with it, a record of the leader's identity and term
// (docs/design.md, "Key layout"). A follower reads who leads from a quorum of those records and
// never sees an identity that no quorum holds. The term is the lock's fence: it grows strictly
// from leader to leader while the nodes keep their counters (appendfsync always). What no
// election can promise: a leader paused (GC, SIGSTOP) past its validity still believes it leads
// when it resumes, until it looks; the resource it writes must reject its stale term.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "redlock/client.hpp"
#include "redlock/export.hpp"
#include "redlock/guard.hpp"
#include "redlock/leader.hpp"
#include "redlock/lock.hpp"
#include "redlock/options.hpp"

namespace redlock {

struct CampaignOptions {
  Millis ttl{15000};  // of the leader's lock: a dead leader is replaced within about this
  // Give up after this long (Errc::contended while someone else leads, Errc::no_quorum while the
  // nodes cannot elect anyone). Unset: campaign until leader or stopped.
  std::optional<Millis> wait;
  // Request a stop from any thread and the campaign ends with Errc::cancelled; what its attempt
  // in flight set on the nodes is taken back, and its waiting mark with it.
  std::stop_token stop;
  // How the leadership is kept: extended automatically (auto_extend is always on for a leader),
  // every extend_every (default ttl/3); on_lost runs once when it is lost, renew_deadline (default
  // 2/3 of the ttl) is when the leader gives up while a third of the ttl is left to stop its
  // work; on_renew_failing warns before. reentrant is refused.
  HoldOptions hold;
};

// The leadership campaign() hands out. Move-only; resigns (releases the lock, so the next
// candidate is elected at once) when destroyed. Thread-safe as Guard.
class REDLOCK_API Leadership {
 public:
  Leadership() noexcept = default;
  Leadership(Leadership&&) noexcept = default;
  Leadership& operator=(Leadership&&) noexcept = default;
  ~Leadership() = default;

  // True while this candidate leads: elected, not resigned, not lost, its validity not passed.
  // Check it before each piece of work, and fence the work with term().
  [[nodiscard]] bool is_leader() const noexcept { return guard_.owns(); }
  [[nodiscard]] explicit operator bool() const noexcept { return is_leader(); }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] const std::string& id() const noexcept { return id_; }
  // The term: grows strictly from leader to leader (the lock's fence, lock().fence()). 0 when
  // empty. Fence what the leader writes with it.
  [[nodiscard]] std::uint64_t term() const noexcept { return term_; }
  // Time left before the local deadline (moves forward with every extension).
  [[nodiscard]] Millis remaining() const noexcept { return guard_.remaining(); }
  // held, renew_failing (take on no new work), lost; none once resigned or empty.
  [[nodiscard]] HoldState state() const noexcept { return guard_.state(); }
  // Why it was lost (reported once through CampaignOptions::hold.on_lost too); nullopt while
  // leading or after resign().
  [[nodiscard]] std::optional<LossInfo> lost() const { return guard_.lost(); }
  // The leader's lock (token, deadline, fence = term).
  [[nodiscard]] Lock lock() const { return guard_.lock(); }
  // Steps down: stops extending and deletes the lock and the record on the nodes, and wakes the
  // candidate that has waited longest. Idempotent; never throws.
  ReleaseResult resign() noexcept { return guard_.release(); }

 private:
  friend class Election;
  Leadership(Guard guard, std::string name, std::string id, std::uint64_t term) noexcept
      : guard_(std::move(guard)), name_(std::move(name)), id_(std::move(id)), term_(term) {}
  Guard guard_;
  std::string name_;
  std::string id_;
  std::uint64_t term_ = 0;
};

// What observe() watches: stops when destroyed. Move-only; stop() from any thread.
class REDLOCK_API Observation {
 public:
  Observation() noexcept = default;
  Observation(Observation&&) noexcept = default;
  Observation& operator=(Observation&& other) noexcept;
  ~Observation();
  Observation(const Observation&) = delete;
  Observation& operator=(const Observation&) = delete;
  // No callback runs after this returns (one running on another thread is waited for; called
  // from inside the callback, none runs after that one). Idempotent.
  void stop() noexcept;
  [[nodiscard]] bool active() const noexcept;

  struct REDLOCK_HIDDEN State;

 private:
  friend class Election;
  explicit Observation(std::shared_ptr<State> state) noexcept : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

struct ObserveOptions {
  // Read who leads at least this often. Sooner when a node says the leader may have changed
  // (Options::wake_ups): a release and every new term publish on the leader record's channel.
  Millis poll{1000};
};

// An election over `name` on the client's nodes. Cheap; holds a reference to the client, which
// must outlive it (and every Leadership and Observation it made). Thread-safe.
class REDLOCK_API Election {
 public:
  // Throws std::invalid_argument naming a bad name (empty, over 1 MiB, or of the form of the
  // library's own keys: redlock/keys.hpp).
  Election(Client& client, std::string name);

  [[nodiscard]] const std::string& name() const noexcept { return name_; }

  // Campaigns as `id` (check_identity(): 1 to 256 bytes, no control characters; readable by every
  // client of the nodes, so never a secret) until elected, the wait passes or a stop is
  // requested. Waiting candidates are woken by the leader's release (a hint; they try, and only
  // the replies elect) and poll at the retry delay otherwise. Must not be called from a
  // callback of the client (Errc::invalid_argument).
  // Throws redlock::Error (with the per-node record of the last attempt); try_campaign never
  // throws and returns an empty Leadership with that record instead (docs/api.md).
  [[nodiscard]] Leadership campaign(std::string_view id, const CampaignOptions& options = {});
  [[nodiscard]] std::pair<Leadership, AcquireResult> try_campaign(
      std::string_view id, const CampaignOptions& options = {});

  // Who leads now, read from every node: LeaderResult (no_quorum when too few answered).
  [[nodiscard]] LeaderResult leader();

  // Calls `on_change` with who leads now, and then each time that changes (a new leader, its term,
  // nobody, or no quorum to tell), in order, on the client's I/O thread (it must not block nor
  // make blocking calls of the client). Until the Observation is stopped or destroyed, or the
  // client is. An empty Observation when the options are unusable (poll not positive).
  // Each change is read from the nodes (a message only hints that one came): a leadership that
  // begins and ends within one read can pass unseen; reported terms grow strictly.
  [[nodiscard]] Observation observe(std::function<void(const LeaderResult&)> on_change,
                                    const ObserveOptions& options = {});

 private:
  Client& client_;
  std::string name_;
};

}  // namespace redlock
