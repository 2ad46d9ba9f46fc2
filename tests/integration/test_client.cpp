// The thread-safe Client from many threads, the async API, and the Engine on a caller's loop.
#include <uv.h>

#include <atomic>
#include <future>
#include <set>
#include <thread>

#include "common.hpp"

using namespace itest;
using namespace redlock;

TEST_CASE("many threads share one Client: mutual exclusion per resource, no lost calls") {
  RedisCluster c(5);
  Options o = options_for(c);
  o.node_timeout = 500ms;  // sanitizer builds are slow; this is about correctness
  Client client(o);
  constexpr int threads = 8;
  constexpr int per_thread = 40;
  std::atomic<int> in_section[4] = {};
  std::atomic<int> violations{0}, acquired{0}, contended{0}, other{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        int k = (t + i) % 4;
        auto r = client.try_acquire({"shared-" + std::to_string(k)}, ttl_opts(5s));
        if (r) {
          ++acquired;
          if (in_section[k].fetch_add(1) != 0) ++violations;
          std::this_thread::yield();
          in_section[k].fetch_sub(1);
          auto rel = client.try_release(r.lock);
          if (!rel) ++other;
        } else if (r.error == Errc::contended) {
          ++contended;
        } else {
          ++other;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  CHECK(violations == 0);
  CHECK(other == 0);
  CHECK(acquired + contended == threads * per_thread);
  CHECK(acquired > 0);
  for (int k = 0; k < 4; ++k) CHECK(c.count_with_key("shared-" + std::to_string(k)) == 0);
}

TEST_CASE("async API: each callback runs exactly once, on the I/O thread") {
  RedisCluster c(3);
  Client client(options_for(c));
  std::atomic<int> calls{0};
  std::promise<std::thread::id> where;
  auto done = where.get_future();
  client.acquire_async({"async"}, ttl_opts(5s), [&](AcquireResult r) {
    ++calls;
    CHECK(r);
    where.set_value(std::this_thread::get_id());
  });
  auto io_thread = done.get();
  CHECK(io_thread != std::this_thread::get_id());
  std::this_thread::sleep_for(50ms);
  CHECK(calls == 1);
}

TEST_CASE("a blocking call from inside a callback fails instead of deadlocking") {
  RedisCluster c(3);
  Client client(options_for(c));
  std::promise<AcquireResult> p;
  client.acquire_async({"cb"}, ttl_opts(5s),
                       [&](AcquireResult) { p.set_value(client.try_acquire({"cb2"}, {})); });
  auto r = p.get_future().get();
  CHECK(r.error == Errc::invalid_argument);
}

TEST_CASE("destroying a Client with calls in flight fails them with shutdown") {
  RedisCluster c(3);
  std::atomic<int> shutdowns{0}, calls{0};
  {
    Options o = options_for(c);
    o.retry_delay = 1000ms;
    Client holder(o);
    REQUIRE(holder.try_acquire({"busy"}, ttl_opts(10s)));
    Client client(o);
    for (int i = 0; i < 10; ++i) {
      client.acquire_async({"busy"}, ttl_opts(5s, std::nullopt, 5), [&](AcquireResult r) {
        ++calls;
        if (r.error == Errc::shutdown) ++shutdowns;
      });
    }
    std::this_thread::sleep_for(100ms);
  }
  CHECK(calls == 10);
  CHECK(shutdowns == 10);
}

TEST_CASE("Engine on the caller's own loop") {
  RedisCluster c(3);
  uv_loop_t loop;
  uv_loop_init(&loop);
  int callbacks = 0;
  bool inside_call = false;
  {
    Engine engine(&loop, options_for(c));
    inside_call = true;
    engine.acquire({"own-loop"}, ttl_opts(5s), [&](AcquireResult r) {
      CHECK_FALSE(inside_call);  // never from inside the call that started it
      ++callbacks;
      REQUIRE(r);
      engine.release(r.lock, [&](ReleaseResult rel) {
        ++callbacks;
        CHECK(rel.deleted == 3);
        engine.close([&] { ++callbacks; });
      });
    });
    inside_call = false;
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(callbacks == 3);
  CHECK(uv_loop_close(&loop) == 0);
  CHECK(c.count_with_key("own-loop") == 0);
}

TEST_CASE("Engine destroyed with operations pending: callbacks run once with shutdown") {
  RedisCluster c(3);
  uv_loop_t loop;
  uv_loop_init(&loop);
  int shutdowns = 0;
  {
    Engine engine(&loop, options_for(c));
    for (int i = 0; i < 5; ++i) {
      engine.acquire({"pending"}, ttl_opts(5s),
                     [&](AcquireResult r) { shutdowns += r.error == Errc::shutdown; });
    }
  }  // destroyed before the loop ever ran
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(shutdowns == 5);
  CHECK(uv_loop_close(&loop) == 0);
}
