// Test support: throwaway certificates, made at test time (tools/nodes/certs.hpp, the same code as
// `redlock-cli cluster up --tls`) under a temp dir that the object removes.
//
// Keys are EC P-256 (fast to make). Every certificate but the expired one is valid from now for 2
// days. The good server certificate names IP:127.0.0.1 and DNS:localhost and carries both
// serverAuth and clientAuth, so a server can also present it as a client (replication, cluster
// bus, the fixture's own control connection).
//
//   TlsFixture tls;
//   ServerConfig cfg;
//   cfg.tls = tls.server_options();            // plaintext port + TLS port, clients need a cert
//   RedisServer s(cfg);
//   nodes::Endpoint e = nodes::Endpoint::local(s.tls_port());
//   e.tls = tls.client_options();
//   nodes::SyncClient c(e);
//   c.command({"PING"});
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "nodes/client.hpp"
#include "redis_fixture.hpp"

namespace redlock::test {

class TlsFixture {
 public:
  // Makes every file below (a few milliseconds). Throws nodes::CertError (a std::runtime_error)
  // when a step fails.
  TlsFixture();
  ~TlsFixture();  // removes dir(). Never throws.
  TlsFixture(const TlsFixture&) = delete;
  TlsFixture& operator=(const TlsFixture&) = delete;

  [[nodiscard]] const std::string& dir() const { return dir_; }

  // --- the good set: one CA, a server and a client certificate it signed ---------------------
  [[nodiscard]] std::string ca_cert() const { return path("ca.crt"); }
  [[nodiscard]] std::string ca_key() const { return path("ca.key"); }
  [[nodiscard]] std::string server_cert() const {
    return path("server.crt");
  }  // 127.0.0.1, localhost
  [[nodiscard]] std::string server_key() const { return path("server.key"); }
  [[nodiscard]] std::string client_cert() const {
    return path("client.crt");
  }  // CN=redlock-test-client
  [[nodiscard]] std::string client_key() const { return path("client.key"); }

  // --- bad variants -------------------------------------------------------------------------
  // A second CA that has nothing to do with the first, and certificates it signed (SANs good).
  [[nodiscard]] std::string other_ca_cert() const { return path("other-ca.crt"); }
  [[nodiscard]] std::string other_ca_key() const { return path("other-ca.key"); }
  [[nodiscard]] std::string other_server_cert() const { return path("other-server.crt"); }
  [[nodiscard]] std::string other_server_key() const { return path("other-server.key"); }
  [[nodiscard]] std::string other_client_cert() const { return path("other-client.crt"); }
  [[nodiscard]] std::string other_client_key() const { return path("other-client.key"); }
  // Signed by the good CA, good SANs, valid 2020-01-01 .. 2020-01-02 only.
  [[nodiscard]] std::string expired_server_cert() const { return path("expired-server.crt"); }
  [[nodiscard]] std::string expired_server_key() const { return path("expired-server.key"); }
  // Signed by the good CA, SAN DNS:wrong.example only (matches neither 127.0.0.1 nor localhost).
  [[nodiscard]] std::string wrong_host_server_cert() const { return path("wrong-host.crt"); }
  [[nodiscard]] std::string wrong_host_server_key() const { return path("wrong-host.key"); }
  // PEM armour around garbage: loading it as a certificate or key fails.
  [[nodiscard]] std::string malformed_cert() const { return path("malformed.crt"); }
  [[nodiscard]] std::string malformed_key() const { return path("malformed.key"); }
  [[nodiscard]] std::string empty_file() const { return path("empty.pem"); }
  // A copy of the good CA certificate with mode 0000. NOTE: root ignores file modes, so check
  // unreadable_file_is_unreadable() before expecting a failure; directory_path() fails for root
  // too.
  [[nodiscard]] std::string unreadable_file() const { return path("unreadable.crt"); }
  [[nodiscard]] bool unreadable_file_is_unreadable() const;
  [[nodiscard]] std::string directory_path() const { return path("a-directory"); }
  [[nodiscard]] std::string missing_file() const { return path("does-not-exist.crt"); }
  // client_key() encrypted with a passphrase (`openssl pkey -aes256`), made on first use (an
  // openssl process, ~20 ms: most tests need none). Throws std::runtime_error if openssl fails.
  [[nodiscard]] std::string encrypted_client_key() const;

  // --- ready-made option sets ---------------------------------------------------------------
  // The good server certificate + CA for RedisServer (ServerConfig::tls).
  [[nodiscard]] TlsServerOptions server_options(const std::string& auth_clients = "yes",
                                                bool tls_only = false) const;
  // The good CA + client certificate, checking the endpoint's host (127.0.0.1).
  [[nodiscard]] nodes::Tls client_options() const;

  // How long the constructor took (for reports; never assert on it).
  [[nodiscard]] std::chrono::milliseconds generation_time() const { return generation_time_; }

 private:
  [[nodiscard]] std::string path(const char* name) const { return dir_ + "/" + name; }
  void generate();

  std::string dir_;
  std::chrono::milliseconds generation_time_{0};
};

}  // namespace redlock::test
