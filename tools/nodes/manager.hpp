#pragma once
// The node manager: local Redis masters, real `redis-server` processes on 127.0.0.1, one per port
// base_port .. base_port+count-1, numbered 1..count. Used by `redlock-cli cluster` and by the
// `demo` command, which drives the same nodes through this class. Started through launcher.hpp
// (detached: they outlive the CLI) and checked through client.hpp.
//
// Three topologies (ClusterSettings::topology):
//   standalone  `count` independent masters, nodes 1..count: one vote each.
//   sentinel    `count` Sentinel-managed masters, each with one replica, watched by 3 sentinels
//               (`redis-server CONF --sentinel`): 2*count+3 processes, numbered by port like the
//               masters of the standalone topology (process I on base_port + I - 1):
//                 1..count           the first masters of m1..mN (vote I is master name "mI")
//                 count+1..2*count   their replicas (count+I replicates mI)
//                 2*count+1..+3      the sentinels
//               After a failover the roles change; the numbers do not. A data node that is
//               started again comes back as a replica of the master the sentinels name (or as a
//               master when they name it), a sentinel with the configuration it rewrote itself.
//   cluster     `count` Redis Clusters (`--cluster-enabled yes`), one vote each (redis+cluster://),
//               each of cluster_masters masters with `replicas` replicas per master:
//               count * P processes, P = cluster_masters * (1 + replicas), numbered by port and
//               grouped by cluster (cluster_topology.cpp):
//                 (V-1)*P + 1 .. (V-1)*P + 3   the first masters of cluster cV (slots split
//                                              evenly, in order)
//                 then                          their replicas, replica r of master m at
//                                              (V-1)*P + 3 + m*replicas + r + 1 (m, r from 0)
//               Every node's cluster bus listens on its port + bus_port_offset (10000 by
//               default), or on another free port when that one is taken. Redis fails a master over
//               by itself (a replica is promoted once the other masters agree the master has
//               failed, cluster_node_timeout_ms); a node started again rejoins with its
//               nodes.conf, as a replica if it was failed over meanwhile.
//
// Files in the cluster directory (all owned by this class):
//   cluster.conf    the settings of the last `up` (count, base port, persistence, TLS, topology)
//   cluster.lock    flock(2) taken by every state-changing call, so two CLIs do not race
//   node-I.conf     the redis.conf node I was (re)started with; regenerated at every start (a
//                   sentinel's only by an `up` that finds no process running: Sentinel keeps its
//                   state there)
//   node-I.pid      the pid of node I, written by us (never by redis)
//   node-I.log      redis's log (stdout/stderr of the process are appended to it too)
//   node-I/         redis's working directory (AOF files live here; with the cluster topology
//                   also nodes.conf, the node's cluster state)
//   cluster-V.ids   cluster topology: the node ids of cluster cV, written once `up` formed it;
//                   an `up` from nothing starts the same clusters again only when every file is
//                   there and the settings are those it was formed with, else it empties the
//                   nodes' directories and forms new ones
//   tls/            with TLS: a throwaway CA (ca.crt), the nodes' certificate (server.crt,
//                   127.0.0.1 and localhost) and a client certificate (client.crt), with their
//                   keys (certs.hpp); made again by an `up` that finds no node running
//
// Safety: a process is only ever signalled when the pid file names it AND /proc/PID/cmdline
// shows a redis-server on that node's port (or started with that node's config file). Nothing
// is ever looked up or signalled by name.
//
// Not thread-safe: one ClusterManager per thread. Calls block (they fork, poll and sleep).

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client.hpp"
#include "redis_cluster.hpp"

