// Sentinel-managed masters as votes (redis+sentinel:// addresses), against real sentinels
// (SentinelFixture): locking through them, a failover while a lock is held (the promoted replica
// never got the key: its vote must wait out the quarantine, for a long-lived client and for a
// fresh one), and replicated votes (WAIT), with which the promoted replica has the key.
#include <algorithm>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "common.hpp"
#include "sentinel_fixture.hpp"
#include "tls_fixture.hpp"

using namespace itest;
using namespace redlock;
using redlock::test::SentinelConfig;
using redlock::test::SentinelFixture;

namespace {

// "redis+sentinel://first/name?sentinel=second&sentinel=third"
std::string sentinel_address(const SentinelFixture& f, const std::string& name) {
  const auto all = f.sentinel_addresses();
  std::string a = "redis+sentinel://" + all.at(0) + "/" + name;
  for (std::size_t i = 1; i < all.size(); ++i) a += (i == 1 ? "?sentinel=" : "&sentinel=") + all[i];
  return a;
}

SentinelConfig config(std::vector<std::string> names, int replicas = 1) {
  SentinelConfig sc;
  sc.master_names = std::move(names);
  sc.replicas = replicas;
  sc.sentinels = 3;
  return sc;
}

Options sentinel_options(const std::string& csv) {
  Options o = options_for(csv);
  o.node_timeout = 200ms;  // a sentinel vote's first answer waits for the master's handshake too
  o.connect_timeout = 500ms;
  return o;
}

bool all_up(Client& client, const std::string& resource) {
  auto st = client.status(resource);
  return std::all_of(st.nodes.begin(), st.nodes.end(), [](const NodeKeyState& n) { return n.up; });
}

}  // namespace

TEST_CASE("Sentinel votes: acquire, extend and release through three Sentinel-managed masters") {
  SentinelFixture f(config({"m1", "m2", "m3"}));
  const std::string csv =
      sentinel_address(f, "m1") + "," + sentinel_address(f, "m2") + "," + sentinel_address(f, "m3");
  Client client(sentinel_options(csv));
  auto r = client.try_acquire({"sentinel-res"}, ttl_opts(10s));
  REQUIRE_MESSAGE(r, r.message);
  for (const auto& n : r.nodes) {
    // pending: decided at quorum before it answered
    CHECK_MESSAGE((n.state == NodeState::ok || n.state == NodeState::pending),
                  n.node << ": " << n.detail);
  }
  // The key is on each master Sentinel names, with the token as its value.
  for (const auto* name : {"m1", "m2", "m3"}) {
    CHECK(eventually([&] {
      return f.current_master(name).command({"GET", "sentinel-res"}).str == r.lock.token();
    }));
  }
  auto e = client.try_extend(r.lock, 20s);
  REQUIRE_MESSAGE(e, e.message);
  CHECK(eventually([&] {  // decided at a quorum: m2's may still be on its way
    return f.current_master("m2").command({"PTTL", "sentinel-res"}).integer > 10'000;
  }));
  CHECK(client.try_release(r.lock));
  for (const auto* name : {"m1", "m2", "m3"}) {
    CHECK(f.current_master(name).command({"EXISTS", "sentinel-res"}).integer == 0);
  }
}

TEST_CASE(
    "Sentinel votes: a bad master name or unreachable sentinels are no vote, with the reason") {
  SentinelFixture f(config({"m1"}, 0));
  RedisCluster plain(2);
  const auto sentinels = f.sentinel_addresses();
  const std::string csv = "redis+sentinel://" + sentinels[0] + "/nosuchmaster," + plain.nodes_csv();
  Client client(sentinel_options(csv));
  auto r = client.try_acquire({"bad-name"}, ttl_opts(5s));
  REQUIRE(r);  // the two plain nodes are a quorum
  // `status` waits for every node: the sentinel vote is down, with the sentinel's words.
  auto st = client.status("bad-name");
  REQUIRE(st.nodes.size() == 3);
  CHECK_FALSE(st.nodes[0].up);
  CHECK_MESSAGE(st.nodes[0].detail.find("No such master") != std::string::npos, st.nodes[0].detail);
  CHECK(client.try_release(r.lock));

  // No sentinel answers at all (a port nobody listens on): no vote, and it says why.
  Client nowhere(sentinel_options("redis+sentinel://127.0.0.1:1/m1," + plain.nodes_csv()));
  auto st2 = nowhere.status("bad-name");
  CHECK_FALSE(st2.nodes[0].up);
  CHECK_MESSAGE(st2.nodes[0].detail.find("127.0.0.1:1") != std::string::npos, st2.nodes[0].detail);
}

