// Fair (FIFO) locks and read-write locks over the quorum.
#include <uv.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "common.hpp"

using namespace itest;
using namespace redlock;

namespace {

AcquireOptions fair_opts(Millis ttl, Millis wait) {
  AcquireOptions o;
  o.ttl = ttl;
  o.fair = true;
  o.wait = wait;
  return o;
}

AcquireOptions mode_opts(LockMode m, Millis ttl, std::optional<Millis> wait = {}) {
  AcquireOptions o;
  o.ttl = ttl;
  o.mode = m;
  o.wait = wait;
  return o;
}

// `clients` threads, each with its own Client, take the fair lock `rounds` times; returns the
// tickets in the order the critical sections were entered, and counts overlaps.
std::vector<std::uint64_t> fair_run(const RedisCluster& c, const std::string& res, int clients,
                                    int rounds, int& overlaps, int& failures) {
  std::mutex mu;
  std::vector<std::uint64_t> order;
  std::atomic<int> inside{0}, ov{0}, fails{0};
  std::vector<std::thread> ts;
  for (int w = 0; w < clients; ++w) {
    ts.emplace_back([&] {
      Client client(options_for(c.nodes_csv()));
      for (int i = 0; i < rounds; ++i) {
        auto r = client.try_acquire({res}, fair_opts(5s, 20s));
        if (!r) {
          ++fails;
          continue;
        }
        if (inside.fetch_add(1) != 0) ++ov;
        {
          std::lock_guard<std::mutex> g(mu);
          order.push_back(*r.lock.ticket());
        }
        std::this_thread::sleep_for(10ms);
        inside.fetch_sub(1);
        (void)client.try_release(r.lock);
      }
    });
  }
  for (auto& t : ts) t.join();
  overlaps = ov;
  failures = fails;
  return order;
}

}  // namespace

TEST_CASE("fair lock: 8 contending clients are granted in ticket order") {
  RedisCluster c(5);
  int overlaps = 0, failures = 0;
  auto order = fair_run(c, "fifo", 8, 4, overlaps, failures);
  CHECK(overlaps == 0);
  CHECK(failures == 0);
  REQUIRE(order.size() == 32);
  for (std::size_t i = 1; i < order.size(); ++i) {
    // Equal tickets (two ticket rounds that overlapped) are ordered by waiter id on every node.
    CHECK_MESSAGE(order[i] >= order[i - 1], "grant ", i, ": ticket ", order[i], " after ",
                  order[i - 1]);
  }
  // Nothing left queued.
  CHECK(eventually([&] {
    return c[0].command({"ZCARD", derived_key("fifo", KeyRole::queue)}).integer == 0;
  }));
}

TEST_CASE("fair lock: a dead waiter blocks the queue only until its heartbeat expires") {
  RedisCluster c(3);
  // A waiter with the lowest ticket that died: its heartbeat runs out in ~800 ms.
  for (std::size_t i = 0; i < c.size(); ++i) {
    auto t = c[i].command({"TIME"});
    long long now_ms = std::stoll(t.elements[0].str) * 1000 + std::stoll(t.elements[1].str) / 1000;
    (void)c[i].command({"ZADD", derived_key("q", KeyRole::queue), "0", "ghost"});
    (void)c[i].command(
        {"ZADD", derived_key("q", KeyRole::heartbeats), std::to_string(now_ms + 800), "ghost"});
  }
  Client client(options_for(c));
  auto start = Clock::now();
  auto r = client.try_acquire({"q"}, fair_opts(5s, 5s));
  auto took = ms_since(start);
  REQUIRE_MESSAGE(r, r.message);
  CHECK(took >= 600);  // it did wait for the ghost ...
  CHECK(took < 2000);  // ... but not much longer than its heartbeat
  CHECK(c[0].command({"ZSCORE", derived_key("q", KeyRole::queue), "ghost"}).is_nil());
}

