#pragma once
// Lock kinds: for each kind, the keys it uses, the command an attempt sends, and how a node's
// reply votes. Pure: the engine runs the rounds, this says what they send and what the answers
// mean. A new kind is one class here and one line in kind_for_acquire().
//
// Kinds (docs/design.md, "Key layout"):
//   plain   SET key token NX PX ttl: the wire format of every Redlock client
//   multi   one token over several keys, all-or-nothing on each node
//   fenced  plain, plus a fence counter grown on the granting nodes (and a write-back round)
//   read    shared with other readers; not while a writer holds or waits
//   write   one writer, no readers; a waiting writer marks itself so new readers wait
//   fair    FIFO: a ticket round first, then the head of the queue takes the lock
//   leader  fenced, plus the leader record (identity, term) beside the lock key; the write-back
//           always runs and settles the term on the record (core/election.hpp)

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/command.hpp"
#include "core/reply.hpp"
#include "redlock/error.hpp"
#include "redlock/lock.hpp"
#include "redlock/options.hpp"

namespace redlock::detail {

enum class Vote { yes, no, failed };

// What one node's reply means for one round.
struct Verdict {
  Vote vote = Vote::failed;
  NodeState state = NodeState::error;  // ok, held_by_other, not_held or error
  std::string detail;                  // an error reply's text, or what was unexpected
  std::uint64_t value = 0;             // fenced acquire: the fence; ticket round: the ticket
  bool behind = false;   // ticket round: the lock is held or a live waiter is ahead on this node
  bool granted = false;  // ticket round: the key was free and the waiter first: it was granted
};

// What one acquisition attempt puts in its command.
struct AttemptArgs {
  const std::vector<std::string>& keys;  // lock keys, key prefix applied
  std::string_view token;                // fresh for every attempt
  Millis ttl;
  std::string_view waiter{};  // write and fair: this waiter's id, kept across attempts
  std::uint64_t ticket = 0;   // fair: the place in the queue
  Millis heartbeat_ttl{0};    // fair: how long the queue keeps a silent waiter
  Millis writer_mark_ttl{0};  // write: how long the waiting mark outlives a silent writer
  // fair, with wake-ups: the registration this attempt makes (the token, other than the
  // attempt's, that a release may set the key to for the waiter); empty: none.
  std::string_view registered_token{};
  std::string_view identity{};  // leader: the candidate's id, written with the lock
};

// A fair waiter's registration: the token (and ttl) a release may set the lock key to when it
// hands the lock over to the waiter. The release's name only tells the waiter to try: its
// attempt takes a key set to its registered token as granted (acquire_fair), and only that
// attempt's replies give it the lock.
struct Registration {
  Millis ttl{0};
  std::string_view token;
};

class LockKind {
 public:
  virtual ~LockKind() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;

  [[nodiscard]] virtual Command acquire(const AttemptArgs& a) const = 0;
  [[nodiscard]] virtual Verdict classify_acquire(const Reply& r) const = 0;

  // Extend and release of a held lock of this kind; release is also the rollback of an attempt.
  // `wake`: the release also publishes on the wake channel while a waiter's mark exists (one
  // more script call per node); without it, the documented compare-and-delete alone.
  [[nodiscard]] virtual Command extend(const std::vector<std::string>& keys, std::string_view token,
                                       Millis ttl) const;
  // `handed_waiter` (a fair lock its ticket round granted with the registered token): the
  // release also clears that waiter's heartbeat and registration, which the grant left.
  [[nodiscard]] virtual Command release(const std::vector<std::string>& keys,
                                        std::string_view token, bool wake,
                                        std::string_view handed_waiter = {}) const;
  // What takes back an attempt that did not win (no quorum, too late, cancelled): the release
  // without wake-ups (the compare-and-delete alone), since an attempt that held nothing frees
  // nothing a waiter waits for, and waking waiters on it made them storm the nodes whenever no
  // attempt could win (algorithm.md, hazard 12); a fair waiter also gets back the place in the
  // queue that a granting node gave up, so a waiter behind it cannot overtake it meanwhile.
  [[nodiscard]] virtual Command rollback(const AttemptArgs& a) const;
  [[nodiscard]] static Verdict classify_extend(const Reply& r);   // 1 extended, 0 not held
  [[nodiscard]] static Verdict classify_release(const Reply& r);  // >0 deleted, 0 not held

