// Fencing tokens over the quorum, the resource-side check, and multi-resource locks.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "common.hpp"

using namespace itest;
using namespace redlock;
using redlock::test::ServerConfig;

namespace {
AcquireOptions fenced(Millis ttl) {
  AcquireOptions o;
  o.ttl = ttl;
  o.fence = true;
  return o;
}
}  // namespace

TEST_CASE(
    "fences strictly increase over 1000 acquisitions while AOF-always nodes are killed and "
    "restarted") {
  ServerConfig cfg;
  cfg.aof_always = true;
  RedisCluster c(5, cfg);
  Options o = options_for(c);
  o.durable_nodes = true;  // appendfsync always: a restarted node kept its counter
  // Every write waits for an fsync, and the five servers share one filesystem: one disk stall
  // delays them all at once (70-390 ms seen with a disk writer beside the test). The deadline
  // must cover that, or a release whose deletes all ran reports timeouts.
  o.node_timeout = 2s;
  o.connect_timeout = 2s;
  o.reconnect_max = 100ms;
  o.retry_count = 5;
  o.retry_delay = 20ms;
  o.retry_jitter = 10ms;
  Client client(o);
  std::uint64_t last = 0;
  int acquired = 0, restarts = 0;
  for (int i = 0; i < 1000; ++i) {
    if (i % 50 == 25) {
      // kill -9 and restart at once: two of five, so a quorum stays possible.
      int a = (i / 50) % 5, b = (a + 2) % 5;
      c[a].kill();
      c[b].kill();
      c[a].start();
      c[b].start();
      restarts += 2;
    }
    auto r = client.try_acquire({"fenced"}, fenced(5s));
    if (!r) continue;  // a restart in progress may cost an attempt; never a smaller fence
    ++acquired;
    REQUIRE(r.lock.fence());
    CHECK_MESSAGE(*r.lock.fence() > last, "fence went from ", last, " to ", *r.lock.fence(), " at ",
                  i);
    last = *r.lock.fence();
    auto rel = client.try_release(r.lock);
    // What must hold is that the lock is gone, not that one reply came in time: check the keys.
    if (!rel) MESSAGE("release at ", i, ": ", rel.message);
    CHECK_MESSAGE(eventually([&] { return c.count_with_key("fenced") == 0; }, 5000ms),
                  "lock key left behind at ", i);
  }
  CHECK(acquired >= 950);
  CHECK(restarts == 40);
  MESSAGE("acquired ", acquired, " of 1000; last fence ", last);
}

TEST_CASE(
    "write-back: the node with the highest counter drops out and the next fence is still higher") {
  RedisCluster c(3);
  // Node 0 has seen many grants the others never saw: its counter is far above where a new
  // counter starts (the server's clock in ms x 1000, about 1.8e15 in 2026).
  const std::uint64_t high = 8'000'000'000'000'000;
  c[0].set(fence_key("wb"), std::to_string(high));
  // Make node 0 part of the granting quorum: node 2 is down for the first acquisition.
  c[2].kill();
  std::uint64_t first;
  {
    Client client(options_for(c));
    auto r = client.try_acquire({"wb"}, fenced(2s));
    REQUIRE_MESSAGE(r, r.message);
    first = *r.lock.fence();
    CHECK(first == high + 1);
    CHECK(client.try_release(r.lock));
  }
  // Node 1 was raised to the fence by the write-back round.
  CHECK(std::stoull(*c[1].get(fence_key("wb"))) >= high + 1);
  c[2].start();  // empty: its counter starts from its clock, far below `high`
  c[0].kill();   // the highest counter is gone; node 1 has it from the write-back
  Client client(options_for(c));
  auto r = client.try_acquire({"wb"}, fenced(2s));
  REQUIRE_MESSAGE(r, r.message);
  CHECK(*r.lock.fence() > first);
}

TEST_CASE("fencing: no write-back round where the granting nodes' counters agree") {
  RedisCluster c(3);
  for (std::size_t i = 0; i < 3; ++i) c[i].set(fence_key("wb-same"), "1000");
  // The write-back script reads the counter with GET; the fenced acquire script does not.
  auto gets = [&] { return calls_of(c[0], "get") + calls_of(c[1], "get") + calls_of(c[2], "get"); };
  Client client(options_for(c));
  const long long before = gets();
  auto r = client.try_acquire({"wb-same"}, fenced(5s));
  REQUIRE_MESSAGE(r, r.message);
  CHECK(*r.lock.fence() == 1001);
  std::this_thread::sleep_for(100ms);  // a straggling round would have arrived
  CHECK(gets() == before);
  // The counters stand at the fence on every granting node, as the write-back would have left them.
  int at_fence = 0;
  for (std::size_t i = 0; i < 3; ++i) at_fence += c[i].get(fence_key("wb-same")) == "1001" ? 1 : 0;
  CHECK(at_fence >= 2);
}

