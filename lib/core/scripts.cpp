#include "core/scripts.hpp"

#include <algorithm>
#include <optional>
#include <utility>

#include "core/token.hpp"

namespace redlock::detail {
namespace {

// How a release names the waiter that should try now (the release script below says why each
// step): `head` a waiter already chosen (a fair queue's first), else the exclusive waiter that
// has waited longest, taken off the `mark`; published on its client's own channel as
// "<id>/<SHA-1 of the token released>", or "#<listeners>" on the lock's `channel` when nobody is
// named. One Lua function, written once, at the start of every script that releases and wakes
// (adjacent string literals: the script bodies stay compile-time constants).
#define REDLOCK_LUA_WAKE_WAITER                                                                 \
  "local function wake_waiter(mark, channel, token, head)\n"                                    \
  "  if not head and redis.call(\"type\", mark).ok == \"zset\" and not redis.call(\"zscore\", " \
  "mark, \"*\") then\n"                                                                         \
  "    head = redis.call(\"zpopmin\", mark)[1]\n"                                               \
  "  end\n"                                                                                     \
  "  local to = channel\n"                                                                      \
  "  if head then\n"                                                                            \
  "    local at = string.find(head, \"@\", 1, true)\n"                                          \
  "    if at then to = string.sub(head, at + 1) end\n"                                          \
  "    head = head .. \"/\" .. redis.sha1hex(token)\n"                                          \
  "  else\n"                                                                                    \
  "    local s = redis.pcall(\"pubsub\", \"numsub\", channel)\n"                                \
  "    head = \"#\" .. (type(s) == \"table\" and s[2] or 1)\n"                                  \
  "  end\n"                                                                                     \
  "  redis.pcall(\"publish\", to, head)\n"                                                      \
  "end\n"

constexpr std::string_view bodies[] = {
    // release (KEYS lock, [waiting mark, fair queue]; ARGV token, [wake channel]): the
    // documented compare-and-delete, and then, while a waiter listens (its mark exists), a publish
    // on the wake channel naming who should try now: the fair queue's first waiter; else the
    // exclusive waiter that has waited longest, taken off the mark (it marks itself again if it
    // loses); else (a reader or writer waits: the mark lists "*") "#<n>", the number of clients
    // listening, so that their waiters spread out over a window that grows with it. A named
    // waiter's id ends in "@<its client's own channel>": the publish goes there, so only that
    // client wakes, not every client listening on the lock's channel. With pcall: a
    // user whose ACL forbids the channel still releases. Other clients' releases publish nothing:
    // their waiters poll, as before.
    // An attempt's rollback is not a release: it runs the compare-and-delete alone (no channel),
    // so it wakes nobody (algorithm.md, hazard 12).
    // A name is sent as "<waiter id>/<SHA-1 of the token released>" (parse_wake_message): the
    // named waiter counts names per release, so that names from releases that each reached too
    // few nodes never add up to a quorum that no single release reached. The hash, not the
    // token: a channel's listeners must not learn how to release the lock.
    // Direct handoff (KEYS[4] heartbeats, KEYS[5] handoff): a fair queue's first waiter that
    // registered a token (handoff: waiter -> "<ttl> <token>"), whose heartbeat is live and whose
    // client listens on its channel now, is given the key here: it is set to the registered token
    // for that ttl, the waiter leaves the queue, and it is named as any first waiter is. The name
    // is only a hint (anyone who may PUBLISH can send it): the waiter's attempt confirms the
    // handoff (acquire_fair takes a key set to its registered token as granted), and only that
    // attempt's replies give it the lock. Its heartbeat and registration stay until it releases
    // or its attempt takes the key: acquire_fair and fair_leave recognise the key as the
    // waiter's by them. ARGV[3] (a fair lock handed over and won with the registered token, being
    // released): the waiter it was handed to, whose heartbeat and registration go with the key.
    R"(if redis.call("get",KEYS[1]) ~= ARGV[1] then return 0 end
local n = redis.call("del",KEYS[1])
)" REDLOCK_LUA_WAKE_WAITER R"(if ARGV[3] and KEYS[5] then
  redis.call("zrem",KEYS[4],ARGV[3])
  redis.call("hdel",KEYS[5],ARGV[3])
end
if ARGV[2] and redis.call("exists",KEYS[2]) == 1 then
  local head = KEYS[3] and redis.call("zrange",KEYS[3],0,0)[1]
  local reg = head and KEYS[5] and redis.call("hget",KEYS[5],head)
  local at = reg and string.find(head,"@",1,true)
  if at then
    local ttl, token = string.match(reg,"^(%d+) (%S+)$")
    local t = redis.call("time")
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local beat = tonumber(redis.call("zscore",KEYS[4],head) or "0")
    local channel = string.sub(head,at + 1)
    local s = ttl and beat > now and redis.pcall("pubsub","numsub",channel)
    if type(s) == "table" and tonumber(s[2]) > 0 then
      redis.call("set",KEYS[1],token,"PX",ttl)
      redis.call("zrem",KEYS[3],head)
      redis.pcall("publish",channel,head .. "/" .. redis.sha1hex(ARGV[1]))
      return n
    end
  end
  wake_waiter(KEYS[2], ARGV[2], ARGV[1], head)
end
return n)",
    // extend
    R"(if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("pexpire",KEYS[1],ARGV[2]) else return 0 end)",
    // acquire_multi: all-or-nothing on this node
    R"(for _, k in ipairs(KEYS) do if redis.call("exists", k) == 1 then return 0 end end
for _, k in ipairs(KEYS) do redis.call("set", k, ARGV[1], "PX", ARGV[2]) end
return 1)",
    // release_multi (KEYS the m lock keys, then their m waiting marks; ARGV token, then the m
    // wake channels; without channels KEYS are the lock keys only): each freed key wakes whom
    // the single release would
    REDLOCK_LUA_WAKE_WAITER
    R"(local m = #KEYS
if #ARGV > 1 then m = #KEYS / 2 end
local n = 0
for i = 1, m do
  if redis.call("get", KEYS[i]) == ARGV[1] then
    n = n + redis.call("del", KEYS[i])
    local mark = KEYS[m + i]
    if ARGV[i + 1] and redis.call("exists", mark) == 1 then
      wake_waiter(mark, ARGV[i + 1], ARGV[1], nil)
    end
  end
end
return n)",
    // extend_multi: only if every key still carries our token
    R"(for _, k in ipairs(KEYS) do if redis.call("get", k) ~= ARGV[1] then return 0 end end