TEST_CASE(
    "Sentinel failover while a lock is held: the promoted replica's vote waits out the "
    "quarantine, for a long-lived client and for a fresh one") {
  // Votes: m1 (a Sentinel-managed master with one replica) and two standalone servers. A takes
  // the lock while standalone s3 is down, so A holds it on m1 and s2 only (a quorum). Then s3 comes
  // back empty (it never had the key) and m1 fails over to a replica that never got the key (the
  // key is deleted on it: the write replication lost). Without the guard, m1 and s3 would give
  // another client the lock while A holds it.
  SentinelFixture f(config({"m1"}));
  RedisCluster plain(2);
  const std::string csv = sentinel_address(f, "m1") + "," + plain.nodes_csv();
  auto opts = sentinel_options(csv);
  opts.restart_quarantine = 3s;
  opts.reconnect_max = 100ms;

  Client a(opts);
  Client b(opts);  // long-lived: it knows m1's master before the failover
  REQUIRE(eventually([&] { return all_up(b, "failover-res"); }, 5000ms));
  plain[1].kill();
  auto held = a.try_acquire({"failover-res"}, ttl_opts(60s));
  REQUIRE_MESSAGE(held, held.message);
  CHECK(held.nodes[0].state == NodeState::ok);
  plain[1].start();

  const auto old_master = f.current_master_index("m1");
  const auto new_master = f.failover("m1");
  REQUIRE(new_master != old_master);
  // Replication may have copied the key before the failover: the promoted replica must not have it.
  f.delete_on_master("m1", "failover-res");

  auto excluded = [](const AcquireResult& r) {
    return r.nodes.size() == 3 && r.nodes[0].state == NodeState::excluded;
  };
  AcquireResult rb;
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        rb = b.try_acquire({"failover-res"}, ttl_opts(5s));
                        return excluded(rb) || bool(rb);
                      },
                      5000ms),
                  rb.message);
  CHECK_FALSE(rb);  // m1's new master said yes, s3 said yes; m1's vote must not count
  CHECK(rb.error == Errc::no_quorum);
  CHECK_MESSAGE(rb.nodes[0].detail.find("restart guard") != std::string::npos, rb.nodes[0].detail);

  // A process that starts after the failover never saw the old master.
  Client c(opts);
  AcquireResult rc;
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        rc = c.try_acquire({"failover-res"}, ttl_opts(5s));
                        return excluded(rc) || bool(rc);
                      },
                      5000ms),
                  rc.message);
  CHECK_FALSE(rc);
  CHECK_MESSAGE(rc.nodes[0].detail.find("promoted") != std::string::npos, rc.nodes[0].detail);

  // After the quarantine (3 s, from 2 s after the switch) the new master votes again.
  CHECK(eventually(
      [&] {
        auto r = c.try_acquire({"after-" + std::to_string(rand())}, ttl_opts(5s));
        return r.nodes.size() == 3 && r.nodes[0].state == NodeState::ok;
      },
      9000ms));
  CHECK(a.try_release(held.lock));
}

TEST_CASE(
    "Sentinel promotion quarantine: waiters wait the retry delay, not each other's rollbacks") {
  // Votes: m1 and m2 (Sentinel-managed, a replica each) and one standalone server. m1 and m2 fail
  // over, and their promoted replicas' votes wait out the quarantine: every node is up, and no
  // quorum can be had. Three clients wait for one lock with wake-ups (issue 41, item 1): each
  // rollback of a failed attempt named another waiter, which tried again at once, hundreds of
  // attempts per client and second. A failure of no quorum waits the retry delay whatever is
  // heard meanwhile: about wait / delay attempts per client; at most twice that, plus the first.
  SentinelFixture f(config({"m1", "m2"}));
  RedisCluster plain(1);
  const std::string csv =
      sentinel_address(f, "m1") + "," + sentinel_address(f, "m2") + "," + plain.nodes_csv();
  auto opts = sentinel_options(csv);
  opts.restart_quarantine = 120s;  // longer than the test
  opts.reconnect_max = 100ms;
  opts.retry_delay = 100ms;
  opts.retry_jitter = 50ms;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<Client>(opts));
    REQUIRE(eventually([&] { return all_up(*clients.back(), "storm"); }, 5000ms));
  }
  f.failover("m1");
  f.failover("m2");
  // Every client knows both new masters, and counts neither.
  for (auto& c : clients) {
    AcquireResult probe;
    REQUIRE_MESSAGE(eventually(
                        [&] {
                          probe = c->try_acquire({"storm-probe"}, ttl_opts(5s));
                          return count_state(probe.nodes, NodeState::excluded) == 2;
                        },
                        10s),
                    probe.message);
  }
  auto total_calls = [&] {
    long long n = 0;
    const std::string info = plain[0].command({"INFO", "commandstats"}).str;
    for (auto at = info.find("calls="); at != std::string::npos; at = info.find("calls=", at + 1))
      n += std::stoll(info.substr(at + 6));
    return n;
  };
  const long long calls_before = total_calls();
  constexpr auto wait = 2000ms;
  std::vector<std::future<AcquireResult>> waits;
  for (auto& c : clients) {
    waits.push_back(std::async(
        std::launch::async, [&c, wait] { return c->try_acquire({"storm"}, ttl_opts(5s, wait)); }));
  }
  std::vector<int> attempts;
  for (auto& w : waits) {
    auto r = w.get();
    CHECK_FALSE(r);
    attempts.push_back(r.attempts);
  }
  const long long calls = total_calls() - calls_before;
  MESSAGE("attempts per client " << attempts[0] << ", " << attempts[1] << ", " << attempts[2]
                                 << "; commands on the standalone node " << calls);
  for (int a : attempts) CHECK(a <= 2 * static_cast<int>(wait / opts.retry_delay) + 2);
  CHECK(eventually([&] { return !plain[0].exists("storm"); }));
}