TEST_CASE(
    "fair lock: a waiter with a short heartbeat does not cut the queue's expiry under others") {
  RedisCluster c(3);
  // A waiter that is paused, not dead: ticket 0, heartbeat valid for 10 s, and the queue kept for
  // twice that, as its own ticket round left it.
  for (std::size_t i = 0; i < c.size(); ++i) {
    auto t = c[i].command({"TIME"});
    long long now_ms = std::stoll(t.elements[0].str) * 1000 + std::stoll(t.elements[1].str) / 1000;
    (void)c[i].command({"ZADD", derived_key("mixed", KeyRole::queue), "0", "sleeper"});
    (void)c[i].command({"ZADD", derived_key("mixed", KeyRole::heartbeats),
                        std::to_string(now_ms + 10000), "sleeper"});
    (void)c[i].command({"PEXPIRE", derived_key("mixed", KeyRole::queue), "20000"});
    (void)c[i].command({"PEXPIRE", derived_key("mixed", KeyRole::heartbeats), "20000"});
  }
  // A waiter with a 100 ms heartbeat queues behind it, gives up and leaves.
  Client client(options_for(c));
  auto o = fair_opts(5s, 150ms);
  o.heartbeat_ttl = 100ms;
  auto w = client.try_acquire({"mixed"}, o);
  CHECK(w.error == Errc::contended);
  std::this_thread::sleep_for(400ms);  // twice the short heartbeat, and more
  for (std::size_t i = 0; i < c.size(); ++i) {
    // The sleeper's heartbeat is still valid: it keeps its place, and the queue its expiry.
    CHECK_MESSAGE(
        !c[i].command({"ZSCORE", derived_key("mixed", KeyRole::queue), "sleeper"}).is_nil(),
        "node ", i);
    CHECK(c[i].pttl(derived_key("mixed", KeyRole::queue)) > 10000);
    CHECK(c[i].pttl(derived_key("mixed", KeyRole::heartbeats)) > 10000);
  }
}

