// Test support: Redis Sentinel topologies made of RedisServer processes.
//
// For every monitored name: one master + R replicas (REPLICAOF, synced before any sentinel
// starts, so the sentinels learn the replicas from the master's first INFO). Then S sentinels,
// each `<server> <its own conf> --sentinel` (redis-server or valkey-server: same executable as the
// data nodes) with short down-after-milliseconds / failover-timeout; every sentinel has its own
// writable config file under the fixture's temp dir (sentinels rewrite it). The constructor
// returns once every sentinel lists every replica (flags "slave", link ok) and knows every other
// sentinel, for every name.
//
// Data node indexes are stable per name: node(name, 0) starts as the master, node(name, 1..R) as
// its replicas. After a failover, ask current_master(name). Each data node has a config file of
// its own in dir() (empty at first), which Sentinel's CONFIG REWRITE updates: a node restarted
// with node(...).start() comes back with the role Sentinel last gave it, like a real deployment;
// restart_node() decides explicitly. Sentinels talk plaintext to the data nodes, unless
// `server.tls` is TLS-only with replication over TLS: then the sentinels too listen on TLS only
// and reach the data nodes and each other over TLS (tls-replication), as in a TLS deployment.
//
// Threading and PR_SET_PDEATHSIG: as for RedisServer (construct on a thread that outlives it).
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "redis_fixture.hpp"

namespace redlock::test {

struct SentinelConfig {
  std::vector<std::string> master_names = {"mymaster"};
  int replicas = 1;  // per master
  int sentinels = 3;
  int quorum = 0;                                    // 0: a majority of the sentinels
  std::chrono::milliseconds down_after{1000};        // sentinel down-after-milliseconds
  std::chrono::milliseconds failover_timeout{3000};  // sentinel failover-timeout
  // Base for the data nodes (executable, aof_always, extra_args...); `port` is ignored.
  ServerConfig server;
  // Sentinels use server.executable (redis-server / valkey-server with --sentinel) unless set.
  std::string sentinel_executable;
  // Upper bound for construction and for each wait (failover, restart).
  std::chrono::milliseconds timeout{30000};
};

class SentinelFixture {
 public:
  explicit SentinelFixture(SentinelConfig cfg = {});
  ~SentinelFixture();  // kills every process, removes the dirs. Never throws.
  SentinelFixture(const SentinelFixture&) = delete;
  SentinelFixture& operator=(const SentinelFixture&) = delete;

  [[nodiscard]] const SentinelConfig& config() const { return cfg_; }
  [[nodiscard]] const std::string& dir() const { return dir_; }  // sentinel config files

  // --- sentinels ------------------------------------------------------------------------------
  [[nodiscard]] std::size_t sentinel_count() const { return sentinels_.size(); }
  [[nodiscard]] RedisServer& sentinel(std::size_t i) { return *sentinels_.at(i); }
  [[nodiscard]] const RedisServer& sentinel(std::size_t i) const { return *sentinels_.at(i); }
  [[nodiscard]] std::vector<std::string> sentinel_addresses() const;  // "127.0.0.1:port", ...
  [[nodiscard]] std::string sentinel_config_file(std::size_t i) const;

  // --- data nodes -----------------------------------------------------------------------------
  [[nodiscard]] std::size_t node_count(const std::string& name) const;  // 1 + replicas
  [[nodiscard]] RedisServer& node(const std::string& name, std::size_t i);
  [[nodiscard]] const RedisServer& node(const std::string& name, std::size_t i) const;

  // SENTINEL GET-MASTER-ADDR-BY-NAME on sentinel i: "127.0.0.1:port", nullopt when it has none
  // (or is not running).
  [[nodiscard]] std::optional<std::string> master_address_seen_by(std::size_t sentinel,
                                                                  const std::string& name) const;
  // The same from every sentinel, in sentinel order.
  [[nodiscard]] std::vector<std::optional<std::string>> master_addresses(
      const std::string& name) const;
  // The data node every running sentinel reports as master. Throws if they disagree or it is not
  // one of ours.
  [[nodiscard]] std::size_t current_master_index(const std::string& name) const;
  [[nodiscard]] RedisServer& current_master(const std::string& name);

  // --- faults ---------------------------------------------------------------------------------
  // What happens to a demoted master that is still running (after failover()) or that comes
  // back (restart_node()). Sentinel itself sends it REPLICAOF <new master> only 10-20 s later (it
  // polls such a node's INFO every 10 s and waits 8 s after it reported its role), and until then
  // the node is a second master that accepts writes.
  enum class Rejoin {
    now,          // the fixture sends that same REPLICAOF at once, then waits until stable
    by_sentinel,  // wait (up to max(timeout, 60 s)) until Sentinel does it itself (~20 s)
    no_wait,      // return at once: the old master still says role:master
  };
  // SENTINEL FAILOVER name (on the first running sentinel), then waits until every running
  // sentinel reports the new master and it says role:master; then deals with the old master as
  // `rejoin` says. Returns the new master's index.
  std::size_t failover(const std::string& name, Rejoin rejoin = Rejoin::now);
  // SIGKILLs the current master (by its recorded pid) and waits for the automatic failover (down
  // after down_after, then elected and promoted): every running sentinel reports a new master
  // that says role:master, and the other replicas follow it. Returns its index.
  std::size_t kill_master_and_wait_failover(const std::string& name);
  // Starts data node i of `name` again (after a kill; it comes back as an empty master unless
  // server.aof_always) and deals with it as `rejoin` says (default: it becomes a replica of the
  // current master at once and the sentinels see it so).
  void restart_node(const std::string& name, std::size_t i, Rejoin rejoin = Rejoin::now);
  // DEL key on the current master only (a write the promoted replica never received).
  void delete_on_master(const std::string& name, const std::string& key);
  // Waits until, for every name, every running sentinel agrees on the master, lists every running
  // replica with flags "slave" and link ok, and knows every other running sentinel. Throws
  // std::runtime_error with the reason otherwise.
  void wait_until_stable() const;
  [[nodiscard]] std::string why_unstable() const;  // "" when stable

 private:
  struct Group {
    std::vector<std::unique_ptr<RedisServer>> nodes;
  };
  [[nodiscard]] const Group& group(const std::string& name) const;
  [[nodiscard]] std::optional<std::size_t> index_of_address(const std::string& name,
                                                            const std::string& addr) const;
  [[nodiscard]] std::string describe(const std::string& name) const;
  std::size_t wait_for_new_master(const std::string& name, std::size_t old_master, const char* what,
                                  std::chrono::milliseconds limit);
  void make_replica(const std::string& name, std::size_t i, std::size_t master);
  void wait_until_stable_for(std::chrono::milliseconds limit) const;
  [[nodiscard]] std::chrono::milliseconds by_sentinel_limit() const;
  [[nodiscard]] std::chrono::milliseconds election_limit() const;
  [[nodiscard]] std::string data_node_config_file(const std::string& name, std::size_t i) const;
  [[nodiscard]] std::vector<std::size_t> running_sentinels() const;

  SentinelConfig cfg_;
  std::string dir_;
  std::map<std::string, Group> groups_;
  std::vector<std::unique_ptr<RedisServer>> sentinels_;
};

}  // namespace redlock::test
