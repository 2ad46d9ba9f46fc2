// Cancellation: AcquireOptions::stop ends an acquisition with Errc::cancelled and leaves nothing of
// it on the nodes.
#include <uv.h>

#include <future>
#include <stop_token>
#include <thread>

#include "common.hpp"

using namespace itest;
using namespace redlock;
using redlock::test::FakeNode;

namespace {

AcquireOptions stoppable(Millis ttl, Millis wait, const std::stop_source& src) {
  AcquireOptions o = ttl_opts(ttl, wait);
  o.stop = src.get_token();
  return o;
}

}  // namespace

TEST_CASE(
    "cancel: a stop while waiting for a held lock ends the wait, the holder's key untouched") {
  RedisCluster c(5);
  Client client(options_for(c));
  auto holder = client.try_acquire({"busy"}, ttl_opts(20s));
  REQUIRE(holder);

  std::stop_source src;
  auto start = Clock::now();
  auto waiter = std::async(std::launch::async,
                           [&] { return client.try_acquire({"busy"}, stoppable(10s, 30s, src)); });
  std::this_thread::sleep_for(400ms);  // a few attempts have been refused meanwhile
  src.request_stop();
  auto r = waiter.get();
  CHECK(r.error == Errc::cancelled);
  CHECK(ms_since(start) < 15000);  // long before the 30 s wait would have ended
  CHECK(r.attempts >= 1);
  CHECK_MESSAGE(r.message.find("cancelled") != std::string::npos, r.message);
  for (std::size_t i = 0; i < c.size(); ++i) CHECK(c[i].get("busy") == holder.lock.token());
  CHECK(client.try_release(holder.lock).deleted == 5);
}

TEST_CASE("cancel: a stop during an attempt in flight deletes the SETs that already ran") {
  // Two real nodes grant at once; three silent ones keep the attempt undecided for node_timeout.
  RedisCluster real(2);
  FakeNode f1(FakeNode::silent()), f2(FakeNode::silent()), f3(FakeNode::silent());
  Options o =
      options_for(real.nodes_csv() + "," + f1.address() + "," + f2.address() + "," + f3.address());
  o.node_timeout = 5s;
  Client client(o);
  std::stop_source src;
  auto start = Clock::now();
  auto pending = std::async(std::launch::async, [&] {
    return client.try_acquire({"inflight"}, stoppable(30s, 0ms, src));
  });
  REQUIRE(eventually([&] { return real.count_with_key("inflight") == 2; }, 3s));  // the SETs ran
  src.request_stop();
  auto r = pending.get();
  CHECK(r.error == Errc::cancelled);
  CHECK(ms_since(start) < 4000);  // did not wait out the silent nodes' 5 s deadline
  // The servers ran the SETs, but the client may not have read both answers before the stop
  // reached it: each real node is ok or pending; the silent ones are pending.
  REQUIRE(r.nodes.size() == 5);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK_MESSAGE((r.nodes[i].state == NodeState::ok || r.nodes[i].state == NodeState::pending), i);
  }
  for (std::size_t i = 2; i < 5; ++i) CHECK(r.nodes[i].state == NodeState::pending);
  CHECK(eventually([&] { return real.count_with_key("inflight") == 0; }));
}

TEST_CASE(
    "cancel: a stop requested before the call sends nothing; a stop after success changes "
    "nothing") {
  RedisCluster c(3);
  Client client(options_for(c));
  std::stop_source early;
  early.request_stop();
  auto r = client.try_acquire({"early"}, stoppable(10s, 5s, early));
  CHECK(r.error == Errc::cancelled);
  CHECK(r.attempts == 0);
  CHECK(r.nodes.empty());
  CHECK(c.count_with_key("early") == 0);

  std::stop_source late;
  auto ok = client.try_acquire({"late"}, stoppable(10s, 0ms, late));
  REQUIRE(ok);
  late.request_stop();  // the outcome was decided: the lock stays the caller's to release
  // Decided at two of three: the third SET may still be on its way; then nothing takes any back.
  CHECK(eventually([&] { return c.count_with_key("late") == 3; }));
  std::this_thread::sleep_for(100ms);
  CHECK(c.count_with_key("late") == 3);
  CHECK(client.try_release(ok.lock).deleted == 3);
}

TEST_CASE("cancel: a fair waiter leaves the queue, a waiting writer takes back its mark") {
  RedisCluster c(3);
  Client client(options_for(c));
  auto holder = client.try_acquire({"fq"}, ttl_opts(20s));
  REQUIRE(holder);

  SUBCASE("fair") {
    std::stop_source src;
    AcquireOptions fo = stoppable(10s, 30s, src);
    fo.fair = true;
    auto waiter = std::async(std::launch::async, [&] { return client.try_acquire({"fq"}, fo); });
    REQUIRE(eventually(
        [&] {
          return c[0].command({"ZCARD", derived_key("fq", KeyRole::queue)}).integer == 1;
        },
        3s));
    src.request_stop();
    CHECK(waiter.get().error == Errc::cancelled);
    for (std::size_t i = 0; i < c.size(); ++i) {
      CHECK(eventually([&] {
        return c[i].command({"ZCARD", derived_key("fq", KeyRole::queue)}).integer == 0;
      }));
    }
  }
  SUBCASE("writer") {
    (void)client.try_release(holder.lock);
    auto reader = client.try_acquire({"fq"}, [] {
      AcquireOptions ro;
      ro.ttl = 20s;
      ro.mode = LockMode::read;
      return ro;
    }());
    REQUIRE(reader);
    std::stop_source src;
    AcquireOptions wo = stoppable(10s, 30s, src);
    wo.mode = LockMode::write;
    auto writer = std::async(std::launch::async, [&] { return client.try_acquire({"fq"}, wo); });
    REQUIRE(eventually(
        [&] { return c.count_with_key(derived_key("fq", KeyRole::writer_waiting)) >= 2; }, 3s));
    src.request_stop();
    CHECK(writer.get().error == Errc::cancelled);
    CHECK(eventually(
        [&] { return c.count_with_key(derived_key("fq", KeyRole::writer_waiting)) == 0; }));
    CHECK(c[0].command({"ZCARD", derived_key("fq", KeyRole::readers)}).integer ==
          1);  // the reader is untouched
  }
}

TEST_CASE("cancel: on the caller's own loop, a stop requested from a callback on that loop") {
  RedisCluster c(3);
  uv_loop_t loop;
  uv_loop_init(&loop);
  std::stop_source src;
  std::optional<AcquireResult> held, waited;
  uv_timer_t timer;
  uv_timer_init(&loop, &timer);
  timer.data = &src;
  {
    Engine engine(&loop, options_for(c));
    engine.acquire({"own"}, ttl_opts(20s), [&](AcquireResult r) {
      held = std::move(r);
      REQUIRE(*held);
      engine.acquire({"own"}, stoppable(10s, 30s, src), [&](AcquireResult w) {
        waited = std::move(w);
        engine.release(held->lock, [&](ReleaseResult) { engine.close(); });
      });
      uv_timer_start(
          &timer, [](uv_timer_t* t) { static_cast<std::stop_source*>(t->data)->request_stop(); },
          300, 0);
    });
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&timer), nullptr);
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(&loop) == 0);
  REQUIRE(waited);
  CHECK(waited->error == Errc::cancelled);
  CHECK(c.count_with_key("own") == 0);
}
