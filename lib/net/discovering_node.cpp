// What every vote that discovers its servers does (discovering_node.hpp).
#include "net/discovering_node.hpp"

#include <algorithm>

#include "core/secret.hpp"
#include "core/server_text.hpp"
#include "core/timing.hpp"

namespace redlock::net {

std::string host_port(const std::string& host, int port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

ConnectionSettings discovery_settings(const Options& o) {
  ConnectionSettings s;
  s.connect_timeout = o.connect_timeout;
  s.reconnect_min = o.reconnect_min;
  s.reconnect_max = o.reconnect_max;
  s.stall_limit = detail::discovery_stall_limit(o);
  s.drain_limit = Millis{0};
  return s;
}

// --- DiscoveredMaster ---------------------------------------------------------------------------

DiscoveredMaster::DiscoveredMaster(DiscoveringNode& o, std::string a)
    : owner(o), address(std::move(a)) {}

void DiscoveredMaster::log(LogLevel level, const std::string& message) {
  owner.host().log(level, owner.display() + ": " + message);
}
void DiscoveredMaster::on_node_closed(int) {
  closed = true;
  owner.finish_if_closed();
}
void DiscoveredMaster::on_server_identified(int index) {
  if (!retired) owner.host().on_server_identified(index);
}
Millis DiscoveredMaster::restart_quarantine() const { return owner.host().restart_quarantine(); }
void DiscoveredMaster::on_wake(int index, const std::string& lock_key, const Wake& wake) {
  if (!retired) owner.host().on_wake(index, lock_key, wake);
}

// --- DiscoveringNode ----------------------------------------------------------------------------

DiscoveringNode::DiscoveringNode(uv_loop_t* loop, NodeHost& host, int index,
                                 TransportMaker transport, const NodeAddress& address,
                                 const Options& options, NodeMetrics* metrics, Millis interval,
                                 DiscoveryAuth auth)
    : loop_(loop),
      host_(host),
      index_(index),
      transport_(std::move(transport)),
      address_(address),
      name_(address.to_string()),
      options_(options),
      metrics_(metrics),
      timer_(loop, [this] { on_interval(); }),
      waiting_(loop, index, [this] { return waiting_reason(); }),
      interval_(interval),
      auth_(std::move(auth)) {}

DiscoveringNode::~DiscoveringNode() {
  detail::wipe(address_.password);
  detail::wipe(address_.sentinel_password);
}

void DiscoveringNode::start() {
  timer_.unref();
  discover();
  timer_.start(static_cast<std::uint64_t>(interval_.count()));
}

void DiscoveringNode::close() {
  if (closing_) return;
  closing_ = true;
  timer_.close();
  waiting_.close();
  for (auto& l : discovery_) l->conn->close();
  for (auto& m : masters_) {
    if (m->node) m->node->close();  // (retired ones are closing already: idempotent)
  }
  finish_if_closed();
}

void DiscoveringNode::finish_if_closed() {
  if (!closing_ || finished_) return;
  for (const auto& l : discovery_) {
    if (!l->closed) return;
  }
  for (const auto& m : masters_) {
    if (!m->closed) return;
  }
  finished_ = true;
  host_.on_node_closed(index_);
}

Connection& DiscoveringNode::open_discovery(const std::string& host, std::uint16_t port,
                                            Connection::PushHandler* push) {
  Endpoint e;
  e.host = host;
  e.port = port;
  auto link = std::make_unique<DiscoveryLink>(*this);
  link->conn =
      std::make_unique<Connection>(loop_, static_cast<Connection::Listener&>(*this), index_, e,
                                   transport_(host), discovery_settings(options_));
  if (push != nullptr) link->conn->set_push_handler(push);
  discovery_.push_back(std::move(link));
  return *discovery_.back()->conn;
}

void DiscoveringNode::drop_closed_discovery() {
  std::erase_if(discovery_, [](const auto& l) { return l->closed; });
}

void DiscoveringNode::on_connecting(Connection& c) {
  if (auth_.auth) {
    for (auto& l : discovery_) {
      if (l->conn.get() != &c) continue;
      const auto now = BootClock::now();
      (void)c.send(auth_.auth, now + options_.connect_timeout, *l, 0, now);
    }
  }
  on_discovery_connecting(c);
}

void DiscoveringNode::on_closed(Connection& c) {
  for (auto& l : discovery_) {
    if (l->conn.get() == &c) l->closed = true;
  }
  finish_if_closed();
}

// An error answer to the AUTH: what follows it on that connection fails with it; it reconnects
// after backoff.
void DiscoveringNode::DiscoveryLink::on_result(int, std::uint32_t, const Result& r) {
  if (node.closing_ || r.kind != Result::Kind::reply || !r.reply->is_error()) return;
  conn->drop(node.auth_.refused_as +
                 detail::auth_error_text(r.reply->str, node.address_.*node.auth_.secret),
             Connection::Failure::refused);
  node.on_discovery_refused(*conn);
}

detail::DiscoveredTrust DiscoveringNode::trust(const std::string& host, std::uint16_t port) const {
  return detail::trust_discovered(address_, options_.tls, host, port);
}

std::unique_ptr<Node> DiscoveringNode::master_node(DiscoveredMaster& m, const std::string& host,
                                                   std::uint16_t port,
                                                   const std::string& verify_name) {
  NodeAddress a = address_;
  a.kind = NodeAddress::Kind::server;
  a.host = host;
  a.port = port;
  a.more_sentinels.clear();
  a.master_name.clear();
  a.more_seeds.clear();
  TransportMaker transport = transport_;
  if (!verify_name.empty()) {
    transport = [maker = transport_, name = verify_name](const std::string&) {
      return maker(name);
    };
  }
  return make_standalone_node(loop_, m, index_, std::move(transport), a, options_, metrics_, &m);
}

void DiscoveringNode::retire(DiscoveredMaster& m) {
  m.retired = true;
  for (auto& [key, s] : subscriptions_) {
    if (s.on != &m) continue;
    m.node->unsubscribe(key);
    s.on = nullptr;
  }
  if (m.node) m.node->close();
}

void DiscoveringNode::drop_closed_masters() {
  std::erase_if(masters_, [](const auto& m) { return m->retired && m->closed; });
}

void DiscoveringNode::subscribe(const std::string& lock_key) {
  auto& s = subscriptions_[lock_key];
  if (++s.users == 1) resubscribe(lock_key, s);
}

void DiscoveringNode::unsubscribe(const std::string& lock_key) {
  auto it = subscriptions_.find(lock_key);
  if (it == subscriptions_.end()) return;
  if (--it->second.users == 0) {
    if (DiscoveredMaster* m = it->second.on) m->node->unsubscribe(lock_key);
    subscriptions_.erase(it);
  }
}

void DiscoveringNode::resubscribe_all() {
  for (auto& [key, s] : subscriptions_) resubscribe(key, s);
}

void DiscoveringNode::resubscribe(const std::string& key, Subscription& s) {
  DiscoveredMaster* m = wake_master(key);
  if (m != nullptr && !m->node) m = nullptr;  // never contacted: no wake-ups there
  if (m == s.on) return;
  if (s.on != nullptr) s.on->node->unsubscribe(key);
  s.on = m;
  if (m != nullptr) m->node->subscribe(key);
}

}  // namespace redlock::net
