// RedisServer's TLS parts (ServerConfig::tls), kept apart from redis_fixture.cpp, which only calls
// these hooks.
#include <string>
#include <vector>

#include "redis_fixture.hpp"

namespace redlock::test {
namespace {

nodes::Tls control_options(const TlsServerOptions& tls) {
  nodes::Tls o;
  // Our own server (the pid check proves it): its certificate is not what is being tested here,
  // and it may be a deliberately bad one (expired, wrong host, another CA).
  o.verify = false;
  o.cert_file = tls.client_cert_file.empty() ? tls.cert_file : tls.client_cert_file;
  o.key_file = tls.client_key_file.empty() ? tls.key_file : tls.client_key_file;
  return o;
}

}  // namespace

std::uint16_t RedisServer::tls_port() const {
  if (!cfg_.tls) return 0;
  return cfg_.tls->tls_only ? port_ : tls_port_;
}

std::string RedisServer::tls_address() const {
  return cfg_.tls ? "127.0.0.1:" + std::to_string(tls_port()) : std::string();
}

void RedisServer::init_tls() {
  if (!cfg_.tls || cfg_.tls->tls_only) return;
  tls_port_ = cfg_.tls->port != 0 ? cfg_.tls->port : pick_port();
}

void RedisServer::repick_auto_tls_port() {
  if (cfg_.tls && !cfg_.tls->tls_only && cfg_.tls->port == 0) tls_port_ = pick_port();
}

std::vector<std::string> RedisServer::tls_args() const {
  const TlsServerOptions& t = *cfg_.tls;
  std::vector<std::string> a;
  if (t.tls_only) a.insert(a.end(), {"--port", "0"});  // overrides the fixture's --port
  // clang-format off
  a.insert(a.end(), {"--tls-port", std::to_string(tls_port()),
                     "--tls-cert-file", t.cert_file,
                     "--tls-key-file", t.key_file,
                     "--tls-ca-cert-file", t.ca_cert_file,
                     "--tls-auth-clients", t.auth_clients});
  // clang-format on
  if (t.replication) a.insert(a.end(), {"--tls-replication", "yes"});
  if (t.cluster) a.insert(a.end(), {"--tls-cluster", "yes"});
  return a;
}

bool RedisServer::tls_answers_as(pid_t pid) const {
  nodes::Endpoint endpoint = nodes::Endpoint::local(port_);
  endpoint.tls = control_options(*cfg_.tls);
  return nodes::answers_ping(endpoint, std::chrono::milliseconds(200), pid);
}

Reply RedisServer::tls_command(const std::vector<std::string>& argv,
                               std::chrono::milliseconds timeout) const {
  return command_at(port_, argv, timeout, control_options(*cfg_.tls));
}

}  // namespace redlock::test
