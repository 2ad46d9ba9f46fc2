#pragma once
// A node: one of the N votes. A standalone Redis master over one connection (standalone.cpp), a
// Sentinel-managed master (sentinel.cpp), or a Redis Cluster (cluster.cpp).
//
// Callback contract: that of net::Connection (connection.hpp): every command send() accepted
// gets exactly one on_result() and then exactly one on_done().

#include <uv.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/capabilities.hpp"
#include "core/command.hpp"
#include "net/connection.hpp"
#include "net/subscriber.hpp"
#include "net/tls.hpp"
#include "redlock/lock.hpp"
#include "redlock/metrics.hpp"
#include "redlock/options.hpp"

namespace redlock::net {

// What a node needs from the engine that owns it.
class NodeHost {
 public:
  virtual void log(LogLevel level, const std::string& message) = 0;
  virtual void on_node_closed(int index) = 0;
  // Node `index` learned its server's identity (server_id()), for the first time or a new one.
  virtual void on_server_identified(int index) = 0;
  // How long a restarted server's votes do not count (the longest ttl in use plus drift).
  [[nodiscard]] virtual Millis restart_quarantine() const = 0;
  // Node `index` heard that `lock_key` may be free (subscriber.hpp).
  virtual void on_wake(int index, const std::string& lock_key, const Wake& wake) = 0;

 protected:
  ~NodeHost() = default;
};

class Node {
 public:
  virtual ~Node() = default;

  virtual void start() = 0;
  // Lets queued commands drain (bounded), then calls host.on_node_closed(index). Idempotent.
  virtual void close() = 0;
  // False when the node cannot take commands now (not connected): then nothing runs. As
  // Connection::send: `deadline` is absolute, set once where the command was stamped (`sent`,
  // the caller's clock reading, plus its timeout), and kept as it is on the way down.
  virtual bool send(const std::shared_ptr<const Request>& req, BootClock::time_point deadline,
                    Sink& sink, std::uint32_t tag, BootClock::time_point sent) = 0;

  // Display address, never with a password.
  [[nodiscard]] virtual const std::string& name() const = 0;
  // Why the node is not usable, for the per-node record ("connection refused", ...).
  [[nodiscard]] virtual std::string last_error() const = 0;
  // The per-node record's text for a command this node's connection failed with `error`: the
  // error, with what the node knows of its cause (a plaintext connection hung up on before any
  // answer: "does it expect TLS?").
  [[nodiscard]] virtual std::string failure_detail(std::string_view error) const {
    return std::string(error);
  }
  // The last failure was the server refusing our credentials or database (AUTH, SELECT).
  [[nodiscard]] virtual bool refused() const = 0;
  // The server's identity (its run_id), empty until known: one vote per server. A reference,
  // valid until the node next changes on the loop: vote_exclusion() compares every pair of
  // nodes on each vote, and copying a 40-byte run_id was ten allocations per lock cycle.
  [[nodiscard]] virtual const std::string& server_id() const = 0;
  // Restart guard: why a vote from this node must not count at `now`, or nullopt.
  [[nodiscard]] virtual std::optional<std::string> vote_exclusion(
      BootClock::time_point now) const = 0;
  // Wake-ups: listen on this node for releases of `lock_key` while more subscribe() than
  // unsubscribe() calls were made for it (host.on_wake() tells). A no-op without wake-ups.
  virtual void subscribe(const std::string& lock_key) = 0;
  virtual void unsubscribe(const std::string& lock_key) = 0;
  // Why this server's fence counters may not survive a crash ("appendonly no", "appendfsync
  // everysec"), as CONFIG said at the last connect; nullopt when durable or unknown.
  [[nodiscard]] virtual std::optional<std::string> fence_durability_problem() const = 0;
  // Where `key` lives behind this vote, for status ("slot 866 on 10.0.0.5:7002", "master
  // 10.0.0.5:6380"); empty for a standalone master (the node itself).
  [[nodiscard]] virtual std::string key_owner(const std::string& key) const {
    (void)key;
    return {};
  }

  // What the server behind this vote can run, as probed at its current connection (not probed:
  // scripts only, as before the probe existed).
  [[nodiscard]] virtual detail::Capabilities capabilities() const { return {}; }
  // Why `req` cannot run on this node at all (detail::cannot_run: a script on a node that refuses
  // them, a native command forced on one without it), or nullopt: then send() it.
  [[nodiscard]] virtual std::optional<std::string> cannot_run(const Request& req) const {
    (void)req;
    return std::nullopt;
  }

  bool fence_warned = false;  // the engine has warned about fencing on this node
};

// Makes the transport of one more connection to `host` (TLS checks the certificate against it,
// unless a server name is set). A standalone node needs two (commands, wake-ups); a Sentinel vote
// connects to sentinels and to whichever server is master, so it makes them as it goes.
using TransportMaker = std::function<std::unique_ptr<TransportFactory>(const std::string& host)>;

// How the node at `address` moves its bytes: plain, or TLS when the address (rediss://,
// rediss+sentinel://) or the options (Options::tls.enabled, tcp addresses only) ask for it. Empty
// with `error` set (naming the file) when a TLS file cannot be used.
[[nodiscard]] TransportMaker transport_for(const NodeAddress& address, const Options& options,
                                           TlsContexts& contexts, std::string& error);

// The node for `address` (the index is its place in Options::nodes; node_factory.cpp): a standalone
// master, a Sentinel-managed one or a Redis Cluster.
[[nodiscard]] std::unique_ptr<Node> make_node(uv_loop_t* loop, NodeHost& host, int index,
                                              TransportMaker transport, const NodeAddress& address,
                                              const Options& options, NodeMetrics* metrics);

// What a node that wraps a standalone one (a Sentinel vote's current master) learns from the
// master's handshake beyond what the standalone node keeps.
class MasterWatcher {
 public:
  // INFO replication at a (re)connect: `promoted` says whether the server was promoted from
  // replica since its process started (core/info.hpp, parse_promoted), nullopt when it says it is
  // not a master (or the answer could not be read).
  virtual void on_replication(std::optional<bool> promoted) = 0;

 protected:
  ~MasterWatcher() = default;
};

// A standalone master node. With a `watcher`, its handshake also reads INFO replication, before
// any command of a vote on the same connection, so a vote's answer always comes after it.
[[nodiscard]] std::unique_ptr<Node> make_standalone_node(uv_loop_t* loop, NodeHost& host, int index,
                                                         TransportMaker transport,
                                                         const NodeAddress& address,
                                                         const Options& options,
                                                         NodeMetrics* metrics,
                                                         MasterWatcher* watcher = nullptr);

// The nodes that discover their servers (DiscoveringNode, discovering_node.hpp).
// A Redis Cluster as one vote (cluster.cpp).
[[nodiscard]] std::unique_ptr<Node> make_cluster_node(uv_loop_t* loop, NodeHost& host, int index,
                                                      TransportMaker transport,
                                                      const NodeAddress& address,
                                                      const Options& options, NodeMetrics* metrics);

// A Sentinel-managed master (sentinel.cpp).
[[nodiscard]] std::unique_ptr<Node> make_sentinel_node(uv_loop_t* loop, NodeHost& host, int index,
                                                       TransportMaker transport,
                                                       const NodeAddress& address,
                                                       const Options& options,
                                                       NodeMetrics* metrics);

}  // namespace redlock::net