for _, k in ipairs(KEYS) do redis.call("pexpire", k, ARGV[2]) end
return 1)",
    // status (KEYS lock, readers, writer, queue, fence, ticket; ARGV how many entries to list, the
    // wake channel): read-only, whatever the keys' types. Returns {type, value or false, pttl,
    // reader count, readers as token/ms-left pairs, waiting writer or false, queue length, queue
    // as waiter/ticket pairs, fence or false, ticket or false, clients listening for wake-ups}.
    R"(local function str(k)
  if redis.call("type", k)["ok"] == "string" then return redis.call("get", k) end
  return false
end
local function zset(k)
  return redis.call("type", k)["ok"] == "zset"
end
local t = redis.call("time")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = tonumber(ARGV[1])
local ty = redis.call("type", KEYS[1])["ok"]
local v = false
if ty == "string" then v = redis.call("get", KEYS[1]) end
local readers, rcount = {}, 0
if zset(KEYS[2]) then
  rcount = redis.call("zcount", KEYS[2], "(" .. now, "+inf")
  local r = redis.call("zrangebyscore", KEYS[2], "(" .. now, "+inf", "withscores", "limit", 0, n)
  for i = 1, #r, 2 do
    table.insert(readers, r[i])
    table.insert(readers, tostring(math.floor(tonumber(r[i + 1]) - now)))
  end