TEST_CASE("fencing: a node whose counter cannot grow gives no vote and keeps no lock key") {
  SUBCASE("not a number on one node: the others grant, and that node holds nothing") {
    RedisCluster c(3);
    c[0].set(fence_key("badf"), "not-a-number");
    const long long sets = calls_of(c[0], "set");
    Client client(options_for(c));
    auto r = client.try_acquire({"badf"}, fenced(60s));  // a key left behind stays for the test
    REQUIRE_MESSAGE(r, r.message);
    // Node 0 may answer after the decision: wait until its script has run (its SET NX counts).
    REQUIRE(eventually([&] { return calls_of(c[0], "set") > sets; }));
    CHECK_FALSE(c[0].exists("badf"));  // before: its SET stayed although its INCR failed
    CHECK(c[1].get("badf") == r.lock.token());
    CHECK(c[0].get(fence_key("badf")) == "not-a-number");  // the user's key is not touched
    CHECK(client.try_release(r.lock));
  }
  SUBCASE("another type on one node, a negative counter on another: an error, not 'held'") {
    RedisCluster c(3);
    c[0].set_wrong_type(fence_key("badg"));
    c[1].set(fence_key("badg"), "-1");
    Client client(options_for(c));
    auto r = client.try_acquire({"badg"}, fenced(60s));  // a key left behind stays for the test
    CHECK(r.error == Errc::no_quorum);
    // Before: -1 INCRs to 0, which read as "held by someone else" on a key nobody held.
    CHECK(count_state(r.nodes, NodeState::held_by_other) == 0);
    CHECK(count_state(r.nodes, NodeState::error) >= 1);
    // Node 2's grant is taken back by the rollback the failed attempt sends, not waited for: it
    // arrives within 100 ms on an idle machine, not always beside the rest of the suite (CI).
    CHECK(eventually([&] { return c.count_with_key("badg") == 0; }));
  }
}

TEST_CASE("concurrent contending clients: fences increase in grant order as the oracle sees it") {
  RedisCluster c(5);
  std::mutex oracle_mu;
  std::vector<std::uint64_t> grants;  // in the order critical sections were entered
  std::atomic<int> inside{0}, overlaps{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      Options o = options_for(c);
      o.retry_count = 50;
      o.retry_delay = 5ms;
      o.retry_jitter = 5ms;
      Client client(o);
      for (int i = 0; i < 25; ++i) {
        auto r = client.try_acquire({"oracle"}, fenced(2s));
        if (!r) continue;
        if (inside.fetch_add(1) != 0) ++overlaps;
        {
          std::lock_guard<std::mutex> g(oracle_mu);
          grants.push_back(*r.lock.fence());
        }
        std::this_thread::sleep_for(1ms);
        inside.fetch_sub(1);
        (void)client.try_release(r.lock);
      }
    });
  }
  for (auto& t : workers) t.join();
  CHECK(overlaps == 0);
  REQUIRE(grants.size() >= 50);
  for (std::size_t i = 1; i < grants.size(); ++i) {
    CHECK_MESSAGE(grants[i] > grants[i - 1], "grant ", i, ": ", grants[i - 1], " then ", grants[i]);
  }
}

TEST_CASE("the resource-side script rejects a stale fence") {
  RedisServer data;
  const std::string script(fenced_write_script());
  auto write = [&](std::uint64_t fence, const std::string& v) {
    return data.command({"EVAL", script, "2", "acct", "acct:fence", std::to_string(fence), v});
  };
  CHECK(write(5, "a").integer == 1);
  CHECK(write(7, "b").integer == 1);
  CHECK(write(7, "b2").integer == 1);  // the same holder writing twice
  CHECK(write(6, "stale").integer == 0);
  CHECK(data.get("acct") == "b2");
  CHECK(data.get("acct:fence") == "7");
  CHECK(data.command({"EVAL", script, "2", "acct", "acct:fence", "x", "v"}).is_error());
  // Only decimal digits: Lua's tonumber() would take these, and "nan" compares false with
  // everything, so after it any stale fence would have been accepted.
  for (const char* bad : {"nan", "inf", "-1", "1e3", "0x10", " 9", "9 ", "", "+8"}) {
    CHECK_MESSAGE(data.command({"EVAL", script, "2", "acct", "acct:fence", bad, "evil"}).is_error(),
                  bad);
  }
  CHECK(data.get("acct") == "b2");
  CHECK(data.get("acct:fence") == "7");
  CHECK(write(6, "stale").integer == 0);
  // Leading zeros are the same number.
  CHECK(data.command({"EVAL", script, "2", "acct", "acct:fence", "0007", "b3"}).integer == 1);
  CHECK(data.command({"EVAL", script, "2", "acct", "acct:fence", "006", "stale"}).integer == 0);
  // Exact above 2^53, where doubles cannot tell 2^53 from 2^53 + 1.
  CHECK(write(9007199254740993ULL, "big").integer == 1);
  CHECK(write(9007199254740992ULL, "stale").integer == 0);
  CHECK(write(18446744073709551615ULL, "max").integer == 1);
  CHECK(write(18446744073709551614ULL, "stale").integer == 0);
  CHECK(data.get("acct") == "max");
}