namespace redlock::nodes {

inline constexpr int max_count = 64;   // nodes in one cluster
inline constexpr int min_port = 1024;  // no privileged ports
inline constexpr int max_port = 65535;

// Whole-string decimal integer (a leading '-' is accepted); nullopt on anything else (spaces,
// '+', overflow).
[[nodiscard]] std::optional<long long> parse_int(std::string_view s);

enum class Persistence {
  none,  // save "" + appendonly no: a killed node restarts empty
  aof,   // appendonly yes + appendfsync always: a killed node restarts with its keys
};

[[nodiscard]] const char* to_string(Persistence p) noexcept;

enum class Topology {
  standalone,  // independent masters, one vote each
  sentinel,    // Sentinel-managed masters with one replica each, and 3 sentinels
  cluster,     // Redis Clusters, one vote each
};

[[nodiscard]] const char* to_string(Topology t) noexcept;

inline constexpr int sentinel_count = 3;   // sentinels of the sentinel topology (quorum 2)
inline constexpr int cluster_masters = 3;  // masters of each Redis Cluster of the cluster topology
inline constexpr int max_cluster_replicas = 4;  // replicas per master, cluster topology
// The cluster topology's cluster-node-timeout: a master silent this long is failed over. Short,
// for a demonstration, but not so short that a busy machine fails masters over by itself.
inline constexpr int cluster_node_timeout_ms = 2000;

struct ClusterSettings {
  int count = 5;              // 1..64
  int base_port = 7001;       // >= 1024, base_port + count - 1 <= 65535
  std::filesystem::path dir;  // empty: ClusterManager::default_dir()
  Persistence persistence = Persistence::none;
  // TLS only: each node listens with TLS on its port and has no plaintext listener (`port 0`),
  // so a client that forgot TLS fails instead of quietly going around it, as on a managed
  // offering; the port numbers stay the same, so `--tls` with the default node list works.
  // Clients are asked for a certificate but not required to give one (tls-auth-clients
  // optional): one the CA did not sign is refused.
  bool tls = false;
  // With sentinel, `count` is the number of votes (masters); the processes take the ports
  // base_port .. base_port + 2*count + 2. With TLS the sentinels are TLS-only too, and replicas
  // and sentinels reach the masters (and each other) over TLS (tls-replication yes); the votes
  // are rediss+sentinel:// addresses.
  Topology topology = Topology::standalone;
  // Cluster topology: replicas per master (0..max_cluster_replicas; with 0 nothing fails over).
  // With TLS the cluster bus and replication are TLS too (tls-cluster, tls-replication), the
  // clusters announce the TLS ports, and the votes are rediss+cluster:// addresses.
  int replicas = 1;
  // Cluster topology: node I's cluster bus listens on port_of(I) + this (`cluster-port`), Redis's
  // own +10000 by default. Any value (negative too) that keeps every bus port in
  // min_port..max_port and off the nodes' client ports. A bus port that is taken when its node
  // starts (by another program, or by the local end of some connection) is replaced by a free one,
  // which the node keeps in its node-I.conf and the other nodes learn by gossip: clients never
  // connect to the bus, so nothing else needs to know it.
  int bus_port_offset = cluster_bus_offset;
};

// Why a call failed; exit_code() is the redlock-cli exit status for it.
class ClusterError : public std::runtime_error {
 public:
  enum class Kind {
    usage,    // bad settings, bad node number, unusable dir, redis-server missing: exit 2
    refused,  // the state change does not apply (start on a running node, port taken): exit 1
    failed,   // a node did not come up / go down in time: exit 1
  };
  ClusterError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  [[nodiscard]] Kind kind() const noexcept { return kind_; }
  [[nodiscard]] int exit_code() const noexcept { return kind_ == Kind::usage ? 2 : 1; }

 private:
  Kind kind_;
};

// What a local redis-server process is doing (not to be confused with redlock::NodeState, a node's
// answer in one operation).
enum class ProcessState { up, paused, down };
[[nodiscard]] const char* to_string(ProcessState s) noexcept;

struct NodeStatus {
  int index = 0;
  int port = 0;
  std::optional<pid_t> pid;  // empty when down
  ProcessState state = ProcessState::down;
  std::optional<long long> uptime_s;  // empty when not answering (down, paused, busy)
  std::optional<long long> keys;      // DBSIZE; empty when not answering
  std::string persistence;            // "none", "aof", "aof-everysec", ... (live or configured)
  // "master", "replica" (what INFO replication says; empty when not answering) or "sentinel".
  std::string role;
  std::string master_name;  // sentinel topology, data nodes: the vote's master name ("m1")
  std::string cluster;      // cluster topology: the vote's cluster ("c1")
  // Cluster topology, a master that answers: the slot ranges it serves [first, last].
  std::vector<std::pair<int, int>> slots;
};

// What up/down/kill/stop/cont/start did to one node.
struct NodeReport {
  enum class Outcome {
    started,          // up, start
    already_running,  // up: left alone
    paused_left,      // up: our node is SIGSTOPped; left as is
    stopped,          // down: exited after SIGTERM
    killed,           // down: needed SIGKILL; kill: SIGKILLed
    stale_removed,    // down: pid file named a process that is not ours any more; file removed
    paused,           // stop
    already_paused,   // stop on a paused node
    resumed,          // cont
    not_paused,       // cont on a running, not paused node
  };
  int index = 0;
  int port = 0;
  pid_t pid = 0;
  Outcome outcome = Outcome::started;
  std::string role = {};  // sentinel topology: "replica of m1", "sentinel" ... (for describe())
};
[[nodiscard]] std::string describe(
    const NodeReport& r);  // "node 2 (127.0.0.1:7002): started, pid 123"

class ClusterManager {
 public:
  // Validates the settings and makes the directory usable (created 0700 if missing).
  // Throws ClusterError{usage} naming the bad value.
  // `create_dir` false (read-only uses such as status): a missing directory is not created and
  // simply means that nothing is running.
  explicit ClusterManager(ClusterSettings settings, bool create_dir = true);