TEST_CASE(
    "fair lock: a waiter whose heartbeat lapsed (its process stalled) takes a new ticket "
    "instead of cutting in with its old one") {
  RedisCluster c(3);
  Client holder(options_for(c));
  auto h = holder.try_acquire({"lapse"}, fair_opts(10s, 1s));
  REQUIRE_MESSAGE(h, h.message);

  // W1 waits on an engine whose loop this thread runs: when it stops running it, W1 stalls.
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    Engine engine(&loop, options_for(c));
    auto o1 = fair_opts(10s, 20s);
    o1.heartbeat_ttl = 300ms;
    std::optional<AcquireResult> w1;
    engine.acquire({"lapse"}, o1, [&](AcquireResult r) { w1 = std::move(r); });
    auto queued = [&] {
      for (std::size_t i = 0; i < c.size(); ++i) {
        if (c[i].command({"ZCARD", derived_key("lapse", KeyRole::queue)}).integer != 1)
          return false;
      }
      return true;
    };
    const auto until = Clock::now() + 5s;
    while (!queued() && Clock::now() < until)
      uv_run(&loop, UV_RUN_NOWAIT), std::this_thread::sleep_for(5ms);
    REQUIRE(queued());
    for (int i = 0; i < 10; ++i) uv_run(&loop, UV_RUN_NOWAIT);

    // W1 stalls for well over its heartbeat ttl; W2 queues meanwhile and is served after the
    // holder.
    std::this_thread::sleep_for(800ms);
    auto w2f = std::async(std::launch::async, [&] {
      Client w2(options_for(c));
      auto r = w2.try_acquire({"lapse"}, fair_opts(10s, 5s));
      if (r) (void)w2.try_release(r.lock);
      return r;
    });
    std::this_thread::sleep_for(200ms);
    CHECK(holder.try_release(h.lock));
    auto w2 = w2f.get();
    REQUIRE_MESSAGE(w2, w2.message);
    REQUIRE(w2.lock.ticket());

    // W1 comes back: its old ticket is below W2's; it must queue again with a new one.
    while (!w1) uv_run(&loop, UV_RUN_ONCE);
    REQUIRE_MESSAGE(*w1, w1->message);
    REQUIRE(w1->lock.ticket());
    CHECK(*w1->lock.ticket() > *w2.lock.ticket());
    engine.release(w1->lock, [&](ReleaseResult) { engine.close({}); });
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("fair lock: a ticket round without a quorum is retried while the wait allows") {
  RedisCluster c(3);
  c[0].kill();
  c[1].kill();
  Options o = options_for(c);
  o.reconnect_min = 20ms;
  o.reconnect_max = 100ms;
  Client client(o);  // never knew the killed nodes' run_ids: no restart quarantine
  AcquireResult r;
  std::thread waiter([&] { r = client.try_acquire({"ticket-retry"}, fair_opts(5s, 4s)); });
  std::this_thread::sleep_for(400ms);  // the first ticket rounds find no quorum
  c[0].start();
  c[1].start();
  waiter.join();
  REQUIRE_MESSAGE(r, r.message);  // before: "no quorum for a queue ticket" at once
  CHECK(r.lock.ticket());
  CHECK(client.try_release(r.lock));
}

TEST_CASE("fair lock: the ticket's write-back round runs only where the counters disagree") {
  // Two of five nodes down: every round waits for all three others, so which replies the ticket
  // round was decided on is known.
  RedisCluster c(5);
  c[3].kill();
  c[4].kill();
  const std::string ticket = derived_key("wb-fair", KeyRole::ticket);
  // The write-back script reads the counter with GET; nothing else in an uncontended fair
  // acquisition does.
  auto gets = [&] { return calls_of(c[0], "get") + calls_of(c[1], "get") + calls_of(c[2], "get"); };
  Client client(options_for(c));
  SUBCASE("the three counters agree: no write-back, and no queue to leave where it was granted") {
    // (Counters that do not exist start from each node's clock, which two nodes read in different
    // seconds now and then: set here, they agree.)
    for (std::size_t i = 0; i < 3; ++i) c[i].set(ticket, "40");
    const long long before = gets();
    std::vector<long long> scripts_before;
    for (std::size_t i = 0; i < 3; ++i) scripts_before.push_back(calls_of(c[i], "evalsha"));
    auto r = client.try_acquire({"wb-fair"}, fair_opts(5s, 2s));
    REQUIRE_MESSAGE(r, r.message);
    std::this_thread::sleep_for(100ms);  // a straggling round would have arrived
    CHECK(gets() == before);
    // One script on each node: the ticket round, which granted the lock too (the key free, the
    // waiter first in line there; before 2026-11-27 an attempt followed, and 4 before that); no
    // write-back, no attempt, no leaving the queue.
    for (std::size_t i = 0; i < 3; ++i) CHECK(calls_of(c[i], "evalsha") - scripts_before[i] == 1);
    CHECK(r.attempts == 0);
    for (std::size_t i = 0; i < 3; ++i)
      CHECK(r.lock.nodes()[i].detail == "granted with its ticket");
    CHECK(*r.lock.ticket() == 41);
    for (std::size_t i = 0; i < 3; ++i) CHECK(c[i].get(ticket) == "41");
  }
  SUBCASE("one node ahead: the others are raised to the ticket before the attempt") {
    // (A low counter is 1, not 0: a counter never holds 0, and ticket_take takes INCR's answer
    // 1 for a counter that did not exist and starts it from the clock.)
    c[0].set(ticket, "100");
    c[1].set(ticket, "1");
    c[2].set(ticket, "1");
    auto r = client.try_acquire({"wb-fair"}, fair_opts(5s, 2s));
    REQUIRE_MESSAGE(r, r.message);
    CHECK(*r.lock.ticket() == 101);
    // The ticket round found the key free everywhere, but nodes 1 and 2 granted it at their own
    // count, 2, not the ticket: not counted (take_ticket_grant); the attempt took those keys.
    CHECK(r.attempts == 1);
    CHECK(c[1].get(ticket) == "101");  // raised from 2 by the write-back, a quorum of 3 of 5
    CHECK(c[2].get(ticket) == "101");
  }
}

TEST_CASE("fair lock: a waiter's place in every node's queue is its agreed ticket") {
  // Nodes that counted concurrent ticket takers in different orders place a waiter by their own
  // count: until it is re-placed, a release there names another head than the others do, and no
  // waiter hears its name from a quorum. The ticket's write-back places it, also on the nodes
  // left out of a quorum that agreed (without a round).
  RedisCluster c(3);
  const std::string ticket = derived_key("place", KeyRole::ticket);
  const std::string queue = derived_key("place", KeyRole::queue);
  Client holder(options_for(c));
  Options o = options_for(c);
  o.retry_delay =
      20s;  // the waiter's own attempts (which also place it) come long after the checks
  o.retry_jitter = Millis{0};
  Client waiter(o);
  AcquireOptions fair = fair_opts(5s, 4s);
  fair.heartbeat_ttl = 120s;
  // The waiter's client listens already (a first wait's subscription would make it try once).
  auto warm = holder.try_acquire({"place-warm"}, ttl_opts(5s));
  REQUIRE(warm);
  CHECK(waiter.try_acquire({"place-warm"}, fair_opts(5s, 300ms)).error == Errc::contended);
  auto held = holder.try_acquire({"place"}, ttl_opts(10s));
  REQUIRE(held);
  // The waiter's score where every node has it at the same one; "" while they differ.
  auto place = [&]() -> std::string {
    std::string score;
    for (std::size_t i = 0; i < c.size(); ++i) {
      auto all = c[i].command({"ZRANGE", queue, "0", "-1", "WITHSCORES"});
      if (all.elements.size() != 2) return "";
      if (i > 0 && all.elements[1].str != score) return "";
      score = all.elements[1].str;
    }
    return score;
  };
  SUBCASE("two of three ahead: all at their count, with or without a round") {
    // Decided on nodes 1 and 2 (11 on a quorum: node 0 is told without a round), or on node 0
    // and one of them (a round): either way the ticket is 11.
    c[0].set(ticket, "1");  // (a counter never holds 0: see the write-back test)
    c[1].set(ticket, "10");
    c[2].set(ticket, "10");
    auto w = std::async(std::launch::async, [&] { return waiter.try_acquire({"place"}, fair); });
    CHECK(eventually([&] { return place() == "11"; }, 2000ms));
    CHECK(c[0].get(ticket) == "11");
    CHECK(w.get().error == Errc::contended);
  }
  SUBCASE("one node ahead: the same place everywhere, whichever replies decided") {
    // Decided with node 0's reply: ticket 101 (a round raises the others); without it: 2 on a
    // quorum, and node 0 is told 2. Without the placing, node 0 keeps 101 and the others 2.
    c[0].set(ticket, "100");
    c[1].set(ticket, "1");
    c[2].set(ticket, "1");
    auto w = std::async(std::launch::async, [&] { return waiter.try_acquire({"place"}, fair); });
    CHECK(eventually([&] { return place() == "101" || place() == "2"; }, 2000ms));
    CHECK(w.get().error == Errc::contended);
  }
  (void)holder.try_release(held.lock);
}

TEST_CASE("fair lock: survives 2 of 5 nodes killed, still in order") {
  RedisCluster c(5);
  c[1].kill();
  c[3].kill();
  int overlaps = 0, failures = 0;
  auto order = fair_run(c, "fifo-degraded", 4, 3, overlaps, failures);
  CHECK(overlaps == 0);
  CHECK(failures == 0);
  REQUIRE(order.size() == 12);
  for (std::size_t i = 1; i < order.size(); ++i) CHECK(order[i] >= order[i - 1]);
}

TEST_CASE("fair lock: counters lost on every node start above the tickets given before") {
  // Nodes restarted empty one after another (each with a delay, the restart guard's rule) can
  // leave no node that remembers the counter while a waiter still holds an old ticket (it puts
  // itself back in each queue as it polls). Before counters started from the clock, the next
  // ticket was 1: the newcomer went ahead of the waiter (chaos --mix fair-node-kill-delayed
  // --seconds 30 --seed 8: "ticket 451 after a holder with ticket 811"). The loss is made here by
  // deleting the counters, which is what such a restart does to them.
  RedisCluster c(3);
  const std::string ticket = derived_key("lost-count", KeyRole::ticket);
  const std::string queue = derived_key("lost-count", KeyRole::queue);
  for (std::size_t i = 0; i < c.size(); ++i) c[i].set(ticket, "500");
  Client holder(options_for(c));
  auto held = holder.try_acquire({"lost-count"}, fair_opts(10s, 2s));
  REQUIRE_MESSAGE(held, held.message);
  std::mutex mu;
  std::vector<std::uint64_t> served;  // tickets, in the order the waiters got the lock
  auto wait_for_it = [&] {
    Client w(options_for(c));
    auto r = w.try_acquire({"lost-count"}, fair_opts(10s, 10s));
    if (r) {
      {
        std::lock_guard<std::mutex> g(mu);
        served.push_back(*r.lock.ticket());
      }
      std::this_thread::sleep_for(100ms);
      (void)w.try_release(r.lock);
    }
    return r;
  };
  auto queued = [&](long long n) {
    return eventually([&] {
      for (std::size_t i = 0; i < c.size(); ++i)
        if (c[i].command({"ZCARD", queue}).integer != n) return false;
      return true;
    });
  };
  auto first = std::async(std::launch::async, wait_for_it);
  REQUIRE(queued(1));
  for (std::size_t i = 0; i < c.size(); ++i) c[i].del(ticket);
  auto second = std::async(std::launch::async, wait_for_it);
  REQUIRE(queued(2));
  CHECK(holder.try_release(held.lock));
  auto r1 = first.get();
  auto r2 = second.get();
  REQUIRE_MESSAGE(r1, r1.message);
  REQUIRE_MESSAGE(r2, r2.message);
  CHECK(*r1.lock.ticket() == 502);
  CHECK(*r2.lock.ticket() > 502);
  REQUIRE(served.size() == 2);
  CHECK(served[0] == 502);  // the waiter that came first, first
}

TEST_CASE("fair lock: a waiter that gives up leaves the queue") {
  RedisCluster c(3);
  Client client(options_for(c));
  auto holder = client.try_acquire({"leave"}, ttl_opts(5s));
  REQUIRE(holder);
  auto w = client.try_acquire({"leave"}, fair_opts(5s, 200ms));
  CHECK(w.error == Errc::contended);
  CHECK(eventually([&] {
    return c.count_with_key(derived_key("leave", KeyRole::queue)) == 0 ||
           c[0].command({"ZCARD", derived_key("leave", KeyRole::queue)}).integer == 0;
  }));
}

TEST_CASE("read-write: readers overlap, writers exclude readers and each other") {
  RedisCluster c(5);
  Client client(options_for(c));
  auto r1 = client.try_acquire({"doc"}, mode_opts(LockMode::read, 5s));
  auto r2 = client.try_acquire({"doc"}, mode_opts(LockMode::read, 5s));
  REQUIRE(r1);
  REQUIRE(r2);
  CHECK(client.try_acquire({"doc"}, mode_opts(LockMode::write, 5s)).error == Errc::contended);
  // A writer that gave up took its waiting mark back: readers are not held off by it.
  CHECK(eventually([&] { return !c[0].exists(derived_key("doc", KeyRole::writer_waiting)); }));
  CHECK(client.try_release(r1.lock).deleted >= 3);
  CHECK(client.try_release(r2.lock).deleted >= 3);
  auto w = client.try_acquire({"doc"}, mode_opts(LockMode::write, 5s));
  REQUIRE_MESSAGE(w, w.message);
  CHECK(client.try_acquire({"doc"}, mode_opts(LockMode::read, 5s)).error == Errc::contended);
  CHECK(client.try_acquire({"doc"}, mode_opts(LockMode::write, 5s)).error == Errc::contended);
  CHECK(client.try_acquire({"doc"}, ttl_opts(5s)).error == Errc::contended);  // plain lockers too
  // A read lock extends and releases by its own token.
  REQUIRE(client.try_release(w.lock));
  auto r3 = client.try_acquire({"doc"}, mode_opts(LockMode::read, 1s));
  REQUIRE(r3);
  auto e = client.try_extend(r3.lock, 10s);
  REQUIRE_MESSAGE(e, e.message);
  CHECK(c[0].command({"ZSCORE", derived_key("doc", KeyRole::readers), r3.lock.token()}).type !=
        redlock::test::Reply::Type::nil);
  CHECK(client.try_release(e.lock).deleted >= 3);
}

TEST_CASE(
    "read-write: a writer waiting behind a writer keeps new readers out when the key is freed") {
  RedisCluster c(3);
  Client client(options_for(c));
  auto w1 = client.try_acquire({"ww"}, mode_opts(LockMode::write, 10s));
  REQUIRE(w1);
  Options slow = options_for(c);
  slow.retry_delay = 300ms;  // polls slowly: the readers below come first
  slow.retry_jitter = 0ms;
  Client second(slow);
  AcquireResult w2;
  std::thread waiter([&] { w2 = second.try_acquire({"ww"}, mode_opts(LockMode::write, 5s, 3s)); });
  // Its first attempt found the key held and left its mark (waited for: a sleep lost to a loaded
  // machine is a reader let in, the very failure this test looks for).
  REQUIRE(eventually([&] {
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (!c[i].exists(derived_key("ww", KeyRole::writer_waiting))) return false;
    }
    return true;
  }));
  REQUIRE(client.try_release(w1.lock));
  // Before: the waiting writer had left no mark, so this reader got in ahead of it.
  auto reader = client.try_acquire({"ww"}, mode_opts(LockMode::read, 5s));
  CHECK(reader.error == Errc::contended);
  waiter.join();
  REQUIRE_MESSAGE(w2, w2.message);
  CHECK(second.try_release(w2.lock));
  if (reader) (void)client.try_release(reader.lock);
}

