#include "net/tls.hpp"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <mutex>

namespace redlock::net {
namespace {

// The last OpenSSL errors of this thread, oldest first, for messages; clears them.
std::string openssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    // "error:0A000086:SSL routines::certificate verify failed": keep the reason only.
    const char* reason = std::strrchr(buf, ':');
    if (!out.empty()) out += "; ";
    out += reason != nullptr && reason[1] != '\0' ? reason + 1 : buf;
  }
  return out;
}

// OpenSSL keeps one error queue per thread, and an Engine shares its loop's thread with the
// application, which may use OpenSSL too: every entry point here starts with an empty queue
// (SSL_get_error() reads it, so OpenSSL requires that) and leaves it empty, whatever failed.
// The reasons the library reports are read off the queue (openssl_errors()) before it is cleared.
class CleanErrorQueue {
 public:
  CleanErrorQueue() { ERR_clear_error(); }
  ~CleanErrorQueue() { ERR_clear_error(); }
  CleanErrorQueue(const CleanErrorQueue&) = delete;
  CleanErrorQueue& operator=(const CleanErrorQueue&) = delete;
};

// OpenSSL's default passphrase callback prompts on the terminal (or reads stdin) and waits: a
// library must not. This one refuses, and says it was asked, so that an encrypted key file is an
// error naming the file.
int refuse_passphrase(char*, int, int, void* asked) {
  if (asked != nullptr) *static_cast<bool*>(asked) = true;
  return -1;
}

bool is_ip(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// Why a file cannot be used, before OpenSSL gives its own less direct reason.
std::string unusable(const std::string& path, bool directory) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::strerror(errno);
  if (directory != S_ISDIR(st.st_mode)) return directory ? "not a directory" : "is a directory";
  return {};
}

// OpenSSL's socket BIO writes with write(2): a peer that went away then raises SIGPIPE, which
// kills the process unless the application ignores it, and a library must not ask that. This BIO
// moves the bytes with send(MSG_NOSIGNAL) and recv instead, and says when to retry as the socket
// BIO does.
int bio_write(BIO* b, const char* data, int len) {
  BIO_clear_retry_flags(b);
  for (;;) {
    const ssize_t n = ::send(static_cast<int>(reinterpret_cast<std::intptr_t>(BIO_get_data(b))),
                             data, static_cast<std::size_t>(len), MSG_NOSIGNAL);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_write(b);
    return -1;
  }
}

int bio_read(BIO* b, char* data, int len) {
  BIO_clear_retry_flags(b);
  for (;;) {
    const ssize_t n = ::recv(static_cast<int>(reinterpret_cast<std::intptr_t>(BIO_get_data(b))),
                             data, static_cast<std::size_t>(len), 0);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(b);
    return -1;
  }
}

long bio_ctrl(BIO*, int cmd, long, void*) {
  switch (cmd) {
    case BIO_CTRL_FLUSH:
    case BIO_CTRL_DUP:
      return 1;
    default:
      return 0;
  }
}

int bio_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

const BIO_METHOD* socket_method() {
  static BIO_METHOD* m = [] {
    BIO_METHOD* method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "redlock socket");
    BIO_meth_set_write(method, &bio_write);
    BIO_meth_set_read(method, &bio_read);
    BIO_meth_set_ctrl(method, &bio_ctrl);
    BIO_meth_set_create(method, &bio_create);
    return method;
  }();
  return m;
}

// The index of the factory pointer in each SSL's ex_data (for the new-session callback).
int factory_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

}  // namespace

class TlsFactory;

// One TLS stream over a connected socket.
class TlsTransport final : public Transport {
 public:
  explicit TlsTransport(SSL* ssl) : ssl_(ssl) {}
  ~TlsTransport() override {
    const CleanErrorQueue clean;  // a shutdown on a connection the server reset fails
    // A close_notify when the stream is still sound, so the server ends its side cleanly too.
    if (!fatal_ && SSL_is_init_finished(ssl_)) (void)SSL_shutdown(ssl_);
    SSL_free(ssl_);
  }

  Status handshake() override {
    const CleanErrorQueue clean;
    const int rc = SSL_connect(ssl_);
    if (rc == 1) return Status::ok;
    return fail(rc, "TLS handshake failed");
  }

