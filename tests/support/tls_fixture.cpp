#include "tls_fixture.hpp"

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "nodes/certs.hpp"
#include "support_util.hpp"

namespace redlock::test {
namespace {

void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  if (!out) throw std::runtime_error("TlsFixture: cannot write " + path);
}

}  // namespace

TlsFixture::TlsFixture() : dir_(make_temp_dir("redlock-tls")) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    generate();
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw;
  }
  generation_time_ = std::chrono::milliseconds(elapsed_ms(t0));
}

TlsFixture::~TlsFixture() {
  if (dir_.empty()) return;
  std::error_code ec;
  ::chmod(unreadable_file().c_str(), 0600);
  std::filesystem::remove_all(dir_, ec);
}

void TlsFixture::generate() {
  using K = nodes::CertSpec::Kind;
  const std::vector<std::string> good_names = {"IP:127.0.0.1", "DNS:localhost"};
  auto made = [](const char* name, const char* cn, K kind, const char* issuer,
                 std::vector<std::string> alt_names = {}) {
    return nodes::CertSpec{.name = name,
                           .common_name = cn,
                           .kind = kind,
                           .issuer = issuer,
                           .alt_names = std::move(alt_names)};
  };
  auto expired = made("expired-server", "localhost", K::server, "ca", good_names);
  expired.not_before = std::chrono::sys_days{std::chrono::January / 1 / 2020};
  expired.not_after = std::chrono::sys_days{std::chrono::January / 2 / 2020};
  nodes::make_certificates(
      dir_, {
                made("ca", "redlock-test-ca", K::ca, ""),
                made("other-ca", "redlock-other-ca", K::ca, ""),
                made("server", "localhost", K::server, "ca", good_names),
                made("client", "redlock-test-client", K::client, "ca"),
                made("wrong-host", "wrong.example", K::server, "ca", {"DNS:wrong.example"}),
                made("other-server", "localhost", K::server, "other-ca", good_names),
                made("other-client", "redlock-test-client", K::client, "other-ca"),
                expired,
            });

  write_file(malformed_cert(),
             "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n");
  write_file(malformed_key(),
             "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n");
  write_file(empty_file(), "");
  std::filesystem::copy_file(ca_cert(), unreadable_file());
  ::chmod(unreadable_file().c_str(), 0);
  std::filesystem::create_directory(directory_path());
}

std::string TlsFixture::encrypted_client_key() const {
  const std::string key = path("client-encrypted.key");
  if (std::filesystem::exists(key)) return key;
  const auto r = run_process({"openssl", "pkey", "-in", client_key(), "-aes256", "-passout",
                              "pass:redlock-test", "-out", key});
  if (!r.ok()) throw std::runtime_error("openssl pkey -aes256: " + r.describe() + ": " + r.output);
  return key;
}

bool TlsFixture::unreadable_file_is_unreadable() const {
  std::ifstream in(unreadable_file());
  return !in.is_open();
}

TlsServerOptions TlsFixture::server_options(const std::string& auth_clients, bool tls_only) const {
  TlsServerOptions o;
  o.cert_file = server_cert();
  o.key_file = server_key();
  o.ca_cert_file = ca_cert();
  o.auth_clients = auth_clients;
  o.tls_only = tls_only;
  return o;
}

nodes::Tls TlsFixture::client_options() const {
  nodes::Tls o;
  o.ca_file = ca_cert();
  o.cert_file = client_cert();
  o.key_file = client_key();
  return o;
}

}  // namespace redlock::test
