#pragma once
// Fencing tokens: what the protected resource does with Lock::fence().
//
// A fence grows strictly with every successful fenced acquisition of a resource (across all
// clients that use fencing on it), so a resource that remembers the highest fence it has seen can
// reject a write from a holder whose lease ran out while it was paused. The counter is the plain
// string key `<prefix><resource>:fence` on every lock node; it never expires. It holds only while
// nodes keep their counters: run them with appendonly yes + appendfsync always. The restart guard
// does not protect fences (a counter lost in a restart is lost however long the node waits; see
// README, "Safety model", and docs/safety/results.md).

#include <string_view>

#include "redlock/export.hpp"

namespace redlock {

// Suffix of the fence counter key, next to the lock key.
inline constexpr std::string_view fence_key_suffix = ":fence";

// The resource-side check for data kept in Redis (also shipped as scripts/lua/fenced-set.lua for
// redis-cli): KEYS[1] data key, KEYS[2] its highest-fence key, ARGV[1] fence, ARGV[2] value.
// Returns 1 when written, 0 when the fence is older than one already seen.
[[nodiscard]] REDLOCK_API std::string_view fenced_write_script() noexcept;

}  // namespace redlock