end
local queue, qcount = {}, 0
if zset(KEYS[4]) then
  qcount = redis.call("zcard", KEYS[4])
  queue = redis.call("zrange", KEYS[4], 0, n - 1, "withscores")
end
local listening = 0
local s = redis.pcall("pubsub", "numsub", ARGV[2])
if type(s) == "table" then listening = s[2] end
return {ty, v, redis.call("pttl", KEYS[1]), rcount, readers, str(KEYS[3]), qcount, queue, str(KEYS[5]), str(KEYS[6]), listening})",
    // acquire_fenced (KEYS lock, counter; ARGV token, ttl, counter idle expiry): the plain SET NX
    // PX, and on success the resource's fence counter grows. A counter that does not exist (never
    // used, idle past its expiry, or lost in a restart) starts from the server's clock in
    // ms x 1000, above every fence given out before it (fencing.hpp says when). The grant and its
    // fence go together: when the counter cannot give a positive fence (not an integer, another
    // type, negative), the SET is taken back before the error is returned, since a script error
    // does not undo earlier writes and a key that gave no vote must not stay held.
    R"(if not redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then return 0 end
if redis.call("exists", KEYS[2]) == 0 then
  local t = redis.call("time")
  local start = tonumber(t[1]) * 1000000 + math.floor(tonumber(t[2]) / 1000) * 1000
  redis.call("set", KEYS[2], string.format("%.0f", start))
end
local f = redis.pcall("incr", KEYS[2])
if type(f) == "number" and f > 0 then
  redis.call("pexpire", KEYS[2], ARGV[3])
  return f
end
redis.call("del", KEYS[1])
if type(f) == "table" and f.err then return f end
return redis.error_reply("fence counter " .. KEYS[2] .. " is not positive"))",
    // fence_raise (KEYS counter, [queue]; ARGV value, expiry, [waiter]): the write-back round;
    // with a fair queue, the waiter (where it is queued) takes the agreed ticket as its place;
    // counters only ever grow, and their expiry is only ever lengthened
    R"(local c = tonumber(redis.call("get", KEYS[1]) or "0")
if c < tonumber(ARGV[1]) then redis.call("set", KEYS[1], ARGV[1], "KEEPTTL") end
if redis.call("pttl", KEYS[1]) < tonumber(ARGV[2]) then redis.call("pexpire", KEYS[1], ARGV[2]) end
if KEYS[2] then redis.call("zadd", KEYS[2], "XX", ARGV[1], ARGV[3]) end
return 1)",
    // acquire_read
    R"(local t = redis.call("time")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call("exists", KEYS[1]) == 1 or redis.call("exists", KEYS[3]) == 1 then return 0 end
redis.call("zremrangebyscore", KEYS[2], "-inf", now)
redis.call("zadd", KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
local last = redis.call("zrange", KEYS[2], -1, -1, "withscores")
redis.call("pexpireat", KEYS[2], last[2])
return 1)",
    // acquire_write: a writer that has to wait marks itself waiting, behind readers and behind
    // another writer alike, so readers arriving when the key is freed do not get in first
    R"(local t = redis.call("time")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call("zremrangebyscore", KEYS[2], "-inf", now)
if redis.call("exists", KEYS[1]) == 1 or redis.call("zcard", KEYS[2]) > 0 then
  redis.call("set", KEYS[3], ARGV[4], "PX", ARGV[3])
  return 0
end
redis.call("set", KEYS[1], ARGV[1], "PX", ARGV[2])
if redis.call("get", KEYS[3]) == ARGV[4] then redis.call("del", KEYS[3]) end
return 1)",
    // release_read: the entry goes either way, but a reader whose expiry (server time) has passed
    // held nothing any more and says so, as the plain release does for an expired key.
    // The last live reader to leave publishes on the wake channel (ARGV[2]) while a waiter
    // listens (KEYS[2], its mark): a writer waits.
    R"(local t = redis.call("time")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = redis.call("zscore", KEYS[1], ARGV[1])