TEST_CASE("fencing with a paused holder: its stale write is refused by the resource") {
  RedisCluster c(3);
  RedisServer data;
  const std::string script(fenced_write_script());
  Client client(options_for(c));
  auto a = client.try_acquire({"job"}, fenced(200ms));
  REQUIRE(a);
  std::this_thread::sleep_for(250ms);  // A "pauses" past its validity
  auto b = client.try_acquire({"job"}, fenced(5s));
  REQUIRE(b);
  CHECK(*b.lock.fence() > *a.lock.fence());
  CHECK(
      data.command({"EVAL", script, "2", "d", "d:fence", std::to_string(*b.lock.fence()), "from-b"})
          .integer == 1);
  CHECK(
      data.command({"EVAL", script, "2", "d", "d:fence", std::to_string(*a.lock.fence()), "from-a"})
          .integer == 0);
  CHECK(data.get("d") == "from-b");
}

TEST_CASE("fencing keeps the lock key a plain string, and refuses several resources") {
  RedisCluster c(3);
  Client client(options_for(c));
  connect_everywhere(client, c.size());  // the key is checked on every node below
  auto r = client.try_acquire({"plain"}, fenced(5s));
  REQUIRE(r);
  CHECK(eventually([&] { return c.count_with_key("plain") == 3; }));
  CHECK(c[0].command({"TYPE", "plain"}).str == "string");
  CHECK(c[0].get("plain") == r.lock.token());
  auto m = client.try_acquire({"a", "b"}, fenced(5s));
  CHECK(m.error == Errc::invalid_argument);
}

TEST_CASE("multi-resource: all-or-nothing on each node, one token, extend and release all") {
  RedisCluster c(3);
  Client client(options_for(c));
  auto other = client.try_acquire({"m2"}, ttl_opts(10s));
  REQUIRE(other);
  auto f = client.try_acquire({"m1", "m2", "m3"}, ttl_opts(10s));
  CHECK(f.error == Errc::contended);
  CHECK(c.count_with_key("m1") == 0);
  CHECK(c.count_with_key("m3") == 0);
  CHECK(c[0].get("m2") == other.lock.token());
  REQUIRE(client.try_release(other.lock));

  auto r = client.try_acquire({"m1", "m2", "m3"}, ttl_opts(2s));
  REQUIRE_MESSAGE(r, r.message);
  CHECK(eventually([&] { return c.count_with_key("m3") == 3; }));
  for (const char* k : {"m1", "m2", "m3"}) {
    CHECK(c[1].get(k) == r.lock.token());
    CHECK(c[1].command({"TYPE", k}).str == "string");
  }
  // Another client (or library) sees each key held.
  auto single = client.try_acquire({"m2"}, ttl_opts(10s));
  CHECK(single.error == Errc::contended);
  auto e = client.try_extend(r.lock, 20s);
  REQUIRE_MESSAGE(e, e.message);
  // Decided at a quorum (2 of 3): node 2 may run its extend a little later (seen under stress).
  CHECK(eventually([&] { return c[2].pttl("m1") > 10000 && c[2].pttl("m3") > 10000; }));
  // Extend needs every key: with one gone on every node it is not held.
  auto rel = client.try_release(e.lock);
  CHECK(rel.deleted == 3);
  for (const char* k : {"m1", "m2", "m3"}) CHECK(c.count_with_key(k) == 0);
}

namespace {
// Warnings a client logs, collected across its I/O thread.
struct WarningLog {
  std::shared_ptr<std::mutex> mu = std::make_shared<std::mutex>();
  std::shared_ptr<std::vector<std::string>> lines = std::make_shared<std::vector<std::string>>();
  void attach(Options& o) const {
    o.logger = [mu = mu, lines = lines](LogLevel level, std::string_view m) {
      std::lock_guard<std::mutex> g(*mu);
      if (level == LogLevel::warning) lines->emplace_back(m);
    };
  }
  int count(std::string_view needle) const {
    std::lock_guard<std::mutex> g(*mu);
    return static_cast<int>(std::count_if(lines->begin(), lines->end(), [&](const std::string& l) {
      return l.find(needle) != std::string::npos;
    }));
  }
};
}  // namespace

