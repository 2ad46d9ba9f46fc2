// The thread-safe Client from many threads, the async API, and the Engine on a caller's loop.
#include <uv.h>

#include <atomic>
#include <future>
#include <mutex>
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

// A blocking call may run the client's loop on its own thread while the loop is idle
// (client_impl.hpp); the user's asynchronous callbacks must still run on the I/O thread only,
// and a borrower waiting long must hand the loop back when an asynchronous call comes.
TEST_CASE("blocking calls beside asynchronous ones: callbacks stay on the I/O thread") {
  RedisCluster c(3);
  Options o = options_for(c);
  o.node_timeout = 500ms;  // sanitizer builds are slow; this is about threads
  Client client(o);
  std::promise<std::thread::id> first;
  client.acquire_async({"borrow-first"}, ttl_opts(5s), [&](AcquireResult r) {
    CHECK(r);
    first.set_value(std::this_thread::get_id());
  });
  const auto io_thread = first.get_future().get();
  REQUIRE(io_thread != std::this_thread::get_id());

  std::mutex mu;
  std::set<std::thread::id> callback_threads;
  auto note_thread = [&] {
    std::lock_guard<std::mutex> g(mu);
    callback_threads.insert(std::this_thread::get_id());
  };
  // One async acquire-then-release chain at a time, so between them nothing of the user's is in
  // flight and the blocking thread may borrow the loop; each start may meet a borrow under way.
  auto async_cycle = [&](const std::string& resource) {
    std::promise<bool> done;
    client.acquire_async({resource}, ttl_opts(5s), [&](AcquireResult r) {
      note_thread();
      if (!r) {
        done.set_value(false);
        return;
      }
      client.release_async(r.lock, [&](ReleaseResult rel) {
        note_thread();
        done.set_value(static_cast<bool>(rel));
      });
    });
    return done.get_future().get();
  };

  SUBCASE("short blocking calls on another thread") {
    std::atomic<int> failed{0};
    std::atomic<bool> stop{false};
    std::thread blocking([&] {
      while (!stop) {
        auto a = client.try_acquire({"borrow-a"}, ttl_opts(5s));
        if (!a || !client.try_release(a.lock)) ++failed;
      }
    });
    int ok = 0;
    for (int i = 0; i < 60; ++i) ok += async_cycle("borrow-b");
    stop = true;
    blocking.join();
    CHECK(ok == 60);
    CHECK(failed == 0);
    CHECK(c.count_with_key("borrow-a") == 0);
  }
  SUBCASE("a blocking call waiting on a held lock hands the loop back") {
    Client other(o);
    auto held = other.try_acquire({"borrow-held"}, ttl_opts(10s));
    REQUIRE(held);
    std::atomic<bool> waiting_done{false}, contended{false};
    std::thread blocking([&] {
      // retries every 200 ms for 3 s, on a loop that is idle between them: a borrower's wait
      auto r = client.try_acquire({"borrow-held"}, ttl_opts(5s, 3000ms));
      contended = r.error == Errc::contended;
      waiting_done = true;
    });
    std::this_thread::sleep_for(300ms);  // the blocking call is in its retries
    CHECK(async_cycle("borrow-c"));
    // The asynchronous call did not wait for the blocking one's 3 s to end.
    CHECK_FALSE(waiting_done.load());
    blocking.join();
    CHECK(contended.load());
    CHECK(other.try_release(held.lock));
  }
  std::lock_guard<std::mutex> g(mu);
  CHECK(callback_threads.size() == 1);
  CHECK(callback_threads.count(io_thread) == 1);
}

