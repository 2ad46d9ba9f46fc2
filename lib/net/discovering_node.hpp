#pragma once
// A vote whose servers are discovered, not named: a Sentinel-managed master (sentinel.cpp: the
// master the sentinels name) or a Redis Cluster (cluster.cpp: the masters of its slot map). What
// every such vote does, whatever it asks and however it decides, lives here once:
// - its life: start (the discovery connections and a periodic timer), close (the timer, the
//   commands still waiting for a first answer, the discovery connections, every master, then
//   host.on_node_closed() once all have closed);
// - the connections that ask where the servers are (discovery_settings()), with the vote's
//   credentials for them (an AUTH before anything else, a refusal dropping the connection);
// - commands sent before anything was discovered (PendingCommands);
// - each master it was told of: trusted or not (core/trust.hpp: the user's hosts, the allow-list,
//   or verified TLS against a name the user gave), reached through a standalone node that gets
//   the vote's credentials, retired and dropped when no longer named;
// - its wake-up subscriptions, counted, on whichever master serves the key now.
// A new topology that discovers its servers is one file (a DiscoveringNode and its
// DiscoveredMaster) plus one line in node_factory.cpp.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/trust.hpp"
#include "net/node.hpp"
#include "net/pending.hpp"
#include "net/uv.hpp"

namespace redlock::net {

// "host:port", IPv6 in brackets.
[[nodiscard]] std::string host_port(const std::string& host, int port);

// A connection that asks where the masters are (a sentinel; a cluster node, for its slot map): it
// answers quickly or is replaced, and nothing on it is worth draining at close.
[[nodiscard]] ConnectionSettings discovery_settings(const Options& options);

class DiscoveringNode;

// One master the discovery named, reached through a standalone node (standalone.cpp: its
// handshake, restart guard, replicated votes and wake-up subscriber). The standalone node's host
// is this, which passes on to the vote's host: messages get the vote's name, and a retired
// master's wake-ups and identity are no longer the vote's.
struct DiscoveredMaster : NodeHost, MasterWatcher {
  DiscoveredMaster(DiscoveringNode& owner, std::string address);
  virtual ~DiscoveredMaster() = default;
  DiscoveredMaster(const DiscoveredMaster&) = delete;
  DiscoveredMaster& operator=(const DiscoveredMaster&) = delete;

  DiscoveringNode& owner;
  std::string address;  // host:port as the discovery named it
  bool retired = false;
  bool closed = false;
  // Null for a master never contacted (not trusted): the topology says why.
  std::unique_ptr<Node> node;

  // NodeHost
  void log(LogLevel level, const std::string& message) override;
  void on_node_closed(int index) override;
  void on_server_identified(int index) override;
  [[nodiscard]] Millis restart_quarantine() const override;
  void on_wake(int index, const std::string& lock_key, const Wake& wake) override;
};

class DiscoveringNode : public Node, protected Connection::Listener {
 public:
  ~DiscoveringNode() override;

  void start() final;
  void close() final;
  [[nodiscard]] const std::string& name() const final { return name_; }
  void subscribe(const std::string& lock_key) final;
  void unsubscribe(const std::string& lock_key) final;

  // --- for the masters (and what works on the vote's behalf) ------------------------------------
  [[nodiscard]] NodeHost& host() { return host_; }
  [[nodiscard]] const std::string& display() const { return name_; }
  [[nodiscard]] int index() const { return index_; }
  [[nodiscard]] bool closing() const { return closing_; }
  // Once closing: tells the host when every discovery connection and every master has closed.
  void finish_if_closed();

 protected:
  // The credentials of the discovery connections: `auth` (null: none) goes first on each; an
  // error answer drops the connection (Failure::refused) with `refused_as` and the reason (the
  // password, `secret` of the address, never shown).
  struct DiscoveryAuth {
    std::shared_ptr<const Request> auth;
    std::string refused_as;  // "AUTH failed: "
    std::string NodeAddress::*secret = &NodeAddress::password;
  };

