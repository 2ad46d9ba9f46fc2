#pragma once
// Redis Cluster (the server's own sharding, `redis-server --cluster-enabled yes`): forming one from
// fresh nodes and checking that it is whole, with plain commands (CLUSTER ADDSLOTSRANGE /
// SET-CONFIG-EPOCH / MEET / REPLICATE), no redis-cli. The one implementation behind the node
// manager's cluster topology (cluster_topology.cpp) and the test fixture
// (tests/support/cluster_fixture.cpp); each says where its nodes are through ClusterMembers.
//
// Not to be confused with ClusterManager (manager.hpp), the local node manager, whose "cluster"
// is any set of local nodes.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client.hpp"

namespace redlock::nodes {

inline constexpr int cluster_slot_count = 16384;
// The cluster bus of a node listens on its client port + this (the TLS port with tls-cluster).
inline constexpr int cluster_bus_offset = 10000;

// One line of CLUSTER NODES, as one node sees it.
struct ClusterNodeView {
  std::string id;
  std::string ip;
  std::uint16_t port = 0;          // the client port the cluster announces
  std::uint16_t bus_port = 0;      // cluster bus
  std::vector<std::string> flags;  // myself, master, slave, fail?, fail, handshake, noaddr, ...
  std::string master_id;           // "" for masters
  bool connected = false;          // link-state
  std::vector<std::pair<int, int>> slots;  // owned ranges [first, last]
  [[nodiscard]] bool has_flag(const std::string& f) const;
};

// CLUSTER NODES' text, one entry per well-formed line (migration markers `[slot->-id]` skipped).
[[nodiscard]] std::vector<ClusterNodeView> parse_cluster_nodes(std::string_view text);

// The nodes of one Redis Cluster as their owner knows them, numbered 0..size()-1 by the owner.
// The non-virtual helpers are built on the virtual calls.
class ClusterMembers {
 public:
  virtual ~ClusterMembers() = default;

  [[nodiscard]] virtual std::size_t size() const = 0;
  // Running and not paused: only such a node is ever asked (a paused one would not answer).
  [[nodiscard]] virtual bool live(std::size_t i) const = 0;
  // One command to node i. Throws std::runtime_error when no reply came (refused, timeout); a
  // Redis error reply is a Reply of Type::error.
  [[nodiscard]] virtual Reply command(std::size_t i,
                                      const std::vector<std::string>& argv) const = 0;
  // Its cluster node id (CLUSTER MYID); "" when not known (then the checks say so).
  [[nodiscard]] virtual std::string id(std::size_t i) const = 0;
  // The port the cluster announces for it and MEET is given: the TLS port with tls-cluster.
  [[nodiscard]] virtual std::uint16_t announced_port(std::size_t i) const = 0;
  // Its cluster bus port, for MEET; 0 (the default): announced_port + cluster_bus_offset, where
  // Redis puts it when no `cluster-port` is set.
  [[nodiscard]] virtual std::uint16_t bus_port(std::size_t) const { return 0; }
  [[nodiscard]] virtual std::string name(std::size_t i) const = 0;  // "node 3 (127.0.0.1:7003)"

  // command(), and an error reply thrown as std::runtime_error naming the command and the node.
  [[nodiscard]] Reply must(std::size_t i, const std::vector<std::string>& argv) const;
  // CLUSTER NODES as node i sees it.
  [[nodiscard]] std::vector<ClusterNodeView> view(std::size_t i) const;
  [[nodiscard]] std::optional<std::size_t> index_of_id(const std::string& id) const;
  // The live node with the "myself" line of node i saying master / naming its master's id.
  [[nodiscard]] bool is_master(std::size_t i) const;
  [[nodiscard]] std::optional<std::size_t> master_of(std::size_t replica) const;
  // The node that serves `slot` now, as the first live node's CLUSTER NODES says; nullopt when
  // no node is live or nobody (that we know) owns it.
  [[nodiscard]] std::optional<std::size_t> owner_of_slot(int slot) const;
  // CLUSTER KEYSLOT on the first live node (nullopt when none is live).
  [[nodiscard]] std::optional<int> key_slot(const std::string& key) const;
  // "" when stable: every live node says cluster_state:ok, knows every member, sees all slots
  // covered, and all agree on the roles and the slot map; no live node is flagged
  // fail / fail? / handshake by another; every live replica's link to its master is up. Else the
  // first thing that is not so (an I/O failure included). Never blocks on a paused node.
  [[nodiscard]] std::string problem() const;
  // Each node's CLUSTER INFO state and CLUSTER NODES, for failure messages.
  [[nodiscard]] std::string describe() const;
  // Waits (polling) until problem() is "": false after `timeout` (then *why says the last one).
  bool wait_stable(std::chrono::milliseconds timeout, std::string* why = nullptr) const;
};

// How a cluster is formed: members 0..masters-1 are its masters (master m owns the m-th equal
// share of the slots, in order), member masters + m*replicas_per_master + r is replica r of
// master m.
struct ClusterLayout {
  int masters = 3;
  int replicas_per_master = 0;
  [[nodiscard]] int size() const { return masters * (1 + replicas_per_master); }
};

// Forms a cluster of fresh nodes (each knows only itself and has no slots; id() must answer for
// each): slots and distinct config epochs, MEET everybody to node 0, REPLICATE once all met; then
// waits until all agree on who replicates whom, and until problem() is "". Each wait may take
// `timeout`; throws std::runtime_error saying which did not happen, with describe().
void form_cluster(const ClusterMembers& members, ClusterLayout layout,
                  std::chrono::milliseconds timeout);

// True when node i is fresh: knows only itself and serves no slot (CLUSTER INFO).
[[nodiscard]] bool cluster_node_blank(const ClusterMembers& members, std::size_t i);

}  // namespace redlock::nodes
