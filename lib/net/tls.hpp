#pragma once
// TLS over a connection's socket, with OpenSSL on the fd (SSL_set_fd): the connection's readiness
// loop drives the handshake, reads and writes through the Transport seam, so pipelining, deadlines,
// reconnects and early decisions work as on plaintext. Verification is on unless turned off by
// name: the CAs given (or the system's), the host name or IP address checked against the
// certificate, SNI sent for names. Sessions are resumed on reconnect.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "net/transport.hpp"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace redlock::net {

struct TlsSettings {
  std::string ca_file;  // empty with ca_dir: the system's CAs
  std::string ca_dir;
  std::string cert_file;  // client certificate (mutual TLS), with key_file
  std::string key_file;
  bool verify = true;  // false: accept any server certificate (insecure)
  friend bool operator==(const TlsSettings&, const TlsSettings&) = default;
};

// One SSL_CTX: the trust store and the client certificate, loaded once. Thread-safe to share
// (the engine shares one per distinct settings between its nodes).
class TlsContext {
 public:
  // Loads what `s` names. On failure returns nullptr and sets `error` to a message naming the
  // file and what is wrong with it (never its contents).
  static std::shared_ptr<TlsContext> create(const TlsSettings& s, std::string& error);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  [[nodiscard]] const TlsSettings& settings() const noexcept { return settings_; }

 private:
  friend class TlsFactory;
  TlsContext() = default;
  ::ssl_ctx_st* ctx_ = nullptr;
  TlsSettings settings_;
};

// Transports for one node: `host` is what the certificate must name (a DNS name or an IP
// address); `server_name` overrides it (and is sent as SNI). Keeps the node's last session for
// resumption (Transport::established() says whether a handshake resumed one).
[[nodiscard]] std::unique_ptr<TransportFactory> tls_transport(std::shared_ptr<TlsContext> context,
                                                              std::string host,
                                                              std::string server_name);

// What a TLS transport agreed on with its server, once its handshake is done, for checks of the
// server's set-up (redlock-cli doctor); nullopt for any other transport or before the handshake.
struct TlsPeer {
  std::string protocol;  // "TLSv1.3", ...
  // The end of the validity of the certificate the server presented; nullopt when it sent none
  // or its date cannot be read.
  std::optional<std::chrono::system_clock::time_point> not_after;
};
[[nodiscard]] std::optional<TlsPeer> tls_peer(const Transport& t);

// The TLS contexts of one engine, one per distinct settings.
class TlsContexts {
 public:
  std::shared_ptr<TlsContext> get(const TlsSettings& s, std::string& error);

 private:
  std::vector<std::shared_ptr<TlsContext>> all_;
};

}  // namespace redlock::net