  ClusterManager(const ClusterManager&) = delete;
  ClusterManager& operator=(const ClusterManager&) = delete;

  // $XDG_RUNTIME_DIR/redlock-cluster if that variable is set and the directory writable,
  // else /tmp/redlock-cluster-$UID.
  [[nodiscard]] static std::filesystem::path default_dir();

  // The settings `up` saved in dir/cluster.conf (dir is filled in), or nullopt when there are
  // none. Throws ClusterError{usage} if the file exists but is malformed.
  [[nodiscard]] static std::optional<ClusterSettings> load_saved(const std::filesystem::path& dir);

  [[nodiscard]] const ClusterSettings& settings() const noexcept { return settings_; }
  [[nodiscard]] int port_of(int index) const noexcept { return settings_.base_port + index - 1; }
  // The processes of the topology, numbered 1..process_count(): count, 2*count+3 (sentinel), or
  // count * cluster_size() (cluster).
  [[nodiscard]] int process_count() const noexcept;
  // "127.0.0.1:7001,127.0.0.1:7002,..." for Options / --nodes ("rediss://127.0.0.1:7001,..."
  // with TLS); with the sentinel topology one redis+sentinel:// address per master name,
  // "redis+sentinel://127.0.0.1:S1/m1?sentinel=127.0.0.1:S2&sentinel=127.0.0.1:S3,...";
  // with the cluster topology one redis+cluster:// address per cluster, its first node and the
  // others as seeds, "redis+cluster://127.0.0.1:P1?seed=127.0.0.1:P2&...&seed=127.0.0.1:P6,...".
  [[nodiscard]] std::string node_list() const;

  // The vote data node I belongs to (1..count), or 0 for a sentinel and in the standalone
  // topology.
  [[nodiscard]] int vote_of(int index) const noexcept;
  // Vote V's name: "mV" (sentinel: its master name), "cV" (cluster), "node V" (standalone).
  [[nodiscard]] std::string vote_name(int vote) const;

  // ---- the sentinel topology (ClusterError{usage} from the calls that need it otherwise) ----
  // The master name of vote V (1..count): "mV".
  [[nodiscard]] static std::string master_name(int vote);
  [[nodiscard]] bool is_sentinel(int index) const noexcept;
  // The node that vote V's master is now, as the first running sentinel that answers names it;
  // nullopt when none answers or it names an address that is not one of ours.
  [[nodiscard]] std::optional<int> current_master(int vote) const;
  // "" when every running sentinel names the same master for every vote, that master says
  // role:master, the vote's other running data node is a replica of it with its link up, every
  // running sentinel lists that replica (flags slave, link ok) and knows the other running
  // sentinels; else the first thing that is not so yet. Never blocks on a paused process.
  [[nodiscard]] std::string sentinel_problem() const;
  // Waits until sentinel_problem() is empty: ClusterError{failed} naming it after `limit`.
  void wait_sentinels_agree(std::chrono::milliseconds limit) const;