  Io read(char* buf, std::size_t len) override {
    const CleanErrorQueue clean;
    std::size_t n = 0;
    const int rc = SSL_read_ex(ssl_, buf, len, &n);
    if (rc == 1) {
      wants_write_ = false;
      return {Status::ok, n};
    }
    return {fail(rc, "TLS read failed"), 0};
  }

  Io write(const char* buf, std::size_t len) override {
    const CleanErrorQueue clean;
    std::size_t n = 0;
    const int rc = SSL_write_ex(ssl_, buf, len, &n);
    if (rc == 1) {
      wants_write_ = false;
      return {Status::ok, n};
    }
    return {fail(rc, "TLS write failed"), 0};
  }

  bool wants_write() const override { return wants_write_; }
  // Decrypted bytes not yet read, or (read ahead) received bytes not yet decrypted.
  bool has_buffered() const override { return SSL_has_pending(ssl_) == 1; }
  std::string error() const override { return error_; }
  bool refused() const override { return refused_; }
  std::string established() const override {
    return std::string(SSL_get_version(ssl_)) +
           (SSL_session_reused(ssl_) ? ", session resumed" : "");
  }

 private:
  Status fail(int rc, const char* what) {
    const int err = SSL_get_error(ssl_, rc);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE && err != SSL_ERROR_ZERO_RETURN)
      fatal_ = true;
    switch (err) {
      case SSL_ERROR_WANT_READ:
        wants_write_ = false;
        return Status::again;
      case SSL_ERROR_WANT_WRITE:
        wants_write_ = true;
        return Status::again;
      case SSL_ERROR_ZERO_RETURN:
        return Status::closed;
      case SSL_ERROR_SYSCALL: {
        const int e = errno;
        std::string queued = openssl_errors();
        if (queued.empty() && (e == ECONNRESET || e == EPIPE)) {
          // The server may have said why before it hung up (TLS 1.3 sends "certificate required"
          // after our side of the handshake is done): read its alert.
          char byte;
          ERR_clear_error();
          (void)SSL_read(ssl_, &byte, 1);
          queued = openssl_errors();
        }
        if (queued.empty() && e == 0) {
          // The peer closed the connection without a TLS close_notify. In the handshake that is
          // what a plaintext server says to a TLS client, or a server that refused us.
          if (!SSL_is_init_finished(ssl_)) {
            error_ = std::string(what) +
                     ": the server closed the connection (not a TLS port, or it refused us?)";
            refused_ = true;
            return Status::failed;
          }
          return Status::closed;
        }
        error_ = std::string(what) + ": " + (queued.empty() ? std::strerror(e) : queued);
        refused_ = !queued.empty();  // the server's alert, read after the reset
        return Status::failed;
      }
      default: {
        std::string why = openssl_errors();
        const long verify = SSL_get_verify_result(ssl_);
        if (verify != X509_V_OK) {
          why = std::string("certificate verify failed: ") + X509_verify_cert_error_string(verify);
        } else if (why.find("wrong version number") != std::string::npos ||
                   why.find("packet length too long") != std::string::npos) {
          why += " (is the server speaking TLS on this port?)";
        }
        error_ = std::string(what) + ": " + (why.empty() ? "error " + std::to_string(err) : why);
        refused_ = true;
        return Status::failed;
      }
    }
  }

  SSL* ssl_;
  bool wants_write_ = false;
  bool fatal_ = false;  // after a fatal error OpenSSL allows no shutdown
  bool refused_ = false;
  std::string error_;

  friend std::optional<TlsPeer> tls_peer(const Transport& t);
};

class TlsFactory final : public TransportFactory {
 public:
  TlsFactory(std::shared_ptr<TlsContext> context, std::string host, std::string server_name)
      : context_(std::move(context)),
        host_(std::move(host)),
        server_name_(std::move(server_name)) {}
  ~TlsFactory() override {
    if (session_ != nullptr) SSL_SESSION_free(session_);
  }