TEST_CASE(
    "replicated votes: a vote counts once a replica has the key, so the promoted one has it") {
  SentinelFixture f(config({"m1", "m2", "m3"}));
  const std::string csv =
      sentinel_address(f, "m1") + "," + sentinel_address(f, "m2") + "," + sentinel_address(f, "m3");
  auto opts = sentinel_options(csv);
  opts.min_replicas = 1;
  // Which votes count, not how fast a replica answers (as "per-vote" below).
  opts.node_timeout = 1s;
  opts.replica_timeout = 800ms;
  Client client(opts);
  auto r = client.try_acquire({"replicated"}, ttl_opts(30s));
  REQUIRE_MESSAGE(r, r.message);
  // Every vote that counted was acknowledged by m1's replica: a failover now keeps the key.
  std::vector<std::string> voted;
  for (std::size_t i = 0; i < r.nodes.size(); ++i) {
    if (r.nodes[i].state == NodeState::ok) voted.push_back("m" + std::to_string(i + 1));
  }
  REQUIRE(voted.size() >= 2);
  const auto& name = voted.front();
  f.failover(name);
  CHECK(f.current_master(name).command({"GET", "replicated"}).str == r.lock.token());
  CHECK(client.try_release(r.lock));

  // Two replicas asked of masters that have one: no vote counts, and nothing is left behind.
  auto strict = opts;
  strict.min_replicas = 2;
  Client c2(strict);
  auto r2 = c2.try_acquire({"replicated-2"}, ttl_opts(30s));
  CHECK_FALSE(r2);
  REQUIRE(r2.nodes.size() == 3);
  int refused = 0;
  for (const auto& n : r2.nodes) {
    if (n.state == NodeState::pending) continue;  // the outcome was known without it
    CHECK_MESSAGE(n.detail.find("reached 1 of 2 replicas") != std::string::npos,
                  n.node << ": " << n.detail);
    ++refused;
  }
  CHECK(refused >= 2);
  CHECK(eventually([&] {
    for (const auto* m : {"m1", "m2", "m3"}) {
      if (f.current_master(m).command({"EXISTS", "replicated-2"}).integer != 0) return false;
    }
    return true;
  }));
}

TEST_CASE("replicated votes: the deadline covers WAIT's timeout and the server's tick") {
  // Redis answers a WAIT that timed out only at its next cron tick (every 100 ms): here between
  // 249 and 349 ms after it was sent, past a deadline of node_timeout (250 ms) alone, which
  // turned every vote into a bare "timeout" (the CLI's default 50 ms and replica timeout of 25 ms
  // did that too). The vote's deadline is node_timeout + replica_timeout + the tick.
  RedisCluster c(3);
  auto opts = options_for(c);
  opts.min_replicas = 1;
  opts.replica_timeout = opts.node_timeout - 1ms;
  Client client(opts);
  auto r = client.try_acquire({"wait-deadline"}, ttl_opts(10s));
  CHECK_FALSE(r);
  int refused = 0;
  for (const auto& n : r.nodes) {
    if (n.state == NodeState::pending) continue;  // the outcome was known without it
    CHECK_MESSAGE(n.state == NodeState::error, n.node << ": " << to_string(n.state));
    CHECK_MESSAGE(n.detail.find("reached 0 of 1 replicas") != std::string::npos, n.detail);
    ++refused;
  }
  CHECK(refused >= 2);
  CHECK(eventually([&] { return c.count_with_key("wait-deadline") == 0; }));
}

