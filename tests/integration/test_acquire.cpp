// The quorum engine against five real redis-server processes.
#include <atomic>
#include <thread>

#include "common.hpp"

using namespace itest;
using namespace redlock;

TEST_CASE("5 of 5 up: acquire, status, extend, release") {
  RedisCluster c(5);
  Client client(options_for(c));
  auto r = client.try_acquire({"job"}, ttl_opts(10s));
  REQUIRE_MESSAGE(r, r.message);
  CHECK(r.lock.token().size() == 40);
  CHECK(r.lock.votes() >= 3);
  CHECK(r.lock.validity() > 9000ms);
  CHECK(r.lock.validity() <= 10000ms);
  CHECK(r.lock.remaining() > 9000ms);
  CHECK(r.attempts == 1);
  // The stragglers' SETs still arrive after the early decision.
  CHECK(eventually([&] { return c.count_with_key("job") == 5; }));
  for (std::size_t i = 0; i < c.size(); ++i) {
    CHECK(c[i].get("job") == r.lock.token());
    CHECK(c[i].pttl("job") > 9000);
  }

  auto st = client.status("job");
  REQUIRE(st.nodes.size() == 5);
  for (const auto& n : st.nodes) {
    CHECK(n.up);
    CHECK(n.value == r.lock.token());
    CHECK(n.pttl.has_value());
  }

  Lock lock = r.lock;
  auto e = client.try_extend(lock, 20s);
  REQUIRE_MESSAGE(e, e.message);
  CHECK(e.lock.validity() > 19000ms);
  CHECK(e.lock.deadline() > lock.deadline());
  CHECK(eventually([&] { return c[0].pttl("job") > 19000; }));

  auto rel = client.try_release(e.lock);
  REQUIRE_MESSAGE(rel, rel.message);
  CHECK(eventually([&] { return c.count_with_key("job") == 0; }));
  CHECK(rel.deleted + rel.not_held + rel.unreachable == 5);
  CHECK(rel.deleted == 5);
}

TEST_CASE("a key prefix: the nodes hold prefixed keys, the lock names its resources") {
  RedisCluster c(5);
  Options o = options_for(c);
  o.key_prefix = "app1:";
  Client client(o);
  for (const std::vector<std::string>& names :
       {std::vector<std::string>{"job"}, std::vector<std::string>{"a", "b"}}) {
    CAPTURE(names.size());
    auto r = client.try_acquire(names, ttl_opts(10s));
    REQUIRE_MESSAGE(r, r.message);
    CHECK(r.lock.resources() == names);
    for (const auto& n : names) {
      CHECK(eventually([&] { return c.count_with_key("app1:" + n) == 5; }));
      CHECK(c.count_with_key(n) == 0);
    }
    auto e = client.try_extend(r.lock, 20s);
    REQUIRE_MESSAGE(e, e.message);
    CHECK(eventually([&] { return c[0].pttl("app1:" + names[0]) > 10000; }));
    auto rel = client.try_release(e.lock);
    REQUIRE_MESSAGE(rel, rel.message);
    CHECK(rel.deleted == 5);
    for (const auto& n : names) CHECK(c.count_with_key("app1:" + n) == 0);
  }
  // Without the prefix the same names are other keys: free.
  Client plain(options_for(c));
  auto p = plain.try_acquire({"job"}, ttl_opts(10s));
  CHECK_MESSAGE(p, p.message);
  CHECK(plain.try_release(p.lock));
}

