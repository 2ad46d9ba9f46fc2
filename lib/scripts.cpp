#include "scripts.hpp"

#include "sha1.hpp"

namespace redlock::detail {
namespace {

constexpr std::string_view bodies[] = {
    // release
    R"(if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end)",
    // extend
    R"(if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("pexpire",KEYS[1],ARGV[2]) else return 0 end)",
    // acquire_multi: all-or-nothing on this node
    R"(for _, k in ipairs(KEYS) do if redis.call("exists", k) == 1 then return 0 end end
for _, k in ipairs(KEYS) do redis.call("set", k, ARGV[1], "PX", ARGV[2]) end
return 1)",
    // release_multi
    R"(local n = 0
for _, k in ipairs(KEYS) do
  if redis.call("get", k) == ARGV[1] then n = n + redis.call("del", k) end
end
return n)",
    // extend_multi: only if every key still carries our token
    R"(for _, k in ipairs(KEYS) do if redis.call("get", k) ~= ARGV[1] then return 0 end end
for _, k in ipairs(KEYS) do redis.call("pexpire", k, ARGV[2]) end
return 1)",
    // status: read-only, works whatever the key's type
    R"(local t = redis.call("type", KEYS[1])["ok"]
local v = false
if t == "string" then v = redis.call("get", KEYS[1]) end
return {t, v, redis.call("pttl", KEYS[1])})",
};
static_assert(std::size(bodies) == script_count());

}  // namespace

const Script& script(ScriptId id) {
  static const auto all = [] {
    std::array<Script, script_count()> a;
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = Script{bodies[i], sha1_hex(bodies[i])};
    return a;
  }();
  return all[static_cast<std::size_t>(id)];
}

}  // namespace redlock::detail