  struct Failover {
    int vote = 0;
    int old_master = 0;  // process numbers
    int new_master = 0;
    // From SENTINEL FAILOVER (cluster: the kill) to role:master on the replica.
    std::chrono::milliseconds took{0};
  };
  // SENTINEL FAILOVER for every vote given, all at once (on the first running sentinel that
  // accepts it); then for each, as soon as its replica says role:master: `on_promoted` (to
  // delete a key there, say: a write replication lost), then REPLICAOF on the old master when it
  // runs (what Sentinel itself sends it only 10-20 s later; until then it would accept writes as
  // a second master); returns once every running sentinel names each new master.
  // ClusterError{refused} when a sentinel refuses the failover (its words: no good replica, one
  // in progress), {failed} when it does not happen within ~10 s.
  std::vector<Failover> failover(const std::vector<int>& votes,
                                 const std::function<void(const Failover&)>& on_promoted = {});

  // ---- the cluster topology (cluster_topology.cpp; ClusterError{usage} otherwise) ----
  // Processes per cluster: cluster_masters * (1 + replicas).
  [[nodiscard]] int cluster_size() const noexcept;
  // The node that serves `key`'s slot in cluster V now, as its first running node says; nullopt
  // when none answers.
  [[nodiscard]] std::optional<int> slot_owner(int vote, const std::string& key) const;
  // "" when every cluster is whole: each running node says cluster_state:ok, knows the others,
  // agrees with them on the slot map and the roles, no running node is flagged failed, every
  // running replica's link is up (redis_cluster.hpp); else the first thing that is not so.
  [[nodiscard]] std::string cluster_problem() const;
  // Waits until cluster_problem() is "": ClusterError{failed} naming it after `limit`.
  void wait_clusters_whole(std::chrono::milliseconds limit) const;
  // For each cluster given, all at once: SIGKILLs the master that serves `key`'s slot; then, as
  // soon as one of its replicas says it is master, `on_promoted` (to delete a key there: a write
  // replication lost); returns once each cluster is whole again (the killed masters stay down).
  // ClusterError{refused} when such a master has no running replica (nothing is killed then),
  // {failed} when a failover does not happen within ~30 s.
  std::vector<Failover> kill_slot_masters(
      const std::vector<int>& votes, const std::string& key,
      const std::function<void(const Failover&)>& on_promoted = {});

  // How to reach node I: 127.0.0.1:port, with TLS (the cluster's CA and client certificate) when
  // the cluster has it.
  [[nodiscard]] Endpoint endpoint(int index) const;
  // With TLS: the CA certificate clients must trust (dir/tls/ca.crt); empty without.
  [[nodiscard]] std::filesystem::path ca_file() const;

  // Starts every node that is not running, saves cluster.conf, and waits until all answer PING
  // (deadline ~20 s); with the sentinel topology also until the sentinels agree, with the cluster
  // topology until every cluster is whole (formed first when its nodes are fresh). Idempotent: our
  // running nodes are left alone. Throws ClusterError: usage (redis-server missing, the
  // certificates cannot be made), refused (a port is taken by another process, or our running nodes
  // were started with other settings, TLS included: nothing is started then), failed (a node did
  // not answer in time; the message has the tail of its log; the others stay up).
  std::vector<NodeReport> up();

  // Stops every node this directory has a pid file for (SIGCONT if paused, SIGTERM, ~3 s, then
  // SIGKILL) and removes the pid files. Empty result: nothing was running (or
  // the directory does not exist; it is not created). Idempotent.
  std::vector<NodeReport> down();

  // Never changes anything; never blocks on a paused node.
  [[nodiscard]] std::vector<NodeStatus> status() const;
  [[nodiscard]] NodeStatus node_status(int index) const;

  // One node, by number (1..count; else ClusterError{usage}). kill/stop/cont on a node that is not
  // running: ClusterError{refused}.
  NodeReport kill(int index);  // SIGKILL, waits until it is gone, removes the pid file
  NodeReport stop(int index);  // SIGSTOP (paused: accepts connections, answers nothing)
  NodeReport cont(int index);  // SIGCONT
  // Restarts a node that is down with the same port and persistence, after sleeping `delay`
  // (the "delayed restart" of the Redlock docs), then waits for PING (cluster topology: until its
  // cluster is whole again, else ClusterError{failed}, the node left running).
  // ClusterError{refused} if it is running (checked before and after the delay) or its port is
  // taken.
  NodeReport start(int index, std::chrono::milliseconds delay = std::chrono::milliseconds{0});
  // The refusals of start() without starting anything: ClusterError{usage} for a bad number,
  // {refused} if the node is running or its port is taken. For announcing a delayed restart.
  void check_can_start(int index) const;