TEST_CASE("two clients contending: exactly one wins, the loser gets contended") {
  RedisCluster c(5);
  Client a(options_for(c));
  Client b(options_for(c));
  for (int round = 0; round < 20; ++round) {
    std::string res = "contended-" + std::to_string(round);
    AcquireResult ra, rb;
    std::thread ta([&] { ra = a.try_acquire({res}, ttl_opts(5s)); });
    std::thread tb([&] { rb = b.try_acquire({res}, ttl_opts(5s)); });
    ta.join();
    tb.join();
    CAPTURE(round);
    CAPTURE(ra.message);
    CAPTURE(rb.message);
    // Both may fail (split votes, then rollback); both may never succeed.
    CHECK_FALSE((ra && rb));
    if (ra || rb) {
      const auto& loser = ra ? rb : ra;
      CHECK(loser.error == Errc::contended);
      const auto& winner = ra ? ra : rb;
      // The winner holds a quorum; the loser's partial grants were rolled back.
      auto holds = [&](const std::string& token) {
        int n = 0;
        for (std::size_t i = 0; i < c.size(); ++i) n += c[i].get(res) == token;
        return n;
      };
      CHECK(holds(winner.lock.token()) >= 3);
      CHECK(eventually([&] { return holds(winner.lock.token()) == c.count_with_key(res); }));
    } else {
      CHECK((ra.error == Errc::contended || ra.error == Errc::no_quorum));
      // The rollback left no key behind for a later attempt.
      CHECK(eventually([&] { return c.count_with_key(res) == 0; }));
    }
  }
}

TEST_CASE("a held lock blocks another acquirer until released") {
  RedisCluster c(5);
  Client client(options_for(c));
  auto first = client.try_acquire({"held"}, ttl_opts(10s));
  REQUIRE(first);
  auto second = client.try_acquire({"held"}, ttl_opts(10s));
  CHECK(second.error == Errc::contended);
  CHECK(count_state(second.nodes, NodeState::held_by_other) >= 3);
  // The failed attempt's rollback did not delete the holder's keys.
  CHECK(eventually([&] { return c.count_with_key("held") == 5; }));
  CHECK(c[2].get("held") == first.lock.token());
  REQUIRE(client.try_release(first.lock));
  auto third = client.try_acquire({"held"}, ttl_opts(10s));
  CHECK(third);
  CHECK(third.lock.token() != first.lock.token());
}

TEST_CASE("wrong-token release and extend are refused and leave the lock alone") {
  RedisCluster c(5);
  Client client(options_for(c));
  auto r = client.try_acquire({"mine"}, ttl_opts(10s));
  REQUIRE(r);
  Lock forged = Lock::from_token({"mine"}, std::string(40, 'a'));
  auto rel = client.try_release(forged);
  CHECK(rel.error == Errc::not_held);
  CHECK(rel.deleted == 0);
  CHECK(rel.not_held == 5);
  auto ext = client.try_extend(forged, 60s);
  CHECK(ext.error == Errc::not_held);
  CHECK(eventually([&] { return c.count_with_key("mine") == 5; }));
  CHECK(c[0].pttl("mine") <= 10000);
  CHECK(c[0].get("mine") == r.lock.token());
  try {
    client.release(forged);
    FAIL("expected redlock::Error");
  } catch (const redlock::Error& e) {
    CHECK(e.code() == Errc::not_held);
    CHECK(e.nodes().size() == 5);
  }
}

TEST_CASE("extend after the local deadline is refused without touching the nodes") {
  RedisCluster c(3);
  Client client(options_for(c));
  connect_everywhere(client, c.size());  // a TLS handshake must not use up the 100 ms
  auto r = client.try_acquire({"short"}, ttl_opts(100ms));
  REQUIRE(r);
  std::this_thread::sleep_for(120ms);
  CHECK(r.lock.remaining() == 0ms);
  // Put the key back by hand: if the engine asked the nodes, the extend would succeed.
  for (std::size_t i = 0; i < c.size(); ++i) {
    (void)c[i].command({"SET", "short", r.lock.token(), "PX", "10000"});
  }
  auto e = client.try_extend(r.lock, 10s);
  CHECK(e.error == Errc::expired);
  CHECK(e.nodes.empty());
  CHECK(c[0].pttl("short") <= 10000);
}

