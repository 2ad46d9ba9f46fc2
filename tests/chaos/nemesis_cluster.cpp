// The nemesis' Redis Cluster faults (Fault::cluster_*): every vote is a ClusterFixture (masters
// with one replica each), and a fault acts on the shard whose master owns a lock key's slot:
// - cluster_migrate: the slot moves to another master of that vote, at once or with an ASK phase
//   (the slot half-migrated for 50 ms .. ttl while the workers keep locking);
// - cluster_kill_master / cluster_failover: the slot's master in 1..Q votes at once (a majority,
//   right after an ENTER, half the time) is killed and its replica elected by the cluster, or its
//   replica takes over with CLUSTER FAILOVER (graceful or FORCE). As soon as the replica says it is
//   a master, the lock keys it serves are deleted there (NemesisSettings::delete_key_percent of the
//   promotions), as if asynchronous replication had lost them, before any client can know of the
//   promotion. A killed master is started again 0.2 s .. 2 ttl later: it rejoins as a replica.
// The votes of one fault fail over together, each on a thread of its own (the fixture's waits are
// per cluster); nothing else of the nemesis runs meanwhile.

#include <algorithm>
#include <exception>
#include <optional>
#include <stdexcept>
#include <thread>

#include "cluster_fixture.hpp"
#include "common.hpp"
#include "nemesis.hpp"
#include "oracle.hpp"

