// The resource-side fencing check (fencing.hpp).
#include "redlock/fencing.hpp"

namespace redlock {

std::string_view fenced_write_script() noexcept {
  // Kept byte for byte equal to scripts/lua/fenced-set.lua (a unit test compares them).
  return R"LUA(-- Resource-side fencing check (redlock): write only if the fence is not older than the highest
-- one this resource has seen. Use it on the Redis that holds the *protected data*.
--   KEYS[1] data key, KEYS[2] the data key's highest-fence key
--   ARGV[1] the writer's fence (decimal digits only), ARGV[2] the value to store
-- Returns 1 when written, 0 when the fence is stale (a newer holder has written).
--   redis-cli EVAL "$(cat fenced-set.lua)" 2 invoice:42 invoice:42:fence 17 '{"paid":true}'
-- Fences are compared as decimal strings, not with tonumber(): Lua numbers are doubles, which
-- merge fences above 2^53, and tonumber() also takes "nan", "inf", "1e3" and "0x10" (one "nan"
-- would switch the check off for good).
local function decimal(s)
  if type(s) ~= "string" or not string.find(s, "^%d+$") then return nil end
  return (string.gsub(s, "^0+(%d)", "%1"))
end
local fence = decimal(ARGV[1])
if fence == nil then return redis.error_reply("fence must be a decimal integer") end
local seen = decimal(redis.call("get", KEYS[2]) or "0")
if seen == nil then return redis.error_reply("the highest-fence key does not hold a decimal integer") end
if #fence < #seen or (#fence == #seen and fence < seen) then return 0 end
redis.call("set", KEYS[2], fence)
redis.call("set", KEYS[1], ARGV[2])
return 1
)LUA";
}

}  // namespace redlock
