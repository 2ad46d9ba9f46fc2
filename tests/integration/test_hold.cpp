// Holding a lock: watchdog, loss notification, RAII guard, reentrancy, restart guard.
#include <uv.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>

#include "common.hpp"

using namespace itest;
using namespace redlock;

namespace {
LockOptions held(Millis ttl, bool auto_extend = true) {
  LockOptions o;
  o.acquire.ttl = ttl;
  o.hold.auto_extend = auto_extend;
  return o;
}
}  // namespace

// Leases in these watchdog tests are short, but not so short that one extension round slowed by
// a loaded machine (scripts/test.sh --stress, over TLS) misses the renew deadline (2/3 of the ttl):
// a 300 ms read lock was lost so once.
TEST_CASE("the watchdog keeps a 600 ms lock for 3 s") {
  RedisCluster c(5);
  Client client(options_for(c));
  std::atomic<int> lost{0};
  auto o = held(600ms);
  o.hold.on_lost = [&](const LossInfo&) { ++lost; };
  Guard g = client.lock({"wd"}, o);
  std::string token = g.lock().token();
  for (int i = 0; i < 30; ++i) {
    std::this_thread::sleep_for(100ms);
    REQUIRE(g.owns());
  }
  CHECK(g.extensions() >= 10);  // every ttl/3 = 200 ms: about 15
  CHECK(lost == 0);
  CHECK(c[0].get("wd") == token);
  CHECK(c[0].pttl("wd") > 0);
  CHECK(g.remaining() > 100ms);
}

TEST_CASE("loss is detected within one extension period after the keys are deleted") {
  RedisCluster c(5);
  Client client(options_for(c));
  std::atomic<bool> lost{false};
  std::atomic<long long> lost_at_ms{0};
  auto start = Clock::now();
  auto o = held(600ms);  // extends every 200 ms
  o.hold.on_lost = [&](const LossInfo& info) {
    CHECK(info.reason == Errc::not_held);
    CHECK_FALSE(lost.exchange(true));  // exactly once
    lost_at_ms = ms_since(start);
  };
  Guard g = client.lock({"gone"}, o);
  std::this_thread::sleep_for(250ms);
  for (std::size_t i = 0; i < c.size(); ++i) c[i].del("gone");
  auto deleted_at = ms_since(start);
  REQUIRE(eventually([&] { return lost.load(); }, 2000ms));
  CHECK(lost_at_ms - deleted_at <= 200 + 100);
  CHECK_FALSE(g.owns());
  REQUIRE(g.lost());
  CHECK(g.lost()->reason == Errc::not_held);
  // Never re-acquired silently.
  std::this_thread::sleep_for(300ms);
  CHECK(c.count_with_key("gone") == 0);
}

TEST_CASE("loss is detected within one extension period after a majority is killed") {
  RedisCluster c(5);
  Client client(options_for(c));
  std::atomic<bool> lost{false};
  std::atomic<long long> lost_at_ms{0};
  auto start = Clock::now();
  auto o = held(900ms);  // extends every 300 ms
  o.hold.on_lost = [&](const LossInfo&) {
    lost = true;
    lost_at_ms = ms_since(start);
  };
  Guard g = client.lock({"majority"}, o);
  std::this_thread::sleep_for(100ms);
  c[0].kill();
  c[1].kill();
  c[2].kill();
  auto killed_at = ms_since(start);
  REQUIRE(eventually([&] { return lost.load(); }, 2000ms));
  CHECK(lost_at_ms - killed_at <= 300 + 100);
  CHECK_FALSE(g.owns());
}