  std::unique_ptr<Transport> wrap(int fd) override {
    const CleanErrorQueue clean;
    const std::string& name = server_name_.empty() ? host_ : server_name_;
    // OpenSSL takes C strings: a name with a NUL would be checked (and sent) as what comes before
    // it, or, refused by set1_host, not checked at all. It comes from the user, or from a server
    // (a Sentinel's or a cluster's answer).
    if (name.find('\0') != std::string::npos) {
      return failed("TLS: the server name contains a NUL byte: refused");
    }
    // RFC 6066 names are at most 255 bytes; OpenSSL refuses longer ones for SNI.
    if (!is_ip(name) && name.size() > TLSEXT_MAXLEN_host_name) {
      return failed("TLS: the server name is " + std::to_string(name.size()) +
                    " bytes long; SNI allows at most " + std::to_string(TLSEXT_MAXLEN_host_name));
    }
    SSL* ssl = SSL_new(context_->ctx_);
    if (ssl == nullptr) return failed("cannot create a TLS session: " + openssl_errors());
    auto transport = std::make_unique<TlsTransport>(ssl);
    SSL_set_ex_data(ssl, factory_index(), this);
    BIO* bio = BIO_new(socket_method());
    if (bio == nullptr) return failed("cannot create a TLS session: " + openssl_errors());
    BIO_set_data(bio, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)));
    SSL_set_bio(ssl, bio, bio);  // the SSL owns it (one reference for both directions)
    SSL_set_connect_state(ssl);
    // Our write buffer may grow (and move) between a write that would block and its retry.
    SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    // One recv for whatever has arrived, not two for every record (its 5-byte header, then its
    // body): a reply of a few dozen bytes is a record of its own, so without this every reply
    // cost a second system call (issue 46, TLS). The connection reads on while the SSL holds
    // bytes the socket will not signal again (has_buffered).
    SSL_set_read_ahead(ssl, 1);
    // SNI is for names, not addresses.
    if (!is_ip(name) && SSL_set_tlsext_host_name(ssl, name.c_str()) != 1) {
      return failed("TLS: cannot send the server name '" + name + "' (SNI): " + openssl_errors());
    }
    if (context_->settings().verify) {
      SSL_set_verify(ssl, SSL_VERIFY_PEER, nullptr);
      X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
      int set = 0;
      if (is_ip(name)) {
        set = X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str());
      } else {
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        set = X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
      }
      // Unchecked, a refusal here left the certificate's name unchecked: any certificate the CAs
      // signed, for any host, would have passed.
      if (set != 1) {
        return failed("TLS: cannot check the certificate against '" + name +
                      "': " + openssl_errors());
      }
    } else {
      SSL_set_verify(ssl, SSL_VERIFY_NONE, nullptr);
    }
    if (session_ != nullptr) SSL_set_session(ssl, session_);
    return transport;
  }

  const char* kind() const override { return "TLS"; }

  // OpenSSL hands over new sessions (TLS 1.3 sends them after the handshake): keep the latest.
  static int on_new_session(SSL* ssl, SSL_SESSION* session) {
    auto* self = static_cast<TlsFactory*>(SSL_get_ex_data(ssl, factory_index()));
    if (self == nullptr) return 0;
    if (self->session_ != nullptr) SSL_SESSION_free(self->session_);
    self->session_ = session;
    return 1;  // we keep the reference
  }

 private:
  // A transport that fails its handshake with `why` (the connection then reports it and retries).
  class Failed final : public Transport {
   public:
    explicit Failed(std::string why) : why_(std::move(why)) {}
    Status handshake() override { return Status::failed; }
    Io read(char*, std::size_t) override { return {Status::failed, 0}; }
    Io write(const char*, std::size_t) override { return {Status::failed, 0}; }
    std::string error() const override { return why_; }

   private:
    std::string why_;
  };
  static std::unique_ptr<Transport> failed(std::string why) {
    return std::make_unique<Failed>(std::move(why));
  }

  std::shared_ptr<TlsContext> context_;
  std::string host_;
  std::string server_name_;
  SSL_SESSION* session_ = nullptr;
};

