#include "server_access.hpp"

namespace redlock::cli {

nodes::Endpoint endpoint_of(const NodeAddress& a, const TlsOptions& tls) {
  if (a.transport == NodeAddress::Transport::unix_socket)
    return nodes::Endpoint::unix_socket(a.path);
  nodes::Endpoint e = nodes::Endpoint::tcp(a.host, a.port);
  if (!a.tls && !tls.enabled) return e;
  const auto& over = a.tls_override;
  nodes::Tls t;
  if (!over.ca_file.empty()) {
    t.ca_file = over.ca_file;
  } else {
    t.ca_file = tls.ca_file;
    t.ca_dir = tls.ca_dir;
  }
  const bool own_cert = !over.cert_file.empty() || !over.key_file.empty();
  t.cert_file = own_cert ? over.cert_file : tls.cert_file;
  t.key_file = own_cert ? over.key_file : tls.key_file;
  t.server_name = !over.server_name.empty() ? over.server_name : tls.server_name;
  t.verify = !(over.insecure || tls.insecure_skip_verify);
  e.tls = std::move(t);
  return e;
}

NodeAddress cluster_member(const NodeAddress& vote, const std::string& host, std::uint16_t port) {
  NodeAddress m = vote;
  m.kind = NodeAddress::Kind::server;
  m.more_seeds.clear();
  m.host = host;
  m.port = port;
  return m;
}

}  // namespace redlock::cli