  // Rounds besides the attempt, run by the engine:
  // a fence write-back after a quorum granted (Lock::fence()),
  [[nodiscard]] virtual bool fenced() const { return false; }
  // its command (raise the counter at `key`'s fence to `fence`; a leader's also settles its term
  // where the lock key carries `token`) and what a reply votes,
  [[nodiscard]] virtual Command fence_writeback(const std::string& key, std::uint64_t fence,
                                                std::string_view token) const;
  [[nodiscard]] virtual Verdict classify_fence_writeback(const Reply& r) const;
  // and whether it runs even where a quorum's counters already stand at the fence (a leader's:
  // its term must be on the records of a quorum before anyone may read it as leader),
  [[nodiscard]] virtual bool always_writes_back() const { return false; }
  // a ticket round (and its write-back) before the attempts: fair queues,
  [[nodiscard]] virtual bool queued() const { return false; }
  // and what a waiter sends to every node once its acquisition has ended (`acquired` or not;
  // `token`: the acquired lock's): a fair waiter leaves the queue, a writer that gave up takes
  // back its waiting mark. Nothing for the other kinds.
  [[nodiscard]] virtual std::optional<Command> finish_waiting(const std::vector<std::string>& keys,
                                                              std::string_view waiter,
                                                              bool acquired,
                                                              std::string_view token = {}) const;
  // Write and fair waiters keep one id across their attempts (the token changes every attempt).
  [[nodiscard]] virtual bool has_waiter_id() const { return false; }
  // Wake-ups: a release wakes one waiter of this kind by name (it marks itself waiting by its
  // id), rather than every listening client. Exclusive kinds; readers may all enter at once, and
  // a fair queue names its own first waiter.
  [[nodiscard]] virtual bool named_wake() const { return false; }
};

// Whether a release checks for waiters (and names one): always where `wakes_waiters` (Lock's:
// fair, contended, extended or rebuilt from a token), else once the lock has been held for
// `short_hold` since its attempt began. A shorter hold seldom gathers a waiter, and the check
// would cost every short uncontended cycle (its release carries the mark, the queue and the
// channel, and runs one more lookup); a waiter that came during it polls.
inline constexpr Millis short_hold{10};
[[nodiscard]] bool release_wakes(bool wakes_waiters, BootClock::duration held) noexcept;

// The kind that acquires with these options (check_acquire() has accepted them).
[[nodiscard]] const LockKind& kind_for_acquire(const AcquireOptions& o, std::size_t resources);
// The kind that extends and releases a lock of `mode` over `resources` resources. Fenced and fair
// locks extend and release like plain ones (a Lock rebuilt from a token does not know it was one).
[[nodiscard]] const LockKind& kind_for_lock(LockMode mode, std::size_t resources);

// The counter rounds of fencing and fair queues.
// Ticket: grows the queue's counter and takes a place in the queue at once.
// Wake-ups: a waiter's mark that it listens on the wake channel of `key`, for `ttl` (releases
// publish only while one exists). `waiter`: the id a release names it by (named_wake() kinds),
// `since` its rank (when it began to wait, ms); empty: a waiter that every release wakes.
[[nodiscard]] Command mark_waiting(std::string_view key, Millis ttl, std::string_view waiter = {},
                                   long long since = 0);
// A named waiter that is done (acquired or not) takes its id off the mark.
[[nodiscard]] Command unmark_waiting(std::string_view key, std::string_view waiter);
// With `mark_ttl` (wake-ups), the waiter is marked waiting on the node in the same script, and
// registers `reg` (given with it); with `grant_if_free` too, a node where the key is free and the
// waiter first in line sets the key to the registered token, and its reply says so (a grant).
[[nodiscard]] Command take_ticket(std::string_view key, std::string_view waiter,
                                  Millis heartbeat_ttl, std::optional<Millis> mark_ttl = {},
                                  const Registration& reg = {}, bool grant_if_free = false);
// The new counter (> 0) as the value, whether someone is ahead of the waiter there, and whether
// the node granted the lock to the registered token.
[[nodiscard]] Verdict classify_ticket(const Reply& r);
// Write-back: raises `counter_key` to at least `value` (counters never shrink), and its expiry to
// at least `expiry`.
[[nodiscard]] Command raise_counter(std::string counter_key, std::uint64_t value, Millis expiry);
// A fair ticket's write-back: raise_counter on the resource's ticket counter, and the waiter's
// place in the queue set to the agreed `ticket` where it is queued (a node that counted concurrent
// takers in another order placed it by its own count: until re-placed, that node's release would
// name another head than the rest, and no waiter would hear its name from a quorum).
[[nodiscard]] Command settle_ticket(std::string_view key, std::uint64_t ticket, Millis expiry,
                                    std::string_view waiter);
[[nodiscard]] Verdict classify_raise(const Reply& r);  // 1 once the counter is >= value

// An election's leader record, as read_leader() reads it on one node: its lock key and record.
[[nodiscard]] Command read_leader(const std::string& key);

// `status`: what a node stores for a lock key and its derived keys, whatever their types; lists
// at most `list_at_most` readers and queued waiters.
[[nodiscard]] Command read_status(std::string key, int list_at_most);

// What one node's answer to read_status() says, into `row` (its node, up and where are the
// caller's): {type, value, pttl, reader count, readers, writer, queue length, queue, fence,
// ticket, listening clients} (scripts.cpp); an error reply's text, as server_text() shows it, or
// "unexpected reply ..." as its detail otherwise. Counters and times outside 0..2^63-1 are left
// unknown.
void classify_status(const Reply& r, NodeKeyState& row);

// A reply no kind expects: an error reply (its text, as server_text() shows it), or an unexpected
// type.
[[nodiscard]] Verdict unexpected(const Reply& r);

}  // namespace redlock::detail