TEST_CASE("read-write: releasing a read lock that expired reports not_held, as a plain lock does") {
  RedisCluster c(3);
  Client client(options_for(c));
  auto brief = client.try_acquire({"rexp"}, mode_opts(LockMode::read, 200ms));
  auto longer =
      client.try_acquire({"rexp"}, mode_opts(LockMode::read, 10s));  // keeps the zset alive
  REQUIRE(brief);
  REQUIRE(longer);
  std::this_thread::sleep_for(300ms);
  auto rel = client.try_release(brief.lock);
  CHECK(rel.error == Errc::not_held);  // before: its expired entry counted as deleted
  CHECK(rel.deleted == 0);
  CHECK(c[0].command({"ZSCORE", derived_key("rexp", KeyRole::readers), brief.lock.token()})
            .is_nil());  // still cleaned up
  auto live = client.try_release(longer.lock);
  CHECK(live.deleted == 3);
}

TEST_CASE("read-write: a crashed reader cannot block writers beyond its ttl") {
  RedisCluster c(3);
  Client client(options_for(c));
  auto r = client.try_acquire({"crash"}, mode_opts(LockMode::read, 400ms));
  REQUIRE(r);  // never released: the reader "crashed"
  auto start = Clock::now();
  Options o = options_for(c);
  o.retry_delay = 50ms;
  o.retry_jitter = 10ms;
  Client writer(o);
  auto w = writer.try_acquire({"crash"}, mode_opts(LockMode::write, 5s, 3s));
  REQUIRE_MESSAGE(w, w.message);
  CHECK(ms_since(start) >= 300);
  CHECK(ms_since(start) < 1500);
}