 private:
  struct Proc;
  [[nodiscard]] Proc inspect(int index) const;
  void check_index(int index) const;
  // kill/stop/cont on a directory that does not exist: ClusterError{refused}, nothing created.
  void require_dir(int index) const;
  [[nodiscard]] std::filesystem::path node_file(int index, const char* suffix) const;
  void save_settings() const;
  // With TLS: makes dir/tls/ when `fresh` (no node is running) or a file is missing.
  void ensure_certificates(bool fresh) const;
  pid_t spawn(int index, const std::string& redis_server);
  // Waits until every node answers PING. A node that exits at startup because a port was taken
  // after it was checked is started again (the pid in `nodes` replaced): with another bus port
  // when that was its cluster bus, on the same port (its address) after a moment otherwise, a few
  // times. ClusterError{failed} naming the nodes that did not come up.
  void wait_ready(std::vector<std::pair<int, pid_t>>& nodes, const std::string& redis_server);
  // Cluster topology: the bus port node I was last started with (node-I.conf), else its
  // port + bus_port_offset.
  [[nodiscard]] int bus_port_of(int index) const;
  // The bus port to start node I with: port + bus_port_offset when it is free, else the one it
  // last had, else the first free port above the range of the preferred ones (none that another
  // node of ours has or prefers). ClusterError{refused} when there is none.
  [[nodiscard]] int choose_bus_port(int index) const;
  // What node I's log got since spawn() last started it.
  [[nodiscard]] std::string log_since_start(int index) const;
  // "master m1", "replica c2" ...: the role now (or as last configured) and the vote.
  [[nodiscard]] std::string role_label(int index) const;
  // The sentinel topology (sentinel_topology.cpp).
  [[nodiscard]] std::string sentinel_role_label(int index) const;
  // What a data node is started as: the port of the master it replicates, or nullopt (master).
  [[nodiscard]] std::optional<int> replica_of_on_start(int index) const;
  // The redis.conf lines of a data node (after the common ones) and a sentinel's whole file.
  [[nodiscard]] std::string data_node_conf(int index) const;
  [[nodiscard]] std::string sentinel_conf(int index);
  [[nodiscard]] std::string sentinel_id(int index);  // from its config, else made up once
  // Waits (at most `limit`, then returns anyway) until every running replica says its link to
  // its master is up.
  void wait_replicas_attached(std::chrono::milliseconds limit) const;
  // The listener lines of a redis.conf: `port P`, or with TLS `port 0` + tls-port and the files.
  [[nodiscard]] std::string listen_conf(int port) const;
  // The cluster topology (cluster_topology.cpp).
  class ClusterVote;  // one cluster's nodes as nodes::ClusterMembers
  [[nodiscard]] int first_of_cluster(int vote) const noexcept;  // its first node's number
  [[nodiscard]] std::string cluster_node_conf() const;          // after the common lines
  [[nodiscard]] std::string cluster_role_label(int index) const;
  // `up` from nothing: each cluster whose files and settings do not let it start again as it was
  // loses its nodes' directories and ids file, so that its nodes start fresh.
  void prepare_fresh_clusters(const std::optional<ClusterSettings>& saved) const;
  // `up`: forms each cluster whose nodes are all fresh, then waits until every one is whole.
  void form_clusters();
  // "" or why cluster V is not whole.
  [[nodiscard]] std::string cluster_problem(int vote) const;
  // Polls `problem` (every 50 ms) until it says "": ClusterError{failed} "WHAT within N s: why"
  // after `limit`.
  static void wait_no_problem(const std::function<std::string()>& problem,
                              std::chrono::milliseconds limit, const std::string& what);
  // Node I's port when it is taken: {"port 7001 (node 1)", why}; {"", ""} when it is free. (A
  // taken cluster bus port is replaced when the node starts: choose_bus_port.)
  [[nodiscard]] std::pair<std::string, std::string> ports_busy(int index) const;
  [[nodiscard]] bool live(int index) const;  // our process runs, not paused (it may answer)

  ClusterSettings settings_;
  std::map<int, std::string> sentinel_ids_;  // sentinel ids made up in this process
  std::map<int, std::uintmax_t> log_start_;  // node -> size of its log when spawn() started it
};

}  // namespace redlock::nodes
