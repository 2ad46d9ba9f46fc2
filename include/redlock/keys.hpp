#pragma once
// The key layout (docs/design.md, "Key layout").
//
// The lock key is the resource with the client's key prefix (Options::key_prefix): exactly the
// key of the Redis-documented Redlock, so locks interoperate with the other clients. The advanced
// lock kinds keep more state in keys derived from the lock key:
//
//     {<tag>}:redlock:<role>:<lock key>
//
// where <tag> is the lock key's Redis Cluster hash tag (the text between its first '{' and the
// next '}', when not empty) or else the whole lock key. So
// - a derived key is never a resource's key: no resource may take that form (is_derived_key());
//   the lock kinds' keys of two resources never meet;
// - a derived key lives in the same Redis Cluster hash slot as its lock key, for every lock key,
//   so one script can touch both on a cluster master. A lock key with a '}' but no hash tag (e.g.
//   "a}b"), or an empty one, cannot be a tag itself: its derived keys take as tag the decimal
//   number slot_tag() gives for the lock key's slot, which hashes to that same slot.

#include <cstdint>
#include <string>
#include <string_view>

#include "redlock/export.hpp"

namespace redlock {

enum class KeyRole {
  fence,           // fencing counter (string integer; expires when idle, see fencing.hpp)
  readers,         // read-lock holders (sorted set token -> expiry, server ms)
  writer_waiting,  // a waiting writer's id (string, short expiry)
  ticket,          // fair-lock ticket counter (string integer; lives as long as the queue;
                   // starts from the server clock in s x 10^6)
  queue,           // fair-lock waiters (sorted set waiter -> ticket)
  heartbeats,      // fair-lock waiters' heartbeats (sorted set waiter -> expiry, server ms)
  wake,            // not a key: the pub/sub channel releases publish on ("#<n>": n clients
                   // listen), so waiters try at once instead of at their next poll; a release
                   // that names one waiter ("<id>@<channel>") publishes on that channel instead
  waiting,         // waiters listening on `wake` (sorted set: exclusive waiters' ids -> since
                   // when they wait, "*" -> 0 for the others; short expiry, renewed while they
                   // wait): releases publish only while it exists, so an uncontended release
                   // publishes nothing
  handoff,         // fair-lock waiters' registered tokens (hash waiter -> "<ttl ms> <token>"):
                   // a release sets the key to the first waiter's token; its attempt takes it
  leader,          // an election's leader record (hash: token, term, since, id), written with
                   // the lock key by the same script, expiring, extended and deleted with it;
                   // its wake channel tells observers that the leader may have changed
};

// "fence", "readers", "writer", "ticket", "queue", "heartbeats", "wake", "waiting", "handoff",
// "leader": the <role> part.
[[nodiscard]] REDLOCK_API std::string_view to_string(KeyRole role) noexcept;

// The key of `role` for the lock key `lock_key` (key prefix included).
[[nodiscard]] REDLOCK_API std::string derived_key(std::string_view lock_key, KeyRole role);

// True for a key of the derived form `{...}:redlock:...`. No resource's key may be one.
[[nodiscard]] REDLOCK_API bool is_derived_key(std::string_view key) noexcept;

// The Redis Cluster hash slot of a key: CRC16 (XMODEM) of its hash tag, or of the whole key when
// it has none, modulo 16384.
[[nodiscard]] REDLOCK_API unsigned hash_slot(std::string_view key) noexcept;

// The hash tag Redis Cluster hashes for `key`: the text between its first '{' and the next '}'
// when that is not empty, else the whole key.
[[nodiscard]] REDLOCK_API std::string_view hash_tag(std::string_view key) noexcept;

// The shortest decimal number (as text) whose Redis Cluster slot is `slot` (0..16383): the tag of
// the derived keys of a lock key that cannot be its own tag.
[[nodiscard]] REDLOCK_API std::string slot_tag(unsigned slot);

}  // namespace redlock