namespace chaos {
namespace {

using redlock::test::ClusterFixture;
using redlock::test::FailoverMode;
constexpr long long ms = 1'000'000LL;  // in mono_ns() units

// One vote's part of a promotion fault.
struct Promotion {
  std::size_t g = 0;
  std::size_t master = 0;   // the shard's master before the fault
  std::size_t replica = 0;  // its replica (the one CLUSTER FAILOVER is sent to)
  bool lose_keys = false;
  FailoverMode mode = FailoverMode::graceful;
  std::optional<std::size_t> promoted;
  std::string error;
};

const char* mode_name(FailoverMode m) {
  switch (m) {
    case FailoverMode::graceful:
      return "CLUSTER FAILOVER";
    case FailoverMode::force:
      return "CLUSTER FAILOVER FORCE";
    case FailoverMode::takeover:
      return "CLUSTER FAILOVER TAKEOVER";
  }
  return "?";
}

}  // namespace

void Nemesis::cluster_migrate() {
  const std::size_t g =
      static_cast<std::size_t>(uniform(0, static_cast<long>(s_.clusters.size()) - 1));
  ClusterFixture& c = *s_.clusters[g];
  const std::string& key = s_.lock_keys[static_cast<std::size_t>(
      uniform(0, static_cast<long>(s_.lock_keys.size()) - 1))];
  const bool with_ask = uniform(0, 1) == 1;
  const long hold_ms = uniform(50, s_.ttl_ms);
  try {
    const int slot = c.key_slot(key);
    const std::size_t from = c.owner_of_slot(slot);
    std::vector<std::size_t> to = c.masters();
    std::erase(to, from);
    if (to.empty()) return;
    const std::size_t target =
        to[static_cast<std::size_t>(uniform(0, static_cast<long>(to.size()) - 1))];
    const std::string what = "vote " + std::to_string(g) + ": slot " + std::to_string(slot) + " (" +
                             key + ") from node " + std::to_string(from) + " to node " +
                             std::to_string(target);
    if (with_ask) {
      c.begin_slot_migration(slot, target);
      note("migrating " + what + ", keys still on the source (ASK) for " + std::to_string(hold_ms) +
           " ms");
      std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
      c.finish_slot_migration(slot);
      note("  migration done");
    } else {
      c.migrate_slot(slot, target);
      note("migrated " + what);
    }
    ++counts_["cluster-migrate"];
  } catch (const std::exception& e) {
    errors_.push_back("vote " + std::to_string(g) + ": migration of " + key +
                      "'s slot: " + e.what());
  }
}

void Nemesis::cluster_promote(bool kill) {
  const int n = static_cast<int>(s_.clusters.size());
  // Half the time right after someone entered a critical section: the keys are then lost on a
  // majority of the votes while that holder is inside.
  bool inside = false;
  if (uniform(0, 1) == 1) {
    oracle_.arm(-1, Oracle::Trigger::at_enter);
    inside = oracle_.wait_trigger(1000).has_value();
  }
  std::vector<std::size_t> idle;
  for (std::size_t g = 0; g < s_.clusters.size(); ++g) {
    if (!vote_busy_[g]) idle.push_back(g);
  }
  if (idle.empty()) return;
  std::shuffle(idle.begin(), idle.end(), rng_);
  const long most = std::min<long>(n / 2 + 1, static_cast<long>(idle.size()));
  idle.resize(static_cast<std::size_t>(inside ? most : uniform(1, most)));

  // Everything random is drawn here, on this thread (the generator is not shared).
  std::vector<Promotion> plan;
  for (std::size_t g : idle) {
    ClusterFixture& c = *s_.clusters[g];
    std::vector<std::string> keys = s_.lock_keys;
    std::shuffle(keys.begin(), keys.end(), rng_);
    Promotion p;
    p.g = g;
    p.lose_keys = uniform(1, 100) <= s_.delete_key_percent;
    p.mode = uniform(0, 1) == 1 ? FailoverMode::force : FailoverMode::graceful;
    bool found = false;
    try {
      for (const auto& key : keys) {
        p.master = c.owner_of_key(key);
        const auto replicas = c.replicas_of(p.master);
        if (replicas.empty()) continue;  // its replica was the master killed lately
        p.replica = replicas.front();
        found = true;
        break;
      }
    } catch (const std::exception& e) {
      note("skip vote " + std::to_string(g) + ": " + e.what());
      continue;
    }
    if (found) plan.push_back(p);
  }
  if (plan.empty()) return;

  auto run = [this, kill, inside](Promotion& p) {
    ClusterFixture& c = *s_.clusters[p.g];
    const std::string vote = "vote " + std::to_string(p.g);
    auto on_promoted = [&](std::size_t promoted) {
      p.promoted = promoted;
      note("  " + vote + ": node " + std::to_string(promoted) + " is master");
      if (!p.lose_keys) return;
      for (const auto& key : s_.lock_keys) {
        // A key of a slot this master does not serve answers MOVED: nothing to lose there.
        try {
          (void)c.node(promoted).command({"DEL", key}, std::chrono::milliseconds(500));
        } catch (const std::exception&) {
        }
      }
      const std::lock_guard<std::recursive_mutex> lock(mu_);
      ++counts_["keys-lost"];
      note("  " + vote + ": DEL the lock keys on node " + std::to_string(promoted) +
           " (replication lost them)");
    };
    try {
      if (kill) {
        note("kill -9 " + vote + "'s master node " + std::to_string(p.master) +
             (inside ? ", just after an ENTER" : ""));
        (void)c.kill_master_and_wait_failover(p.master, on_promoted);
      } else {
        note(std::string(mode_name(p.mode)) + " on " + vote + "'s node " +
             std::to_string(p.replica) + " (replica of node " + std::to_string(p.master) + ")" +
             (inside ? ", just after an ENTER" : ""));
        c.manual_failover(p.replica, p.mode, on_promoted);
      }
      note("  " + vote + ": cluster stable again");
    } catch (const std::exception& e) {
      p.error = e.what();
    }
  };
  std::vector<std::thread> threads;
  for (auto& p : plan) threads.emplace_back([&run, &p] { run(p); });
  for (auto& t : threads) t.join();

  for (const auto& p : plan) {
    if (!p.error.empty()) {
      errors_.push_back("vote " + std::to_string(p.g) + ": " +
                        (kill ? "failover after kill -9: " : "manual failover: ") + p.error);
    }
    if (p.promoted) ++counts_[kill ? "cluster-kill-master" : "cluster-failover"];
    if (!kill) continue;
    vote_busy_[p.g] = true;  // one dead node per cluster at a time
    const long delay = uniform(200, 2 * s_.ttl_ms);
    const std::size_t promoted = p.promoted.value_or(p.replica);
    at(mono_ns() + delay * ms,
       [this, g = p.g, node = p.master, promoted] { cluster_restart(g, node, promoted); });
  }
}

void Nemesis::cluster_restart(std::size_t g, std::size_t node, std::size_t promoted) {
  try {
    ClusterFixture& c = *s_.clusters[g];
    c.restart_node(node);
    // It rejoins as a replica of the master that took its slots, unless some of those slots
    // moved elsewhere meanwhile (a migration): then it stays a master without slots
    // (--cluster-allow-replica-migration no), and is made its old replica's replica, as an
    // operator would.
    std::string how = "a replica now";
    if (c.is_master(node)) {
      const auto r = c.node(node).command({"CLUSTER", "REPLICATE", c.node_id(promoted)});
      if (!r.is_status("OK"))
        throw std::runtime_error("CLUSTER REPLICATE: " + redlock::nodes::reply_text(r));
      c.wait_until_stable();
      how = "a master without slots: made a replica with CLUSTER REPLICATE";
    }
    if (c.master_of(node) != promoted) {
      errors_.push_back("vote " + std::to_string(g) + "'s node " + std::to_string(node) +
                        " is not a replica of node " + std::to_string(promoted) +
                        " after its restart");
    }
    note("restarted vote " + std::to_string(g) + "'s node " + std::to_string(node) + " (" + how +
         ")");
  } catch (const std::exception& e) {
    errors_.push_back("restart of vote " + std::to_string(g) + "'s node " + std::to_string(node) +
                      ": " + e.what());
  }
  vote_busy_[g] = false;
}

}  // namespace chaos