if not exp then return 0 end
redis.call("zrem", KEYS[1], ARGV[1])
if ARGV[2] and redis.call("exists", KEYS[2]) == 1 and
    redis.call("zcount", KEYS[1], "(" .. now, "+inf") == 0 then
  local s = redis.pcall("pubsub", "numsub", ARGV[2])
  redis.pcall("publish", ARGV[2], "#" .. (type(s) == "table" and s[2] or 1))
end
if tonumber(exp) <= now then return 0 end
return 1)",
    // extend_read
    R"(local t = redis.call("time")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = redis.call("zscore", KEYS[1], ARGV[1])
if not exp or tonumber(exp) <= now then return 0 end
redis.call("zadd", KEYS[1], "XX", now + tonumber(ARGV[2]), ARGV[1])
local last = redis.call("zrange", KEYS[1], -1, -1, "withscores")
redis.call("pexpireat", KEYS[1], last[2])
return 1)",
    // ticket_take (KEYS ticket, queue, heartbeats, lock, [waiting mark]; ARGV waiter, heartbeat
    // ttl, [mark ttl]): the counter,
    // and a place in the queue at once with this node's value, so no later ticket can overtake a
    // waiter whose ticket round is still finishing. The three keys live as long as the queue:
    // when less than one heartbeat ttl is left, their expiry is set to two (so a script renews it
    // about once per heartbeat ttl, not every time); it is only ever lengthened, since waiters
    // may use different heartbeat ttls, and one with a short one must not make the queue expire
    // under a waiter whose heartbeat is still valid (each script leaves the keys at least its
    // heartbeat ttl). Once nobody waits, the counter goes with the queue.
    // Returns {counter, 1 if the lock is held or a live waiter is ahead here, else 0}: a waiter
    // behind on a quorum need not try before its turn (waiters whose heartbeat expired are
    // dropped first, as acquire_fair does). With wake-ups, the waiter is on the waiting mark from
    // here on (as mark_waiting puts it, for at least the mark ttl; when less is left the mark is
    // given twice that, as the queue's keys are, so most rounds do not renew it), so a release
    // that comes before it sleeps names the head,
    // and (KEYS[6] handoff; ARGV lock ttl, token) registers the token that a release may hand
    // it the key with. The place is this node's own count: where that is not the waiter's
    // agreed ticket (the node counted concurrent takers in another order, or its counter lagged:
    // it missed a taker while a client's connection to it was down), it may be ahead of a waiter
    // with a lower ticket. Its client counts this round's grant here only where the count was its
    // agreed ticket, and its next attempt gives such a key back (acquire_fair). That rule needs
    // the place to be the count of this round: a waiter taking a ticket again (its last round
    // found no quorum; it never had an agreed ticket) is placed anew, not left at the place its
    // earlier round gave it, which could be ahead of waiters that took lower tickets since.
    // ARGV[6] (wake-ups, votes without replicas): where the lock key is free and the waiter is
    // first in line here, the ticket round also grants it, as a release would hand it over: the
    // key is set to the registered token for its ttl and the waiter leaves the queue (its
    // heartbeat and registration stay, as after a handoff); the second element is then 2. A
    // reply its client counts as a vote (where this count was its agreed ticket), so an
    // uncontended fair acquisition takes one round, not a ticket round and an attempt.
    // A key that this node granted (or a release here handed over) under the waiter's previous
    // registration is its own (a ticket round that found no quorum, whose grants its client
    // never counted, is followed by this one): granted again under this registration if it
    // is first here and asks, otherwise given back, so no key of a registration its client has
    // left behind stays held until its ttl.
    // A counter that does not exist (no queue, or lost when the node restarted empty) starts
    // from the server's clock in seconds x 1e6, as the fence counter does (in ms there): above
    // every ticket given out before, so a waiter still queued with an old ticket stays ahead of
    // those that come after a majority of the nodes lost their counters one after another.
    // Seconds, so that nodes starting a queue together mostly agree and need no write-back.
    // (INCR answers 1 only where the counter did not exist: a counter never holds 0.)
    R"(local t = redis.call("time")
