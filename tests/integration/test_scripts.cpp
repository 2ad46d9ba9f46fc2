// The fair queue's scripts run one by one against a real server, with the queue put in the state
// under test by hand: states that the whole client reaches only in races (a place that a node has
// not updated yet, a heartbeat that lapsed) are set up here directly.
#include <doctest/doctest.h>
#include <poll.h>

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
  REQUIRE_MESSAGE(r.type == Reply::Type::integer, redlock::nodes::reply_text(r));
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

// Direct handoff (wake-ups): a fair waiter registers a token (handoff: waiter -> "<ttl> <token>"),
// and a release sets the key to the token of the first waiter that registered one, whose
// heartbeat is live and whose client listens on its own channel, and names it. The name is only
// a hint: the waiter's attempt takes the key (acquire_fair's 2), and its replies are the vote.
namespace {

const std::string handoff = "{job}:handoff";
const std::string mark = "{job}:waiting";
const std::string lock_channel = "{job}:wake:job";
const std::string holder = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const std::string registered = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const std::string waiter = "w@chan-w";  // named on its client's own channel, "chan-w"

std::string sha1(const RedisServer& s, const std::string& text) {
  return s.command({"EVAL", "return redis.sha1hex(ARGV[1])", "0", text}).str;
}

long long release(const RedisServer& s, const std::string& tok) {
  const auto r = s.command({"EVAL", std::string(script_body(ScriptId::release)), "5", lock, mark,
                            queue, heartbeats, handoff, tok, lock_channel});
  REQUIRE_MESSAGE(r.type == Reply::Type::integer, redlock::nodes::reply_text(r));
  return r.integer;
}

// A client listening on `channel`, as a waiting client's wake-up connection does.
class Listener {
 public:
  Listener(const RedisServer& s, const std::string& channel)
      : c_(redlock::nodes::Endpoint::local(s.port())) {
    REQUIRE_MESSAGE(c_.ok(), c_.error());
    auto r = c_.command({"SUBSCRIBE", channel});
    REQUIRE(r);
  }
  // The next message's payload, or "" when none comes within a second.
  std::string next() {
    for (int i = 0; i < 100; ++i) {
      pollfd p{c_.fd(), POLLIN, 0};
      if (::poll(&p, 1, 10) <= 0) continue;
      Reply m;
      if (c_.read_reply(&m) != redlock::nodes::SyncClient::Read::reply) continue;
      if (m.type == Reply::Type::array && m.elements.size() == 3) return m.elements[2].str;
    }
    return "";
  }

 private:
  redlock::nodes::SyncClient c_;
};

// The lock held by `holder`, `waiter` first in the queue with a registration.
void waiting_with_registration(const RedisServer& s, long long heartbeat_until) {
  s.set(lock, holder);
  queue_up(s, waiter, 3, heartbeat_until);
  (void)s.command({"HSET", handoff, waiter, "10000 " + registered});
  (void)s.command({"ZADD", mark, "0", "*"});
}

}  // namespace