TEST_CASE("a failed extend does not release, and extend never re-creates a missing key") {
  RedisCluster c(3);
  Client client(options_for(c));
  auto r = client.try_acquire({"ext"}, ttl_opts(10s));
  REQUIRE(r);
  REQUIRE(eventually([&] { return c.count_with_key("ext") == 3; }));
  c[0].del("ext");
  c[1].del("ext");
  auto e = client.try_extend(r.lock, 10s);
  CHECK(e.error == Errc::not_held);
  CHECK(c.count_with_key("ext") == 1);  // not released by the failed extend, not re-created
  CHECK_FALSE(c[0].exists("ext"));
}

TEST_CASE("SCRIPT FLUSH between calls: the NOSCRIPT fallback still releases and extends") {
  RedisCluster c(5);
  Client client(options_for(c));
  auto r = client.try_acquire({"flushed"}, ttl_opts(10s));
  REQUIRE(r);
  REQUIRE(eventually([&] { return c.count_with_key("flushed") == 5; }));
  for (std::size_t i = 0; i < c.size(); ++i) c[i].script_flush();
  Lock lock = r.lock;
  auto e = client.try_extend(lock, 20s);
  REQUIRE_MESSAGE(e, e.message);
  CHECK(count_state(e.nodes, NodeState::error) == 0);
  for (std::size_t i = 0; i < c.size(); ++i) c[i].script_flush();
  auto rel = client.try_release(e.lock);
  CHECK(rel.deleted == 5);
  CHECK(c.count_with_key("flushed") == 0);
}

// The scripts are loaded in the handshake, ahead of anything a caller sends: a fresh client's
// first script calls find them cached. (When SCRIPT LOAD waited for the capability probe's answer,
// the first read locks went out before it: NOSCRIPT, then EVAL, or no vote at all where the retry
// would have run behind the second reader's call to the same key; CI saw "reader_count 1 == 2".)
TEST_CASE("a fresh client's first script calls find their scripts loaded (no NOSCRIPT)") {
  RedisCluster c(3);
  for (int round = 0; round < 3; ++round) {
    Client client(options_for(c));
    AcquireOptions read;
    read.mode = redlock::LockMode::read;
    read.ttl = 10s;
    const std::string key = "first-scripts-" + std::to_string(round);
    auto r1 = client.try_acquire({key}, read);
    auto r2 = client.try_acquire({key}, read);
    REQUIRE_MESSAGE(r1, r1.message);
    REQUIRE_MESSAGE(r2, r2.message);
    (void)client.try_release(r1.lock);
    (void)client.try_release(r2.lock);
  }
  for (std::size_t i = 0; i < c.size(); ++i) {
    const std::string errors = c[i].command({"INFO", "errorstats"}).str;
    CHECK_MESSAGE(errors.find("NOSCRIPT") == std::string::npos, "node " << i << ": " << errors);
    CHECK(calls_of(c[i], "eval") == 0);  // every script call was an EVALSHA that hit the cache
  }
}

TEST_CASE("resources are bytes: spaces, tabs, NUL, non-UTF-8, 100 kB") {
  RedisCluster c(3);
  Options o = options_for(c);
  // About bytes, not deadlines: a 100 kB key takes more than the default 50 ms to go out and be
  // deleted on a loaded machine (seen once under stress: "deleted 2 of 3").
  o.node_timeout = 1s;
  Client client(o);
  for (std::string res : {std::string("with space\tand tab"), std::string("nul\0inside", 10),
                          std::string("\xff\xfe latin"), std::string(100 * 1024, 'k')}) {
    auto r = client.try_acquire({res}, ttl_opts(5s));
    REQUIRE_MESSAGE(r, r.message);
    CHECK(eventually([&] { return c.count_with_key(res) == 3; }));
    CHECK(c[1].get(res) == r.lock.token());
    auto rel = client.try_release(r.lock);
    CHECK(rel.deleted == 3);
    CHECK(c.count_with_key(res) == 0);
  }
}

