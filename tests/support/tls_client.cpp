#include "tls_client.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace redlock::test {
namespace {

using std::chrono::milliseconds;

// Blocks SIGPIPE on this thread for the object's lifetime and swallows a SIGPIPE raised meanwhile
// (a write to a connection the peer closed), unless one was already pending before.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigset_t s;
    ::sigemptyset(&s);
    ::sigaddset(&s, SIGPIPE);
    ::pthread_sigmask(SIG_BLOCK, &s, &old_);
    sigset_t pending;
    ::sigpending(&pending);
    was_pending_ = ::sigismember(&pending, SIGPIPE) == 1;
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pending;
      ::sigpending(&pending);
      if (::sigismember(&pending, SIGPIPE) == 1) {
        sigset_t s;
        ::sigemptyset(&s);
        ::sigaddset(&s, SIGPIPE);
        const timespec zero{};
        while (::sigtimedwait(&s, nullptr, &zero) < 0 && errno == EINTR) {
        }
      }
    }
    ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t old_{};
  bool was_pending_ = false;
};

// OpenSSL's error queue as one string (and cleared).
std::string openssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    // "error:0A000086:SSL routines::certificate verify failed" -> keep the reason after "::"
    const std::string s(buf);
    const auto pos = s.rfind(':');
    out += pos == std::string::npos ? s : s.substr(pos + 1);
  }
  return out;
}

Reply convert(const redisReply* r) {
  Reply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = Reply::Type::string;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = Reply::Type::status;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = Reply::Type::error;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = Reply::Type::integer;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = Reply::Type::array;
      for (std::size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
      break;
    default:
      out.type = Reply::Type::nil;
      break;
  }
  return out;
}

bool is_timeout_errno(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == ETIMEDOUT; }

}  // namespace

struct TlsConnection::Impl {
  std::uint16_t port = 0;
  int fd = -1;
  SSL_CTX* ctx = nullptr;
  SSL* ssl = nullptr;
  redisReader* reader = nullptr;

  ~Impl() {
    if (ssl) {
      SigpipeGuard guard;
      SSL_shutdown(ssl);  // best effort close_notify
      SSL_free(ssl);
    }
    if (ctx) SSL_CTX_free(ctx);
    if (fd >= 0) ::close(fd);
    if (reader) redisReaderFree(reader);
  }

  [[nodiscard]] std::string where() const { return "TLS 127.0.0.1:" + std::to_string(port); }