TEST_CASE(
    "read-write: no writer starvation under a continuous stream of readers, with nodes killed") {
  RedisCluster c(5);
  c[4].kill();
  c[2].kill();
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0}, writer_inside{0}, violations{0};
  std::atomic<int> readers_inside{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 4; ++i) {
    readers.emplace_back([&] {
      Options o = options_for(c);
      o.retry_delay = 10ms;
      o.retry_jitter = 5ms;
      Client client(o);
      while (!stop) {
        auto r = client.try_acquire({"hot"}, mode_opts(LockMode::read, 2s));
        if (!r) continue;
        ++readers_inside;
        if (writer_inside) ++violations;
        ++reads;
        std::this_thread::sleep_for(30ms);
        --readers_inside;
        (void)client.try_release(r.lock);
      }
    });
  }
  // The readers overlap continuously by now (counted, not slept for: under --stress over TLS
  // 300 ms once saw fewer than ten reads).
  REQUIRE(eventually([&] { return reads >= 10; }));
  Options o = options_for(c);
  o.retry_delay = 20ms;
  o.retry_jitter = 10ms;
  Client writer(o);
  auto start = Clock::now();
  auto w = writer.try_acquire({"hot"}, mode_opts(LockMode::write, 2s, 5s));
  auto took = ms_since(start);
  if (w) {
    writer_inside = 1;
    if (readers_inside) ++violations;
    std::this_thread::sleep_for(50ms);
    writer_inside = 0;
    (void)writer.try_release(w.lock);
  }
  stop = true;
  for (auto& t : readers) t.join();
  // Not starved: the writer got in within its wait (5 s) while the readers kept coming.
  REQUIRE_MESSAGE(w, w.message << " (after " << took << " ms)");
  CHECK(violations == 0);
}