TEST_CASE("invalid arguments are refused before anything is sent") {
  RedisCluster c(3);
  Client client(options_for(c));
  CHECK(client.try_acquire({""}, {}).error == Errc::invalid_argument);
  CHECK(client.try_acquire({}, {}).error == Errc::invalid_argument);
  CHECK(client.try_acquire({"x"}, ttl_opts(0ms)).error == Errc::invalid_argument);
  CHECK(client.try_acquire({"x"}, ttl_opts(-5ms)).error == Errc::invalid_argument);
  // Not longer than the drift allowance (2 ms + 1 %): no lock could ever be valid.
  auto tiny = client.try_acquire({"x"}, ttl_opts(2ms));
  CHECK(tiny.error == Errc::invalid_argument);
  CHECK_MESSAGE(tiny.message.find("drift") != std::string::npos, tiny.message);
  CHECK(client.try_acquire({"x"}, ttl_opts(max_ttl + 1ms)).error == Errc::invalid_argument);
  CHECK(client.try_acquire({"a", "a"}, {}).error == Errc::invalid_argument);
  CHECK(client.try_acquire({std::string((1 << 20) + 1, 'x')}, {}).error == Errc::invalid_argument);
  CHECK(client.try_release(Lock{}).error == Errc::invalid_argument);
  CHECK(c.count_with_key("x") == 0);
  CHECK(c.count_with_key("a") == 0);
  CHECK_THROWS_AS(Client{Options{}}, std::invalid_argument);
  Options dup = options_for(c);
  dup.nodes.push_back(dup.nodes[0]);
  CHECK_THROWS_AS(Client{dup}, std::invalid_argument);
  Options zero = options_for(c);
  zero.node_timeout = 0ms;
  CHECK_THROWS_AS(Client{zero}, std::invalid_argument);
}

TEST_CASE("the throwing forms and their try_ twins") {
  RedisCluster c(3);
  Client client(options_for(c));
  Lock l = client.acquire({"ov"}, ttl_opts(5s));
  CHECK_FALSE(l.empty());
  auto r2 = client.try_acquire({"ov"}, ttl_opts(5s));
  CHECK(r2.error == Errc::contended);
  CHECK(r2.lock.empty());
  try {
    (void)client.acquire({"ov"}, ttl_opts(5s));
    FAIL("expected redlock::Error");
  } catch (const redlock::Error& e) {
    CHECK(e.code() == Errc::contended);
    CHECK(e.nodes().size() == 3);
  }
  client.extend(l, 8s);
  CHECK(l.ttl() == 8s);
  client.release(l);
  CHECK(c.count_with_key("ov") == 0);
}

TEST_CASE("retries: a fresh token per attempt, and a wait deadline that bounds the attempts") {
  RedisCluster c(3);
  Options o = options_for(c);
  o.retry_delay = 50ms;
  o.retry_jitter = 10ms;
  Client client(o);
  auto holder = client.try_acquire({"w"}, ttl_opts(700ms));
  REQUIRE(holder);
  auto start = Clock::now();
  auto waiter = client.try_acquire({"w"}, ttl_opts(5s, 3s));
  auto took = ms_since(start);
  REQUIRE_MESSAGE(waiter, waiter.message);
  CHECK(waiter.attempts > 1);
  CHECK(took >= 500);  // the holder's key expired after ~700 ms
  CHECK(took < 2000);
  CHECK(waiter.lock.token() != holder.lock.token());

  // A wait that ends before the holder leaves: contended after several attempts.
  start = Clock::now();
  auto r = client.try_acquire({"w"}, ttl_opts(5s, 300ms));
  took = ms_since(start);
  CHECK(r.error == Errc::contended);
  CHECK(r.attempts >= 3);
  // It waited to the end of the wait, within libuv's clock: its timers count whole ms and may
  // fire a fraction early, and ms_since truncates (seen: 299 in a fresh clone). 5 ms of slack, as
  // test_faults.cpp allows for a node deadline.
  CHECK(took >= 295);
  CHECK(took < 1500);
}