TEST_CASE("hold() on a lock taken a while ago extends it at once instead of letting it lapse") {
  RedisCluster c(3);
  uv_loop_t loop;
  uv_loop_init(&loop);
  int extended = 0, lost = 0;
  {
    Engine engine(&loop, options_for(c));
    std::optional<AcquireResult> got;
    engine.acquire({"late-hold"}, ttl_opts(600ms), [&](AcquireResult r) { got = std::move(r); });
    while (!got) uv_run(&loop, UV_RUN_ONCE);
    REQUIRE_MESSAGE(*got, got->message);
    // The holder worked before asking for the watchdog: about 160 ms are left, less than one
    // extension period (ttl/3 = 200 ms) after hold() is called.
    std::this_thread::sleep_for(430ms);
    REQUIRE(got->lock.remaining() > 50ms);
    const auto id = engine.hold(
        got->lock, HoldOptions{}, [&](const Lock&) { ++extended; },
        [&](const LossInfo&) { ++lost; });
    REQUIRE(id != 0);
    struct Stop {
      Engine* engine;
      Engine::HoldId id;
    } stop{&engine, id};
    uv_timer_t timer;
    uv_timer_init(&loop, &timer);
    timer.data = &stop;
    uv_timer_start(
        &timer,
        [](uv_timer_t* t) {
          auto* s = static_cast<Stop*>(t->data);
          s->engine->stop_hold(s->id);
          s->engine->close();
          uv_close(reinterpret_cast<uv_handle_t*>(t), nullptr);
        },
        1000, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(&loop) == 0);
  CHECK(lost == 0);  // before: the first extension was due after the deadline, so it was lost
  CHECK(extended >= 3);
}

TEST_CASE("no extension after release, and the guard's destructor releases") {
  RedisCluster c(3);
  Client client(options_for(c));
  {
    Guard g = client.lock({"rel"}, held(900ms));
    CHECK(eventually([&] { return g.extensions() >= 1; }, 600ms));  // due at 300 ms
    auto r = g.release();
    CHECK(r.deleted == 3);
    CHECK_FALSE(g.owns());
    CHECK(g.release().deleted == 0);  // idempotent
  }
  std::this_thread::sleep_for(700ms);   // two extension periods
  CHECK(c.count_with_key("rel") == 0);  // the watchdog did not bring it back
  {
    Guard g = client.lock({"scoped"}, held(10s, false));
    CHECK(eventually([&] { return c.count_with_key("scoped") == 3; }));
  }
  CHECK(c.count_with_key("scoped") == 0);
}

TEST_CASE("the guard's destructor with nodes down: no throw, bounded, keys gone where reachable") {
  RedisCluster c(5);
  Client client(options_for(c));
  auto g = std::make_unique<Guard>(client.lock({"down"}, held(10s)));
  REQUIRE(eventually([&] { return c.count_with_key("down") == 5; }));
  c[0].kill();
  c[1].kill();
  // Bounded: one release round (no retry, no wait for a reconnect); the bound is generous, a
  // loaded machine is slow, not wrong.
  auto start = Clock::now();
  CHECK_NOTHROW(g.reset());
  CHECK(ms_since(start) < 3000);
  CHECK(c.count_with_key("down") == 0);
  auto g2 = std::make_unique<Guard>(client.lock({"down2"}, held(10s)));
  for (std::size_t i = 2; i < c.size(); ++i) c[i].kill();
  start = Clock::now();
  CHECK_NOTHROW(g2.reset());
  CHECK(ms_since(start) < 3000);
}

TEST_CASE("a Guard moved around keeps one ownership") {
  RedisCluster c(3);
  Client client(options_for(c));
  Guard a = client.lock({"mv"}, held(10s, false));
  Guard b = std::move(a);
  CHECK_FALSE(a.owns());
  CHECK(b.owns());
  Guard d;
  d = std::move(b);
  CHECK(d.owns());
  // The lock returns at a quorum (2 of 3): the third SET may still be on its way.
  CHECK(eventually([&] { return c.count_with_key("mv") == 3; }));
  d = Guard();  // move-assigning releases the held one
  CHECK(c.count_with_key("mv") == 0);
}

// A held lock keeps no per-node record (it was most of the memory one costs, issue 46): the
// acquisition's record is on its result, and the Guard's snapshot has none, before or after the
// watchdog extends it; a reentrant hold asks no node, so its result has no record either.
TEST_CASE("a held lock keeps no per-node record: the result has it, the guard's snapshot not") {
  RedisCluster c(3);
  Client client(options_for(c));
  auto o = held(900ms);  // extended every 300 ms
  o.hold.reentrant = true;
  auto [g, r] = client.try_lock({"rec"}, o);
  REQUIRE(r);
  CHECK(r.nodes.size() == 3);
  CHECK(count_state(r.nodes, NodeState::ok) >= 2);
  CHECK(r.lock.nodes().size() == 3);  // the result's lock is the acquisition's value
  CHECK(g.lock().nodes().empty());
  CHECK(g.lock().token() == r.lock.token());
  REQUIRE(eventually([&] { return g.extensions() >= 2; }));
  CHECK(g.lock().nodes().empty());
  CHECK(g.lock().token() == r.lock.token());
  auto again = client.try_lock({"rec"}, o);
  REQUIRE(again.second);
  CHECK(again.second.nodes.empty());
  CHECK(again.first.hold_count() == 2);
}

TEST_CASE("reentrancy: counted, no network I/O, only the last release reaches the nodes") {
  RedisCluster c(3);
  Client client(options_for(c));
  auto o = held(10s, false);
  o.hold.reentrant = true;
  Guard first = client.lock({"re"}, o);
  REQUIRE(eventually([&] { return c.count_with_key("re") == 3; }));
  // No I/O: it works with every node paused.
  for (std::size_t i = 0; i < c.size(); ++i) c[i].stop();
  Guard second = client.lock({"re"}, o);
  for (std::size_t i = 0; i < c.size(); ++i) c[i].cont();
  CHECK(second.owns());
  CHECK(second.lock().token() == first.lock().token());
  CHECK(first.hold_count() == 2);
  // Another thread is another owner: refused.
  std::error_code other_ec;
  std::thread([&] { other_ec = client.try_lock({"re"}, o).second.error; }).join();
  CHECK(other_ec == Errc::contended);
  first.release();
  CHECK(c.count_with_key("re") == 3);
  CHECK(second.hold_count() == 1);
  second.release();
  CHECK(c.count_with_key("re") == 0);
}

TEST_CASE("reentrancy: a request for another kind of lock is refused, not handed the held one") {
  RedisCluster c(3);
  Client client(options_for(c));
  auto kind = [](LockMode mode, bool fence, bool auto_extend) {
    LockOptions o = held(10s, auto_extend);
    o.acquire.mode = mode;
    o.acquire.fence = fence;
    o.hold.reentrant = true;
    return o;
  };
  auto reader = client.try_lock({"kinds"}, kind(LockMode::read, false, false));
  REQUIRE(reader.second);
  // A writer must not get the read lock back: it would believe it excludes readers.
  auto writer = client.try_lock({"kinds"}, kind(LockMode::write, false, false));
  CHECK(writer.second.error == Errc::invalid_argument);
  CHECK_MESSAGE(writer.second.message.find("read lock") != std::string::npos,
                writer.second.message);
  CHECK_FALSE(writer.first.owns());
  CHECK(reader.first.hold_count() == 1);
  auto reader2 = client.try_lock({"kinds"}, kind(LockMode::read, false, false));  // the same kind
  REQUIRE(reader2.second);
  CHECK(reader.first.hold_count() == 2);
  reader2.first.release();
  reader.first.release();
  // Once released, the other kind is simply taken.
  auto writer2 = client.try_lock({"kinds"}, kind(LockMode::write, false, false));
  CHECK_MESSAGE(writer2.second, writer2.second.message);
  writer2.first.release();

  auto plain = client.try_lock({"plain"}, kind(LockMode::exclusive, false, false));
  REQUIRE(plain.second);
  CHECK(client.try_lock({"plain"}, kind(LockMode::exclusive, true, false)).second.error ==
        Errc::invalid_argument);
  CHECK(client.try_lock({"plain"}, kind(LockMode::exclusive, false, true)).second.error ==
        Errc::invalid_argument);
  CHECK(plain.first.hold_count() == 1);
  CHECK(c.count_with_key("plain") == 3);
}

TEST_CASE("reentrancy with an explicit owner id across threads; off by default") {
  RedisCluster c(3);
  Client client(options_for(c));
  auto o = held(10s, false);
  o.hold.reentrant = true;
  o.hold.owner = "job-7";
  Guard a = client.lock({"owner"}, o);
  Guard b;
  std::thread([&] { b = client.lock({"owner"}, o); }).join();
  CHECK(b.owns());
  CHECK(a.hold_count() == 2);
  auto [plain, r] = client.try_lock({"owner"}, held(10s, false));
  CHECK(r.error == Errc::contended);
  CHECK_FALSE(plain.owns());
}

TEST_CASE("restart guard: a run_id change excludes the node in a long-lived client") {
  RedisCluster c(3);
  Options o = options_for(c);
  o.restart_quarantine = 2500ms;
  o.reconnect_max = 100ms;
  Client client(o);
  REQUIRE(client.try_acquire({"learn"}, ttl_opts(5s)));
  // The acquisition above was decided at quorum: node 0 may not have answered yet, and then its
  // run_id (read in the handshake, before any lock command) is not known. `status` waits for
  // every node, so once each row is up the client knows every run_id.
  REQUIRE(eventually([&] {
    auto st = client.status("learn");
    return std::all_of(st.nodes.begin(), st.nodes.end(),
                       [](const NodeKeyState& n) { return n.up; });
  }));
  c[0].restart();
  c[2].kill();  // the quorum of two now needs node 0's vote: its state is always in the record
  AcquireResult r;
  REQUIRE(eventually(
      [&] {
        r = client.try_acquire({"after-" + std::to_string(rand())}, ttl_opts(5s));
        return r.nodes.size() == 3 && r.nodes[0].state == NodeState::excluded;
      },
      2000ms));
  CHECK(r.error == Errc::no_quorum);  // node 0 answered OK, but its vote does not count
  CHECK(r.nodes[0].detail.find("restart guard") != std::string::npos);
  CHECK(r.nodes[1].state != NodeState::excluded);  // ok, or pending at the early decision
  // After the quarantine the node votes again.
  CHECK(eventually(
      [&] {
        r = client.try_acquire({"later-" + std::to_string(rand())}, ttl_opts(5s));
        return bool(r);
      },
      4000ms));
  CHECK(r.nodes[0].state == NodeState::ok);
}

TEST_CASE("restart guard: min_node_uptime refuses young nodes; durable_nodes turns it off") {
  RedisCluster c(3);
  Options o = options_for(c);
  o.min_node_uptime = 60s;
  {
    Client client(o);
    auto r = client.try_acquire({"young"}, ttl_opts(5s));
    CHECK(r.error == Errc::no_quorum);
    CHECK(count_state(r.nodes, NodeState::excluded) >= 2);
    CHECK(eventually([&] { return c.count_with_key("young") == 0; }));  // rolled back
  }
  o.durable_nodes = true;
  Client durable(o);
  CHECK(durable.try_acquire({"young"}, ttl_opts(5s)));
}

TEST_CASE("invalid hold options are refused before anything is sent") {
  RedisCluster c(3);
  Client client(options_for(c));
  auto o = held(300ms);
  o.hold.extend_every = 300ms;
  auto [g, r] = client.try_lock({"bad-hold"}, o);
  CHECK(r.error == Errc::invalid_argument);
  CHECK_FALSE(g.owns());
  CHECK(c.count_with_key("bad-hold") == 0);
}

TEST_CASE(
    "hold limits: after max_extensions the watchdog stops and the loss is reported at the "
    "deadline") {
  RedisCluster c(3);
  Client client(options_for(c));
  std::atomic<int> lost{0};
  auto o = held(900ms);  // extended every 300 ms
  o.hold.max_extensions = 2;
  o.hold.on_lost = [&](const LossInfo& l) {
    CHECK(l.reason == Errc::expired);
    ++lost;
  };
  Guard g = client.lock({"limited"}, o);
  REQUIRE(eventually([&] { return lost.load() == 1; }));
  CHECK(g.extensions() == 2);
  CHECK_FALSE(g.owns());
  std::this_thread::sleep_for(300ms);
  CHECK(lost == 1);
  CHECK(c.count_with_key("limited") == 0);  // it expired on the nodes too

  auto o2 = held(600ms);  // extended every 200 ms, five times at most in a second
  o2.hold.max_hold = 1000ms;
  Guard g2 = client.lock({"limited2"}, o2);
  REQUIRE(eventually([&] { return g2.lost().has_value(); }));
  CHECK_FALSE(g2.owns());
  CHECK(g2.extensions() <= 5);
}

TEST_CASE("the watchdog and the guard work for read locks and fair locks") {
  RedisCluster c(3);
  Client client(options_for(c));
  auto o = held(1500ms);  // extended every 500 ms
  o.acquire.mode = LockMode::read;
  Guard reader = client.lock({"rw-held"}, o);
  auto o2 = held(1500ms);
  o2.acquire.fair = true;
  o2.acquire.wait = 2s;
  Guard fair = client.lock({"fair-held"}, o2);
  std::this_thread::sleep_for(2500ms);  // past the ttl: kept only by being extended
  CHECK(reader.owns());
  CHECK(fair.owns());
  CHECK(reader.extensions() >= 3);  // about 5
  CHECK(fair.extensions() >= 3);
  CHECK(c[0].command({"ZSCORE", derived_key("rw-held", KeyRole::readers), reader.lock().token()})
            .type != redlock::test::Reply::Type::nil);
  reader.release();
  fair.release();
  CHECK(c[0].command({"ZCARD", derived_key("rw-held", KeyRole::readers)}).integer == 0);
  CHECK(c.count_with_key("fair-held") == 0);
}

namespace {
// Sanitizer builds run 5-20x slower: the timings below scale with the build.
constexpr int slow = sanitized_build ? 3 : 1;
}  // namespace

TEST_CASE("renew deadline: with a majority paused the loss comes at it, well before the validity") {
  RedisCluster c(3);
  Options opts = options_for(c);
  // Paused nodes time out (they do not show as down): with node_timeout * 10 = the ttl, a
  // connection is not dropped as stalled before the validity deadline either, so the only early
  // loss is the renew deadline's.
  opts.node_timeout = 300ms * slow;
  Client client(opts);
  const Millis ttl = 3s * slow;  // extends at 1 s, gives up at 2 s, validity ends at 3 s
  std::atomic<int> lost{0}, failing{0};
  std::atomic<BootClock::rep> lost_at{0}, failing_at{0};
  std::optional<LossInfo> loss;
  std::optional<RenewFailure> failure;
  std::mutex mu;
  auto o = held(ttl);
  o.hold.on_lost = [&](const LossInfo& info) {
    lost_at = BootClock::now().time_since_epoch().count();
    std::lock_guard<std::mutex> g(mu);
    loss = info;
    ++lost;
  };
  o.hold.on_renew_failing = [&](const RenewFailure& f) {
    failing_at = BootClock::now().time_since_epoch().count();
    std::lock_guard<std::mutex> g(mu);
    failure = f;
    ++failing;
  };
  Guard g = client.lock({"renew"}, o);
  REQUIRE(eventually([&] { return c.count_with_key("renew") == 3; }));
  c[0].stop();
  c[1].stop();
  // No extension has succeeded yet (the first is due at ttl/3): the deadlines of the lock taken.
  const auto validity_end = g.lock().deadline();
  REQUIRE(g.lock().remaining() > ttl / 2);
  const auto renew_deadline = validity_end - (ttl - ttl * 2 / 3);
  CHECK(g.state() == HoldState::held);
  REQUIRE(eventually([&] { return lost.load() > 0; }, ttl * 2));
  c.heal();
  const BootClock::time_point at{BootClock::duration{lost_at.load()}};
  // At the renew deadline (never before: a timer due then, checked against the clock; at most
  // an extension in flight later, node_timeout), with most of the remaining third of the ttl
  // still left: not at the validity deadline.
  CHECK(at >= renew_deadline);
  CHECK_MESSAGE(at < validity_end - (validity_end - renew_deadline) / 4,
                "the loss came " << std::chrono::duration_cast<Millis>(validity_end - at).count()
                                 << " ms before the validity deadline");
  std::lock_guard<std::mutex> lk(mu);
  REQUIRE(loss);
  CHECK(loss->reason == Errc::no_quorum);
  CHECK_MESSAGE(loss->message.find("renew deadline") != std::string::npos, loss->message);
  // "Extensions are failing" came first, once, with the time left before giving up.
  CHECK(failing == 1);
  REQUIRE(failure);
  const BootClock::time_point failed_at{BootClock::duration{failing_at.load()}};
  CHECK(failed_at < at);
  CHECK(failure->give_up_in > Millis{0});
  CHECK(failure->give_up_in <= ttl / 3);
  CHECK(count_state(failure->nodes, NodeState::timeout) >= 2);
  CHECK(g.state() == HoldState::lost);
  CHECK_FALSE(g.owns());
  CHECK(lost == 1);
}

TEST_CASE("renew deadline: extensions that fail and recover report it once, and keep the lock") {
  RedisCluster c(3);
  Options opts = options_for(c);
  opts.node_timeout = 300ms * slow;
  Client client(opts);
  const Millis ttl = 3s * slow;
  std::atomic<int> lost{0}, failing{0};
  auto o = held(ttl);
  o.hold.on_lost = [&](const LossInfo&) { ++lost; };
  o.hold.on_renew_failing = [&](const RenewFailure&) { ++failing; };
  Guard g = client.lock({"renew-back"}, o);
  REQUIRE(eventually([&] { return c.count_with_key("renew-back") == 3; }));
  c[0].stop();
  c[1].stop();
  REQUIRE(eventually([&] { return failing.load() > 0; }, ttl));
  CHECK(g.state() == HoldState::renew_failing);
  CHECK(g.owns());  // still held: the validity has not run out
  c.heal();
  // The next retry succeeds (before the renew deadline: retries come every 2 x node_timeout).
  REQUIRE(eventually([&] { return g.extensions() > 0; }, ttl));
  CHECK(g.state() == HoldState::held);
  std::this_thread::sleep_for(ttl);
  CHECK(lost == 0);
  CHECK(failing == 1);
  CHECK(g.owns());
  g.release();
  CHECK(g.state() == HoldState::none);
}

TEST_CASE("renew deadline: unusable values are refused before anything is sent") {
  RedisCluster c(3);
  Client client(options_for(c));
  auto o = held(3s);
  o.hold.renew_deadline = 1s;  // not above extend_every (ttl/3)
  CHECK_THROWS_AS((void)client.lock({"bad-renew"}, o), redlock::Error);
  auto [g, r1] = client.try_lock({"bad-renew"}, o);
  CHECK(r1.error == Errc::invalid_argument);
  o.hold.renew_deadline = 4s;  // past the ttl
  auto [g2, r] = client.try_lock({"bad-renew"}, o);
  CHECK(r.error == Errc::invalid_argument);
  CHECK_MESSAGE(r.message.find("renew_deadline") != std::string::npos, r.message);
  CHECK(c.count_with_key("bad-renew") == 0);
}

// Issue 41 item 3: the quarantine is a deployment setting, Options::max_ttl (+ drift), not a 30 s
// floor; a ttl above the declared maximum is refused, naming both.
TEST_CASE("restart guard: with max_ttl 3s a restarted node votes again after ~3 s, not 30 s") {
  RedisCluster c(3);
  Options o = options_for(c);
  o.max_ttl = 3s;
  o.reconnect_max = 100ms;
  Client client(o);
  auto too_long = client.try_acquire({"too-long"}, ttl_opts(5s));
  CHECK(too_long.error == Errc::invalid_argument);
  CHECK_MESSAGE(too_long.message.find("5000 ms") != std::string::npos, too_long.message);
  CHECK_MESSAGE(too_long.message.find("max_ttl of 3000 ms") != std::string::npos, too_long.message);
  CHECK(c.count_with_key("too-long") == 0);
  auto learn = client.try_acquire({"learn"}, ttl_opts(2s));
  REQUIRE_MESSAGE(learn, learn.message);
  auto e = client.try_extend(learn.lock, 5s);
  CHECK(e.error == Errc::invalid_argument);
  REQUIRE(eventually([&] {
    auto st = client.status("learn");
    return std::all_of(st.nodes.begin(), st.nodes.end(),
                       [](const NodeKeyState& n) { return n.up; });
  }));
  c[0].restart();
  c[2].kill();  // the quorum of two needs node 0's vote
  AcquireResult r;
  REQUIRE(eventually(
      [&] {
        r = client.try_acquire({"after-" + std::to_string(rand())}, ttl_opts(2s));
        return r.nodes.size() == 3 && r.nodes[0].state == NodeState::excluded;
      },
      3000ms));
  CHECK(r.nodes[0].detail.find("restart guard") != std::string::npos);
  const auto excluded_at = Clock::now();
  // Unfixed, the quarantine was at least 30 s; 3 s + drift now. The limit leaves room for a
  // loaded machine, far below 30 s.
  CHECK(eventually(
      [&] {
        r = client.try_acquire({"later-" + std::to_string(rand())}, ttl_opts(2s));
        return bool(r);
      },
      15'000ms));
  CHECK(r.nodes[0].state == NodeState::ok);
  MESSAGE("node 0 voted again " << ms_since(excluded_at) << " ms after it was first excluded");
}

// Issue 41 item 2: an ACL user without +info used to turn the restart guard off silently. A guard
// that is on fails closed, naming the missing permission; granted later, it counts again.
TEST_CASE("restart guard: a user that cannot read INFO gives no vote while the guard is on") {
  RedisCluster c(3);
  std::string csv;
  for (std::size_t i = 0; i < c.size(); ++i) {
    REQUIRE(
        c[i].command({"ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info"}).str ==
        "OK");
    csv += (csv.empty() ? "" : ",") + std::string("redis://noinfo:pw@127.0.0.1:") +
           std::to_string(c[i].port());
  }
  Options o = options_for(csv);
  o.tls = {};  // plaintext ports, also in the suite's TLS run
  {
    Client guarded(o);
    auto r = guarded.try_acquire({"noinfo"}, ttl_opts(5s));
    CHECK_FALSE(r);
    CHECK(r.error == Errc::refused);  // nothing a retry fixes: the user lacks a permission
    CHECK(count_state(r.nodes, NodeState::ok) == 0);
    CHECK(count_state(r.nodes, NodeState::excluded) >= 2);
    CHECK_MESSAGE(r.message.find("the user needs +info") != std::string::npos, r.message);
    CHECK(eventually([&] { return c.count_with_key("noinfo") == 0; }));  // rolled back
    // Granted meanwhile: the guard reads INFO again and the votes count, without a reconnect.
    for (std::size_t i = 0; i < c.size(); ++i)
      REQUIRE(c[i].command({"ACL", "SETUSER", "noinfo", "+info"}).str == "OK");
    CHECK(eventually([&] {
      auto ok = guarded.try_acquire({"noinfo-" + std::to_string(rand())}, ttl_opts(5s));
      return bool(ok);
    }));
    for (std::size_t i = 0; i < c.size(); ++i)
      REQUIRE(c[i].command({"ACL", "SETUSER", "noinfo", "-info"}).str == "OK");
  }
  // The guard off: durable nodes, or a quarantine of 0 without a minimum uptime.
  Options durable = o;
  durable.durable_nodes = true;
  Client d(durable);
  CHECK(d.try_acquire({"noinfo-durable"}, ttl_opts(5s)));
  Options off = o;
  off.restart_quarantine = 0ms;
  Client u(off);
  CHECK(u.try_acquire({"noinfo-off"}, ttl_opts(5s)));
}