local reg = KEYS[6] and redis.call("hget", KEYS[6], ARGV[1])
local mine = reg and string.match(reg, "^%d+ (%S+)$")
if mine and redis.call("get", KEYS[4]) ~= mine then mine = nil end
local n = redis.call("incr", KEYS[1])
if n == 1 then
  n = tonumber(t[1]) * 1000000 + 1
  redis.call("set", KEYS[1], string.format("%.0f", n))
end
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for _, d in ipairs(redis.call("zrangebyscore", KEYS[3], "-inf", now)) do
  redis.call("zrem", KEYS[2], d)
  redis.call("zrem", KEYS[3], d)
  if KEYS[6] then redis.call("hdel", KEYS[6], d) end
end
redis.call("zadd", KEYS[2], n, ARGV[1])
redis.call("zadd", KEYS[3], now + tonumber(ARGV[2]), ARGV[1])
local kept = {KEYS[1], KEYS[2], KEYS[3]}
if KEYS[6] then
  redis.call("hset", KEYS[6], ARGV[1], ARGV[4] .. " " .. ARGV[5])
  table.insert(kept, KEYS[6])
end
local keep = 2 * tonumber(ARGV[2])
for _, k in ipairs(kept) do
  if redis.call("pttl", k) < keep / 2 then redis.call("pexpire", k, keep) end
end
if KEYS[5] then
  if type(redis.pcall("zadd", KEYS[5], 0, "*")) == "table" then
    redis.call("del", KEYS[5])
    redis.call("zadd", KEYS[5], 0, "*")
  end
  local mt = tonumber(ARGV[3])
  if redis.call("pttl", KEYS[5]) < mt then redis.call("pexpire", KEYS[5], 2 * mt) end
end
local behind = 0
if (not mine and redis.call("exists", KEYS[4]) == 1) or
    redis.call("zrank", KEYS[2], ARGV[1]) > 0 then
  behind = 1
  if mine then redis.call("del", KEYS[4]) end
elseif ARGV[6] then
  redis.call("set", KEYS[4], ARGV[5], "PX", ARGV[4])
  redis.call("zrem", KEYS[2], ARGV[1])
  behind = 2
elseif mine then
  redis.call("del", KEYS[4])
end
return {n, behind})",
    // acquire_fair (KEYS lock, queue, heartbeats, ticket, [handoff]; ARGV token, ttl, ticket,
    // heartbeat ttl, waiter id, [registered token]): drop waiters whose heartbeat expired,
    // (re)join the
    // queue with our ticket, refresh our heartbeat, and take the lock only when first in line and
    // the key is free (the queue's keys' expiry only grows, as above). A waiter already first
    // here with this ticket (the usual named waiter) takes the free key at once: it leaves the
    // queue, so nothing of its own needs refreshing, and who else has expired does not change who
    // is first. With a handoff key, the attempt also registers the waiter again (a token of its
    // own, so that a rollback of the attempt never takes back what a release handed over; this
    // ttl), and a key that a release handed it under an earlier registration is taken as
    // granted: set to this attempt's token for this ttl, as a grant now would be, and the
    // reply is 2 (a handoff confirmed: this reply, not the release's message, is the vote);
    // unless a live waiter is queued here below our ticket (handed over at a place that was
    // this node's count, not our ticket: ticket_take), when it is given back. (Waiters whose
    // heartbeat expired are dropped only when someone is queued below us: nobody below, nobody
    // to drop who could change that answer; the usual confirmed handoff costs no more. A key
    // handed over is not free, and a free key is not handed over: which of the two is looked
    // at first does not change the answer, and the handoff, the usual case, goes first.)
    R"(local function won()
  redis.call("zrem", KEYS[2], ARGV[5])
  redis.call("zrem", KEYS[3], ARGV[5])
  if KEYS[5] then redis.call("hdel", KEYS[5], ARGV[5]) end
  return 1
