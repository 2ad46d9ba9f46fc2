#pragma once
// Fencing tokens: what the protected resource does with Lock::fence().
//
// A fence grows strictly with every successful fenced acquisition of a resource (across all
// clients that use fencing on it), so a resource that remembers the highest fence it has seen can
// reject a write from a holder whose lease ran out while it was paused.
//
// The counter is the string key derived_key(<lock key>, KeyRole::fence) (keys.hpp) on every lock
// node. A node that has no counter (never used, idle past fence_counter_idle_expiry, or restarted
// without its data) starts it from its own clock: milliseconds since 1970 x 1000. So fences look
// like 1763870000000001 and keep growing across an expiry, given that
//   - the nodes' wall clocks are within fence_counter_idle_expiry of each other and never step back
//     that far (an idle counter only goes after that long), and
//   - a resource sees fewer than 1000 fenced acquisitions per millisecond on average.
// A counter lost in a crash or restart is guarded only by the clock condition in the same way,
// with the time the node was down in place of the expiry; appendonly yes + appendfsync always
// makes counters durable and is still the recommendation for fenced locks (docs/design.md, "Safety
// model").

#include <chrono>
#include <string_view>

#include "redlock/export.hpp"

namespace redlock {

// How long a fence counter stays after its last use. Bounds the memory of many fenced resources
// (one counter of about 70 bytes per resource used in that time; docs/design.md, "Key layout").
inline constexpr std::chrono::milliseconds fence_counter_idle_expiry{7LL * 24 * 3600 * 1000};

// The resource-side check for data kept in Redis (also shipped as scripts/lua/fenced-set.lua for
// redis-cli): KEYS[1] data key, KEYS[2] its highest-fence key, ARGV[1] fence, ARGV[2] value.
// Returns 1 when written, 0 when the fence is older than one already seen.
[[nodiscard]] REDLOCK_API std::string_view fenced_write_script() noexcept;

}  // namespace redlock
