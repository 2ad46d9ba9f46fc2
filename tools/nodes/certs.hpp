#pragma once
// Throwaway certificates for local TLS nodes: the CA, server and client certificates that
// `redlock-cli cluster up --tls` puts in the cluster directory, and the good and bad sets of the
// test fixtures (tests/support/tls_fixture). One implementation for both, made in-process with
// OpenSSL's library (no `openssl` CLI needed at run time; EC P-256 keys, a few milliseconds each).
//
// Never for production: keys are written unencrypted (mode 0600) next to the certificates.

#include <chrono>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace redlock::nodes {

struct CertSpec {
  enum class Kind {
    ca,      // CA:TRUE, keyCertSign
    server,  // serverAuth and clientAuth: a server may present it as a client too (replication,
             // the cluster bus, a fixture's or the node manager's own connection)
    client,  // clientAuth only
  };
  std::string name;         // writes DIR/NAME.crt and DIR/NAME.key
  std::string common_name;  // the subject's CN
  Kind kind = Kind::server;
  std::string issuer = {};  // `name` of a CA made earlier in the same call; empty: self-signed
  // subjectAltName entries, "IP:127.0.0.1" or "DNS:localhost"
  std::vector<std::string> alt_names = {};
  // Validity, by default from an hour ago (clock skew) for `days` days.
  int days = 2;
  std::optional<std::chrono::system_clock::time_point> not_before = {};
  std::optional<std::chrono::system_clock::time_point> not_after = {};
};

struct CertError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Makes every certificate of `specs`, in order (a CA before what it signs), in `dir`, which must
// exist. Throws CertError naming the certificate and OpenSSL's reason.
void make_certificates(const std::filesystem::path& dir, const std::vector<CertSpec>& specs);

// The set of a local TLS cluster: "ca" (CN redlock-local-ca), "server" (IP:127.0.0.1,
// DNS:localhost), "client" (CN redlock-local-client), valid `days` days.
[[nodiscard]] std::vector<CertSpec> local_cluster_certs(int days);

}  // namespace redlock::nodes