end
local reg = KEYS[5] and redis.call("hget", KEYS[5], ARGV[5])
local mine = reg and string.match(reg, "^%d+ (%S+)$")
if mine and redis.call("get", KEYS[1]) ~= mine then mine = nil end
local function nobody_below()
  local ahead = redis.call("zrangebyscore", KEYS[2], "-inf", "(" .. ARGV[3], "limit", 0, 2)
  return #ahead == 0 or (#ahead == 1 and ahead[1] == ARGV[5])
end
local function take_handed()
  redis.call("set", KEYS[1], ARGV[1], "PX", ARGV[2])
  won()
  return 2
end
if mine and nobody_below() then return take_handed() end
local first = redis.call("zrange", KEYS[2], 0, 0, "WITHSCORES")
if first[1] == ARGV[5] and tonumber(first[2]) == tonumber(ARGV[3]) and
    redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
  return won()
end
local t = redis.call("time")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for _, d in ipairs(redis.call("zrangebyscore", KEYS[3], "-inf", now)) do
  redis.call("zrem", KEYS[2], d)
  redis.call("zrem", KEYS[3], d)
  if KEYS[5] then redis.call("hdel", KEYS[5], d) end
end
if mine then
  if nobody_below() then return take_handed() end
  redis.call("del", KEYS[1])
end
redis.call("zadd", KEYS[2], ARGV[3], ARGV[5])
redis.call("zadd", KEYS[3], now + tonumber(ARGV[4]), ARGV[5])
local kept = {KEYS[2], KEYS[3], KEYS[4]}
if KEYS[5] then
  redis.call("hset", KEYS[5], ARGV[5], ARGV[2] .. " " .. ARGV[6])
  table.insert(kept, KEYS[5])
end
local keep = 2 * tonumber(ARGV[4])
for _, k in ipairs(kept) do
  if redis.call("pttl", k) < keep / 2 then redis.call("pexpire", k, keep) end
end
if redis.call("zrange", KEYS[2], 0, 0)[1] ~= ARGV[5] then return 0 end
if not redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then return 0 end
return won())",
    // fair_leave (KEYS queue, heartbeats, [waiting mark, [lock, handoff]]; ARGV waiter, [wake
    // channel, [the token of the lock it acquired]]): a first waiter that leaves names the next
    // one (on its own channel, as release does; the leaving waiter's id stands for the token); so
    // does one that leaves with a lock a release handed it here (the key is its registered
    // token), which goes, unless it is the lock it acquired (the grant came after it decided: its
    // release takes it back).
    R"(local first = redis.call("zrange", KEYS[1], 0, 0)[1] == ARGV[1]
redis.call("zrem", KEYS[1], ARGV[1])
redis.call("zrem", KEYS[2], ARGV[1])
if KEYS[5] then
  local reg = redis.call("hget", KEYS[5], ARGV[1])
  local mine = reg and string.match(reg, "^%d+ (%S+)$")
  redis.call("hdel", KEYS[5], ARGV[1])
  if mine and mine ~= ARGV[3] and redis.call("get", KEYS[4]) == mine then
    redis.call("del", KEYS[4])
    first = true
  end
end
if first and ARGV[2] and redis.call("exists", KEYS[3]) == 1 then
  local head = redis.call("zrange", KEYS[1], 0, 0)[1]
  if head then
    local at = string.find(head, "@", 1, true)
    redis.pcall("publish", at and string.sub(head, at + 1) or ARGV[2],
                head .. "/" .. redis.sha1hex(ARGV[1]))
  else
    redis.pcall("publish", ARGV[2], "#1")
  end
end
return 1)",
    // fair_rollback (KEYS lock, queue, heartbeats; ARGV token, ticket, waiter, heartbeat ttl): an
    // attempt that did not win takes its key back where it was granted, and the place in the
    // queue that the grant gave up (with a fresh heartbeat): a node that granted after the
    // attempt had timed out must not leave the waiter out of its queue, or the one behind it
    // would be first there and could win before it.
    R"(if redis.call("get", KEYS[1]) ~= ARGV[1] then return 0 end