TEST_CASE("handoff: a release hands the lock to the first waiter that registered and listens") {
  if (!redis_server_available()) return;
  RedisServer s;
  const long long later = server_ms(s) + 60'000;
  SUBCASE("listening, heartbeat live: the key is its token for its ttl, and it is named") {
    waiting_with_registration(s, later);
    Listener w(s, "chan-w");
    CHECK(release(s, holder) == 1);
    CHECK(s.get(lock) == registered);
    CHECK(s.pttl(lock) > 9'000);
    CHECK(s.pttl(lock) <= 10'000);
    CHECK(score(s, queue, waiter) == "nil");  // out of the queue: the next one is first
    // Its heartbeat and registration stay (acquire_fair and fair_leave know the key by them).
    CHECK(score(s, heartbeats, waiter) != "nil");
    CHECK(s.command({"HGET", handoff, waiter}).str == "10000 " + registered);
    // A name as any other (a release's message is never a grant: anyone may PUBLISH one).
    CHECK(w.next() == waiter + "/" + sha1(s, holder));
  }
  SUBCASE("nobody listens on its channel (its client is gone): named only, the key stays free") {
    waiting_with_registration(s, later);
    CHECK(release(s, holder) == 1);
    CHECK_FALSE(s.exists(lock));
    CHECK(score(s, queue, waiter) == "3");
  }
  SUBCASE("its heartbeat lapsed: named only") {
    waiting_with_registration(s, 1);
    Listener w(s, "chan-w");
    CHECK(release(s, holder) == 1);
    CHECK_FALSE(s.exists(lock));
    CHECK(w.next() == waiter + "/" + sha1(s, holder));
  }
  SUBCASE("no registration (a client without it): named only") {
    waiting_with_registration(s, later);
    (void)s.command({"HDEL", handoff, waiter});
    Listener w(s, "chan-w");
    CHECK(release(s, holder) == 1);
    CHECK_FALSE(s.exists(lock));
    CHECK(w.next() == waiter + "/" + sha1(s, holder));
  }
  SUBCASE("a release by another token hands nothing over") {
    waiting_with_registration(s, later);
    Listener w(s, "chan-w");
    CHECK(release(s, registered) == 0);
    CHECK(s.get(lock) == holder);
    CHECK(w.next().empty());
  }
}

TEST_CASE("handoff: the waiter's next attempt takes a key handed over to it as granted") {
  if (!redis_server_available()) return;
  RedisServer s;
  const long long later = server_ms(s) + 60'000;
  auto attempt = [&](const std::string& who) {
    const auto r = s.command({"EVAL", std::string(script_body(ScriptId::acquire_fair)), "5", lock,
                              queue, heartbeats, ticket_counter, handoff, token, "20000", "3",
                              "60000", who, "next-registered"});
    REQUIRE_MESSAGE(r.type == Reply::Type::integer, redlock::nodes::reply_text(r));
    return r.integer;
  };
  // As a release leaves it: the key is the registered token, the waiter out of the queue.
  s.set(lock, registered);
  (void)s.command({"ZADD", heartbeats, std::to_string(later), waiter});
  (void)s.command({"HSET", handoff, waiter, "10000 " + registered});
  SUBCASE("the waiter: granted (2: handed over), this attempt's token and ttl; registration done") {
    CHECK(attempt(waiter) == 2);
    CHECK(s.get(lock) == token);
    CHECK(s.pttl(lock) > 10'000);
    CHECK(s.command({"HEXISTS", handoff, waiter}).integer == 0);
    CHECK(score(s, heartbeats, waiter) == "nil");
  }
  SUBCASE("a live waiter queued below its ticket: given back, and placed at its ticket") {
    // Handed over at this node's own count, below its agreed ticket 3, ahead of x at 2
    // (ticket_take): x is first in truth.
    queue_up(s, "x@chan-x", 2, later);
    CHECK(attempt(waiter) == 0);
    CHECK_FALSE(s.exists(lock));
    CHECK(score(s, queue, waiter) == "3");
    CHECK(s.command({"HGET", handoff, waiter}).str == "20000 next-registered");
  }
  SUBCASE("a waiter below whose heartbeat lapsed is dropped: granted") {
    queue_up(s, "dead@chan-d", 2, 1);
    CHECK(attempt(waiter) == 2);
    CHECK(s.get(lock) == token);
    CHECK(score(s, queue, "dead@chan-d") == "nil");
  }
  SUBCASE("nobody below: granted at once, a lapsed waiter above left to the next ticket round") {
    // (Dropping it could not change the answer; the usual handoff pays for no drop.)
    queue_up(s, "dead@chan-d", 5, 1);
    CHECK(attempt(waiter) == 2);
    CHECK(s.get(lock) == token);
    CHECK(score(s, queue, "dead@chan-d") == "5");
  }
  SUBCASE("another waiter: not granted, and it registers its own token") {
    queue_up(s, "x@chan-x", 4, later);
    CHECK(attempt("x@chan-x") == 0);
    CHECK(s.get(lock) == registered);
    CHECK(s.command({"HGET", handoff, "x@chan-x"}).str == "20000 next-registered");
  }
}

TEST_CASE("handoff: a waiter that leaves gives back a key handed over that it did not take") {
  if (!redis_server_available()) return;
  RedisServer s;
  const long long later = server_ms(s) + 60'000;
  auto leave = [&] {
    (void)s.command({"EVAL", std::string(script_body(ScriptId::fair_leave)), "5", queue, heartbeats,
                     mark, lock, handoff, waiter, lock_channel});
  };
  (void)s.command({"HSET", handoff, waiter, "10000 " + registered});
  (void)s.command({"ZADD", mark, "0", "*"});
  queue_up(s, "next@chan-n", 4, later);
  Listener next(s, "chan-n");
  SUBCASE("handed over: the key goes, and the next waiter is named") {
    s.set(lock, registered);
    leave();
    CHECK_FALSE(s.exists(lock));
    CHECK(s.command({"HEXISTS", handoff, waiter}).integer == 0);
    CHECK(next.next() == "next@chan-n/" + sha1(s, waiter));
  }
  SUBCASE("handed over after it acquired with that token: kept (its release takes it back)") {
    s.set(lock, registered);
    (void)s.command({"EVAL", std::string(script_body(ScriptId::fair_leave)), "5", queue, heartbeats,
                     mark, lock, handoff, waiter, lock_channel, registered});
    CHECK(s.get(lock) == registered);
    CHECK(s.command({"HEXISTS", handoff, waiter}).integer == 0);
    CHECK(next.next().empty());
  }
  SUBCASE("held by someone else: untouched, nobody named") {
    s.set(lock, holder);
    leave();
    CHECK(s.get(lock) == holder);
    CHECK(s.command({"HEXISTS", handoff, waiter}).integer == 0);
    CHECK(next.next().empty());
  }
}

TEST_CASE("handoff: a ticket registers a token; an attempt's rollback leaves a handed-over key") {
  if (!redis_server_available()) return;
  RedisServer s;
  const auto ticket = s.command({"EVAL", std::string(script_body(ScriptId::ticket_take)), "6",
                                 ticket_counter, queue, heartbeats, lock, mark, handoff, waiter,
                                 "60000", "5000", "20000", registered});
  REQUIRE_MESSAGE(ticket.type == Reply::Type::array, redlock::nodes::reply_text(ticket));
  CHECK(s.command({"HGET", handoff, waiter}).str == "20000 " + registered);
  CHECK(s.pttl(handoff) > 60'000);  // as long as the queue
  auto rollback = [&] {
    return s
        .command({"EVAL", std::string(script_body(ScriptId::fair_rollback)), "3", lock, queue,
                  heartbeats, token, "1", waiter, "60000"})
        .integer;
  };
  SUBCASE("the attempt's key: taken back") {
    s.set(lock, token);
    CHECK(rollback() == 1);
    CHECK_FALSE(s.exists(lock));
  }
  SUBCASE("a key a release handed over after the attempt ran here (the registered token): kept") {
    s.set(lock, registered);
    CHECK(rollback() == 0);
    CHECK(s.get(lock) == registered);
  }
}

TEST_CASE("handoff: a ticket round asked to grant takes a free lock when first in line") {
  if (!redis_server_available()) return;
  RedisServer s;
  const long long later = server_ms(s) + 60'000;
  // ticket_take for the waiter, registering `registered` for 20 s; `grant`: the client asks for
  // the lock too (wake-ups). Returns {count, 0 first / 1 behind / 2 granted}.
  auto take = [&](bool grant) {
    std::vector<std::string> cmd{"EVAL", std::string(script_body(ScriptId::ticket_take)), "6"};
    cmd.insert(cmd.end(), {ticket_counter, queue, heartbeats, lock, mark, handoff});
    cmd.insert(cmd.end(), {waiter, "60000", "5000", "20000", registered});
    if (grant) cmd.push_back("grant");
    const auto r = s.command(cmd);
    REQUIRE_MESSAGE(r.type == Reply::Type::array, redlock::nodes::reply_text(r));
    REQUIRE(r.elements.size() == 2);
    return r.elements[1].integer;
  };
  SUBCASE(
      "free and first: granted, as a release hands it over (out of the queue, its heartbeat "
      "and registration kept)") {
    CHECK(take(true) == 2);
    CHECK(s.get(lock) == registered);
    CHECK(s.pttl(lock) > 19'000);
    CHECK(s.pttl(lock) <= 20'000);
    CHECK(score(s, queue, waiter) == "nil");
    CHECK(score(s, heartbeats, waiter) != "nil");
    CHECK(s.command({"HGET", handoff, waiter}).str == "20000 " + registered);
  }
  SUBCASE("not asked: queued, the key left free") {
    CHECK(take(false) == 0);
    CHECK_FALSE(s.exists(lock));
    CHECK(score(s, queue, waiter) != "nil");
  }
  SUBCASE("the lock held: behind, nothing set") {
    s.set(lock, holder);
    CHECK(take(true) == 1);
    CHECK(s.get(lock) == holder);
    CHECK(score(s, queue, waiter) != "nil");
  }
  SUBCASE("a live waiter ahead: behind, the key left free for it") {
    (void)s.command({"SET", ticket_counter, "10"});
    queue_up(s, "x@chan-x", 9, later);
    CHECK(take(true) == 1);
    CHECK_FALSE(s.exists(lock));
    CHECK(score(s, queue, waiter) == "11");
  }
  SUBCASE("a waiter ahead whose heartbeat lapsed: dropped, and granted") {
    (void)s.command({"SET", ticket_counter, "10"});
    queue_up(s, "dead@chan-d", 9, 1);
    CHECK(take(true) == 2);
    CHECK(s.get(lock) == registered);
    CHECK(score(s, queue, "dead@chan-d") == "nil");
  }
  SUBCASE("taken again (the last round found no quorum): placed at the new count, not the old") {
    (void)s.command({"SET", ticket_counter, "10"});
    queue_up(s, waiter, 3, later);  // its earlier round's place
    queue_up(s, "x@chan-x", 9, later);
    CHECK(take(true) == 1);
    CHECK(score(s, queue, waiter) == "11");
  }
  // A key granted (or handed over) under the waiter's previous registration, whose round its
  // client never counted: as such a grant leaves it, the key the old token, the waiter out of
  // the queue.
  const std::string previous = "cccccccccccccccccccccccccccccccccccccccc";
  auto granted_before = [&] {
    s.set(lock, previous);
    (void)s.command({"ZADD", heartbeats, std::to_string(later), waiter});
    (void)s.command({"HSET", handoff, waiter, "20000 " + previous});
  };
  SUBCASE("its own key from an earlier registration, first: granted again under this one") {
    granted_before();
    CHECK(take(true) == 2);
    CHECK(s.get(lock) == registered);
    CHECK(score(s, queue, waiter) == "nil");
  }
  SUBCASE("its own key from an earlier registration, a live waiter ahead: given back") {
    (void)s.command({"SET", ticket_counter, "10"});
    granted_before();
    queue_up(s, "x@chan-x", 9, later);
    CHECK(take(true) == 1);
    CHECK_FALSE(s.exists(lock));
    CHECK(score(s, queue, waiter) == "11");
  }
  SUBCASE("its own key from an earlier registration, not asked to grant: given back") {
    granted_before();
    CHECK(take(false) == 0);
    CHECK_FALSE(s.exists(lock));
  }
  SUBCASE("someone else's key: untouched") {
    s.set(lock, holder);
    (void)s.command({"HSET", handoff, waiter, "20000 " + previous});
    CHECK(take(true) == 1);
    CHECK(s.get(lock) == holder);
  }
}

TEST_CASE(
    "handoff: a key handed over at a place below the agreed ticket goes back at the attempt") {
  if (!redis_server_available()) return;
  RedisServer s;
  const long long later = server_ms(s) + 60'000;
  // A node whose counter lags (it missed a taker while a client could not reach it): the
  // newcomer's ticket round runs here and is placed by this node's count, 222, ahead of a waiter
  // queued at its agreed ticket 223; the newcomer's ticket, from the other nodes, is 224. A
  // release here hands it the key, and its attempt (the release's name woke it), at 224, gives
  // the key back to the queue, where the waiter at 223 is first.
  s.set(lock, holder);
  (void)s.command({"SET", ticket_counter, "221"});
  queue_up(s, "x@chan-x", 223, later);
  (void)s.command({"HSET", handoff, "x@chan-x", "10000 " + token});
  const auto taken = s.command({"EVAL", std::string(script_body(ScriptId::ticket_take)), "6",
                                ticket_counter, queue, heartbeats, lock, mark, handoff, waiter,
                                "60000", "5000", "20000", registered});
  REQUIRE_MESSAGE(taken.type == Reply::Type::array, redlock::nodes::reply_text(taken));
  REQUIRE(taken.elements.at(0).integer == 222);
  Listener w(s, "chan-w");
  Listener x(s, "chan-x");
  CHECK(release(s, holder) == 1);
  CHECK(s.get(lock) == registered);
  CHECK(w.next() == waiter + "/" + sha1(s, holder));
  const auto attempt = s.command({"EVAL", std::string(script_body(ScriptId::acquire_fair)), "5",
                                  lock, queue, heartbeats, ticket_counter, handoff, token, "20000",
                                  "224", "60000", waiter, "next-registered"});
  REQUIRE_MESSAGE(attempt.type == Reply::Type::integer, redlock::nodes::reply_text(attempt));
  CHECK(attempt.integer == 0);
  CHECK_FALSE(s.exists(lock));
  CHECK(score(s, queue, waiter) == "224");
  CHECK(acquire_fair(s, "x@chan-x", 223) == 1);
}

TEST_CASE("handoff: the release of a lock handed over clears its waiter's heartbeat and entry") {
  if (!redis_server_available()) return;
  RedisServer s;
  const long long later = server_ms(s) + 60'000;
  // As a ticket round's grant leaves it: the key the waiter's registered token, its heartbeat
  // and registration still there; another waiter in line behind it.
  s.set(lock, registered);
  (void)s.command({"ZADD", heartbeats, std::to_string(later), waiter});
  (void)s.command({"HSET", handoff, waiter, "10000 " + registered});
  queue_up(s, "x@chan-x", 4, later);
  auto release_handed = [&](const std::string& tok) {
    const auto r = s.command({"EVAL", std::string(script_body(ScriptId::release)), "5", lock, mark,
                              queue, heartbeats, handoff, tok, lock_channel, waiter});
    REQUIRE_MESSAGE(r.type == Reply::Type::integer, redlock::nodes::reply_text(r));
    return r.integer;
  };
  SUBCASE("its own token: the key, the heartbeat and the entry go; the next waiter stays") {
    CHECK(release_handed(registered) == 1);
    CHECK_FALSE(s.exists(lock));
    CHECK(score(s, heartbeats, waiter) == "nil");
    CHECK(s.command({"HEXISTS", handoff, waiter}).integer == 0);
    CHECK(score(s, queue, "x@chan-x") == "4");
    CHECK(score(s, heartbeats, "x@chan-x") != "nil");
  }
  SUBCASE("a lock it no longer holds: nothing changes") {
    s.set(lock, holder);
    CHECK(release_handed(registered) == 0);
    CHECK(s.get(lock) == holder);
    CHECK(score(s, heartbeats, waiter) != "nil");
    CHECK(s.command({"HEXISTS", handoff, waiter}).integer == 1);
  }
}
