// The one place a node is made: which kind of node an address is (a standalone master, a
// Sentinel-managed master, a Redis Cluster), and how its bytes move (plain or TLS). A new
// topology is one new file (its Node; one that discovers its servers is a DiscoveringNode,
// discovering_node.hpp) plus one line in make_node().
#include <algorithm>

#include "net/node.hpp"

namespace redlock::net {

TransportMaker transport_for(const NodeAddress& a, const Options& o, TlsContexts& contexts,
                             std::string& error) {
  const bool unix_socket = a.transport == NodeAddress::Transport::unix_socket;
  // Redis serves TLS on TCP ports only: a unix socket stays plain (it is local) with --tls too.
  if (unix_socket || !(a.tls || o.tls.enabled)) {
    return [unix_socket](const std::string&) { return plain_transport(unix_socket); };
  }
  const auto& over = a.tls_override;
  TlsSettings s;
  if (!over.ca_file.empty()) {
    s.ca_file = over.ca_file;  // this node's CA replaces the client's
  } else {
    s.ca_file = o.tls.ca_file;
    s.ca_dir = o.tls.ca_dir;
  }
  if (!over.cert_file.empty() || !over.key_file.empty()) {
    s.cert_file = over.cert_file;
    s.key_file = over.key_file;
  } else {
    s.cert_file = o.tls.cert_file;
    s.key_file = o.tls.key_file;
  }
  s.verify = !(over.insecure || o.tls.insecure_skip_verify);
  auto context = contexts.get(s, error);
  if (!context) return {};
  const std::string name = !over.server_name.empty() ? over.server_name : o.tls.server_name;
  return [context, name](const std::string& host) { return tls_transport(context, host, name); };
}

std::unique_ptr<Node> make_node(uv_loop_t* loop, NodeHost& host, int index,
                                TransportMaker transport, const NodeAddress& address,
                                const Options& options, NodeMetrics* metrics) {
  if (address.kind == NodeAddress::Kind::sentinel) {
    return make_sentinel_node(loop, host, index, std::move(transport), address, options, metrics);
  }
  if (address.kind == NodeAddress::Kind::cluster) {
    return make_cluster_node(loop, host, index, std::move(transport), address, options, metrics);
  }
  return make_standalone_node(loop, host, index, std::move(transport), address, options, metrics);
}

}  // namespace redlock::net