redis.call("del", KEYS[1])
local t = redis.call("time")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call("zadd", KEYS[2], ARGV[2], ARGV[3])
redis.call("zadd", KEYS[3], now + tonumber(ARGV[4]), ARGV[3])
local keep = 2 * tonumber(ARGV[4])
for _, k in ipairs({KEYS[2], KEYS[3]}) do
  if redis.call("pttl", k) < keep / 2 then redis.call("pexpire", k, keep) end
end
return 1)",
    // mark_waiting (KEYS mark; ARGV member, score, ttl): a waiter listens on the wake channel.
    // Exclusive waiters are members by their id, scored by when they began to wait, so a release
    // names the one that has waited longest; readers, writers and fair waiters are the member "*"
    // (releases wake them all). The mark lives while any waiter renews it (its expiry only grows);
    // a string mark (older versions) is replaced.
    R"(if redis.call("type", KEYS[1]).ok ~= "zset" then redis.call("del", KEYS[1]) end
redis.call("zadd", KEYS[1], ARGV[2], ARGV[1])
if redis.call("pttl", KEYS[1]) < tonumber(ARGV[3]) then redis.call("pexpire", KEYS[1], ARGV[3]) end
return 1)",
    // acquire_leader (KEYS lock, fence counter, leader record; ARGV token, ttl, counter idle
    // expiry, id): acquire_fenced, and with the grant the leader record, under the same expiry:
    // the candidate's id, this attempt's token (a record counts only where the lock key carries
    // it), "since" (this server's clock, ms) and term 0 (not settled: settle_leader writes the
    // term agreed over the quorum; a reader never takes a record with term 0 for a leader).
    R"(if not redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then return 0 end
if redis.call("exists", KEYS[2]) == 0 then
  local t = redis.call("time")
  local start = tonumber(t[1]) * 1000000 + math.floor(tonumber(t[2]) / 1000) * 1000
  redis.call("set", KEYS[2], string.format("%.0f", start))
end
local f = redis.pcall("incr", KEYS[2])
if type(f) == "number" and f > 0 then
  redis.call("pexpire", KEYS[2], ARGV[3])
  local t = redis.call("time")
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call("del", KEYS[3])
  redis.call("hset", KEYS[3], "token", ARGV[1], "term", "0", "since", now, "id", ARGV[4])
  redis.call("pexpire", KEYS[3], ARGV[2])
  return f
end
redis.call("del", KEYS[1])
if type(f) == "table" and f.err then return f end
return redis.error_reply("fence counter " .. KEYS[2] .. " is not positive"))",
    // settle_leader (KEYS fence counter, lock, record; ARGV term, counter idle expiry, token,
    // [record channel]): the fence write-back (as fence_raise), and where the lock key and the
    // record still carry the token, the agreed term on the record; then a word to observers
    // (only a hint: they read the record from a quorum).
    R"(local c = tonumber(redis.call("get", KEYS[1]) or "0")
if c < tonumber(ARGV[1]) then redis.call("set", KEYS[1], ARGV[1], "KEEPTTL") end
if redis.call("pttl", KEYS[1]) < tonumber(ARGV[2]) then redis.call("pexpire", KEYS[1], ARGV[2]) end
if redis.call("get", KEYS[2]) ~= ARGV[3] then return 0 end
if redis.call("type", KEYS[3]).ok ~= "hash" or redis.call("hget", KEYS[3], "token") ~= ARGV[3] then
  return 0
end
redis.call("hset", KEYS[3], "term", ARGV[1])
if ARGV[4] then redis.pcall("publish", ARGV[4], "leader") end
return 1)",
    // extend_leader (KEYS lock, record; ARGV token, ttl): the documented extend, and the record
    // with it
    R"(if redis.call("get", KEYS[1]) ~= ARGV[1] then return 0 end
redis.call("pexpire", KEYS[1], ARGV[2])
if redis.call("type", KEYS[2]).ok == "hash" and redis.call("hget", KEYS[2], "token") == ARGV[1] then
  redis.call("pexpire", KEYS[2], ARGV[2])
