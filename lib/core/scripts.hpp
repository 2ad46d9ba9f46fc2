#pragma once
// The Lua scripts the engine runs on each node. The single-resource release and extend scripts
// are those of the Redis documentation (the release also publishes on the resource's wake
// channel, which other clients ignore), so locks interoperate with other clients.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace redlock::detail {

enum class ScriptId {
  release,        // KEYS[1], [mark, queue, [heartbeats, handoff]]; ARGV[1]=token, [channel, [handed
                  // waiter]] -> 1 deleted / 0 not held
  extend,         // KEYS[1], ARGV[1]=token, ARGV[2]=ttl ms -> 1 extended / 0 not held
  acquire_multi,  // KEYS..., ARGV[1]=token, ARGV[2]=ttl ms -> 1 all set / 0 one exists
  release_multi,  // KEYS..., [marks...]; ARGV[1]=token, [channels...] -> number deleted
  extend_multi,   // KEYS..., ARGV[1]=token, ARGV[2]=ttl ms -> 1 if every key held and extended
  status,         // KEYS[1] -> {type, value or nil, pttl}
  acquire_fenced,  // KEYS[1]=lock, KEYS[2]=fence counter; ARGV token, ttl -> new fence / 0 held
  fence_raise,     // KEYS counter, [queue]; ARGV f, expiry, [waiter] -> 1 once the counter is >= f
  // Read-write locks. KEYS[1]=lock key (the writer), KEYS[2]=readers (zset token -> expiry,
  // server ms), KEYS[3]=writer (a waiting writer's mark, with its own expiry). Key names:
  // redlock/keys.hpp.
  acquire_read,   // ARGV token, ttl -> 1 granted / 0 a writer holds or waits
  acquire_write,  // ARGV token, ttl, mark ttl, writer id -> 1 granted / 0 held (marks itself
                  // waiting)
  release_read,   // KEYS[1]=readers, [mark]; ARGV token, [channel] -> 1 removed / 0 not there
  extend_read,    // KEYS[1]=readers; ARGV token, ttl -> 1 extended / 0 not held (or expired)
  // Fair locks. KEYS[1]=lock key, KEYS[2]=queue (zset waiter -> ticket), KEYS[3]=heartbeats
  // (zset waiter -> expiry, server ms), KEYS[4]=ticket counter (acquire_fair), and with wake-ups
  // the handoff registrations (hash waiter -> "<ttl> <token>") last.
  ticket_take,    // KEYS ticket, queue, heartbeats, lock, [mark, handoff]; ARGV waiter, heartbeat
                  //   ttl, [mark ttl, ttl, token, [grant]] -> {the new counter, 1 if the lock is
                  //   held or a waiter is ahead, 2 if it granted the lock to the token}
  acquire_fair,   // ARGV token, ttl, ticket, heartbeat ttl, waiter, [registered token] -> 1
                  // granted / 2 granted, the key handed over to the registered token / 0 not yet
  fair_leave,     // KEYS queue, heartbeats, [mark, [lock, handoff]]; ARGV waiter, [channel,
                  // [token of the lock acquired]] -> 1
  fair_rollback,  // KEYS lock, queue, heartbeats; ARGV token, ticket, waiter, heartbeat ttl -> 1
                  // taken back (and the place restored) / 0 not held
  // Wake-ups. KEYS[1]=waiting mark (zset waiter -> since when it waits, or "*" -> 0).
  mark_waiting,  // ARGV member, score, ttl -> 1
  // Leader election (core/election.hpp). KEYS[1]=lock key, then the leader record (hash token,
  // term, since, id; redlock/keys.hpp), which lives and dies with the lock key.
  acquire_leader,  // KEYS lock, fence, record; ARGV token, ttl, fence expiry, id -> fence / 0
  settle_leader,   // KEYS fence, lock, record; ARGV term, fence expiry, token, [record channel]
                   //   -> 1 the term is on the record / 0 the lock is not ours here
  extend_leader,   // KEYS lock, record; ARGV token, ttl -> 1 extended / 0 not held
  release_leader,  // KEYS lock, record, [mark]; ARGV token, [record channel, wake channel]
                   //   -> 1 deleted / 0 not held
  read_leader,     // KEYS lock, record -> {lock value, pttl, token, term, ms since, id}
  count_,
};

// A release's publish that names one waiter: "<waiter id>/<SHA-1 of the token released, 40 hex>"
// (the release scripts above; fair_leave hashes the leaving waiter's id). Anything else (a
// "#<n>", a name without the hash) is all waiter, with an empty release. A name says only "try
// now": anyone who may PUBLISH on the channel can send one.
struct WakeName {
  std::string_view waiter;
  std::string_view release;
};
[[nodiscard]] WakeName parse_wake_message(std::string_view message);

// Whether a call of `id` may run later than it was sent, after commands sent behind it, without
// harm: it acts only where a key still carries the caller's own token (releases, rollbacks,
// extends), or it only reads, or it only raises a counter to a floor. A token is never reused
// and the command that set it was sent before, so nothing that runs in between makes such a call
// do what its sender did not mean. The others (acquires, queue and mark changes) create state: a
// release sent behind one must not run before it (net::Connection keeps them in order after a
// NOSCRIPT).
[[nodiscard]] bool safe_to_run_late(ScriptId id);
// A release that wakes every waiter (readers, writers, fair waiters: the "*" mark) publishes
// "#<n>", the number of clients that listened. That number for such a waiter text (its leading
// digits; 0 for none), at most max_wake_listeners whatever the digits say (it sets how long a
// woken waiter may wait: a publisher's number must not make that unbounded); nullopt for any
// other text.
inline constexpr long long max_wake_listeners = 100'000;
[[nodiscard]] std::optional<long long> wake_listeners(std::string_view waiter) noexcept;

// The Lua source of a script (its SHA-1, what EVALSHA names, is net::script_sha()).
[[nodiscard]] std::string_view script_body(ScriptId id);
[[nodiscard]] constexpr std::size_t script_count() {
  return static_cast<std::size_t>(ScriptId::count_);
}

}  // namespace redlock::detail