  void connect_tcp(milliseconds timeout) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
      throw RedisIoError(where() + ": socket: " + std::strerror(errno), nodes::Failure::io);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      if (errno != EINPROGRESS) {
        throw RedisIoError(where() + ": connect: " + std::strerror(errno), nodes::Failure::io);
      }
      pollfd p{fd, POLLOUT, 0};
      int r;
      do {
        r = ::poll(&p, 1, static_cast<int>(timeout.count()));
      } while (r < 0 && errno == EINTR);
      if (r == 0) throw RedisIoError(where() + ": connect timed out", nodes::Failure::timeout);
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        throw RedisIoError(where() + ": connect: " + std::strerror(err), nodes::Failure::io);
      }
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }

  void setup_ssl(const TlsClientOptions& opts) {
    ERR_clear_error();
    ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) throw TlsError(where() + ": SSL_CTX_new: " + openssl_errors(), X509_V_OK);
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    const bool verify = opts.verify_peer && !opts.ca_file.empty();
    if (verify) {
      if (SSL_CTX_load_verify_locations(ctx, opts.ca_file.c_str(), nullptr) != 1) {
        throw TlsError(where() + ": cannot load CA file " + opts.ca_file + ": " + openssl_errors(),
                       X509_V_OK);
      }
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    } else {
      SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
    }
    if (!opts.cert_file.empty() || !opts.key_file.empty()) {
      if (SSL_CTX_use_certificate_chain_file(ctx, opts.cert_file.c_str()) != 1) {
        throw TlsError(where() + ": cannot load client certificate " + opts.cert_file + ": " +
                           openssl_errors(),
                       X509_V_OK);
      }
      if (SSL_CTX_use_PrivateKey_file(ctx, opts.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
          SSL_CTX_check_private_key(ctx) != 1) {
        throw TlsError(
            where() + ": cannot load client key " + opts.key_file + ": " + openssl_errors(),
            X509_V_OK);
      }
    }
    ssl = SSL_new(ctx);
    if (!ssl || SSL_set_fd(ssl, fd) != 1) {
      throw TlsError(where() + ": SSL_new: " + openssl_errors(), X509_V_OK);
    }
    in_addr a4{};
    in6_addr a6{};
    const bool is_ip = ::inet_pton(AF_INET, opts.host.c_str(), &a4) == 1 ||
                       ::inet_pton(AF_INET6, opts.host.c_str(), &a6) == 1;
    if (is_ip) {
      if (verify && X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), opts.host.c_str()) != 1) {
        throw TlsError(where() + ": bad host " + opts.host, X509_V_OK);
      }
    } else if (!opts.host.empty()) {
      SSL_set_tlsext_host_name(ssl, opts.host.c_str());
      if (verify && SSL_set1_host(ssl, opts.host.c_str()) != 1) {
        throw TlsError(where() + ": bad host " + opts.host, X509_V_OK);
      }
    }
  }

  // Throws the right exception for a failed SSL_* call that returned `ret`.
  [[noreturn]] void fail(const std::string& op, int ret, int saved_errno) {
    const int err = SSL_get_error(ssl, ret);
    const long vr = SSL_get_verify_result(ssl);
    std::string reasons = openssl_errors();
    if (vr != X509_V_OK) {
      throw TlsError(where() + ": " + op + ": " + (reasons.empty() ? "" : reasons + ": ") +
                         X509_verify_cert_error_string(vr),
                     vr);
    }
    if (err == SSL_ERROR_SSL) {
      throw TlsError(where() + ": " + op + ": " + (reasons.empty() ? "TLS error" : reasons),
                     X509_V_OK);
    }
    if (err == SSL_ERROR_ZERO_RETURN || (err == SSL_ERROR_SYSCALL && saved_errno == 0)) {
      throw RedisIoError(where() + ": " + op + ": connection closed by the server",
                         nodes::Failure::eof);
    }
    if (err == SSL_ERROR_SYSCALL || err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      const bool timed_out = is_timeout_errno(saved_errno);
      throw RedisIoError(where() + ": " + op + ": " +
                             (timed_out ? std::string("timed out") : std::strerror(saved_errno)),
                         timed_out ? nodes::Failure::timeout : nodes::Failure::io);
    }
    throw TlsError(where() + ": " + op + ": SSL error " + std::to_string(err) +
                       (reasons.empty() ? "" : ": " + reasons),
                   X509_V_OK);
  }

  void handshake() {
    SigpipeGuard guard;
    ERR_clear_error();
    errno = 0;
    const int r = SSL_connect(ssl);
    if (r != 1) fail("handshake", r, errno);
  }

  void write_all(const char* data, std::size_t len) {
    SigpipeGuard guard;
    while (len > 0) {
      ERR_clear_error();
      errno = 0;
      const int n = SSL_write(ssl, data, static_cast<int>(len));
      if (n <= 0) fail("write", n, errno);
      data += n;
      len -= static_cast<std::size_t>(n);
    }
  }

  Reply read_reply() {
    for (;;) {
      void* raw = nullptr;
      if (redisReaderGetReply(reader, &raw) != REDIS_OK) {
        throw RedisIoError(where() + ": protocol error", nodes::Failure::protocol);
      }
      if (raw) {
        auto* reply = static_cast<redisReply*>(raw);
        Reply out = convert(reply);
        freeReplyObject(reply);
        return out;
      }
      char buf[16384];
      SigpipeGuard guard;  // TLS 1.3 may write (key updates, session tickets) inside SSL_read
      ERR_clear_error();
      errno = 0;
      const int n = SSL_read(ssl, buf, sizeof buf);
      if (n <= 0) fail("read", n, errno);
      if (redisReaderFeed(reader, buf, static_cast<std::size_t>(n)) != REDIS_OK) {
        throw RedisIoError(where() + ": protocol error", nodes::Failure::protocol);
      }
    }
  }
};

TlsConnection::TlsConnection(std::uint16_t port, const TlsClientOptions& opts,
                             std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->port = port;
  impl_->reader = redisReaderCreate();
  if (!impl_->reader) throw RedisIoError("redisReaderCreate: out of memory", nodes::Failure::oom);
  impl_->connect_tcp(timeout);
  impl_->setup_ssl(opts);
  impl_->handshake();
}

TlsConnection::~TlsConnection() = default;
TlsConnection::TlsConnection(TlsConnection&&) noexcept = default;
TlsConnection& TlsConnection::operator=(TlsConnection&&) noexcept = default;

Reply TlsConnection::command(const std::vector<std::string>& argv) {
  if (argv.empty()) throw std::invalid_argument("TlsConnection::command: empty argv");
  std::vector<const char*> args;
  std::vector<std::size_t> lens;
  for (const auto& a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  char* cmd = nullptr;
  const int len =
      redisFormatCommandArgv(&cmd, static_cast<int>(args.size()), args.data(), lens.data());
  if (len < 0 || !cmd) throw RedisIoError("redisFormatCommandArgv failed", nodes::Failure::oom);
  try {
    impl_->write_all(cmd, static_cast<std::size_t>(len));
  } catch (...) {
    redisFreeCommand(cmd);
    throw;
  }
  redisFreeCommand(cmd);
  return impl_->read_reply();
}

std::string TlsConnection::protocol() const { return SSL_get_version(impl_->ssl); }

Reply tls_command_at(std::uint16_t port, const std::vector<std::string>& argv,
                     const TlsClientOptions& opts, std::chrono::milliseconds timeout) {
  TlsConnection c(port, opts, timeout);
  return c.command(argv);
}

}  // namespace redlock::test
