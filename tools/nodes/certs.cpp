#include "certs.hpp"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>

namespace redlock::nodes {
namespace {

using namespace std::chrono_literals;

struct KeyFree {
  void operator()(EVP_PKEY* k) const noexcept { EVP_PKEY_free(k); }
};
struct CertFree {
  void operator()(X509* x) const noexcept { X509_free(x); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;
using CertPtr = std::unique_ptr<X509, CertFree>;

struct Made {
  KeyPtr key;
  CertPtr cert;
};

[[noreturn]] void fail(const CertSpec& s, const std::string& what) {
  std::string why;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    why += (why.empty() ? ": " : "; ") + std::string(buf);
  }
  throw CertError("certificate '" + s.name + "': " + what + why);
}

void add_extension(const CertSpec& s, X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr || X509_add_ext(cert, ext, -1) != 1) {
    X509_EXTENSION_free(ext);
    fail(s, std::string("cannot add ") + OBJ_nid2sn(nid) + " = " + value);
  }
  X509_EXTENSION_free(ext);
}

// Writes `pem` to `path` through a file created with `mode` (a key is never readable by others,
// not even between create and chmod).
template <class Write>
void write_pem(const CertSpec& s, const std::filesystem::path& path, mode_t mode, Write pem) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  FILE* f = fd >= 0 ? ::fdopen(fd, "w") : nullptr;
  if (f == nullptr) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    fail(s, "cannot write " + path.string() + ": " + std::strerror(err));
  }
  const bool ok = pem(f) == 1;
  if (std::fclose(f) != 0 || !ok) fail(s, "cannot write " + path.string());
}

Made make_one(const CertSpec& s, const std::map<std::string, Made>& made) {
  const Made* issuer = nullptr;
  if (!s.issuer.empty()) {
    const auto it = made.find(s.issuer);
    if (it == made.end()) throw CertError("certificate '" + s.name + "': no CA '" + s.issuer + "'");
    issuer = &it->second;
  }
  Made m;
  m.key.reset(EVP_EC_gen("P-256"));
  if (!m.key) fail(s, "cannot make a key");
  m.cert.reset(X509_new());
  X509* x = m.cert.get();
  if (x == nullptr || X509_set_version(x, X509_VERSION_3) != 1) fail(s, "cannot make it");

  // A random positive serial: two certificates of one CA never share one.
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) fail(s, "no random serial");
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  const bool serial_ok = bn != nullptr && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
  BN_free(bn);
  if (!serial_ok) fail(s, "cannot set the serial");

  const auto now = std::chrono::system_clock::now();
  const auto from = s.not_before.value_or(now - 1h);
  const auto to = s.not_after.value_or(now + std::chrono::hours(24) * s.days);
  if (ASN1_TIME_set(X509_getm_notBefore(x), std::chrono::system_clock::to_time_t(from)) ==
          nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(x), std::chrono::system_clock::to_time_t(to)) == nullptr) {
    fail(s, "cannot set the validity");
  }
  X509_NAME* name = X509_get_subject_name(x);
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(s.common_name.c_str()), -1,
                                 -1, 0) != 1 ||
      X509_set_issuer_name(
          x, issuer != nullptr ? X509_get_subject_name(issuer->cert.get()) : name) != 1 ||
      X509_set_pubkey(x, m.key.get()) != 1) {
    fail(s, "cannot set the names");
  }

  X509* signer = issuer != nullptr ? issuer->cert.get() : x;
  add_extension(s, x, signer, NID_subject_key_identifier, "hash");
  if (issuer != nullptr) add_extension(s, x, signer, NID_authority_key_identifier, "keyid");
  if (s.kind == CertSpec::Kind::ca) {
    add_extension(s, x, signer, NID_basic_constraints, "critical,CA:TRUE");
    add_extension(s, x, signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add_extension(s, x, signer, NID_basic_constraints, "critical,CA:FALSE");
    add_extension(s, x, signer, NID_key_usage, "critical,digitalSignature,keyEncipherment");
    add_extension(s, x, signer, NID_ext_key_usage,
                  s.kind == CertSpec::Kind::server ? "serverAuth,clientAuth" : "clientAuth");
  }
  if (!s.alt_names.empty()) {
    std::string san;
    for (const auto& a : s.alt_names) san += (san.empty() ? "" : ",") + a;
    add_extension(s, x, signer, NID_subject_alt_name, san.c_str());
  }
  EVP_PKEY* signing_key = issuer != nullptr ? issuer->key.get() : m.key.get();
  if (X509_sign(x, signing_key, EVP_sha256()) == 0) fail(s, "cannot sign it");
  return m;
}

}  // namespace

void make_certificates(const std::filesystem::path& dir, const std::vector<CertSpec>& specs) {
  ERR_clear_error();
  std::map<std::string, Made> made;
  for (const auto& s : specs) {
    Made m = make_one(s, made);
    write_pem(s, dir / (s.name + ".key"), 0600, [&](FILE* f) {
      return PEM_write_PrivateKey(f, m.key.get(), nullptr, nullptr, 0, nullptr, nullptr);
    });
    write_pem(s, dir / (s.name + ".crt"), 0644,
              [&](FILE* f) { return PEM_write_X509(f, m.cert.get()); });
    made[s.name] = std::move(m);
  }
}

std::vector<CertSpec> local_cluster_certs(int days) {
  using K = CertSpec::Kind;
  return {
      {.name = "ca", .common_name = "redlock-local-ca", .kind = K::ca, .issuer = {}, .days = days},
      {.name = "server",
       .common_name = "localhost",
       .kind = K::server,
       .issuer = "ca",
       .alt_names = {"IP:127.0.0.1", "DNS:localhost"},
       .days = days},
      {.name = "client",
       .common_name = "redlock-local-client",
       .kind = K::client,
       .issuer = "ca",
       .days = days},
  };
}

}  // namespace redlock::nodes