TEST_CASE("a wait shorter than the retry delay: one attempt at once, one at its end, no more") {
  // The sleep after the first attempt is cut to the end of the wait; the attempt that follows it
  // is the last. The loop's timers count whole milliseconds and may fire a fraction of one early:
  // that attempt then fails just before the end, and must not be followed by a 1 ms sleep and a
  // third attempt (seen in CI: 5 attempts in a wait of four). Without wake-ups: a waiter's first
  // subscription is a reason of its own for one more attempt (test_wake.cpp).
  RedisCluster c(3);
  Options o = options_for(c);
  o.wake_ups = false;
  o.retry_delay = 1s;
  o.retry_jitter = Millis{0};
  Client client(o);
  auto holder = client.try_acquire({"short-wait"}, ttl_opts(30s));
  REQUIRE(holder);
  std::vector<int> attempts;
  for (int i = 0; i < 80; ++i) {
    auto r = client.try_acquire({"short-wait"}, ttl_opts(5s, Millis{20 + i % 7}));
    CHECK(r.error == Errc::contended);
    attempts.push_back(r.attempts);
  }
  std::string seen;
  for (int a : attempts) seen += std::to_string(a) + " ";
  CAPTURE(seen);
  // Never a third. (One alone is right when the first attempt's round outlasted the wait: a
  // wait bounds when an attempt may start: seen once in 40 with TLS beside stress-ng.) Without
  // the fix, 4, 8, 9 and 8 of 80 had a third in four runs.
  CHECK(*std::max_element(attempts.begin(), attempts.end()) == 2);
  CHECK(std::count(attempts.begin(), attempts.end(), 2) >= 40);
  CHECK(client.try_release(holder.lock));
}

TEST_CASE("unix socket and IPv6 addresses reach real servers") {
  redlock::test::ServerConfig cfg;
  cfg.unix_socket = true;
  RedisServer s(cfg);
  {
    Client client(options_for("unix://" + s.unix_path()));
    auto r = client.try_acquire({"via-unix"}, ttl_opts(5s));
    REQUIRE_MESSAGE(r, r.message);
    CHECK(s.get("via-unix") == r.lock.token());
  }
  // IPv6 loopback, when this machine has it.
  redlock::test::ServerConfig v6;
  v6.extra_args = {"--bind", "127.0.0.1 ::1"};
  std::unique_ptr<RedisServer> s6;
  try {
    s6 = std::make_unique<RedisServer>(v6);
  } catch (const std::exception& e) {
    MESSAGE("no IPv6 loopback here, skipped: ", e.what());
    return;
  }
  Client client(options_for("redis://[::1]:" + std::to_string(s6->port())));
  auto r = client.try_acquire({"via-v6"}, ttl_opts(5s));
  REQUIRE_MESSAGE(r, r.message);
  CHECK(s6->get("via-v6") == r.lock.token());
}

TEST_CASE("a multi-resource lock's token names its resources; a part of them is refused") {
  RedisCluster c(3);
  Client client(options_for(c));
  auto r = client.try_acquire({"ma", "mb", "mc"}, ttl_opts(10s));
  REQUIRE_MESSAGE(r, r.message);
  const auto& token = r.lock.token();
  CHECK(token.size() == 42);
  CHECK(token.substr(40) == "-3");
  auto single = client.try_acquire({"ms"}, ttl_opts(10s));
  REQUIRE(single);
  CHECK(single.lock.token().size() == 40);  // the plain wire format stays as other clients have it
  // Issue 15: `release ma TOKEN` deleted ma and left mb and mc held (and said it succeeded).
  auto part = client.try_release(Lock::from_token({"ma"}, token));
  CHECK(part.error == Errc::invalid_argument);
  CHECK_MESSAGE(part.message.find("lock over 3 resources, 1 given") != std::string::npos,
                part.message);
  CHECK(c.count_with_key("ma") == 3);  // nothing was sent
  auto ext = client.try_extend(Lock::from_token({"ma", "mb"}, token), 10s);
  CHECK(ext.error == Errc::invalid_argument);
  auto all = client.try_release(Lock::from_token({"ma", "mb", "mc"}, token));
  CHECK(all.deleted == 3);
  for (const char* k : {"ma", "mb", "mc"}) CHECK(c.count_with_key(k) == 0);
  CHECK(client.try_release(single.lock));
}
