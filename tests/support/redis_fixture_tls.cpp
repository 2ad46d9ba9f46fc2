// RedisServer's TLS parts (ServerConfig::tls), kept apart from redis_fixture.cpp, which only calls
// these hooks.
#include <string>
#include <vector>

#include "redis_fixture.hpp"
#include "tls_client.hpp"

namespace redlock::test {
namespace {

TlsClientOptions control_options(const TlsServerOptions& tls) {
  TlsClientOptions o;
  // Our own server (the pid check proves it): its certificate is not what is being tested here,
  // and it may be a deliberately bad one (expired, wrong host, another CA).
  o.verify_peer = false;
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
  tls_port_ = cfg_.tls->port != 0 ? cfg_.tls->port : free_port();
}

void RedisServer::repick_auto_tls_port() {
  if (cfg_.tls && !cfg_.tls->tls_only && cfg_.tls->port == 0) tls_port_ = free_port();
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
  const std::string expected_pid_field = "process_id:" + std::to_string(pid) + "\r\n";
  try {
    TlsConnection c(port_, control_options(*cfg_.tls), std::chrono::milliseconds(200));
    const Reply pong = c.command({"PING"});
    if (pong.type != Reply::Type::status || pong.str != "PONG") return false;
    const Reply info = c.command({"INFO", "server"});
    return info.type == Reply::Type::string &&
           info.str.find(expected_pid_field) != std::string::npos;
  } catch (const RedisIoError&) {
    return false;  // not listening yet (TlsError is a RedisIoError too)
  }
}

Reply RedisServer::tls_command(const std::vector<std::string>& argv,
                               std::chrono::milliseconds timeout) const {
  return tls_command_at(port_, argv, control_options(*cfg_.tls), timeout);
}

}  // namespace redlock::test
