// One voting round, without servers.
#include <doctest/doctest.h>

#include "core/info.hpp"
#include "core/restart_guard.hpp"
#include "core/round.hpp"

using namespace redlock;
using namespace redlock::detail;
using namespace std::chrono_literals;

namespace {
const std::vector<std::string> five{"a:1", "b:1", "c:1", "d:1", "e:1"};
NodeOutcome as(NodeState s) { return NodeOutcome{{}, s, {}, {}}; }
}  // namespace

TEST_CASE("Round decides at the quorum and marks the others pending") {
  Round r(&five);
  r.record(0, as(NodeState::ok));
  r.record(1, as(NodeState::ok));
  CHECK(r.decision() == Decision::undecided);
  r.record(1, as(NodeState::down));  // a second answer of the same node is ignored
  CHECK(r.tally().ok == 2);
  r.record(4, as(NodeState::ok));
  CHECK(r.decision() == Decision::quorum);
  r.close();
  CHECK_FALSE(r.open());
  CHECK(r.outcomes()[2].state == NodeState::pending);
  CHECK(r.outcomes()[2].node == "c:1");
  CHECK(r.outcomes()[4].node == "e:1");
  r.record(2, as(NodeState::ok));  // late: ignored
  CHECK(r.outcomes()[2].state == NodeState::pending);
  CHECK(r.breakdown() == "3 ok, 2 pending");
}

TEST_CASE("Round: refusals and failures; nothing is decided while dispatching") {
  Round r(&five);
  r.begin_dispatch();
  r.record(0, as(NodeState::down));
  r.record(1, as(NodeState::down));
  r.record(2, as(NodeState::down));
  CHECK(r.decision() == Decision::undecided);  // the other commands must still go out
  r.end_dispatch();
  CHECK(r.decision() == Decision::impossible);
  CHECK(failure_reason(r.tally(), Errc::contended) == Errc::no_quorum);
  Round h(&five);
  for (int i = 0; i < 3; ++i) h.record(i, as(NodeState::held_by_other));
  CHECK(h.decision() == Decision::impossible);
  CHECK(failure_reason(h.tally(), Errc::contended) == Errc::contended);
}

TEST_CASE("INFO fields match whole names at the start of a line") {
  const std::string info =
      "# Server\r\nmaster_run_id:nope\r\nrun_id:abc123\r\nuptime_in_seconds:42\r\n";
  CHECK(info_field(info, "run_id") == "abc123");
  CHECK(info_field(info, "uptime_in_seconds") == "42");
  CHECK(info_field(info, "uptime") == "");
  auto s = parse_server_info(info);
  REQUIRE(s);
  CHECK(s->run_id == "abc123");
  CHECK(s->uptime_seconds == 42);
  CHECK_FALSE(parse_server_info("# Server\r\nuptime_in_seconds:1\r\n"));
  CHECK(parse_server_info("run_id:x\nuptime_in_seconds:-4")->uptime_seconds == 0);
}

TEST_CASE(
    "RestartGuard: a changed run_id excludes the server for the quarantine after it came back") {
  RestartGuard g;
  const auto t0 = BootClock::now();
  RestartGuard::Policy p{10s, 0ms, false};
  CHECK_FALSE(g.observe({"one", 1000}, t0, p));  // first sight: nothing to compare with
  CHECK_FALSE(g.exclusion(t0, false));
  auto warn = g.observe({"two", 3}, t0 + 1s, p);  // restarted 3 s ago
  REQUIRE(warn);
  auto why = g.exclusion(t0 + 2s, false);
  REQUIRE(why);
  CHECK(why->find("run_id changed") != std::string::npos);
  CHECK_FALSE(g.exclusion(t0 + 2s, true));     // durable nodes: off
  CHECK(g.exclusion(t0 + 7s + 900ms, false));  // came up at t0-2s: excluded until t0+8s
  CHECK_FALSE(g.exclusion(t0 + 8s, false));
}

TEST_CASE("RestartGuard: min_uptime refuses a young server; durable turns the guard off") {
  RestartGuard g;
  const auto t0 = BootClock::now();
  g.observe({"x", 5}, t0, RestartGuard::Policy{0ms, 60s, false});
  auto why = g.exclusion(t0, false);
  REQUIRE(why);
  CHECK(why->find("uptime 5 s") != std::string::npos);
  RestartGuard d;
  d.observe({"x", 5}, t0, RestartGuard::Policy{0ms, 60s, true});
  CHECK_FALSE(d.exclusion(t0, false));
}
