#pragma once
// The nemesis: injects the faults of one mix on a schedule drawn from a seeded generator, on the
// driver's main thread (the fixture's servers must be restarted from the thread that made them),
// and heals everything at the end.
//
// The seed fixes which faults are drawn, on which nodes/slots and for how long; the exact
// interleaving with the workers is up to the scheduler, so a replay reproduces the schedule,
// not necessarily the same interleaving.

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "redis_fixture.hpp"

namespace redlock::test {
class SentinelFixture;
class ClusterFixture;
}  // namespace redlock::test

namespace chaos {

class Oracle;
class WorkerPool;
class Partitioner;

enum class Fault {
  node_kill_delayed,     // kill -9 of up to N-Q nodes, restart empty after more than one ttl
  node_kill_aof,         // kill -9 of up to N-Q nodes (appendfsync always), restart at once
  node_pause,            // SIGSTOP of 1..N-Q+1 nodes, SIGCONT later
  client_pause_acquire,  // SIGSTOP of a worker while it acquires (outside its critical section)
  client_kill,           // kill -9 of a worker (inside or outside its critical section), respawned
  clock_jump,            // the workers' wall clock jumps (libfaketime)
  holder_pause,          // SIGSTOP of a worker inside its critical section for longer than the ttl
  // The election mix: SIGSTOP of the next candidate elected (any slot), right after its LEAD,
  // for 20 ms .. a third of the ttl or (half the time) ttl+0.2 .. 2 ttl: past its validity.
  leader_pause,
  restart_empty,  // kill -9 of a majority, restarted at once without data (no restart guard)
  partition,      // nftables drop rules cut some workers off from some nodes
  // Sentinel votes (NemesisSettings::sentinels): the lock keys may be deleted on the promoted
  // replica at once (NemesisSettings::delete_key_percent), as if replication had lost them.
  sentinel_failover,     // SENTINEL FAILOVER of 1..Q votes at once; old masters demoted at once
  sentinel_kill_master,  // kill -9 of a vote's master, Sentinel's own failover, restarted later
  // Redis Cluster votes (NemesisSettings::clusters); the promotions may lose the lock keys as the
  // Sentinel ones do. Each acts on the shard (master) that owns a lock key's slot.
  cluster_migrate,      // a lock key's slot moved to another master (at once, or with an ASK phase)
  cluster_kill_master,  // kill -9 of the slot's master in 1..Q votes, the replica's own election;
                        // the killed node started again 0.2 s .. 2 ttl later (it rejoins as
                        // replica)
  cluster_failover,     // CLUSTER FAILOVER [FORCE] on the slot's replica in 1..Q votes at once
};

[[nodiscard]] const char* to_string(Fault f);

struct NemesisSettings {
  std::vector<Fault> faults;
  long ttl_ms = 1500;
  long gap_min_ms = 300;  // time between two fault starts
  long gap_max_ms = 1500;
  std::string faketime_file;           // for clock_jump
  Partitioner* partitioner = nullptr;  // for partition
  // For the sentinel faults: the votes' master names, the keys to delete on a promoted replica,
  // and how often (percent of the promotions).
  redlock::test::SentinelFixture* sentinels = nullptr;
  std::vector<std::string> master_names;
  std::vector<std::string> lock_keys;
  int delete_key_percent = 0;
  // For the cluster faults: the votes' clusters (their promotions use delete_key_percent too).
  std::vector<redlock::test::ClusterFixture*> clusters;
  bool verbose = false;
};

class Nemesis {
 public:
  // `cluster`: the standalone nodes of the node faults; null in the Sentinel mixes.
  Nemesis(NemesisSettings s, redlock::test::RedisCluster* cluster, WorkerPool& workers,
          Oracle& oracle, std::uint64_t seed);

  // Injects faults until `duration_ms` has passed, then heals everything.
  void run(long duration_ms);

  // How many faults of each kind were injected (keyed by to_string(Fault)), and what happened.
  [[nodiscard]] const std::map<std::string, long long>& counts() const { return counts_; }
  [[nodiscard]] const std::vector<std::string>& log() const { return log_; }
  [[nodiscard]] const std::vector<std::string>& errors() const { return errors_; }

 private:
  using Clock = std::int64_t;  // CLOCK_MONOTONIC ns
  void at(Clock when, std::function<void()> fn);
  void run_due(Clock now);
  void inject(Fault f);
  void heal_all();
  void note(const std::string& what);
  long uniform(long lo, long hi);

  void node_kill(bool aof);
  void node_pause();
  void client_pause_acquire();
  void client_kill();
  void clock_jump();
  void holder_pause();
  void leader_pause();
  void restart_empty();
  void partition();
  void sentinel_failover();
  void sentinel_kill_master();
  // After a promotion of vote `g`'s node `promoted`: deletes the lock keys there (sometimes).
  void lose_replication(std::size_t g, std::size_t promoted);
  // nemesis_cluster.cpp
  void cluster_migrate();
  void cluster_promote(bool kill);
  void cluster_restart(std::size_t g, std::size_t node, std::size_t promoted);
  void write_faketime(const std::string& spec);

  int pick_idle_slot();
  void start_node(int i);

  NemesisSettings s_;
  redlock::test::RedisCluster* cluster_;
  WorkerPool& workers_;
  Oracle& oracle_;
  std::mt19937_64 rng_;
  Clock t0_ = 0;
  std::multimap<Clock, std::function<void()>> queue_;
  std::vector<bool> node_down_;
  std::vector<bool> node_paused_;
  std::vector<bool> slot_busy_;
  std::vector<bool> vote_busy_;  // sentinel: a killed master of the vote waits for its restart
  // note() and counts_ from the threads of a cluster fault (one per vote it acts on).
  std::recursive_mutex mu_;
  std::map<std::string, long long> counts_;
  std::vector<std::string> log_;
  std::vector<std::string> errors_;
};

}  // namespace chaos
