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

TEST_CASE("Round over 64 nodes, the most a client takes: each node's answer counts once") {
  std::vector<std::string> names;
  for (int i = 0; i < 64; ++i) names.push_back("n" + std::to_string(i) + ":1");
  Round r(&names);
  for (int i : {0, 31, 32, 63}) {
    CHECK_FALSE(r.answered(i));
    r.record(i, as(NodeState::ok));
    CHECK(r.answered(i));
    r.record(i, as(NodeState::ok));  // counted once
  }
  CHECK(r.tally().ok == 4);
  CHECK_FALSE(r.answered(1));
  CHECK_FALSE(r.answered(62));
  r.reset(&names);  // a fresh round forgets who answered
  CHECK_FALSE(r.answered(63));
  CHECK(r.tally().ok == 0);
}

TEST_CASE("Round: take_outcomes hands the record over and ends the round") {
  Round r(&five);
  r.record(0, as(NodeState::ok));
  r.record(3, as(NodeState::not_held));
  auto record = r.take_outcomes();
  REQUIRE(record.size() == 5);
  CHECK(record[0].node == "a:1");
  CHECK(record[0].state == NodeState::ok);
  CHECK(record[3].state == NodeState::not_held);
  CHECK_FALSE(r.open());
  r.record(1, as(NodeState::ok));  // after the end: ignored
  CHECK(r.tally().ok == 1);
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
  CHECK_FALSE(g.exclusion(t0, false, 0ms));
  auto warn = g.observe({"two", 3}, t0 + 1s, p);  // restarted 3 s ago
  REQUIRE(warn);
  auto why = g.exclusion(t0 + 2s, false, 0ms);
  REQUIRE(why);
  CHECK(why->find("run_id changed") != std::string::npos);
  CHECK_FALSE(g.exclusion(t0 + 2s, true, 0ms));     // durable nodes: off
  CHECK(g.exclusion(t0 + 7s + 900ms, false, 0ms));  // came up at t0-2s: excluded until t0+8s
  CHECK_FALSE(g.exclusion(t0 + 8s, false, 0ms));
}

TEST_CASE(
    "RestartGuard: a promotion excludes the server for the quarantine in force, durable "
    "or not") {
  RestartGuard g;
  const auto t0 = BootClock::now();
  g.observe({"r", 100000}, t0, RestartGuard::Policy{10s, 0ms, false});
  g.promoted(t0 - 1s, "promoted by a failover");
  auto why = g.exclusion(t0, true, 3s);  // durable nodes do not lift it
  REQUIRE(why);
  CHECK(why->find("promoted by a failover") != std::string::npos);
  CHECK(why->find("2000 ms left") != std::string::npos);
  CHECK(g.exclusion(t0 + 1s + 999ms, false, 3s));
  CHECK_FALSE(g.exclusion(t0 + 2s, false, 3s));
  CHECK(g.exclusion(t0 + 2s, false, 10s));   // the quarantine grew (a longer ttl came in use)
  CHECK_FALSE(g.exclusion(t0, false, 0ms));  // a quarantine of 0: the guard is off
  g.promoted(t0 - 5s, "an older one");       // the latest promotion counts
  CHECK(g.exclusion(t0 + 1s, false, 3s)->find("promoted by a failover") != std::string::npos);
}

TEST_CASE("INFO replication: promoted from replica or not; SENTINEL MASTER's fields") {
  CHECK(parse_promoted(
            "role:master\r\nmaster_replid2:0000000000000000000000000000000000000000\r\n") == false);
  CHECK(parse_promoted("# Replication\r\nrole:master\r\nconnected_slaves:1\r\n"
                       "master_replid2:03b4b72aad2e4fe6bbe7af33a5c2f957c222202e\r\n") == true);
  CHECK_FALSE(parse_promoted("role:slave\r\nmaster_replid2:0000\r\n").has_value());
  CHECK_FALSE(parse_promoted("role:master\r\n").has_value());  // cannot tell: not trusted

  auto pairs = [](std::vector<std::string> kv) {
    Reply r;
    r.type = Reply::Type::array;
    for (auto& s : kv) {
      Reply e;
      e.type = Reply::Type::string;
      e.str = std::move(s);
      r.elements.push_back(std::move(e));
    }
    return r;
  };
  std::string err;
  auto m = parse_sentinel_master(
      pairs({"name", "m", "ip", "10.0.0.5", "port", "6380", "runid", "", "flags", "master",
             "role-reported-time", "3359", "config-epoch", "4"}),
      err);
  REQUIRE_MESSAGE(m, err);
  CHECK(m->ip == "10.0.0.5");
  CHECK(m->port == 6380);
  CHECK(m->flags == "master");
  CHECK(m->role_reported_ms == 3359);
  CHECK(m->config_epoch == 4);
  CHECK_FALSE(
      parse_sentinel_master(pairs({"ip", "h", "port", "70000", "role-reported-time", "1"}), err));
  CHECK_FALSE(parse_sentinel_master(pairs({"ip", "h", "port", "1"}), err));  // no role time
  CHECK_FALSE(parse_sentinel_master(pairs({"ip", "h", "port"}), err));       // odd
  Reply e;
  e.type = Reply::Type::error;
  e.str = "ERR No such master with that name";
  CHECK_FALSE(parse_sentinel_master(e, err));
  CHECK(err.find("(error) ERR No such master") != std::string::npos);
}

TEST_CASE("RestartGuard: min_uptime refuses a young server; durable turns the guard off") {
  RestartGuard g;
  const auto t0 = BootClock::now();
  g.observe({"x", 5}, t0, RestartGuard::Policy{0ms, 60s, false});
  auto why = g.exclusion(t0, false, 0ms);
  REQUIRE(why);
  CHECK(why->find("uptime 5 s") != std::string::npos);
  RestartGuard d;
  d.observe({"x", 5}, t0, RestartGuard::Policy{0ms, 60s, true});
  CHECK_FALSE(d.exclusion(t0, false, 0ms));
}

TEST_CASE("RestartGuard: INFO unreadable fails closed while the guard is on (issue 41 item 2)") {
  const auto t0 = BootClock::now();
  RestartGuard g;
  g.unreadable("restart guard: cannot read INFO server (the user needs +info): NOPERM ...");
  CHECK_FALSE(g.readable());
  // On: a quarantine, or a minimum uptime, and the nodes not durable.
  auto why = g.exclusion(t0, false, 30s);
  REQUIRE(why);
  CHECK(why->find("the user needs +info") != std::string::npos);
  CHECK(g.exclusion(t0, false, 0ms, 60s));
  // Off: durable nodes, or neither a quarantine nor a minimum uptime.
  CHECK_FALSE(g.exclusion(t0, true, 30s, 60s));
  CHECK_FALSE(g.exclusion(t0, false, 0ms, 0ms));
  // Read again: the guard judges by what it read.
  g.observe({"x", 100000}, t0, RestartGuard::Policy{30s, 0ms, false});
  CHECK(g.readable());
  CHECK_FALSE(g.exclusion(t0, false, 30s));
}
