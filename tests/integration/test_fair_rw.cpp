// Fair (FIFO) locks and read-write locks over the quorum.
#include <atomic>
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
std::vector<std::uint64_t> fair_run(const RedisCluster& c, const std::string& res, int clients, int rounds,
                                    int& overlaps, int& failures) {
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
    CHECK_MESSAGE(order[i] >= order[i - 1], "grant ", i, ": ticket ", order[i], " after ", order[i - 1]);
  }
  // Nothing left queued.
  CHECK(eventually([&] { return c[0].command({"ZCARD", "fifo:queue"}).integer == 0; }));
}

TEST_CASE("fair lock: a dead waiter blocks the queue only until its heartbeat expires") {
  RedisCluster c(3);
  // A waiter with the lowest ticket that died: its heartbeat runs out in ~800 ms.
  for (std::size_t i = 0; i < c.size(); ++i) {
    auto t = c[i].command({"TIME"});
    long long now_ms = std::stoll(t.elements[0].str) * 1000 + std::stoll(t.elements[1].str) / 1000;
    (void)c[i].command({"ZADD", "q:queue", "0", "ghost"});
    (void)c[i].command({"ZADD", "q:queue:heartbeats", std::to_string(now_ms + 800), "ghost"});
  }
  Client client(options_for(c));
  auto start = Clock::now();
  auto r = client.try_acquire({"q"}, fair_opts(5s, 5s));
  auto took = ms_since(start);
  REQUIRE_MESSAGE(r, r.message);
  CHECK(took >= 600);   // it did wait for the ghost ...
  CHECK(took < 2000);   // ... but not much longer than its heartbeat
  CHECK(c[0].command({"ZSCORE", "q:queue", "ghost"}).is_nil());
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

TEST_CASE("fair lock: a waiter that gives up leaves the queue") {
  RedisCluster c(3);
  Client client(options_for(c));
  auto holder = client.try_acquire({"leave"}, ttl_opts(5s));
  REQUIRE(holder);
  auto w = client.try_acquire({"leave"}, fair_opts(5s, 200ms));
  CHECK(w.error == Errc::contended);
  CHECK(eventually([&] { return c.count_with_key("leave:queue") == 0 || c[0].command({"ZCARD", "leave:queue"}).integer == 0; }));
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
  CHECK(eventually([&] { return !c[0].exists("doc:writer_waiting"); }));
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
  CHECK(c[0].command({"ZSCORE", "doc:readers", r3.lock.token()}).type != redlock::test::Reply::Type::nil);
  CHECK(client.try_release(e.lock).deleted >= 3);
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

TEST_CASE("read-write: no writer starvation under a continuous stream of readers, with nodes killed") {
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
  std::this_thread::sleep_for(300ms);  // the readers overlap continuously by now
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
  REQUIRE_MESSAGE(w, w.message);
  CHECK(took < 3000);
  CHECK(violations == 0);
  CHECK(reads > 10);
}
