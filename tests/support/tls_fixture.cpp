#include "tls_fixture.hpp"

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "support_util.hpp"

namespace redlock::test {
namespace {

using Args = std::vector<std::string>;

// The extensions of every kind of certificate, and a minimal `openssl ca` setup (only used for
// the expired certificate, the one whose dates `req -x509` cannot set).
std::string openssl_config(const std::string& dir) {
  return "[req]\n"
         "distinguished_name = dn\n"
         "[dn]\n"
         "[ca_ext]\n"
         "basicConstraints = critical,CA:TRUE\n"
         "keyUsage = critical,keyCertSign,cRLSign\n"
         "subjectKeyIdentifier = hash\n"
         "[server_ext]\n"
         "basicConstraints = critical,CA:FALSE\n"
         "keyUsage = critical,digitalSignature,keyEncipherment\n"
         "extendedKeyUsage = serverAuth,clientAuth\n"
         "subjectAltName = IP:127.0.0.1,DNS:localhost\n"
         "authorityKeyIdentifier = keyid\n"
         "[client_ext]\n"
         "basicConstraints = critical,CA:FALSE\n"
         "keyUsage = critical,digitalSignature,keyEncipherment\n"
         "extendedKeyUsage = clientAuth\n"
         "authorityKeyIdentifier = keyid\n"
         "[wrong_host_ext]\n"
         "basicConstraints = critical,CA:FALSE\n"
         "keyUsage = critical,digitalSignature,keyEncipherment\n"
         "extendedKeyUsage = serverAuth,clientAuth\n"
         "subjectAltName = DNS:wrong.example\n"
         "authorityKeyIdentifier = keyid\n"
         "[ca]\n"
         "default_ca = testca\n"
         "[testca]\n"
         "database = " +
         dir + "/index.txt\n" + "new_certs_dir = " + dir + "/issued\n" + "serial = " + dir +
         "/serial\n" +
         "default_md = sha256\n"
         "policy = anything\n"
         "unique_subject = no\n"
         "copy_extensions = none\n"
         "[anything]\n"
         "commonName = supplied\n";
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  if (!out) throw std::runtime_error("TlsFixture: cannot write " + path);
}

}  // namespace

bool openssl_cli_available() { return !find_executable("openssl").empty(); }

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

void TlsFixture::openssl(const std::vector<std::string>& args) const {
  std::vector<std::string> argv{"openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  const ProcessResult r = run_process(argv, std::chrono::seconds(20), dir_);
  if (!r.ok()) {
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    throw std::runtime_error("TlsFixture: `" + cmd + "` failed (" + r.describe() + "):\n" +
                             r.output);
  }
}

void TlsFixture::generate() {
  const std::string cnf = path("openssl.cnf");
  write_file(cnf, openssl_config(dir_));
  write_file(path("index.txt"), "");
  write_file(path("serial"), "1000\n");
  std::filesystem::create_directory(path("issued"));

  const Args newkey = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-noenc"};
  auto self_signed_ca = [&](const std::string& name, const std::string& cn) {
    Args a = {"req", "-x509", "-new"};
    a.insert(a.end(), newkey.begin(), newkey.end());
    a.insert(a.end(),
             {"-keyout", path((name + ".key").c_str()), "-out", path((name + ".crt").c_str()),
              "-days", "2", "-subj", "/CN=" + cn, "-config", cnf, "-extensions", "ca_ext"});
    return a;
  };
  auto signed_by = [&](const std::string& ca, const std::string& name, const std::string& cn,
                       const std::string& ext) {
    Args a = {"req", "-x509", "-new"};
    a.insert(a.end(), newkey.begin(), newkey.end());
    a.insert(a.end(),
             {"-keyout", path((name + ".key").c_str()), "-out", path((name + ".crt").c_str()),
              "-days", "2", "-subj", "/CN=" + cn, "-config", cnf, "-extensions", ext, "-CA",
              path((ca + ".crt").c_str()), "-CAkey", path((ca + ".key").c_str())});
    return a;
  };
  Args expired_csr = {"req", "-new"};
  expired_csr.insert(expired_csr.end(), newkey.begin(), newkey.end());
  expired_csr.insert(expired_csr.end(),
                     {"-keyout", expired_server_key(), "-out", path("expired-server.csr"), "-subj",
                      "/CN=localhost", "-config", cnf});
  const Args expired_sign = {"ca",          "-batch",
                             "-config",     cnf,
                             "-extensions", "server_ext",
                             "-cert",       ca_cert(),
                             "-keyfile",    ca_key(),
                             "-in",         path("expired-server.csr"),
                             "-out",        expired_server_cert(),
                             "-startdate",  "20200101000000Z",
                             "-enddate",    "20200102000000Z",
                             "-notext"};

  // Two rounds of independent openssl runs, each round in parallel (the runs are mostly process
  // start-up, so this roughly halves the wall time even on two cores).
  auto run_all = [this](const std::vector<std::vector<Args>>& chains) {
    std::vector<std::future<void>> jobs;
    for (const auto& chain : chains) {
      jobs.push_back(std::async(std::launch::async, [this, chain] {
        for (const auto& args : chain) openssl(args);
      }));
    }
    std::exception_ptr first;
    for (auto& j : jobs) {
      try {
        j.get();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  };
  run_all({{self_signed_ca("ca", "redlock-test-ca")},
           {self_signed_ca("other-ca", "redlock-other-ca")},
           {expired_csr}});
  run_all({{signed_by("ca", "server", "localhost", "server_ext")},
           {signed_by("ca", "client", "redlock-test-client", "client_ext")},
           {signed_by("ca", "wrong-host", "wrong.example", "wrong_host_ext")},
           {signed_by("other-ca", "other-server", "localhost", "server_ext")},
           {signed_by("other-ca", "other-client", "redlock-test-client", "client_ext")},
           {expired_sign}});

  write_file(malformed_cert(),
             "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n");
  write_file(malformed_key(),
             "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n");
  write_file(empty_file(), "");
  std::filesystem::copy_file(ca_cert(), unreadable_file());
  ::chmod(unreadable_file().c_str(), 0);
  std::filesystem::create_directory(directory_path());
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

TlsClientOptions TlsFixture::client_options() const {
  TlsClientOptions o;
  o.ca_file = ca_cert();
  o.host = "127.0.0.1";
  o.cert_file = client_cert();
  o.key_file = client_key();
  return o;
}

}  // namespace redlock::test
