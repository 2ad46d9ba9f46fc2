-- Resource-side fencing check (redlock): write only if the fence is not older than the highest
-- one this resource has seen. Use it on the Redis that holds the *protected data*.
--   KEYS[1] data key, KEYS[2] the data key's highest-fence key
--   ARGV[1] the writer's fence (a decimal integer), ARGV[2] the value to store
-- Returns 1 when written, 0 when the fence is stale (a newer holder has written).
--   redis-cli EVAL "$(cat fenced-set.lua)" 2 invoice:42 invoice:42:fence 17 '{"paid":true}'
local seen = tonumber(redis.call("get", KEYS[2]) or "0")
local fence = tonumber(ARGV[1])
if fence == nil then return redis.error_reply("fence must be an integer") end
if fence < seen then return 0 end
redis.call("set", KEYS[2], ARGV[1])
redis.call("set", KEYS[1], ARGV[2])
return 1
