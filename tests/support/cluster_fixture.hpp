// Test support: a real Redis Cluster (M masters, R replicas each) made of RedisServer nodes.
// Formed and checked by the tools' one implementation of that (tools/nodes/redis_cluster.hpp),
// which `redlock-cli cluster up --topology cluster` uses too.
//
// Not to be confused with RedisCluster (redis_fixture.hpp), which is N *independent* masters for
// Redlock. Every node is a RedisServer started with --cluster-enabled yes and a short
// --cluster-node-timeout, on a port P whose bus twin P + 10000 was free too. The fixture builds the
// cluster itself (CLUSTER ADDSLOTSRANGE / SET-CONFIG-EPOCH / MEET / REPLICATE: no redis-cli) and
// returns only once every node says cluster_state:ok, every node agrees on the slot map and on who
// replicates whom, and every replica's link to its master is up.
//
// Node indexes are stable for the fixture's lifetime: nodes 0..M-1 start as masters (master m owns
// an equal share of the slots, in order), node M + m*R + r starts as replica r of master m. Roles
// change with failovers: ask is_master() / master_of() for the current ones.
//
// Threading and PR_SET_PDEATHSIG: as for RedisServer (construct on a thread that outlives it).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nodes/redis_cluster.hpp"
#include "redis_fixture.hpp"

namespace redlock::test {

struct ClusterConfig {
  int masters = 3;
  int replicas_per_master = 0;
  std::chrono::milliseconds node_timeout{1000};  // --cluster-node-timeout
  // Base for every node: executable (e.g. valkey_server_path()), aof_always, extra_args, tls...
  // Its `port` is ignored (each node gets free_port_with_bus_twin()). With server.tls and
  // server.tls->cluster, the bus and replication run over TLS and the cluster announces the TLS
  // ports; tls->port is ignored too (each node gets a TLS port with a free bus twin). TLS-only
  // nodes (tls->tls_only) need tls->cluster as well.
  ServerConfig server;
  // How long construction and each wait (failover, migration, restart) may take at most.
  std::chrono::milliseconds timeout{30000};
};

// One line of CLUSTER NODES, as one node sees it.
using ClusterNodeView = nodes::ClusterNodeView;

enum class FailoverMode { graceful, force, takeover };  // CLUSTER FAILOVER [FORCE|TAKEOVER]

class ClusterFixture {
 public:
  static constexpr int kSlots = nodes::cluster_slot_count;

  explicit ClusterFixture(ClusterConfig cfg = {});
  ~ClusterFixture();  // kills every node, removes their dirs. Never throws.
  ClusterFixture(const ClusterFixture&) = delete;
  ClusterFixture& operator=(const ClusterFixture&) = delete;

  [[nodiscard]] std::size_t size() const { return nodes_.size(); }
  [[nodiscard]] RedisServer& node(std::size_t i) { return *nodes_.at(i).server; }
  [[nodiscard]] const RedisServer& node(std::size_t i) const { return *nodes_.at(i).server; }
  [[nodiscard]] const std::string& node_id(std::size_t i) const { return nodes_.at(i).id; }
  [[nodiscard]] std::optional<std::size_t> index_of_id(const std::string& id) const;
  [[nodiscard]] const ClusterConfig& config() const { return cfg_; }
  // The port the cluster announces for node i (the TLS port with tls->cluster, else port()).
  [[nodiscard]] std::uint16_t announced_port(std::size_t i) const;
  [[nodiscard]] std::string address(std::size_t i) const;  // "127.0.0.1:<announced_port>"

  // --- what a client needs --------------------------------------------------------------------
  // Announced addresses of every running node (seeds for a cluster client), node order.
  [[nodiscard]] std::vector<std::string> seed_addresses() const;
  [[nodiscard]] std::string seed_address() const;            // the first running node
  [[nodiscard]] int key_slot(const std::string& key) const;  // CLUSTER KEYSLOT
  // The node that serves `slot` now (from a running node's CLUSTER NODES).
  [[nodiscard]] std::size_t owner_of_slot(int slot) const;
  [[nodiscard]] std::size_t owner_of_key(const std::string& key) const;
  // Some running master other than `i` (to send a key to the wrong node and get MOVED).
  [[nodiscard]] std::size_t other_master(std::size_t i) const;