TEST_CASE("status shows readers, a waiting writer, the fair queue and the counters") {
  RedisCluster c(3);
  Client client(options_for(c));
  AcquireOptions read;
  read.mode = LockMode::read;
  read.ttl = 10s;
  auto r1 = client.try_acquire({"st"}, read);
  auto r2 = client.try_acquire({"st"}, read);
  REQUIRE(r1);
  REQUIRE(r2);
  auto st = client.status("st");
  REQUIRE(st.nodes.size() == 3);
  for (const auto& n : st.nodes) {
    CHECK(n.up);
    CHECK(n.reader_count == 2);
    REQUIRE(n.readers.size() == 2);
    CHECK(n.readers[0].remaining > 5s);
    CHECK((n.readers[0].token == r1.lock.token() || n.readers[0].token == r2.lock.token()));
    CHECK_FALSE(n.value);  // no writer holds the lock key
  }
  // A writer that has to wait marks itself; status shows its id.
  AcquireOptions write;
  write.mode = LockMode::write;
  write.ttl = 10s;
  write.retry_count = 0;
  auto w = client.try_acquire({"st"}, write);
  CHECK(w.error == Errc::contended);
  // (the mark is taken back when the writer gives up; look before that happens is racy, so
  // place one the way a waiting writer does)
  for (std::size_t i = 0; i < c.size(); ++i) {
    (void)c[i].command(
        {"SET", derived_key("st", KeyRole::writer_waiting), "writer-1", "PX", "10000"});
  }
  st = client.status("st");
  for (const auto& n : st.nodes) CHECK(n.writer_waiting == std::optional<std::string>("writer-1"));

  // A fair queue: one holder, two waiters.
  AcquireOptions fair;
  fair.fair = true;
  fair.ttl = 10s;
  fair.wait = 5s;
  auto holder = client.try_acquire({"fq-st"}, fair);
  REQUIRE(holder);
  std::stop_source stop;
  fair.stop = stop.get_token();
  auto waiter = std::async(std::launch::async, [&] { return client.try_acquire({"fq-st"}, fair); });
  StatusResult fs;
  REQUIRE(eventually(
      [&] {
        fs = client.status("fq-st");
        return fs.nodes[0].queue_length == 1;
      },
      3s));
  for (const auto& n : fs.nodes) {
    CHECK(n.value == holder.lock.token());
    REQUIRE(n.queue.size() == 1);
    CHECK(n.queue[0].ticket > *holder.lock.ticket());
    CHECK(n.ticket >= n.queue[0].ticket);
  }
  stop.request_stop();
  CHECK(waiter.get().error == Errc::cancelled);
  // Fenced: the counter is shown.
  AcquireOptions fenced;
  fenced.fence = true;
  fenced.ttl = 10s;
  auto f = client.try_acquire({"st-f"}, fenced);
  REQUIRE(f);
  auto ss = client.status("st-f");
  int with_fence = 0;
  for (const auto& n : ss.nodes) with_fence += n.fence && *n.fence >= *f.lock.fence();
  CHECK(with_fence >= 2);
}