TEST_CASE("replicated votes per vote: ?min_replicas= on one master, the others without") {
  RedisCluster c(3);
  RedisServer replica;
  replica.replica_of(c[0]);
  REQUIRE(eventually([&] {
    // Synced, not only connected: WAIT counts the acknowledgements of online replicas.
    return c[0].command({"INFO", "replication"}).str.find("state=online") != std::string::npos;
  }));
  // Vote 0 has a replica and waits for it; votes 1 and 2 have none and do not wait. With
  // Options::min_replicas = 1 for all, votes 1 and 2 could never vote.
  const std::string first = test_tls() ? "rediss://127.0.0.1:" + std::to_string(c[0].tls_port())
                                       : "redis://" + c[0].address();
  auto opts = options_for(first + "?min_replicas=1," + client_csv(c, {1, 2}));
  REQUIRE(opts.nodes[0].min_replicas == 1);
  // This is about which votes wait, not how fast a replica answers: on a loaded machine the
  // replica's acknowledgement missed the default 125 ms once (the suite beside its sanitizer
  // builds).
  opts.node_timeout = 1s;
  opts.replica_timeout = 800ms;
  c[2].kill();  // the quorum of two needs vote 0's replicated vote
  Client client(opts);
  const long long waits_before = calls_of(c[0], "wait");
  auto r = client.try_acquire({"per-vote"}, ttl_opts(10s));
  REQUIRE_MESSAGE(r, r.message);
  CHECK(r.nodes[0].state == NodeState::ok);
  CHECK(calls_of(c[0], "wait") > waits_before);
  CHECK(calls_of(c[1], "wait") == 0);
  CHECK(replica.command({"GET", "per-vote"}).str == r.lock.token());
  CHECK(client.try_release(r.lock));
  auto all = opts;
  all.nodes[0].min_replicas.reset();
  all.min_replicas = 1;
  Client everyone(all);
  auto none = everyone.try_acquire({"per-vote-all"}, ttl_opts(10s));
  CHECK_FALSE(none);  // vote 1 has no replica: NOREPLICAS, and vote 2 is down
  REQUIRE(none.nodes.size() == 3);
  CHECK_MESSAGE(none.nodes[1].detail.find("NOREPLICAS") != std::string::npos, none.nodes[1].detail);
}

TEST_CASE("replicated votes on standalone masters without replicas: no vote, with the reason") {
  RedisCluster c(3);
  auto opts = options_for(c);
  // The WAITs below time out after 20 ms, answered at the server's next cron tick (up to 100 ms
  // later): the node deadline leaves a loaded machine room, or the answer would be a timeout.
  opts.node_timeout = 1s;
  opts.min_replicas = 1;
  opts.replica_timeout = 20ms;
  Client client(opts);
  auto r = client.try_acquire({"no-replicas"}, ttl_opts(5s));
  CHECK_FALSE(r);
  int refused = 0;
  for (const auto& n : r.nodes) {
    if (n.state == NodeState::pending) continue;  // the outcome was known without it
    CHECK(n.state == NodeState::error);
    CHECK_MESSAGE(n.detail.find("reached 0 of 1 replicas") != std::string::npos, n.detail);
    ++refused;
  }
  CHECK(refused >= 2);
  CHECK(eventually([&] { return c.count_with_key("no-replicas") == 0; }));
  // A refusal is not turned into an error: a held key stays "held by another".
  opts.min_replicas = 0;
  Client plain(opts);
  auto held = plain.try_acquire({"no-replicas"}, ttl_opts(5s));
  REQUIRE(held);
  auto other = client.try_acquire({"no-replicas"}, ttl_opts(5s));
  CHECK(other.error == Errc::contended);
  CHECK(plain.try_release(held.lock));
}

TEST_CASE("rediss+sentinel://: TLS to the sentinels and to the master they name") {
  redlock::test::TlsFixture certs;
  auto sc = config({"m1"});
  auto tls = certs.server_options("no");
  tls.tls_only = true;     // no plaintext port anywhere
  tls.replication = true;  // replicas and sentinels reach the master over TLS
  sc.server.tls = tls;
  SentinelFixture f(sc);
  RedisCluster plain(2);
  const std::string csv =
      "rediss+sentinel://" + f.sentinel_addresses().at(0) + "/m1," + plain.nodes_csv();
  auto opts = sentinel_options(csv);
  opts.tls.ca_file = certs.ca_cert();
  Client client(opts);
  auto r = client.try_acquire({"tls-sentinel"}, ttl_opts(10s));
  REQUIRE_MESSAGE(r, r.message);
  auto st = client.status("tls-sentinel");
  REQUIRE(st.nodes.size() == 3);
  CHECK_MESSAGE(st.nodes[0].up, st.nodes[0].detail);
  CHECK(st.nodes[0].value == r.lock.token());
  CHECK(f.current_master("m1").command({"GET", "tls-sentinel"}).str == r.lock.token());
  CHECK(client.try_release(r.lock));

  // The same sentinel over plaintext: no vote (the port speaks TLS only).
  Client wrong(sentinel_options("redis+sentinel://" + f.sentinel_addresses().at(0) + "/m1," +
                                plain.nodes_csv()));
  auto st2 = wrong.status("tls-sentinel");
  CHECK_FALSE(st2.nodes[0].up);
}
