// Test support: a minimal blocking TLS client for Redis (OpenSSL + hiredis' reply parser).
//
// Used by the fixtures to talk to TLS-only servers and by tests to check what a TLS server
// accepts. One TlsConnection = one TCP connection to 127.0.0.1; not thread-safe (use one per
// thread). SIGPIPE is blocked around writes, so a peer that closed never kills the test.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "redis_fixture.hpp"

namespace redlock::test {

struct TlsClientOptions {
  // Trust anchor for the server's certificate. Empty: the server is not verified at all.
  std::string ca_file;
  // Check the server's certificate (chain to ca_file, validity dates, and `host` against its
  // subjectAltName). Ignored (treated as false) when ca_file is empty.
  bool verify_peer = true;
  // What the certificate must name: an IP literal is checked against SAN IP entries, anything else
  // against SAN DNS entries (and sent as SNI). The TCP connection always goes to 127.0.0.1.
  std::string host = "127.0.0.1";
  // Client identity (servers started with --tls-auth-clients yes require one). Both or neither.
  std::string cert_file;
  std::string key_file;
};

// A TLS failure: the handshake was refused (by us: untrusted / expired / wrong-host certificate;
// or by the server: no or untrusted client certificate), or the client's own files could not be
// loaded. what() carries OpenSSL's reason, e.g. "certificate verify failed: certificate has
// expired" or "... alert certificate required".
class TlsError : public RedisIoError {
 public:
  TlsError(const std::string& what, long verify_result)
      : RedisIoError(what, nodes::Failure::handshake), verify_result_(verify_result) {}
  // X509_V_OK (0) unless our verification of the server's certificate failed, e.g.
  // X509_V_ERR_CERT_HAS_EXPIRED (10), X509_V_ERR_HOSTNAME_MISMATCH (62),
  // X509_V_ERR_IP_ADDRESS_MISMATCH (64), X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY (20).
  [[nodiscard]] long verify_result() const noexcept { return verify_result_; }

 private:
  long verify_result_;
};

class TlsConnection {
 public:
  // TCP connect + TLS handshake to 127.0.0.1:port. Throws RedisIoError (connect refused / timeout)
  // or TlsError (handshake or certificate problem).
  TlsConnection(std::uint16_t port, const TlsClientOptions& opts,
                std::chrono::milliseconds timeout = kDefaultCommandTimeout);
  ~TlsConnection();
  TlsConnection(const TlsConnection&) = delete;
  TlsConnection& operator=(const TlsConnection&) = delete;
  TlsConnection(TlsConnection&&) noexcept;
  TlsConnection& operator=(TlsConnection&&) noexcept;

  // Sends one command and reads its reply. A Redis error reply is a Reply, not an exception;
  // an IO failure throws RedisIoError, a TLS alert from the server (e.g. it rejected our client
  // certificate, which TLS 1.3 reports only after the handshake) throws TlsError.
  [[nodiscard]] Reply command(const std::vector<std::string>& argv);

  // The negotiated protocol, e.g. "TLSv1.3".
  [[nodiscard]] std::string protocol() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One command over a fresh TLS connection.
[[nodiscard]] Reply tls_command_at(std::uint16_t port, const std::vector<std::string>& argv,
                                   const TlsClientOptions& opts,
                                   std::chrono::milliseconds timeout = kDefaultCommandTimeout);

}  // namespace redlock::test