TEST_CASE(
    "fair lock: an attempt granted after it timed out keeps the waiter's place in the queue") {
  // Two of three nodes stopped: the first waiter's attempt is granted by the third at once and by
  // the stopped two when they come back, after it timed out; its rollback takes the key back on
  // all three. A granting node drops the waiter from its queue, so the rollback must put it back,
  // or the second waiter is first on every node and overtakes it.
  RedisCluster c(3);
  Options o = options_for(c);
  o.retry_delay = 1500ms;  // a fair waiter with wake-ups polls at the retry delay
  o.retry_jitter = 0ms;
  AcquireOptions fair = fair_opts(10s, 30s);
  fair.heartbeat_ttl = 20s;  // (its polls are bounded by a quarter of it)
  Client holder(options_for(c)), first(o), second(o);
  auto held = holder.try_acquire({"late-grant"}, ttl_opts(30s));
  REQUIRE_MESSAGE(held, held.message);
  const std::string queue = derived_key("late-grant", KeyRole::queue);
  auto queued = [&](long long n) {
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (c[i].command({"ZCARD", queue}).integer != n) return false;
    }
    return true;
  };
  auto w1 = std::async(std::launch::async, [&] { return first.try_acquire({"late-grant"}, fair); });
  REQUIRE(eventually([&] { return queued(1); }, 5000ms));
  auto w2 =
      std::async(std::launch::async, [&] { return second.try_acquire({"late-grant"}, fair); });
  REQUIRE(eventually([&] { return queued(2); }, 5000ms));
  c[1].stop();
  c[2].stop();
  c[0].del("late-grant");  // free on the running node only: the release reached one node
  // Both waiters poll during this (1.5 s): the first is granted on node 0, then times out.
  std::this_thread::sleep_for(2500ms);
  CHECK_MESSAGE(c[0].command({"ZCARD", queue}).integer == 2,
                "node 0 lost a waiter from its queue after a failed attempt");
  c[1].cont();
  c[2].cont();
  c[1].del("late-grant");
  c[2].del("late-grant");
  auto got1 = w1.get();
  REQUIRE_MESSAGE(got1, got1.message);
  CHECK(w2.wait_for(0s) != std::future_status::ready);  // the second waits behind it
  REQUIRE(first.try_release(got1.lock));
  auto got2 = w2.get();
  REQUIRE_MESSAGE(got2, got2.message);
  CHECK(*got2.lock.ticket() > *got1.lock.ticket());
  (void)second.try_release(got2.lock);
}

TEST_CASE("fair lock: a node that answers after the decision is told only what it missed") {
  // Node 3 down and node 4 stopped while the waiter takes its ticket and the lock: both rounds
  // are decided on nodes 0-2, and node 4 answers both once it runs again (well within the node
  // deadline). It is told the ticket if it counted another one, and that the waiter left the
  // queue if it did not grant; nothing where it agreed and granted.
  RedisCluster c(5);
  c[3].kill();
  Options o = options_for(c);
  o.node_timeout = 10s;  // node 4's answers come late, not never
  Client client(o);
  auto warm = client.try_acquire({"late-node-warm"}, ttl_opts(5s));  // connected, scripts loaded
  REQUIRE_MESSAGE(warm, warm.message);
  REQUIRE(client.try_release(warm.lock));
  const std::string ticket = derived_key("late-node", KeyRole::ticket);
  const std::string queue = derived_key("late-node", KeyRole::queue);
  SUBCASE("it agreed and granted: nothing more is sent to it") {
    for (std::size_t i : {0U, 1U, 2U, 4U}) c[i].set(ticket, "20");  // (not each node's clock)
    const long long before = calls_of(c[4], "evalsha");
    c[4].stop();
    auto r = client.try_acquire({"late-node"}, fair_opts(5s, 2s));
    c[4].cont();
    REQUIRE_MESSAGE(r, r.message);
    CHECK(eventually([&] { return c[4].get("late-node") == r.lock.token(); }, 5000ms));
    std::this_thread::sleep_for(300ms);  // a word sent on its answers would have arrived
    // The ticket and the attempt; before, a write-back and a leave were sent to it at once.
    CHECK(calls_of(c[4], "evalsha") - before == 2);
    CHECK(c[4].command({"ZCARD", queue}).integer == 0);
    (void)client.try_release(r.lock);
  }
  SUBCASE("it counted another ticket and did not grant: told the ticket, and that we left") {
    for (std::size_t i = 0; i < 3; ++i) c[i].set(ticket, "10");
    c[4].set(ticket, "3");
    c[4].set("late-node", "held elsewhere");
    c[4].stop();
    auto r = client.try_acquire({"late-node"}, fair_opts(5s, 2s));
    c[4].cont();
    REQUIRE_MESSAGE(r, r.message);
    CHECK(*r.lock.ticket() == 11);
    CHECK(eventually(
        [&] {
          return c[4].get(ticket) == "11" && c[4].command({"ZCARD", queue}).integer == 0;
        },
        5000ms));
    CHECK(c[4].get("late-node") == "held elsewhere");
    (void)client.try_release(r.lock);
  }
}

