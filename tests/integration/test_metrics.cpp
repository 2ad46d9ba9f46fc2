// Metrics: counters per outcome, per-node failures, latency histograms, Prometheus text.
#include "common.hpp"

using namespace itest;
using namespace redlock;

TEST_CASE("metrics count outcomes, node failures and latencies; Prometheus text renders them") {
  RedisCluster c(3);
  std::vector<std::string> logged;
  Options o = options_for(c);
  Client client(o);
  auto a = client.try_acquire({"m"}, ttl_opts(5s));
  REQUIRE(a);
  CHECK(client.try_acquire({"m"}, ttl_opts(5s)).error == Errc::contended);
  Lock l = a.lock;
  CHECK(client.try_extend(l, 5s));
  CHECK(client.try_release(l));
  c[0].kill();
  c[1].kill();
  CHECK(client.try_acquire({"n"}, ttl_opts(5s)).error == Errc::no_quorum);

  Metrics m = client.metrics();
  CHECK(m.acquired == 1);
  CHECK(m.contended == 1);
  CHECK(m.no_quorum == 1);
  CHECK(m.attempts == 3);
  CHECK(m.extended == 1);
  CHECK(m.released == 1);
  CHECK(m.acquire_latency.count == 3);
  REQUIRE(m.nodes.size() == 3);
  CHECK(m.nodes[0].down + m.nodes[1].down >= 1);
  CHECK(m.nodes[2].down == 0);
  CHECK(m.nodes[2].ok >= 5);  // handshake, two SETs, extend, release, and late answers too
  CHECK(m.nodes[2].latency.count == m.nodes[2].ok + m.nodes[2].errors);

  std::string text = to_prometheus(m);
  CHECK(text.find("# TYPE redlock_acquire_total counter") != std::string::npos);
  CHECK(text.find("redlock_acquire_total{outcome=\"acquired\"} 1\n") != std::string::npos);
  CHECK(text.find("redlock_acquire_total{outcome=\"no_quorum\"} 1\n") != std::string::npos);
  CHECK(text.find("redlock_acquire_duration_seconds_count 3\n") != std::string::npos);
  CHECK(text.find("redlock_acquire_duration_seconds_bucket{le=\"+Inf\"} 3\n") != std::string::npos);
  // The node's display address (rediss://... in the TLS run).
  const std::string node2 = client.options().nodes[2].to_string();
  CHECK(m.nodes[2].node == node2);
  CHECK(text.find("redlock_node_replies_total{node=\"" + node2 + "\",kind=\"ok\"}") !=
        std::string::npos);
  // Every sample line is "name{labels} value" or "name value".
  std::size_t pos = 0, lines = 0;
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    REQUIRE(end != std::string::npos);
    std::string line = text.substr(pos, end - pos);
    if (line[0] != '#') {
      ++lines;
      auto space = line.rfind(' ');
      REQUIRE(space != std::string::npos);
      CHECK_NOTHROW((void)std::stod(line.substr(space + 1)));
    }
    pos = end + 1;
  }
  CHECK(lines > 30);
}

TEST_CASE("the watchdog's losses are counted") {
  RedisCluster c(3);
  Client client(options_for(c));
  LockOptions lo;
  lo.acquire.ttl = 300ms;
  lo.hold.auto_extend = true;
  Guard g = client.lock({"l"}, lo);
  for (std::size_t i = 0; i < c.size(); ++i) c[i].del("l");
  REQUIRE(eventually([&] { return g.lost().has_value(); }));
  CHECK(client.metrics().lost == 1);
}

TEST_CASE("histogram buckets are cumulative in the text and bounded by +Inf") {
  Metrics m;
  m.acquire_latency.observe(0.0001);
  m.acquire_latency.observe(0.003);
  m.acquire_latency.observe(10);
  auto t = to_prometheus(m, "x");
  CHECK(t.find("x_acquire_duration_seconds_bucket{le=\"0.00025\"} 1\n") != std::string::npos);
  CHECK(t.find("x_acquire_duration_seconds_bucket{le=\"0.005\"} 2\n") != std::string::npos);
  CHECK(t.find("x_acquire_duration_seconds_bucket{le=\"2.5\"} 2\n") != std::string::npos);
  CHECK(t.find("x_acquire_duration_seconds_bucket{le=\"+Inf\"} 3\n") != std::string::npos);
}