// A blocking call that runs the loop itself also runs the connect handshake; a warning said there
// is handed to the I/O thread (the logger runs there only), and must still be logged before the
// call returns, as when the I/O thread runs the call. A slow logger makes a late one certain.
TEST_CASE("a warning said while a blocking call connects is logged before the call returns") {
  redlock::test::ServerConfig cfg;
  cfg.extra_args = {"--maxmemory-policy", "allkeys-lru"};  // warned about at connect
  RedisServer s(cfg);
  Options o = options_for(s.address());
  // The logger runs on the loop's thread: while it sleeps, no reply is read, so the node's
  // deadline must outlast the sleep.
  o.node_timeout = 2000ms;
  struct Seen {
    std::mutex mu;
    bool warned = false;
    std::thread::id thread;
  };
  auto seen = std::make_shared<Seen>();
  o.logger = [seen](LogLevel level, std::string_view m) {
    if (level != LogLevel::warning || m.find("allkeys-lru") == std::string_view::npos) return;
    std::this_thread::sleep_for(300ms);
    std::lock_guard<std::mutex> g(seen->mu);
    seen->warned = true;
    seen->thread = std::this_thread::get_id();
  };
  Client client(o);
  auto r = client.try_acquire({"warned-first"}, ttl_opts(5s));
  REQUIRE(r);
  {
    std::lock_guard<std::mutex> g(seen->mu);
    CHECK(seen->warned);
    CHECK(seen->thread != std::this_thread::get_id());
  }
  CHECK(client.try_release(r.lock));
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

namespace {

// Connections the server has open now, the one asking included.
long long connections(const RedisServer& s) {
  const std::string info = s.command({"INFO", "clients"}).str;
  const std::string field = "connected_clients:";
  const auto at = info.find(field);
  return at == std::string::npos ? -1 : std::stoll(info.substr(at + field.size()));
}

// Each server of `c` back to `baseline` connections: every client made meanwhile closed its own.
bool back_to(const RedisCluster& c, const std::vector<long long>& baseline) {
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (connections(c[i]) != baseline[i]) return false;
  }
  return true;
}

std::vector<long long> connections(const RedisCluster& c) {
  std::vector<long long> out;
  for (std::size_t i = 0; i < c.size(); ++i) out.push_back(connections(c[i]));
  return out;
}

}  // namespace

// Issue 40 item 11: the last reference to the Client's state dropped on its own I/O thread made
// ~Impl join that very thread: std::system_error from a destructor, std::terminate. Here the
// callback owns the last Client; the I/O thread must hand its own shutdown over and go on.
TEST_CASE("a Client destroyed inside its own callback shuts down without terminating") {
  RedisCluster c(3);
  const auto baseline = connections(c);
  auto client = std::make_shared<Client>(options_for(c));
  std::promise<bool> in_callback;
  std::promise<void> main_let_go;
  auto let_go = main_let_go.get_future().share();
  client->acquire_async({"own-last"}, ttl_opts(5s),
                        [owner = client, &in_callback, let_go](AcquireResult r) mutable {
                          in_callback.set_value(bool(r));
                          let_go.wait();
                          owner.reset();  // the last reference, on the I/O thread
                        });
  CHECK(in_callback.get_future().get());
  client.reset();
  main_let_go.set_value();
  // The process is still here, and the client closed its connections: it did shut down.
  CHECK(eventually([&] { return back_to(c, baseline); }));
}

// The race of the issue: a Guard released inside its loss callback (on the I/O thread, holding a
// reference to the Client's state while it sends the release) while the Client is destroyed on
// the main thread. Whoever lets go last destroys it; when that is the I/O thread it used to
// terminate. The window is a few microseconds: each round moves the main thread's moment a little.
TEST_CASE("a Guard released in its loss callback while the Client is destroyed: no terminate") {
  RedisCluster c(3);
  const auto baseline = connections(c);
  Options o = options_for(c);
  constexpr int rounds = 40;
  int lost = 0;
  for (int i = 0; i < rounds; ++i) {
    CAPTURE(i);
    auto client = std::make_unique<Client>(o);
    // Shared with the callback, which may still run when this round's locals are gone.
    struct Shared {
      std::mutex mu;
      Guard guard;
      std::atomic<bool> in_loss{false};
    };
    auto st = std::make_shared<Shared>();
    LockOptions lo;
    lo.acquire = ttl_opts(10s);
    lo.hold.auto_extend = true;
    lo.hold.extend_every = 20ms;
    lo.hold.on_lost = [st](const LossInfo&) {
      Guard g;
      {
        std::lock_guard<std::mutex> lk(st->mu);
        g = std::move(st->guard);
      }
      st->in_loss = true;
      g.release();  // on the I/O thread: holds the Client's state while it sends the release
    };
    const std::string res = "guard-race-" + std::to_string(i);
    auto [g, r] = client->try_lock({res}, lo);
    REQUIRE_MESSAGE(r, r.message);
    {
      std::lock_guard<std::mutex> lk(st->mu);
      st->guard = std::move(g);
    }
    for (std::size_t n = 0; n < c.size(); ++n) c[n].del(res);  // the next extension finds it gone
    // Spinning, not sleeping: the window opens the moment the flag is set.
    const auto give_up = Clock::now() + 10s;
    while (!st->in_loss.load() && Clock::now() < give_up) {
    }
    if (!st->in_loss.load()) continue;
    ++lost;
    const auto until = Clock::now() + std::chrono::microseconds(i % 20);
    while (Clock::now() < until) {
    }
    client.reset();
  }
  CHECK(lost == rounds);
  CHECK(eventually([&] { return back_to(c, baseline); }));
}
