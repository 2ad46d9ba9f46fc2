#pragma once
// A node: one of the N votes. Today a standalone Redis master over one connection; a Redis
// Cluster or a Sentinel-managed master are other kinds of node behind the same interface.
//
// Callback contract: that of net::Connection (connection.hpp): every command send() accepted
// gets exactly one on_result() and then exactly one on_done().

#include <uv.h>

#include <memory>
#include <optional>
#include <string>

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
  // Node `index` learned its server's identity (server_id()) for the first time.
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
  // Connection::send: the loop time is the caller's to update, `sent` its clock reading.
  virtual bool send(const std::shared_ptr<const Request>& req, Millis timeout, Sink& sink,
                    std::uint32_t tag, BootClock::time_point sent) = 0;

  // Display address, never with a password.
  [[nodiscard]] virtual const std::string& name() const = 0;
  // Why the node is not usable, for the per-node record ("connection refused", ...).
  [[nodiscard]] virtual std::string last_error() const = 0;
  // The last failure was the server refusing our credentials or database (AUTH, SELECT).
  [[nodiscard]] virtual bool refused() const = 0;
  // The server's identity (its run_id), empty until known: one vote per server.
  [[nodiscard]] virtual std::string server_id() const = 0;
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

  bool fence_warned = false;  // the engine has warned about fencing on this node
};

// How the node at `address` moves its bytes: plain, or TLS when the address (rediss://) or the
// options (Options::tls.enabled, tcp addresses only) ask for it. nullptr with `error` set (naming
// the file) when a TLS file cannot be used.
[[nodiscard]] std::unique_ptr<TransportFactory> transport_for(const NodeAddress& address,
                                                              const Options& options,
                                                              TlsContexts& contexts,
                                                              std::string& error);

// The node for `address` (the index is its place in Options::nodes). `wake_transport` moves the
// bytes of its pub/sub connection (wake-ups); nullptr: no wake-ups.
[[nodiscard]] std::unique_ptr<Node> make_node(uv_loop_t* loop, NodeHost& host, int index,
                                              std::unique_ptr<TransportFactory> transport,
                                              std::unique_ptr<TransportFactory> wake_transport,
                                              const NodeAddress& address, const Options& options,
                                              NodeMetrics* metrics);

}  // namespace redlock::net
