// The fair queue's scripts run one by one against a real server, with the queue put in the state
// under test by hand: states that the whole client reaches only in races (a place that a node has
// not updated yet, a heartbeat that lapsed) are set up here directly.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/scripts.hpp"
#include "redis_fixture.hpp"

using namespace redlock::test;
using redlock::detail::script_body;
using redlock::detail::ScriptId;

namespace {

const std::string lock = "job";
const std::string queue = "{job}:queue";
const std::string heartbeats = "{job}:heartbeats";
const std::string ticket_counter = "{job}:ticket";
const std::string token = "0123456789abcdef0123456789abcdef01234567";

// The server's clock in ms, as the scripts read it.
long long server_ms(const RedisServer& s) {
  const auto t = s.command({"TIME"});
  return std::stoll(t.elements.at(0).str) * 1000 + std::stoll(t.elements.at(1).str) / 1000;
}

// acquire_fair for `waiter` with its agreed `ticket`: 1 granted, 0 not.
long long acquire_fair(const RedisServer& s, const std::string& waiter, long long ticket) {
  const auto r = s.command({"EVAL", std::string(script_body(ScriptId::acquire_fair)), "4", lock,
                            queue, heartbeats, ticket_counter, token, "10000",
                            std::to_string(ticket), "60000", waiter});
  REQUIRE_MESSAGE(r.type == Reply::Type::integer, r.to_string());
  return r.integer;
}

std::string score(const RedisServer& s, const std::string& key, const std::string& member) {
  const auto r = s.command({"ZSCORE", key, member});
  return r.is_nil() ? "nil" : r.str;
}

void queue_up(const RedisServer& s, const std::string& waiter, long long place,
              long long heartbeat_until) {
  (void)s.command({"ZADD", queue, std::to_string(place), waiter});
  (void)s.command({"ZADD", heartbeats, std::to_string(heartbeat_until), waiter});
}

}  // namespace

TEST_CASE("acquire_fair: who is first, by the agreed ticket, on one node") {
  if (!redis_server_available()) return;
  RedisServer s;
  const long long later = server_ms(s) + 60'000;
  SUBCASE("first at its ticket, the key free: granted, and out of the queue") {
    queue_up(s, "w", 3, later);
    queue_up(s, "x", 4, later);
    CHECK(acquire_fair(s, "w", 3) == 1);
    CHECK(s.get(lock) == token);
    CHECK(score(s, queue, "w") == "nil");
    CHECK(score(s, heartbeats, "w") == "nil");
    CHECK(score(s, queue, "x") == "4");
  }
  SUBCASE("first only by a place this node has not updated: re-placed, behind a lower ticket") {
    // Its ticket is 7, but this node still has it at 1 (the write-back has not arrived): x, at
    // 5, is first in truth.
    queue_up(s, "w", 1, later);
    queue_up(s, "x", 5, later);
    CHECK(acquire_fair(s, "w", 7) == 0);
    CHECK_FALSE(s.exists(lock));
    CHECK(score(s, queue, "w") == "7");
    CHECK(acquire_fair(s, "x", 5) == 1);
  }
  SUBCASE("first, the key held: not granted, its heartbeat refreshed") {
    s.set(lock, "someone else");
    queue_up(s, "w", 3, 1);  // lapsed long ago
    const long long before = server_ms(s);
    CHECK(acquire_fair(s, "w", 3) == 0);
    CHECK(s.get(lock) == "someone else");
    CHECK(score(s, queue, "w") == "3");
    CHECK(std::stoll(score(s, heartbeats, "w")) >= before + 60'000);
  }
  SUBCASE("the queue outlives every heartbeat: renewed to two heartbeat ttls when under one") {
    // acquire_fair's heartbeat ttl is 60 s here: a key with 100 s left keeps it, one with 30 s
    // left (a waiter with a shorter heartbeat ttl renewed it last) is set to 120 s.
    s.set(lock, "someone else");
    queue_up(s, "w", 3, later);
    (void)s.command({"PEXPIRE", queue, "100000"});
    (void)s.command({"PEXPIRE", heartbeats, "30000"});
    CHECK(acquire_fair(s, "w", 3) == 0);
    CHECK(s.pttl(queue) <= 100'000);
    CHECK(s.pttl(queue) > 60'000);
    CHECK(s.pttl(heartbeats) > 100'000);
    CHECK(s.pttl(ticket_counter) == -2);  // never created by acquire_fair: nothing to renew
  }
  SUBCASE("a waiter ahead whose heartbeat lapsed is dropped, and the next is granted") {
    queue_up(s, "dead", 1, 1);
    queue_up(s, "w", 2, later);
    CHECK(acquire_fair(s, "w", 2) == 1);
    CHECK(score(s, queue, "dead") == "nil");
    CHECK(s.get(lock) == token);
  }
}