TEST_CASE("fair lock: a client closed right after winning still tells a late node its words") {
  // As above, node 4 stopped while the waiter takes its ticket and the lock, and counting another
  // ticket; but the client closes as soon as it has the lock (the CLI's `acquire --fair` exits),
  // before node 4 can answer. Its words cannot wait for the answers: without them node 4 keeps
  // the waiter queued (with wake-ups, registered too: a release there would hand it the key, left
  // until its ttl; a flake of tests/cli/test_acl.py's fair test found it).
  RedisCluster c(5);
  c[3].kill();
  Options o = options_for(c);
  o.node_timeout = 10s;  // node 4's answers come late, not never
  // Without wake-ups the ticket round grants nothing: the lock, free on nodes 0-2, is won by the
  // attempt that follows it, whose answers there all come before node 4's. (A key left to expire
  // meanwhile could expire in the middle of an attempt: two grants and a refusal then wait for
  // node 4's answer, the whole node deadline, which is what made this test fail once in CI.)
  o.wake_ups = false;
  const std::string ticket = derived_key("late-close", KeyRole::ticket);
  const std::string queue = derived_key("late-close", KeyRole::queue);
  for (std::size_t i = 0; i < 3; ++i) c[i].set(ticket, "10");
  c[4].set(ticket, "3");
  c[4].set("late-close", "held elsewhere");
  auto client = std::make_unique<Client>(o);
  auto warm = client->try_acquire({"late-close-warm"}, ttl_opts(5s));  // connected, scripts loaded
  REQUIRE_MESSAGE(warm, warm.message);
  REQUIRE(client->try_release(warm.lock));
  c[4].stop();
  auto r = client->try_acquire({"late-close"}, fair_opts(5s, 2s));
  REQUIRE_MESSAGE(r, r.message);
  CHECK(*r.lock.ticket() == 11);
  CHECK(r.attempts == 1);  // won by the attempt after the ticket round
  // The close waits for node 4's answers (its connections drain): node 4 runs again meanwhile.
  auto closed = std::async(std::launch::async, [&] { client.reset(); });
  std::this_thread::sleep_for(300ms);
  c[4].cont();
  closed.get();
  CHECK(c[4].command({"ZCARD", queue}).integer == 0);
  CHECK(c[4].get(ticket) == "11");
  CHECK(c[4].get("late-close") == "held elsewhere");
  Client other(options_for(c));
  (void)other.try_release(r.lock);
}

TEST_CASE("waiters whose client closes while they wait take back what marks them as waiting") {
  // As a waiter that gives up does: a writer its mark that keeps new readers out (until the
  // mark's ttl, 10 s and more, had it stayed), a fair waiter its place in the queue (until its
  // heartbeat lapsed).
  RedisCluster c(3);
  Client holder(options_for(c));
  auto read = holder.try_acquire({"close-wait"}, mode_opts(LockMode::read, 10s));
  REQUIRE_MESSAGE(read, read.message);
  auto held = holder.try_acquire({"close-fair"}, ttl_opts(10s));
  REQUIRE_MESSAGE(held, held.message);
  const std::string mark = derived_key("close-wait", KeyRole::writer_waiting);
  const std::string queue = derived_key("close-fair", KeyRole::queue);
  auto on_all = [&](auto pred) {
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (!pred(c[i])) return false;
    }
    return true;
  };
  auto waiter = std::make_unique<Client>(options_for(c));
  std::promise<AcquireResult> wrote, queued;
  waiter->acquire_async({"close-wait"}, mode_opts(LockMode::write, 5s, 20s),
                        [&](AcquireResult r) { wrote.set_value(std::move(r)); });
  waiter->acquire_async({"close-fair"}, fair_opts(5s, 20s),
                        [&](AcquireResult r) { queued.set_value(std::move(r)); });
  auto marked = [&](auto& n) { return n.exists(mark); };
  auto in_queue = [&](auto& n) { return n.command({"ZCARD", queue}).integer; };
  REQUIRE(eventually([&] { return on_all(marked); }, 5000ms));
  REQUIRE(eventually([&] { return on_all([&](auto& n) { return in_queue(n) == 1; }); }, 5000ms));
  waiter.reset();
  CHECK(wrote.get_future().get().error == Errc::shutdown);
  CHECK(queued.get_future().get().error == Errc::shutdown);
  CHECK(on_all([&](auto& n) { return !marked(n); }));
  CHECK(on_all([&](auto& n) { return in_queue(n) == 0; }));
  // The writer's mark gone, a new reader is let in at once.
  auto second = holder.try_acquire({"close-wait"}, mode_opts(LockMode::read, 10s));
  CHECK_MESSAGE(second, second.message);
  (void)holder.try_release(read.lock);
  if (second) (void)holder.try_release(second.lock);
  (void)holder.try_release(held.lock);
}