std::shared_ptr<TlsContext> TlsContext::create(const TlsSettings& s, std::string& error) {
  const CleanErrorQueue clean;
  std::shared_ptr<TlsContext> c(new TlsContext());
  c->settings_ = s;
  c->ctx_ = SSL_CTX_new(TLS_client_method());
  if (c->ctx_ == nullptr) {
    error = "cannot create a TLS context: " + openssl_errors();
    return nullptr;
  }
  bool passphrase_asked = false;
  SSL_CTX_set_default_passwd_cb(c->ctx_, &refuse_passphrase);
  SSL_CTX_set_default_passwd_cb_userdata(c->ctx_, &passphrase_asked);
  // (The flag lives on this stack frame: forget it when leaving, the callback still refuses.)
  struct ForgetFlag {
    SSL_CTX* ctx;
    ~ForgetFlag() { SSL_CTX_set_default_passwd_cb_userdata(ctx, nullptr); }
  } forget{c->ctx_};
  SSL_CTX_set_min_proto_version(c->ctx_, TLS1_2_VERSION);
  // A server that closes without a close_notify (CLIENT KILL, a restart) would otherwise count as
  // a fatal error, and OpenSSL then refuses to resume the session. A cut RESP stream cannot pass
  // for a whole one (the reader waits for the rest), so nothing is lost by taking EOF as a close.
  SSL_CTX_set_options(c->ctx_, SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_session_cache_mode(c->ctx_, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(c->ctx_, &TlsFactory::on_new_session);
  auto bad_file = [&](const std::string& what, const std::string& path, bool directory = false) {
    const auto why = unusable(path, directory);
    const auto ossl = openssl_errors();
    error = what + " '" + path + "': " +
            (!why.empty()   ? why
             : ossl.empty() ? "cannot be used"
                            : ossl);
    return nullptr;
  };
  if (!s.ca_file.empty() || !s.ca_dir.empty()) {
    if (!s.ca_file.empty() && !unusable(s.ca_file, false).empty())
      return bad_file("CA file", s.ca_file);
    if (!s.ca_dir.empty() && !unusable(s.ca_dir, true).empty())
      return bad_file("CA directory", s.ca_dir, true);
    if (SSL_CTX_load_verify_locations(c->ctx_, s.ca_file.empty() ? nullptr : s.ca_file.c_str(),
                                      s.ca_dir.empty() ? nullptr : s.ca_dir.c_str()) != 1) {
      return s.ca_file.empty() ? bad_file("CA directory", s.ca_dir, true)
                               : bad_file("CA file", s.ca_file);
    }
  } else if (SSL_CTX_set_default_verify_paths(c->ctx_) != 1) {
    error = "cannot load the system's CA certificates: " + openssl_errors();
    return nullptr;
  }
  if (s.cert_file.empty() != s.key_file.empty()) {
    error = s.cert_file.empty() ? "a client key '" + s.key_file + "' needs its certificate (cert)"
                                : "a client certificate '" + s.cert_file + "' needs its key (key)";
    return nullptr;
  }
  if (!s.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(c->ctx_, s.cert_file.c_str()) != 1) {
      return bad_file("client certificate", s.cert_file);
    }
    if (SSL_CTX_use_PrivateKey_file(c->ctx_, s.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      if (passphrase_asked) {
        error = "client key '" + s.key_file +
                "' is encrypted, and the library does not ask for passphrases: give it the key "
                "decrypted (openssl pkey -in KEY -out PLAIN-KEY), readable by this user only";
        return nullptr;
      }
      return bad_file("client key", s.key_file);
    }
    if (SSL_CTX_check_private_key(c->ctx_) != 1) {
      error =
          "client key '" + s.key_file + "' does not match the certificate '" + s.cert_file + "'";
      return nullptr;
    }
  }
  return c;
}

TlsContext::~TlsContext() {
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
}

std::shared_ptr<TlsContext> TlsContexts::get(const TlsSettings& s, std::string& error) {
  for (const auto& c : all_) {
    if (c->settings() == s) return c;
  }
  auto c = TlsContext::create(s, error);
  if (c) all_.push_back(c);
  return c;
}

std::unique_ptr<TransportFactory> tls_transport(std::shared_ptr<TlsContext> context,
                                                std::string host, std::string server_name) {
  return std::make_unique<TlsFactory>(std::move(context), std::move(host), std::move(server_name));
}

std::optional<TlsPeer> tls_peer(const Transport& t) {
  const auto* tls = dynamic_cast<const TlsTransport*>(&t);
  if (tls == nullptr || !SSL_is_init_finished(tls->ssl_)) return std::nullopt;
  TlsPeer peer;
  peer.protocol = SSL_get_version(tls->ssl_);
  X509* cert = SSL_get1_peer_certificate(tls->ssl_);
  if (cert == nullptr) return peer;
  std::tm end{};
  if (const ASN1_TIME* at = X509_get0_notAfter(cert);
      at != nullptr && ASN1_TIME_to_tm(at, &end) == 1) {
    peer.not_after = std::chrono::system_clock::from_time_t(timegm(&end));
  }
  X509_free(cert);
  return peer;
}

}  // namespace redlock::net