TEST_CASE("fencing on nodes without appendfsync always is warned about, once per node") {
  SUBCASE("appendonly no: one warning per node, however many fenced locks") {
    RedisCluster c(3);
    Options o = options_for(c);
    WarningLog log;
    log.attach(o);
    Client client(o);
    // A plain lock first: no fencing, no warning.
    auto plain = client.try_acquire({"plain"}, ttl_opts(5s));
    REQUIRE(plain);
    CHECK(log.count("fencing on a node") == 0);
    for (int i = 0; i < 20; ++i) {
      auto r = client.try_acquire({"fenced-warn"}, fenced(5s));
      REQUIRE_MESSAGE(r, r.message);
      REQUIRE(client.try_release(r.lock));
    }
    CHECK(log.count("fencing on a node with appendonly no") == 3);
  }
  SUBCASE("appendonly yes + appendfsync everysec: named") {
    ServerConfig cfg;
    cfg.extra_args = {"--appendonly", "yes", "--appendfsync", "everysec"};
    RedisCluster c(3, cfg);
    Options o = options_for(c);
    WarningLog log;
    log.attach(o);
    Client client(o);
    // A node is named once it has answered CONFIG and a fenced lock was handed out; the first
    // acquisition may be decided before the slowest node said anything.
    CHECK(eventually(
        [&] {
          auto r = client.try_acquire({"fenced-everysec"}, fenced(5s));
          if (r) (void)client.try_release(r.lock);
          return log.count("fencing on a node with appendfsync everysec") >= 3;
        },
        3000ms));
    CHECK(log.count("fencing on a node with appendfsync everysec") == 3);
  }
  SUBCASE("appendonly yes + appendfsync always: silent") {
    ServerConfig cfg;
    cfg.aof_always = true;
    RedisCluster c(3, cfg);
    Options o = options_for(c);
    WarningLog log;
    log.attach(o);
    Client client(o);
    REQUIRE(client.try_acquire({"fenced-durable"}, fenced(5s)));
    CHECK(log.count("fencing on a node") == 0);
  }
}

TEST_CASE("fence counters expire when idle and start again above every fence given out") {
  RedisCluster c(3);
  Client client(options_for(c));
  auto a = client.try_acquire({"idle"}, fenced(2s));
  REQUIRE_MESSAGE(a, a.message);
  REQUIRE(client.try_release(a.lock));
  for (std::size_t i = 0; i < c.size(); ++i) {
    const auto ttl = c[i].pttl(fence_key("idle"));
    CHECK(ttl > 0);  // no counter is kept forever ...
    CHECK(ttl <= fence_counter_idle_expiry.count());
    CHECK(ttl > fence_counter_idle_expiry.count() - 60000);  // ... but for the documented time
  }
  // The counters go (what an idle week does), and the next fence is still higher.
  for (std::size_t i = 0; i < c.size(); ++i) c[i].del(fence_key("idle"));
  std::this_thread::sleep_for(5ms);
  auto b = client.try_acquire({"idle"}, fenced(2s));
  REQUIRE_MESSAGE(b, b.message);
  CHECK(*b.lock.fence() > *a.lock.fence());
  CHECK(client.try_release(b.lock));
}

TEST_CASE("derived keys: a resource cannot take their form; the old collisions are gone") {
  RedisCluster c(3);
  Client client(options_for(c));
  // Issue 15: `acquire coll --fence` left `coll:fence` held forever for a resource of that name.
  auto f = client.try_acquire({"coll"}, fenced(2s));
  REQUIRE_MESSAGE(f, f.message);
  REQUIRE(client.try_release(f.lock));
  auto plain = client.try_acquire({"coll:fence"}, ttl_opts(2s));
  CHECK_MESSAGE(plain, plain.message);
  CHECK(client.try_release(plain.lock));
  // ... and `acquire coll2:fence` then `acquire coll2 --fence` failed on every node.
  auto p2 = client.try_acquire({"coll2:fence"}, ttl_opts(10s));
  REQUIRE(p2);
  auto f2 = client.try_acquire({"coll2"}, fenced(2s));
  CHECK_MESSAGE(f2, f2.message);
  // A resource in the derived form is refused before anything is sent, naming it.
  const std::string reserved = fence_key("coll");
  auto r = client.try_acquire({reserved}, ttl_opts(2s));
  CHECK(r.error == Errc::invalid_argument);
  CHECK(r.message.find(reserved) != std::string::npos);
  CHECK(c.count_with_key(reserved) == 3);  // the real counter is untouched
  Options o = options_for(c);
  o.key_prefix = "{svc}";  // the prefix is part of the key
  Client prefixed(o);
  auto rp = prefixed.try_acquire({":redlock:fence:x"}, ttl_opts(2s));
  CHECK(rp.error == Errc::invalid_argument);
}
