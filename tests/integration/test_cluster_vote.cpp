// Redis Clusters as votes (redis+cluster:// addresses), against real clusters (ClusterFixture:
// redis-server --cluster-enabled yes): every lock kind through three 3-master clusters, a mix with
// standalone votes, keys whose slots live on different masters, slot migrations (MOVED, ASK) while
// locks are held and taken, and a cluster failover with and without replicated votes.
#include <algorithm>
#include <atomic>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cluster_fixture.hpp"
#include "common.hpp"
#include "fake_node.hpp"
#include "redlock/keys.hpp"
#include "tls_fixture.hpp"

using namespace itest;
using namespace redlock;
using redlock::test::ClusterConfig;
using redlock::test::ClusterFixture;
using redlock::test::FakeNode;

namespace {

std::string cluster_address(const ClusterFixture& c, const char* scheme = "redis+cluster://") {
  return scheme + c.seed_address();
}

Options cluster_options(const std::string& csv) {
  Options o = options_for(csv);
  o.node_timeout = 500ms;  // a vote's first answer waits for the slot map and a handshake
  o.connect_timeout = 500ms;
  return o;
}

ClusterConfig masters_only() {
  ClusterConfig cc;
  cc.masters = 3;
  return cc;
}

ClusterConfig with_replicas() {
  ClusterConfig cc;
  cc.masters = 3;
  cc.replicas_per_master = 1;
  return cc;
}

// The value of `key` on the master of `c` that owns its slot ("" when absent).
std::string value_on_owner(const ClusterFixture& c, const std::string& key) {
  const auto r = c.node(c.owner_of_key(key)).command({"GET", key});
  return r.type == redlock::test::Reply::Type::string ? r.str : std::string();
}

bool absent_everywhere(const ClusterFixture& c, const std::string& key) {
  for (auto m : c.masters()) {
    if (c.node(m).command({"EXISTS", key}).integer != 0) return false;
  }
  return true;
}

// Keys with the given slots' owners distinct (for multi-resource locks across masters).
std::vector<std::string> keys_on_distinct_masters(const ClusterFixture& c, const std::string& base,
                                                  std::size_t n) {
  std::vector<std::string> out;
  std::vector<std::size_t> owners;
  for (int i = 0; out.size() < n && i < 1000; ++i) {
    const std::string k = base + std::to_string(i);
    const auto o = c.owner_of_key(k);
    if (std::find(owners.begin(), owners.end(), o) != owners.end()) continue;
    owners.push_back(o);
    out.push_back(k);
  }
  REQUIRE(out.size() == n);
  return out;
}

// How many keys master `m` of `c` holds in `slot` (whatever the slot's migration state).
long long keys_in_slot(const ClusterFixture& c, std::size_t m, int slot) {
  return c.node(m).command({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).integer;
}

}  // namespace

TEST_CASE("cluster votes: every lock kind through three 3-master clusters") {
  ClusterFixture c0(masters_only()), c1(masters_only()), c2(masters_only());
  const std::vector<const ClusterFixture*> all = {&c0, &c1, &c2};
  const std::string csv =
      cluster_address(c0) + "," + cluster_address(c1) + "," + cluster_address(c2);
  Client client(cluster_options(csv));

  {  // plain: the key is on the master that owns its slot, in each cluster
    auto r = client.try_acquire({"cv-job"}, ttl_opts(10s));
    REQUIRE_MESSAGE(r, r.message);
    for (const auto* c : all) {
      CHECK(eventually([&] { return value_on_owner(*c, "cv-job") == r.lock.token(); }));
    }
    auto st = client.status("cv-job");
    for (std::size_t i = 0; i < 3; ++i) {
      const auto& n = st.nodes[i];
      CHECK_MESSAGE(n.up, n.detail);
      CHECK(n.value == r.lock.token());
      const auto& c = *all[i];
      CHECK(n.where == "slot " + std::to_string(c.key_slot("cv-job")) + " on " +
                           c.address(c.owner_of_key("cv-job")));
    }
    auto e = client.try_extend(r.lock, 20s);
    REQUIRE_MESSAGE(e, e.message);
    // Decided at two of three clusters: c1's may be the one still on its way.
    CHECK(eventually([&] {
      return c1.node(c1.owner_of_key("cv-job")).command({"PTTL", "cv-job"}).integer > 10'000;
    }));
    CHECK(client.try_release(r.lock));
    for (const auto* c : all) CHECK(absent_everywhere(*c, "cv-job"));
  }

  {  // fencing: the counter lives beside the key, in its slot
    AcquireOptions o = ttl_opts(10s);
    o.fence = true;
    auto a = client.try_acquire({"cv-fenced"}, o);
    REQUIRE_MESSAGE(a, a.message);
    REQUIRE(a.lock.fence());
    REQUIRE(client.try_release(a.lock));
    auto b = client.try_acquire({"cv-fenced"}, o);
    REQUIRE_MESSAGE(b, b.message);
    CHECK(*b.lock.fence() > *a.lock.fence());
    const auto fk = derived_key("cv-fenced", KeyRole::fence);
    for (const auto* c : all) {
      CHECK(c->owner_of_key(fk) == c->owner_of_key("cv-fenced"));
      CHECK(c->node(c->owner_of_key(fk)).command({"EXISTS", fk}).integer == 1);
    }
    CHECK(client.try_release(b.lock));
    // A name with a '}' but no hash tag: its counter takes a number of the same slot as tag,
    // so the fenced script (lock key + counter) runs on one master (else CROSSSLOT).
    for (const std::string odd : {"cv}odd", "cv{}odd}", "}{"}) {
      auto f = client.try_acquire({odd}, o);
      REQUIRE_MESSAGE(f, odd << ": " << f.message);
      const auto k = derived_key(odd, KeyRole::fence);
      for (const auto* c : all) CHECK(c->owner_of_key(k) == c->owner_of_key(odd));
      CHECK(client.try_release(f.lock));
    }
  }

  {  // read-write: readers share, a writer waits for them
    AcquireOptions read = ttl_opts(10s);
    read.mode = LockMode::read;
    AcquireOptions write = ttl_opts(10s);
    write.mode = LockMode::write;
    auto r1 = client.try_acquire({"cv-rw"}, read);
    auto r2 = client.try_acquire({"cv-rw"}, read);
    REQUIRE_MESSAGE(r1, r1.message);
    REQUIRE_MESSAGE(r2, r2.message);
    auto w = client.try_acquire({"cv-rw"}, write);
    CHECK_FALSE(w);
    CHECK(client.try_release(r1.lock));
    CHECK(client.try_release(r2.lock));
    auto w2 = client.try_acquire({"cv-rw"}, write);
    REQUIRE_MESSAGE(w2, w2.message);
    CHECK(client.try_release(w2.lock));
  }

  {  // fair: a waiter gets the lock after the holder's release
    AcquireOptions fair = ttl_opts(10s, 5s);
    fair.fair = true;
    auto first = client.try_acquire({"cv-fair"}, fair);
    REQUIRE_MESSAGE(first, first.message);
    Client other(cluster_options(csv));
    std::atomic<bool> got{false};
    std::thread waiter([&] {
      auto r = other.try_acquire({"cv-fair"}, fair);
      got = static_cast<bool>(r);
      if (r) (void)other.try_release(r.lock);
    });
    // The waiter is queued (its ticket in the queue on every cluster) before the release.
    CHECK(eventually(
        [&] {
          auto st = client.status("cv-fair");
          return std::all_of(st.nodes.begin(), st.nodes.end(),
                             [](const NodeKeyState& n) { return n.queue_length == 1; });
        },
        3s));
    CHECK(client.try_release(first.lock));
    waiter.join();
    CHECK(got);
  }

  {  // multi-resource: resources on different masters, all or nothing
    const auto keys = keys_on_distinct_masters(c0, "cv-multi-", 3);
    auto r = client.try_acquire(keys, ttl_opts(10s));
    REQUIRE_MESSAGE(r, r.message);
    // Decided at two of three clusters: the third's SETs may still be on their way.
    CHECK(eventually([&] {
      for (const auto* c : all) {
        for (const auto& k : keys) {
          if (value_on_owner(*c, k) != r.lock.token()) return false;
        }
      }
      return true;
    }));
    auto e = client.try_extend(r.lock, 20s);
    REQUIRE_MESSAGE(e, e.message);
    CHECK(client.try_release(r.lock));
    for (const auto* c : all) {
      for (const auto& k : keys) CHECK(absent_everywhere(*c, k));
    }
    // One resource held by someone else: no vote anywhere, and the others are not left behind
    // (the parts that granted were taken back).
    auto blocker = client.try_acquire({keys[1]}, ttl_opts(10s));
    REQUIRE(blocker);
    auto refused = client.try_acquire(keys, ttl_opts(10s));
    CHECK_FALSE(refused);
    for (const auto* c : all) {
      CHECK(eventually(
          [&] { return absent_everywhere(*c, keys[0]) && absent_everywhere(*c, keys[2]); }));
    }
    CHECK(client.try_release(blocker.lock));
  }

  {  // auto-extension keeps a cluster-voted lock past its ttl (a longer one in a sanitizer build:
     // with 600 ms, one slow extension round under ASan on a busy machine lost it)
    const auto ttl = sanitized_build ? 3000ms : 600ms;
    LockOptions lo;
    lo.acquire = ttl_opts(ttl);
    lo.hold.auto_extend = true;
    auto g = client.lock({"cv-watchdog"}, lo);
    REQUIRE(g.owns());
    std::this_thread::sleep_for(ttl * 5 / 2);
    CHECK(g.owns());
    for (const auto* c : all) CHECK_FALSE(value_on_owner(*c, "cv-watchdog").empty());
    g.release();
    for (const auto* c : all) CHECK(absent_everywhere(*c, "cv-watchdog"));
  }
}

// Issue 43: every master of a cluster vote is probed at its own connect, and a plain lock's
// release and extend run natively on the master that owns the key where it can (Valkey 9: DELIFEQ
// and SET IFEQ; Redis 7.0: the scripts). status -v shows what every master serving slots can run.
TEST_CASE("cluster votes: each master is probed; native release and extend where it has them") {
  ClusterFixture c(masters_only());
  const auto delifeq = c.node(c.masters()[0]).command({"COMMAND", "INFO", "DELIFEQ"});
  const bool native =
      !delifeq.elements.empty() && delifeq.elements[0].type == redlock::test::Reply::Type::array;
  Client client(cluster_options(cluster_address(c)));
  // The probe of every master: the vote's capabilities once all three have answered theirs.
  for (const auto& k : keys_on_distinct_masters(c, "cvn-probe", 3))
    (void)client.try_acquire({k}, ttl_opts(1s));
  std::string caps;
  CHECK(eventually([&] {
    caps = client.status("cvn-job").nodes[0].capabilities;
    return caps.find("not probed") == std::string::npos;
  }));
  CHECK_MESSAGE(caps.find("scripts") != std::string::npos, caps);
  CHECK_MESSAGE((caps.find("DELIFEQ") != std::string::npos) == native, caps);
  CHECK_MESSAGE((caps.find("SET IFEQ") != std::string::npos) == native, caps);

  const auto& owner = c.node(c.owner_of_key("cvn-job"));
  const auto scripts_run = [&] { return calls_of(owner, "evalsha") + calls_of(owner, "eval"); };
  // A short uncontended hold: its release wakes nobody, so it is the plain compare-and-delete.
  long long before = scripts_run();
  const long long delifeq_before = calls_of(owner, "delifeq");
  auto r = client.try_acquire({"cvn-job"}, ttl_opts(10s));
  REQUIRE_MESSAGE(r, r.message);
  auto rel = client.try_release(r.lock);
  CHECK(rel.deleted == 1);
  CHECK(absent_everywhere(c, "cvn-job"));
  CHECK(calls_of(owner, "delifeq") - delifeq_before == (native ? 1 : 0));
  CHECK(scripts_run() - before == (native ? 0 : 1));
  // An extend: SET IFEQ PX where the master has it.
  auto r2 = client.try_acquire({"cvn-job"}, ttl_opts(10s));
  REQUIRE_MESSAGE(r2, r2.message);
  before = scripts_run();
  auto e = client.try_extend(r2.lock, 20s);
  REQUIRE_MESSAGE(e, e.message);
  CHECK(owner.command({"PTTL", "cvn-job"}).integer > 10'000);
  CHECK(scripts_run() - before == (native ? 0 : 1));
  CHECK(client.try_release(e.lock).deleted == 1);

  // Forced native: the master that owns the key is asked before anything is sent.
  Options forced = cluster_options(cluster_address(c));
  forced.commands = Options::Commands::native;
  Client nat(forced);
  for (const auto& k : keys_on_distinct_masters(c, "cvn-probe", 3))
    (void)nat.try_acquire({k}, ttl_opts(1s));
  CHECK(eventually([&] {
    return nat.status("cvn-job").nodes[0].capabilities.find("not probed") == std::string::npos;
  }));
  auto f = nat.try_acquire({"cvn-job"}, ttl_opts(10s));
  REQUIRE_MESSAGE(f, f.message);
  auto frel = nat.try_release(f.lock);
  if (native) {
    CHECK(frel.deleted == 1);
  } else {
    CHECK(frel.deleted == 0);
    REQUIRE(frel.nodes.size() == 1);
    CHECK_MESSAGE(
        frel.nodes[0].detail.find("cannot run here: " + c.address(c.owner_of_key("cvn-job")) +
                                  " has no") != std::string::npos,
        frel.nodes[0].detail);
    CHECK(client.try_release(f.lock).deleted == 1);
  }
}

TEST_CASE("cluster votes mix with standalone votes; a bad seed is no vote, with the reason") {
  ClusterFixture c(masters_only());
  RedisCluster plain(2);
  const std::string csv = cluster_address(c) + "," + client_csv(plain);
  Client client(cluster_options(csv));
  auto r = client.try_acquire({"mixed"}, ttl_opts(10s));
  REQUIRE_MESSAGE(r, r.message);
  CHECK(eventually([&] { return value_on_owner(c, "mixed") == r.lock.token(); }));
  CHECK(eventually([&] { return plain[1].command({"GET", "mixed"}).str == r.lock.token(); }));
  CHECK(client.try_release(r.lock));
  CHECK(absent_everywhere(c, "mixed"));

  // A standalone server named as a cluster, and a seed nobody listens on.
  Options o = cluster_options("redis+cluster://" + plain[0].address() + "," + cluster_address(c) +
                              ",redis+cluster://127.0.0.1:1");
  Client bad(o);
  auto b = bad.try_acquire({"mixed-2"}, ttl_opts(10s));
  CHECK_FALSE(b);
  REQUIRE(b.nodes.size() == 3);
  CHECK_MESSAGE(b.nodes[0].detail.find("cluster support disabled") != std::string::npos,
                b.nodes[0].detail);
  CHECK(b.nodes[1].state == NodeState::ok);
  CHECK(b.nodes[2].state == NodeState::down);

  // A master without a replica dies: the cluster stops serving (cluster-require-full-coverage),
  // and its vote is no vote with the server's words, not a timeout.
  const std::string key = "mixed-3";
  const auto owner = c.owner_of_key(key);
  c.node(c.other_master(owner)).kill();
  REQUIRE(eventually(
      [&] {
        return c.node(owner).command({"CLUSTER", "INFO"}).str.find("cluster_state:fail") !=
               std::string::npos;
      },
      10s));
  Client solo(cluster_options(cluster_address(c)));
  auto down = solo.try_acquire({key}, ttl_opts(10s));
  CHECK_FALSE(down);
  REQUIRE(down.nodes.size() == 1);
  CHECK(down.nodes[0].state == NodeState::error);
  CHECK_MESSAGE(down.nodes[0].detail.find("CLUSTERDOWN") != std::string::npos,
                down.nodes[0].detail);
}

TEST_CASE("cluster votes: replicated votes for the cluster vote alone (?min_replicas=1)") {
  // The cluster's masters have replicas, the standalone masters none: Options::min_replicas
  // would take the standalone votes away; the cluster's address asks for it for itself.
  ClusterFixture c(with_replicas());
  RedisCluster plain(2);
  Options o = cluster_options(cluster_address(c) + "?min_replicas=1," + client_csv(plain));
  REQUIRE(o.nodes[0].min_replicas == 1);
  // Room for the replica's acknowledgement on a loaded machine (the default, half of node_timeout,
  // 250 ms here, was missed once in an ASan build beside stress-ng): what this case checks is
  // which vote waits, not how fast.
  o.replica_timeout = 1000ms;
  o.node_timeout = 1500ms;
  plain[1].kill();  // the quorum of two needs the cluster's vote
  Client client(o);
  const std::string key = "per-vote-cluster";
  const auto owner = c.owner_of_key(key);
  const long long waits_before = calls_of(c.node(owner), "wait");
  auto r = client.try_acquire({key}, ttl_opts(10s));
  REQUIRE_MESSAGE(r, r.message);
  CHECK(r.nodes[0].state == NodeState::ok);
  CHECK(calls_of(c.node(owner), "wait") > waits_before);  // the vote waited for a replica
  CHECK(calls_of(plain[0], "wait") == 0);                 // the standalone one did not
  CHECK(client.try_release(r.lock));
}

TEST_CASE("cluster votes: slots migrated while locks are held and taken (MOVED, ASK)") {
  ClusterFixture c0(masters_only()), c1(masters_only()), c2(masters_only());
  const std::string csv =
      cluster_address(c0) + "," + cluster_address(c1) + "," + cluster_address(c2);
  Client client(cluster_options(csv));

  // Held: a lock whose slot moves to another master in every cluster keeps being extended and is
  // released where its key now lives.
  auto held = client.try_acquire({"mig-held"}, ttl_opts(20s));
  REQUIRE_MESSAGE(held, held.message);
  std::atomic<bool> stop{false};
  std::atomic<int> taken{0}, failed_release{0};
  // Taken: another client locks and unlocks keys of the migrating slots all along.
  std::thread churn([&] {
    Client other(cluster_options(csv));
    int i = 0;
    while (!stop) {
      const std::string k = "{mig-held}churn-" + std::to_string(i++ % 20);
      auto r = other.try_acquire({k}, ttl_opts(5s));
      if (r) {
        ++taken;
        if (!other.try_release(r.lock)) ++failed_release;
      }
    }
  });
  for (auto* c : {&c0, &c1, &c2}) {
    const int slot = c->key_slot("mig-held");
    c->migrate_slot(slot, c->other_master(c->owner_of_slot(slot)));
  }
  auto e = client.try_extend(held.lock, 30s);
  CHECK_MESSAGE(e, e.message);
  for (auto* c : {&c0, &c1, &c2}) CHECK(value_on_owner(*c, "mig-held") == held.lock.token());

  // ASK: a slot half-migrated (its keys not moved yet): a new key is set on the importing master.
  const std::string fresh = "{mig-ask}lock";
  for (auto* c : {&c0, &c1, &c2}) {
    const int slot = c->key_slot(fresh);
    c->begin_slot_migration(slot, c->other_master(c->owner_of_slot(slot)));
  }
  auto asked = client.try_acquire({fresh}, ttl_opts(10s));
  REQUIRE_MESSAGE(asked, asked.message);
  // A release that publishes (a lock rebuilt from its token, as `redlock-cli release` makes)
  // names the waiting mark and the queue too; during a migration the importing master answers
  // TRYAGAIN to a script over keys of which some are missing: the release goes again without them.
  const std::string during = "{mig-ask}during";
  auto mid = client.try_acquire({during}, ttl_opts(10s));
  REQUIRE_MESSAGE(mid, mid.message);
  auto rel = client.try_release(Lock::from_token({during}, mid.lock.token()));
  CHECK_MESSAGE(rel, rel.message);
  for (auto* c : {&c0, &c1, &c2}) {
    // Left in the half-migrated slot: `fresh` alone (COUNTKEYSINSLOT counts a node's own keys,
    // whatever the slot's state).
    CHECK(eventually([&] {
      long long n = 0;
      for (auto m : c->masters()) {
        n += c->node(m)
                 .command({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(c->key_slot(during))})
                 .integer;
      }
      return n == 1;
    }));
  }
  // TRYAGAIN: a lock over two keys of one slot, one of them already moved: the source cannot run
  // a script over both. That vote is no vote with the server's words (one vote alone here, so
  // the outcome waits for its answer).
  const std::vector<std::string> pair = {"{mig-pair}a", "{mig-pair}b"};
  Client solo(cluster_options(cluster_address(c0)));
  auto both = solo.try_acquire(pair, ttl_opts(20s));
  REQUIRE_MESSAGE(both, both.message);
  {
    const int slot = c0.key_slot(pair[0]);
    c0.begin_slot_migration(slot, c0.other_master(c0.owner_of_slot(slot)), {pair[0]});
    auto e2 = solo.try_extend(both.lock, 20s);
    CHECK_FALSE(e2);
    REQUIRE(e2.nodes.size() == 1);
    CHECK(e2.nodes[0].state == NodeState::error);
    CHECK_MESSAGE(e2.nodes[0].detail.find("TRYAGAIN") != std::string::npos, e2.nodes[0].detail);
    c0.finish_slot_migration(slot);
  }
  CHECK(solo.try_release(both.lock));
  for (const auto& k : pair) CHECK(absent_everywhere(c0, k));
  stop = true;
  churn.join();
  CHECK(taken > 0);
  CHECK(failed_release == 0);
  for (auto* c : {&c0, &c1, &c2}) {
    c->finish_slot_migration(c->key_slot(fresh));
    CHECK(value_on_owner(*c, fresh) == asked.lock.token());
  }
  CHECK(client.try_release(asked.lock));
  CHECK(client.try_release(held.lock));
  for (auto* c : {&c0, &c1, &c2}) {
    CHECK(absent_everywhere(*c, "mig-held"));
    CHECK(absent_everywhere(*c, fresh));
    for (int i = 0; i < 20; ++i)
      CHECK(absent_everywhere(*c, "{mig-held}churn-" + std::to_string(i)));
  }
}

TEST_CASE("cluster votes: a master killed and its replica promoted") {
  // Vote 0 is a cluster with replicas; votes 1 and 2 are standalone masters. A holder took the
  // lock while vote 2 was down (so on votes 0 and 1); vote 2 comes back empty; vote 0's master
  // for the key is killed and its replica promoted without the key (deleted by hand: the write
  // asynchronous replication can lose). Votes 0 and 2 would then hand the lock to a second client.
  ClusterFixture c(with_replicas());
  RedisCluster plain(2);
  const std::string csv = cluster_address(c) + "," + client_csv(plain);
  Options o = cluster_options(csv);
  Client holder(o);
  plain[1].kill();
  auto held = holder.try_acquire({"promo"}, ttl_opts(30s));
  REQUIRE_MESSAGE(held, held.message);
  plain[1].start();
  // Long-lived clients that know the slot map from before the failover (and vote 2 only as it
  // is now: its restart is the restart guard's business, not this test's).
  Client contender(o);
  Options unguarded_opts = o;
  unguarded_opts.restart_quarantine = Millis{0};
  Client unguarded(unguarded_opts);
  for (auto* cl : {&contender, &unguarded}) {
    auto warm = cl->try_acquire({"promo-warm"}, ttl_opts(1s));
    REQUIRE_MESSAGE(warm, warm.message);
    CHECK(cl->try_release(warm.lock));
  }
  const auto old_master = c.owner_of_key("promo");
  REQUIRE(c.node(old_master).wait_replicated(1, 5000ms));
  const auto promoted = c.kill_master_and_wait_failover(old_master);
  REQUIRE(c.node(promoted).command({"DEL", "promo"}).integer == 1);  // the write that was lost
  // Both clients have seen the new slot map (at most a second: they ask for it every second).
  const std::string now_on =
      "slot " + std::to_string(c.key_slot("promo")) + " on " + c.address(promoted);
  for (auto* cl : {&contender, &unguarded}) {
    CHECK(eventually([&] { return cl->status("promo").nodes[0].where == now_on; }, 5s));
  }

  auto second = contender.try_acquire({"promo"}, ttl_opts(30s));
  CHECK_FALSE(second);
  REQUIRE(second.nodes.size() == 3);
  CHECK_MESSAGE(second.nodes[0].state == NodeState::excluded, second.nodes[0].detail);
  CHECK_MESSAGE(second.nodes[0].detail.find("replica") != std::string::npos,
                second.nodes[0].detail);
  // Without the guard the lock is handed out twice: what the guard is for. (Once the refused
  // attempt's rollback has taken its key back from the promoted master.)
  CHECK(eventually([&] { return c.node(promoted).command({"EXISTS", "promo"}).integer == 0; }));
  auto twice = unguarded.try_acquire({"promo"}, ttl_opts(30s));
  CHECK_MESSAGE(twice, twice.message);
  if (twice) CHECK(unguarded.try_release(twice.lock));

  {  // replicated votes (the cluster vote alone: the standalone masters have no replicas)
    Options ro = cluster_options(cluster_address(c));
    ro.min_replicas = 1;
    ro.replica_timeout = 1000ms;
    ro.node_timeout = 1500ms;
    Client replicated(ro);
    // A key whose master has a replica running (not the one promoted above).
    std::string key;
    for (int i = 0; key.empty() && i < 1000; ++i) {
      const std::string k = "promo-repl-" + std::to_string(i);
      if (!c.replicas_of(c.owner_of_key(k)).empty()) key = k;
    }
    REQUIRE(!key.empty());
    auto r = replicated.try_acquire({key}, ttl_opts(30s));
    REQUIRE_MESSAGE(r, r.message);
    const auto m = c.owner_of_key(key);
    const auto p = c.kill_master_and_wait_failover(m);
    CHECK(c.node(p).command({"GET", key}).str == r.lock.token());
    // A replicated vote asks for more replicas than a master has (the promoted one has none
    // running): no vote, with the reason, and no key left.
    Options many = ro;
    many.min_replicas = 2;
    Client greedy(many);
    auto g = greedy.try_acquire({"promo-greedy"}, ttl_opts(5s));
    CHECK_FALSE(g);
    REQUIRE(g.nodes.size() == 1);
    CHECK(g.nodes[0].state != NodeState::ok);
    CHECK_MESSAGE(g.nodes[0].detail.find("NOREPLICAS") != std::string::npos, g.nodes[0].detail);
    CHECK(eventually([&] { return absent_everywhere(c, "promo-greedy"); }));
  }
}

TEST_CASE("cluster votes over TLS: rediss+cluster:// to a cluster that announces its TLS ports") {
  redlock::test::TlsFixture tls;
  ClusterConfig cc = masters_only();
  cc.server.tls = tls.server_options("no");
  cc.server.tls->cluster = true;
  ClusterFixture c(cc);
  Options o = cluster_options(cluster_address(c, "rediss+cluster://"));
  o.tls.ca_file = tls.ca_cert();
  Client client(o);
  const auto keys = keys_on_distinct_masters(c, "tls-cv-", 2);
  auto r = client.try_acquire(keys, ttl_opts(10s));
  REQUIRE_MESSAGE(r, r.message);
  for (const auto& k : keys) {
    CHECK(c.node(c.owner_of_key(k)).command({"GET", k}).str == r.lock.token());
  }
  CHECK(client.try_release(r.lock));
}

TEST_CASE("cluster votes: a slot that leaves a promoted master keeps its quarantine (ASK, MOVED)") {
  // As above: vote 0 a cluster with replicas, votes 1 and 2 standalone; the holder took the lock
  // while vote 2 was down, vote 2 came back empty. Vote 0's master for the key is failed over to
  // its replica, which lost the key, and the contender sees the promoted master in quarantine.
  // Then the slot migrates away from it: first half-way (the promoted master answers ASK, as it
  // has no key, and the importing master grants), then wholly (MOVED, then the slot map). The
  // answers of the other master are about keys that came from the promoted one: they must wait
  // out its quarantine too, or votes 0 and 2 hand the lock out twice (found by the chaos mix
  // cluster-migrate-failover, seed 103: an overlap during the ASK phase of such a migration).
  ClusterFixture c(with_replicas());
  RedisCluster plain(2);
  const std::string csv = cluster_address(c) + "," + client_csv(plain);
  Options o = cluster_options(csv);
  Client holder(o);
  plain[1].kill();
  const std::string key = "promo-mig";
  auto held = holder.try_acquire({key}, ttl_opts(30s));
  REQUIRE_MESSAGE(held, held.message);
  plain[1].start();
  Client contender(o);
  auto warm = contender.try_acquire({"promo-mig-warm"}, ttl_opts(1s));
  REQUIRE_MESSAGE(warm, warm.message);
  CHECK(contender.try_release(warm.lock));

  // One attempt each: a failed attempt's retries leave waiting marks, which are not the point.
  const auto once = ttl_opts(30s, std::nullopt, 0);
  const int slot = c.key_slot(key);
  const auto old_master = c.owner_of_slot(slot);
  REQUIRE(c.node(old_master).wait_replicated(1, 5000ms));
  const auto replicas = c.replicas_of(old_master);
  REQUIRE(!replicas.empty());
  const auto promoted = replicas.front();
  c.manual_failover(promoted, redlock::test::FailoverMode::graceful, [&](std::size_t p) {
    (void)c.node(p).command({"DEL", key});  // the write replication lost
  });
  const std::string on_promoted = "slot " + std::to_string(slot) + " on " + c.address(promoted);
  REQUIRE(eventually([&] { return contender.status(key).nodes[0].where == on_promoted; }, 5s));
  auto refused = contender.try_acquire({key}, once);
  CHECK_FALSE(refused);
  CHECK_MESSAGE(refused.nodes.at(0).state == NodeState::excluded, refused.nodes.at(0).detail);
  // (Once the refused attempt's rollback has taken its key back from the promoted master.)
  CHECK(eventually([&] { return c.node(promoted).command({"EXISTS", key}).integer == 0; }));

  // ASK: the promoted master is the source of a migration and has no key.
  const auto other = c.other_master(promoted);
  c.begin_slot_migration(slot, other);
  auto asked = contender.try_acquire({key}, once);
  CHECK_FALSE(asked);
  CHECK_MESSAGE(asked.nodes.at(0).state == NodeState::excluded, asked.nodes.at(0).detail);
  // Excluded for the promotion: through the ASK, or (seen under --stress, when the contender's
  // map showed the old master without slots before it met the promoted one) by the slot's taint
  // from the old master's failover, which is checked first. Either keeps the quarantine.
  const std::string failed_over =
      "came from master " + c.address(old_master) + " (it serves no slot any more: a failover)";
  const auto for_promotion = [&](const std::string& detail, const std::string& how) {
    return detail.find(how + c.address(promoted)) != std::string::npos ||
           detail.find(failed_over) != std::string::npos;
  };
  CHECK_MESSAGE(for_promotion(asked.nodes.at(0).detail, "ASK from master "),
                asked.nodes.at(0).detail);
  if (asked) CHECK(contender.try_release(asked.lock));

  // MOVED, then the slot map: the slot is the other master's now. (Without the key the refused
  // attempt left there: its rollback, the release script over the lock key and its derived keys,
  // got TRYAGAIN from the importing master, which refuses a multi-key command with missing keys
  // while it imports the slot; the key would only make the next answers "held".)
  c.finish_slot_migration(slot);
  (void)c.node(other).command({"DEL", key});
  auto moved = contender.try_acquire({key}, once);
  CHECK_FALSE(moved);
  CHECK_MESSAGE(moved.nodes.at(0).state == NodeState::excluded, moved.nodes.at(0).detail);
  CHECK_MESSAGE(for_promotion(moved.nodes.at(0).detail, "came from master "),
                moved.nodes.at(0).detail);
  if (moved) CHECK(contender.try_release(moved.lock));
  CHECK(eventually([&] { return keys_in_slot(c, other, slot) == 0; }));
  const std::string on_other = "slot " + std::to_string(slot) + " on " + c.address(other);
  REQUIRE(eventually([&] { return contender.status(key).nodes[0].where == on_other; }, 5s));
  auto mapped = contender.try_acquire({key}, once);
  CHECK_FALSE(mapped);
  CHECK_MESSAGE(mapped.nodes.at(0).state == NodeState::excluded, mapped.nodes.at(0).detail);
  CHECK_MESSAGE(for_promotion(mapped.nodes.at(0).detail, "came from master "),
                mapped.nodes.at(0).detail);
  if (mapped) CHECK(contender.try_release(mapped.lock));
  CHECK(holder.try_release(held.lock));
}

TEST_CASE("cluster votes: a waiter is woken by the release, through any master") {
  // The release publishes on the waiter's client's own channel from the master of the lock's
  // slot; the client listens on the master of its channel's slot, which is usually another one:
  // the cluster bus carries the message across.
  ClusterFixture c0(masters_only()), c1(masters_only()), c2(masters_only());
  const std::vector<const ClusterFixture*> all = {&c0, &c1, &c2};
  const std::string csv =
      cluster_address(c0) + "," + cluster_address(c1) + "," + cluster_address(c2);
  Client holder(cluster_options(csv));
  Options slow = cluster_options(csv);
  slow.retry_delay = 3000ms;
  slow.retry_jitter = 0ms;
  Client waiter(slow);
  auto held = holder.try_acquire({"cv-hot"}, ttl_opts(30s));
  REQUIRE_MESSAGE(held, held.message);
  auto w = std::async(std::launch::async, [&] {
    auto r = waiter.try_acquire({"cv-hot"}, ttl_opts(10s, 15s));
    return std::make_pair(std::move(r), Clock::now());
  });
  const std::string mark = derived_key("cv-hot", KeyRole::waiting);
  REQUIRE(eventually(
      [&] {
        for (const auto* c : all) {
          if (c->node(c->owner_of_key(mark)).command({"ZCARD", mark}).integer != 1) return false;
        }
        return true;
      },
      5000ms));
  std::this_thread::sleep_for(200ms);  // its attempt after subscribing is over: it sleeps 3 s
  const auto released = Clock::now();
  REQUIRE(holder.try_release(Lock::from_token({"cv-hot"}, held.lock.token())));
  auto [got, at] = w.get();
  REQUIRE_MESSAGE(got, got.message);
  CHECK_MESSAGE(at - released < 1500ms,
                "took " << ms_since(released) << " ms: it waited for its poll");
  CHECK(waiter.try_release(got.lock));
}

// --- trust in what the cluster says (core/trust.hpp) -------------------------------------------

namespace {

std::string bulk(const std::string& s) {
  return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
}

// A master that says so (redis_like() answers INFO without a role).
FakeNode::Responder fake_master(const std::string& run_id_char) {
  auto base = FakeNode::redis_like();
  return [base, run_id_char](const std::vector<std::string>& argv) -> std::optional<std::string> {
    if (!argv.empty() && argv[0] == "INFO") {
      return bulk("# Server\r\nredis_version:7.0.15\r\nrun_id:" + std::string(40, run_id_char[0]) +
                  "\r\nuptime_in_seconds:1000\r\n# Replication\r\nrole:master\r\nmaster_replid2:" +
                  std::string(40, '0') + "\r\n");
    }
    return base(argv);
  };
}

// A seed whose slot map gives every slot to `owner` (host:port), and which answers every key
// command with MOVED to `moved_to` when set.
FakeNode::Responder lying_seed(std::string owner_host, std::uint16_t owner_port,
                               std::string moved_to) {
  auto base = fake_master("a");
  return [=](const std::vector<std::string>& argv) -> std::optional<std::string> {
    if (argv.size() >= 2 && argv[0] == "CLUSTER" && argv[1] == "SLOTS") {
      return "*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n" + bulk(owner_host) + ":" +
             std::to_string(owner_port) + "\r\n" + bulk(std::string(40, 'e'));
    }
    static const std::set<std::string> handshake = {"AUTH",   "HELLO",  "INFO",   "PING",
                                                    "CONFIG", "SCRIPT", "CLIENT", "SELECT"};
    if (!moved_to.empty() && !argv.empty() && handshake.count(argv[0]) == 0) {
      return "-MOVED 866 " + moved_to + "\r\n";
    }
    return base(argv);
  };
}

bool saw(const FakeNode& n, const std::string& command) {
  const auto cmds = n.commands();
  return std::any_of(cmds.begin(), cmds.end(),
                     [&](const auto& argv) { return !argv.empty() && argv[0] == command; });
}

}  // namespace

TEST_CASE("cluster trust: a MOVED or slot-map address the user did not name gets nothing") {
  FakeNode target(fake_master("b"), {}, 0, "127.0.0.2");  // not a host the address names
  RedisCluster plain(2);
  struct Case {
    std::string what;
    std::unique_ptr<FakeNode> seed;
  };
  std::vector<Case> cases;
  {  // the seed owns every slot and redirects every key command to the target
    auto seed = std::make_unique<FakeNode>(lying_seed("127.0.0.1", 0, target.address()));
    const auto port = seed->port();
    seed->set_responder(lying_seed("127.0.0.1", port, target.address()));
    cases.push_back({"MOVED", std::move(seed)});
  }
  // the slot map itself names the target
  cases.push_back(
      {"CLUSTER SLOTS", std::make_unique<FakeNode>(lying_seed("127.0.0.2", target.port(), ""))});
  for (auto& c : cases) {
    CAPTURE(c.what);
    const std::string vote = "redis+cluster://locker:s3cret@" + c.seed->address();
    Client client(cluster_options(vote + "," + client_csv(plain)));
    auto r = client.try_acquire({"trust-res"}, ttl_opts(10s));
    REQUIRE_MESSAGE(r, r.message);  // the two plain nodes
    REQUIRE(r.nodes.size() == 3);
    CHECK(r.nodes[0].state != NodeState::ok);
    // (pending when the plain nodes decided first: status waits for every vote)
    auto st = client.status("trust-res");
    CHECK_FALSE(st.nodes[0].value == r.lock.token());
    const std::string why =
        r.nodes[0].state == NodeState::pending ? st.nodes[0].detail : r.nodes[0].detail;
    CHECK_MESSAGE(why.find(target.address()) != std::string::npos,
                  why << " | state " << int(r.nodes[0].state) << " " << r.nodes[0].detail
                      << " | status " << st.nodes[0].up << " " << st.nodes[0].detail);
    CHECK_MESSAGE(why.find("allow") != std::string::npos, why);
    CHECK(why.find("s3cret") == std::string::npos);
    CHECK(client.try_release(r.lock));
    CHECK(saw(*c.seed, "AUTH"));  // the seed is named: it gets the credentials
    CHECK(target.connections_accepted() == 0);
  }

  // Allowed by the user: the target is logged into and votes.
  const std::string vote = "redis+cluster://locker:s3cret@" + cases[0].seed->address();
  Client allowed(cluster_options(vote + "?allow=127.0.0.0/8," + client_csv(plain)));
  auto a = allowed.try_acquire({"trust-res-2"}, ttl_opts(10s));
  REQUIRE_MESSAGE(a, a.message);
  CHECK(eventually([&] { return saw(target, "AUTH") && saw(target, "SET"); }));
}

TEST_CASE("cluster votes: one seed, killed: the vote asks the masters it knows for the map") {
  ClusterFixture c(with_replicas());
  const std::size_t seed = 0;  // seed_address() is the first running node: a master
  REQUIRE(c.address(seed) == c.seed_address());
  Options o = cluster_options(cluster_address(c));
  o.restart_quarantine = 0ms;  // the promoted replica's answers count (not the subject here)
  Client client(o);
  // A key the seed serves: after the kill, only a fresh slot map finds its new master.
  std::string key;
  for (int i = 0; key.empty(); ++i) {
    if (c.owner_of_key("seedkey-" + std::to_string(i)) == seed)
      key = "seedkey-" + std::to_string(i);
  }
  auto r = client.try_acquire({key}, ttl_opts(10s));
  REQUIRE_MESSAGE(r, r.message);
  CHECK(client.try_release(r.lock));

  const auto promoted = c.kill_master_and_wait_failover(seed);
  AcquireResult after;
  CHECK_MESSAGE(eventually(
                    [&] {
                      after = client.try_acquire({key}, ttl_opts(10s));
                      return bool(after);
                    },
                    20s),
                after.message);
  if (after) {
    CHECK(value_on_owner(c, key) == after.lock.token());
    CHECK(c.owner_of_key(key) == promoted);
    CHECK(client.try_release(after.lock));
  }
}

TEST_CASE("cluster votes over TLS: every master's certificate must carry the fixed name") {
  redlock::test::TlsFixture tls;  // the server certificate names 127.0.0.1 and localhost
  ClusterConfig cc = masters_only();
  cc.server.tls = tls.server_options("no");
  cc.server.tls->cluster = true;
  ClusterFixture c(cc);
  // The slot map names 127.0.0.1: checked against localhost, the name the user gave.
  Options good =
      cluster_options(cluster_address(c, "rediss+cluster://") + "?verify_name=localhost");
  good.tls.ca_file = tls.ca_cert();
  Client client(good);
  auto r = client.try_acquire({"tls-fixed"}, ttl_opts(10s));
  REQUIRE_MESSAGE(r, r.message);
  CHECK(client.try_release(r.lock));

  Options wrong =
      cluster_options(cluster_address(c, "rediss+cluster://") + "?verify_name=other.example");
  wrong.tls.ca_file = tls.ca_cert();
  Client w(wrong);
  auto b = w.try_acquire({"tls-fixed"}, ttl_opts(10s));
  CHECK_FALSE(b);
  REQUIRE(b.nodes.size() == 1);
  CHECK_MESSAGE(b.nodes[0].detail.find("certificate verify failed") != std::string::npos,
                b.nodes[0].detail);
  CHECK(absent_everywhere(c, "tls-fixed"));
}