  // `interval`: how often on_interval() runs (restart it with timer_.start()).
  DiscoveringNode(uv_loop_t* loop, NodeHost& host, int index, TransportMaker transport,
                  const NodeAddress& address, const Options& options, NodeMetrics* metrics,
                  Millis interval, DiscoveryAuth auth);

  // --- what a topology says ----------------------------------------------------------------------
  // At start(): open the discovery connections (open_discovery()).
  virtual void discover() = 0;
  // Every interval.
  virtual void on_interval() = 0;
  // The master that serves `lock_key` now, for its wake-ups; nullptr: none.
  [[nodiscard]] virtual DiscoveredMaster* wake_master(const std::string& lock_key) const = 0;
  // A discovery connection is being set up, after its AUTH: what else goes first on it.
  virtual void on_discovery_connecting(Connection& c) { (void)c; }
  // The server refused the AUTH of discovery connection `c` (dropped already).
  virtual void on_discovery_refused(Connection& c) { (void)c; }
  // Why a command that waited for the first discovery is down (it expired, or could not go).
  [[nodiscard]] virtual std::string waiting_reason() const { return last_error(); }

  // --- what every topology uses ------------------------------------------------------------------
  // A new discovery connection to host:port (`push`: its pub/sub messages), not started yet.
  // Owned here until it has closed and drop_closed_discovery() runs.
  Connection& open_discovery(const std::string& host, std::uint16_t port,
                             Connection::PushHandler* push = nullptr);
  void drop_closed_discovery();
  // Whether a master the discovery named at host:port may be contacted (core/trust.hpp).
  [[nodiscard]] detail::DiscoveredTrust trust(const std::string& host, std::uint16_t port) const;
  // The standalone node of `m`, a master at host:port that trust() trusted with `verify_name`:
  // the vote's credentials and settings, and under TLS a certificate that must carry that name,
  // never one that only the discovery supplied. Not started.
  [[nodiscard]] std::unique_ptr<Node> master_node(DiscoveredMaster& m, const std::string& host,
                                                  std::uint16_t port,
                                                  const std::string& verify_name);
  // Owned here from now on, until retired and closed (drop_closed_masters()).
  template <class M>
  M& adopt(std::unique_ptr<M> m) {
    M& ref = *m;
    masters_.push_back(std::move(m));
    return ref;
  }
  // No longer the vote's: its wake-up subscriptions leave it, and its node closes.
  void retire(DiscoveredMaster& m);
  void drop_closed_masters();
  // Every wake-up subscription on the master that serves its key now (wake_master()).
  void resubscribe_all();
  [[nodiscard]] const std::vector<std::unique_ptr<DiscoveredMaster>>& masters() const {
    return masters_;
  }

  uv_loop_t* loop_;
  NodeHost& host_;
  int index_;
  TransportMaker transport_;
  NodeAddress address_;
  std::string name_;
  const Options& options_;
  NodeMetrics* metrics_;
  bool closing_ = false;
  Timer timer_;              // on_interval()
  PendingCommands waiting_;  // commands sent before anything was discovered

 private:
  // One discovery connection, and the sink of its AUTH.
  struct DiscoveryLink final : Sink {
    explicit DiscoveryLink(DiscoveringNode& n) : node(n) {}
    DiscoveringNode& node;
    std::unique_ptr<Connection> conn;
    bool closed = false;
    void on_result(int, std::uint32_t, const Result& r) override;
    void on_done() override {}
  };
  struct Subscription {
    int users = 0;
    DiscoveredMaster* on = nullptr;  // the master it is subscribed on
  };

  // Connection::Listener (the discovery connections): on_ready() and on_dropped() are the
  // topology's.
  void on_connecting(Connection& c) final;
  void on_closed(Connection& c) final;

  void resubscribe(const std::string& key, Subscription& s);

  Millis interval_;
  DiscoveryAuth auth_;
  bool finished_ = false;
  std::vector<std::unique_ptr<DiscoveryLink>> discovery_;
  std::vector<std::unique_ptr<DiscoveredMaster>> masters_;  // live and retired, in order made
  std::map<std::string, Subscription> subscriptions_;
};

}  // namespace redlock::net