  // --- roles ----------------------------------------------------------------------------------
  // Current roles, from the node's own CLUSTER NODES line (node must be running).
  [[nodiscard]] bool is_master(std::size_t i) const;
  [[nodiscard]] std::optional<std::size_t> master_of(std::size_t replica) const;
  [[nodiscard]] std::vector<std::size_t> masters() const;                        // running masters
  [[nodiscard]] std::vector<std::size_t> replicas_of(std::size_t master) const;  // running ones
  // CLUSTER NODES as node i sees it.
  [[nodiscard]] std::vector<ClusterNodeView> view(std::size_t i) const;

  // --- slot migration -------------------------------------------------------------------------
  // Moves `slot` (and all its keys) to master `to`: SETSLOT IMPORTING / MIGRATING, MIGRATE the
  // keys in batches, SETSLOT NODE on the target, the source and every other master; returns when
  // every node agrees. No-op if `to` already owns it.
  void migrate_slot(int slot, std::size_t to);
  // Leaves `slot` half-migrated to `to`: IMPORTING on `to`, MIGRATING on the owner, and only
  // `keys_to_move` (which must hash to `slot`) moved. The owner then answers -ASK for keys of the
  // slot it no longer has, and `to` answers -MOVED unless the client sends ASKING first.
  void begin_slot_migration(int slot, std::size_t to,
                            const std::vector<std::string>& keys_to_move = {});
  // Completes a begin_slot_migration(): the remaining keys move, SETSLOT NODE everywhere.
  void finish_slot_migration(int slot);

  // --- failover -------------------------------------------------------------------------------
  // SIGKILLs master `m` (by the pid its RedisServer recorded), waits until one of its replicas is
  // promoted and every running node says cluster_state:ok and agrees on the slot map; returns the
  // promoted node. Throws std::logic_error if `m` is not a master with a running replica. (Kills
  // only once no replica of `m` won an election in the last 4 x node_timeout: see below.)
  // `on_promoted`, when given, runs once with the promoted node as soon as it says it is a master
  // (polled every 5 ms), before the wait for the others to agree: what a test does to the new
  // master then (e.g. delete keys, as if replication had lost them) happens before clients that
  // follow the slot map can know of it.
  std::size_t kill_master_and_wait_failover(
      std::size_t m, const std::function<void(std::size_t)>& on_promoted = {});
  // CLUSTER FAILOVER [FORCE|TAKEOVER] sent to `replica`; waits until it is master, the others
  // agree and the cluster is ok. graceful needs its master reachable; force and takeover do not;
  // graceful and force need the other masters' votes, which they give for the replicas of one
  // master only once per 2 x node_timeout: a second failover in the same shard that soon is
  // refused by Redis and retried here after its 5 s manual-failover timeout. takeover needs no
  // votes. A replica that won an election less than 4 x node_timeout ago is made to wait that out
  // first (Redis 7.0 would reuse that election's stale votes and epoch, and the cluster fails).
  // `on_promoted`: as for kill_master_and_wait_failover (runs once, with `replica`).
  void manual_failover(std::size_t replica, FailoverMode mode = FailoverMode::graceful,
                       const std::function<void(std::size_t)>& on_promoted = {});
  // Starts a killed node again (same port, dir and nodes.conf: it rejoins with its old identity,
  // as a replica when it was failed over meanwhile) and waits until the cluster is stable.
  void restart_node(std::size_t i);
  // Waits until every running node says cluster_state:ok and all agree on slots and roles, and
  // no running node is flagged fail by another. Throws std::runtime_error with the views if not.
  void wait_until_stable() const;
  // Same check once, "" when stable, else why not.
  [[nodiscard]] std::string why_unstable() const;

 private:
  struct Node {
    std::unique_ptr<RedisServer> server;
    std::string id;
    std::uint16_t announced_port = 0;
  };
  struct Migration {
    std::size_t from;
    std::size_t to;
  };
  class Members;  // this fixture's nodes as nodes::ClusterMembers
  [[nodiscard]] Reply must(std::size_t i, const std::vector<std::string>& argv) const;
  [[nodiscard]] std::size_t any_running() const;
  void move_keys(int slot, std::size_t from, std::size_t to,
                 const std::vector<std::string>& keys) const;
  void move_all_keys(int slot, std::size_t from, std::size_t to) const;
  void set_slot_node_everywhere(int slot, std::size_t owner) const;
  [[nodiscard]] std::string describe_views() const;
  void wait_out_last_election(std::size_t replica) const;

  ClusterConfig cfg_;
  std::vector<Node> nodes_;
  std::unique_ptr<const Members> members_;
  std::map<int, Migration> migrations_;
  // When a node last won an election (kill failover, graceful or forced manual failover).
  std::map<std::size_t, std::chrono::steady_clock::time_point> last_election_;
};

}  // namespace redlock::test