end
return 1)",
    // release_leader (KEYS lock, record, [waiting mark]; ARGV token, [record channel, wake
    // channel]): the documented compare-and-delete, the record with it; with the channels, a
    // word to observers and the wake-up of the candidate that has waited longest (as a plain
    // release: the release script above says how a waiter is named). Without them (an attempt's
    // rollback), nobody is woken.
    // A record of the token goes also where the lock key is gone (expired a moment before the
    // record, deleted by someone): nothing of the leadership stays behind.
    REDLOCK_LUA_WAKE_WAITER
    R"(if redis.call("type", KEYS[2]).ok == "hash" and redis.call("hget", KEYS[2], "token") == ARGV[1] then
  redis.call("del", KEYS[2])
end
if redis.call("get", KEYS[1]) ~= ARGV[1] then return 0 end
local n = redis.call("del", KEYS[1])
if ARGV[2] then redis.pcall("publish", ARGV[2], "none") end
if ARGV[3] and redis.call("exists", KEYS[3]) == 1 then
  wake_waiter(KEYS[3], ARGV[3], ARGV[1], nil)
end
return n)",
    // read_leader (KEYS lock, record): read-only, whatever the keys' types: {lock value or false,
    // its pttl, the record's token, term, ms since it was written (this server's clock), id}
    R"(local t = redis.call("time")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = false
if redis.call("type", KEYS[1]).ok == "string" then v = redis.call("get", KEYS[1]) end
local r = {false, false, false, false}
if redis.call("type", KEYS[2]).ok == "hash" then
  r = redis.call("hmget", KEYS[2], "token", "term", "since", "id")
end
local since = false
if tonumber(r[3]) then since = now - tonumber(r[3]) end
return {v, redis.call("pttl", KEYS[1]), r[1], r[2], since, r[4]})",
};
static_assert(std::size(bodies) == script_count());
#undef REDLOCK_LUA_WAKE_WAITER

}  // namespace

std::string_view script_body(ScriptId id) { return bodies[static_cast<std::size_t>(id)]; }

bool safe_to_run_late(ScriptId id) {
  switch (id) {
    case ScriptId::release:
    case ScriptId::release_multi:
    case ScriptId::release_read:
    case ScriptId::fair_rollback:  // (only where the lock key is still its token)
    case ScriptId::extend:
    case ScriptId::extend_multi:
    case ScriptId::extend_read:
    case ScriptId::status:
    case ScriptId::fence_raise:
    case ScriptId::settle_leader:  // (the term only where the lock key is still its token)
    case ScriptId::extend_leader:
    case ScriptId::release_leader:
    case ScriptId::read_leader:
      return true;
    case ScriptId::acquire_multi:
    case ScriptId::acquire_fenced:
    case ScriptId::acquire_read:
    case ScriptId::acquire_write:
    case ScriptId::ticket_take:
    case ScriptId::acquire_fair:
    case ScriptId::fair_leave:  // (by waiter id, which a later ticket_take may bring back)
    case ScriptId::mark_waiting:
    case ScriptId::acquire_leader:
    case ScriptId::count_:
      return false;
  }
  return false;
}

WakeName parse_wake_message(std::string_view message) {
  constexpr std::size_t hash_size = 40;  // a SHA-1 in hex has the shape of one of our tokens
  if (message.size() <= hash_size + 1 || message[message.size() - hash_size - 1] != '/')
    return {message, {}};
  const auto hash = message.substr(message.size() - hash_size);
  if (!looks_like_token(hash)) return {message, {}};
  return {message.substr(0, message.size() - hash_size - 1), hash};
}

std::optional<long long> wake_listeners(std::string_view waiter) noexcept {
  if (!waiter.starts_with('#')) return std::nullopt;
  long long n = 0;
  for (char c : waiter.substr(1)) {
    if (c < '0' || c > '9') break;
    n = std::min(max_wake_listeners, n * 10 + (c - '0'));  // saturates: never past the bound
  }
  return n;
}

}  // namespace redlock::detail
