#include "client.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <utility>

namespace redlock::nodes {
namespace {

using Clock = std::chrono::steady_clock;

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
      out.elements.reserve(r->elements);
      for (std::size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
      break;
    case REDIS_REPLY_NIL:
    default:
      out.type = Reply::Type::nil;
      break;
  }
  return out;
}

struct ReplyFree {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyFree>;

// ---- OpenSSL ------------------------------------------------------------------------------------

// This thread's queued OpenSSL errors, oldest first, reasons only ("certificate verify failed");
// clears the queue.
std::string ssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    const char* reason = std::strrchr(buf, ':');  // "error:0A000086:SSL routines::<reason>"
    if (!out.empty()) out += "; ";
    out += reason != nullptr && reason[1] != '\0' ? reason + 1 : buf;
  }
  return out;
}

bool is_ip_literal(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// OpenSSL's own socket BIO writes with write(2), which raises SIGPIPE on a connection the server
// closed; this one sends with MSG_NOSIGNAL. The fd is the BIO's data pointer.
int fd_of(BIO* b) { return static_cast<int>(reinterpret_cast<std::intptr_t>(BIO_get_data(b))); }

int nosignal_write(BIO* b, const char* data, int len) {
  BIO_clear_retry_flags(b);
  ssize_t n;
  do {
    n = ::send(fd_of(b), data, static_cast<std::size_t>(len), MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_write(b);
  return n < 0 ? -1 : static_cast<int>(n);
}

int nosignal_read(BIO* b, char* data, int len) {
  BIO_clear_retry_flags(b);
  ssize_t n;
  do {
    n = ::recv(fd_of(b), data, static_cast<std::size_t>(len), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_read(b);
  return n < 0 ? -1 : static_cast<int>(n);
}

long nosignal_ctrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

int nosignal_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

const BIO_METHOD* nosignal_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "nodes socket");
    BIO_meth_set_write(m, &nosignal_write);
    BIO_meth_set_read(m, &nosignal_read);
    BIO_meth_set_ctrl(m, &nosignal_ctrl);
    BIO_meth_set_create(m, &nosignal_create);
    return m;
  }();
  return method;
}

// Why `path` cannot be used as a file (or a directory), in the words of stat(2); empty if it can.
std::string unusable(const std::string& path, bool directory) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::strerror(errno);
  if (S_ISDIR(st.st_mode) != directory) return directory ? "not a directory" : "is a directory";
  if (::access(path.c_str(), R_OK) != 0) return std::strerror(errno);
  return {};
}

struct CtxFree {
  void operator()(SSL_CTX* c) const noexcept { SSL_CTX_free(c); }
};
using CtxPtr = std::unique_ptr<SSL_CTX, CtxFree>;

// The trust store and client identity of `t`; nullptr and `error` naming the file (never its
// contents) when one cannot be used.
CtxPtr make_context(const Tls& t, std::string& error) {
  ERR_clear_error();
  CtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) {
    error = "cannot create a TLS context: " + ssl_errors();
    return nullptr;
  }
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  // A server that closes without close_notify (a kill, CLIENT KILL) is a plain EOF.
  SSL_CTX_set_options(ctx.get(), SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  auto bad = [&](const char* what, const std::string& path, bool directory) {
    std::string why = unusable(path, directory);
    if (why.empty()) why = ssl_errors();
    error = std::string(what) + " '" + path + "': " + (why.empty() ? "cannot be used" : why);
    return nullptr;
  };
  if (!t.ca_file.empty() || !t.ca_dir.empty()) {
    if (!t.ca_file.empty() && !unusable(t.ca_file, false).empty())
      return bad("CA file", t.ca_file, false);
    if (!t.ca_dir.empty() && !unusable(t.ca_dir, true).empty())
      return bad("CA directory", t.ca_dir, true);
    if (SSL_CTX_load_verify_locations(ctx.get(), t.ca_file.empty() ? nullptr : t.ca_file.c_str(),
                                      t.ca_dir.empty() ? nullptr : t.ca_dir.c_str()) != 1) {
      return t.ca_file.empty() ? bad("CA directory", t.ca_dir, true)
                               : bad("CA file", t.ca_file, false);
    }
  } else if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
    error = "cannot load the system's CA certificates: " + ssl_errors();
    return nullptr;
  }
  if (t.cert_file.empty() != t.key_file.empty()) {
    error = t.cert_file.empty() ? "client key '" + t.key_file + "' needs its certificate"
                                : "client certificate '" + t.cert_file + "' needs its key";
    return nullptr;
  }
  if (!t.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx.get(), t.cert_file.c_str()) != 1)
      return bad("client certificate", t.cert_file, false);
    if (SSL_CTX_use_PrivateKey_file(ctx.get(), t.key_file.c_str(), SSL_FILETYPE_PEM) != 1)
      return bad("client key", t.key_file, false);
    if (SSL_CTX_check_private_key(ctx.get()) != 1) {
      ERR_clear_error();
      error =
          "client key '" + t.key_file + "' does not match the certificate '" + t.cert_file + "'";
      return nullptr;
    }
  }
  return ctx;
}

}  // namespace

// ---- Endpoint -----------------------------------------------------------------------------------

Endpoint Endpoint::tcp(std::string host, std::uint16_t port) {
  Endpoint e;
  e.host = std::move(host);
  e.port = port;
  return e;
}

Endpoint Endpoint::unix_socket(std::string path) {
  Endpoint e;
  e.kind = Kind::unix_socket;
  e.path = std::move(path);
  return e;
}

std::string Endpoint::to_string() const {
  if (kind == Kind::unix_socket) return "unix://" + path;
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// ---- Reply --------------------------------------------------------------------------------------

std::string Reply::to_string() const {
  switch (type) {
    case Type::nil:
      return "(nil)";
    case Type::status:
      return str;
    case Type::error:
      return "(error) " + str;
    case Type::integer:
      return "(integer) " + std::to_string(integer);
    case Type::string: {
      std::string out = "\"";
      for (unsigned char ch : str) {
        if (ch == '"' || ch == '\\') {
          out += '\\';
          out += static_cast<char>(ch);
        } else if (ch >= 0x20 && ch < 0x7f) {
          out += static_cast<char>(ch);
        } else {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", ch);
          out += buf;
        }
      }
      return out + "\"";
    }
    case Type::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < elements.size(); ++i) {
        if (i) out += ", ";
        out += elements[i].to_string();
      }
      return out + "]";
    }
  }
  return "?";
}

// ---- SyncClient ---------------------------------------------------------------------------------

struct SyncClient::Impl {
  Endpoint endpoint;
  std::chrono::milliseconds command_timeout{1000};
  int fd = -1;
  SSL* ssl = nullptr;  // TLS over fd, when the endpoint asks for it
  redisReader* reader = nullptr;
  Failure failure = Failure::none;
  std::string error;  // set with `failure`

  Impl() : reader(redisReaderCreate()) {}
  ~Impl() {
    if (ssl != nullptr) {
      // A close_notify when the stream is still sound; never waits (the socket is non-blocking).
      if (failure == Failure::none && SSL_is_init_finished(ssl)) {
        ERR_clear_error();
        (void)SSL_shutdown(ssl);
      }
      SSL_free(ssl);
    }
    if (fd >= 0) ::close(fd);
    if (reader != nullptr) redisReaderFree(reader);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void fail(Failure f, std::string why) {
    if (failure != Failure::none) return;  // the first cause is the one worth reporting
    failure = f;
    error = std::move(why);
  }
  [[nodiscard]] bool usable() const { return fd >= 0 && failure == Failure::none; }

  // Waits until fd is ready for `events`; false, with a timeout failure naming `what`, when the
  // deadline passes first.
  bool wait(short events, Clock::time_point deadline, const char* what) {
    for (;;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        fail(Failure::timeout, std::string(what) + " timed out");
        return false;
      }
      pollfd p{fd, events, 0};
      const int r = ::poll(&p, 1, static_cast<int>(left.count()));
      if (r > 0) return true;
      if (r < 0 && errno != EINTR) {
        fail(Failure::io, std::string("poll: ") + std::strerror(errno));
        return false;
      }
    }
  }

  // A non-blocking connect to one address, finished within the deadline.
  bool connect_to(const sockaddr* addr, socklen_t len, Clock::time_point deadline) {
    fd = ::socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      fail(Failure::io, std::string("socket: ") + std::strerror(errno));
      return false;
    }
    int rc;
    do {
      rc = ::connect(fd, addr, len);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0 && errno != EINPROGRESS && errno != EAGAIN) {
      fail(Failure::io, std::strerror(errno));
      return false;
    }
    if (rc != 0) {
      if (!wait(POLLOUT, deadline, "connect")) return false;
      int err = 0;
      socklen_t err_len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len);
      if (err != 0) {
        fail(err == ETIMEDOUT ? Failure::timeout : Failure::io, std::strerror(err));
        return false;
      }
    }
    if (addr->sa_family != AF_UNIX) {
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return true;
  }

  bool connect_socket(Clock::time_point deadline) {
    if (endpoint.kind == Endpoint::Kind::unix_socket) {
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      if (endpoint.path.size() >= sizeof addr.sun_path) {
        fail(Failure::io, "unix socket path too long: " + endpoint.path);
        return false;
      }
      std::memcpy(addr.sun_path, endpoint.path.c_str(), endpoint.path.size() + 1);
      return connect_to(reinterpret_cast<const sockaddr*>(&addr), sizeof addr, deadline);
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(endpoint.port);
    if (const int rc = ::getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &found);
        rc != 0) {
      fail(Failure::io, "cannot resolve " + endpoint.host + ": " + ::gai_strerror(rc));
      return false;
    }
    // Every address the name has, in order, until one connects; the last failure is the one said.
    for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
      if (a != found) {
        ::close(fd);
        fd = -1;
        failure = Failure::none;
        error.clear();
      }
      if (connect_to(a->ai_addr, a->ai_addrlen, deadline)) break;
    }
    ::freeaddrinfo(found);
    return failure == Failure::none;
  }

  // Why an SSL_* call that returned `rc` failed; Failure::none when it only has to wait
  // (`events` then says for what).
  Failure ssl_failure(int rc, const char* what, short& events) {
    const int saved = errno;
    const int err = SSL_get_error(ssl, rc);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      events = err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
      return Failure::none;
    }
    const bool handshaking = !SSL_is_init_finished(ssl);
    std::string why = ssl_errors();
    if (err == SSL_ERROR_ZERO_RETURN || (err == SSL_ERROR_SYSCALL && why.empty() && saved == 0)) {
      if (handshaking) {
        fail(Failure::handshake, std::string(what) +
                                     ": the server closed the connection (not a TLS port, or it "
                                     "refused us?)");
        return Failure::handshake;
      }
      fail(Failure::eof, "connection closed by the server");
      return Failure::eof;
    }
    if (err == SSL_ERROR_SYSCALL && why.empty()) {
      fail(Failure::io, std::string(what) + ": " + std::strerror(saved));
      return Failure::io;
    }
    if (const long verify = SSL_get_verify_result(ssl); verify != X509_V_OK) {
      why = std::string("certificate verify failed: ") + X509_verify_cert_error_string(verify);
    } else if (why.find("wrong version number") != std::string::npos ||
               why.find("packet length too long") != std::string::npos) {
      why += " (is the server speaking TLS on this port?)";
    }
    // A TLS alert from the server (a client certificate it refused, which TLS 1.3 says after the
    // handshake) is about the handshake too.
    fail(Failure::handshake,
         std::string(what) + ": " + (why.empty() ? "error " + std::to_string(err) : why));
    return Failure::handshake;
  }

  bool handshake(SSL_CTX* ctx, Clock::time_point deadline) {
    const Tls& t = *endpoint.tls;
    ERR_clear_error();
    ssl = SSL_new(ctx);
    BIO* bio = ssl != nullptr ? BIO_new(nosignal_method()) : nullptr;
    if (bio == nullptr) {
      fail(Failure::oom, "cannot create a TLS session: " + ssl_errors());
      return false;
    }
    BIO_set_data(bio, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)));
    SSL_set_bio(ssl, bio, bio);
    const std::string& name = t.server_name.empty() ? endpoint.host : t.server_name;
    if (!is_ip_literal(name)) SSL_set_tlsext_host_name(ssl, name.c_str());  // SNI: names only
    if (t.verify) {
      SSL_set_verify(ssl, SSL_VERIFY_PEER, nullptr);
      X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
      if (is_ip_literal(name)) {
        X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str());
      } else {
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
      }
    } else {
      SSL_set_verify(ssl, SSL_VERIFY_NONE, nullptr);
    }
    for (;;) {
      ERR_clear_error();
      errno = 0;
      const int rc = SSL_connect(ssl);
      if (rc == 1) return true;
      short events = 0;
      if (ssl_failure(rc, "TLS handshake failed", events) != Failure::none) return false;
      if (!wait(events, deadline, "TLS handshake")) return false;
    }
  }

  bool write_all(const char* data, std::size_t len, Clock::time_point deadline) {
    while (len > 0) {
      std::size_t n = 0;
      short events = POLLOUT;
      if (ssl != nullptr) {
        ERR_clear_error();
        errno = 0;
        const int rc = SSL_write_ex(ssl, data, len, &n);
        if (rc != 1 && ssl_failure(rc, "TLS write failed", events) != Failure::none) return false;
      } else {
        const ssize_t w = ::send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w >= 0) {
          n = static_cast<std::size_t>(w);
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          fail(Failure::io, std::strerror(errno));
          return false;
        }
      }
      data += n;
      len -= n;
      if (len > 0 && n == 0 && !wait(events, deadline, "write")) return false;
    }
    return true;
  }

  enum class Got { data, again, failed };
  // One read of what has arrived, fed to the reply parser; never waits. `events` says what to
  // wait for after `again`.
  Got read_some(short& events) {
    char buf[16384];
    std::size_t n = 0;
    events = POLLIN;
    if (ssl != nullptr) {
      ERR_clear_error();
      errno = 0;
      const int rc = SSL_read_ex(ssl, buf, sizeof buf, &n);
      if (rc != 1) {
        return ssl_failure(rc, "TLS read failed", events) == Failure::none ? Got::again
                                                                           : Got::failed;
      }
    } else {
      const ssize_t r = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (r == 0) {
        fail(Failure::eof, "connection closed by the server");
        return Got::failed;
      }
      if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Got::again;
        fail(Failure::io, std::strerror(errno));
        return Got::failed;
      }
      n = static_cast<std::size_t>(r);
    }
    if (redisReaderFeed(reader, buf, n) != REDIS_OK) {
      fail(Failure::protocol, "protocol error");
      return Got::failed;
    }
    return Got::data;
  }

  enum class Next { reply, none, failed };
  Next next_reply(Reply* out) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader, &raw) != REDIS_OK) {
      fail(Failure::protocol, std::string("protocol error: ") + reader->errstr);
      return Next::failed;
    }
    if (raw == nullptr) return Next::none;
    ReplyPtr r(static_cast<redisReply*>(raw));
    if (out != nullptr) *out = convert(r.get());
    return Next::reply;
  }

  bool send(std::span<const std::string_view> argv) {
    std::vector<const char*> args;
    std::vector<std::size_t> lens;
    args.reserve(argv.size());
    lens.reserve(argv.size());
    for (auto a : argv) {
      args.push_back(a.data());
      lens.push_back(a.size());
    }
    char* cmd = nullptr;
    const int len =
        redisFormatCommandArgv(&cmd, static_cast<int>(args.size()), args.data(), lens.data());
    if (len < 0 || cmd == nullptr) {
      fail(Failure::oom, "out of memory");
      return false;
    }
    const bool ok = write_all(cmd, static_cast<std::size_t>(len), Clock::now() + command_timeout);
    redisFreeCommand(cmd);
    return ok;
  }

  std::optional<Reply> command(std::span<const std::string_view> argv) {
    if (!usable() || argv.empty() || !send(argv)) return std::nullopt;
    const auto deadline = Clock::now() + command_timeout;
    Reply out;
    for (;;) {
      switch (next_reply(&out)) {
        case Next::reply:
          return out;
        case Next::failed:
          return std::nullopt;
        case Next::none:
          break;
      }
      short events = POLLIN;
      const Got got = read_some(events);
      if (got == Got::failed) return std::nullopt;
      if (got == Got::again && !wait(events, deadline, "reply")) return std::nullopt;
    }
  }
};

SyncClient::SyncClient(const Endpoint& endpoint, const ClientOptions& options)
    : impl_(std::make_unique<Impl>()) {
  impl_->endpoint = endpoint;
  impl_->command_timeout = options.command_timeout;
  if (impl_->reader == nullptr) {
    impl_->fail(Failure::oom, "out of memory");
    return;
  }
  // The TLS files first: one that cannot be used is our mistake, found before anything is sent.
  const bool tls = endpoint.tls && endpoint.kind == Endpoint::Kind::tcp;
  CtxPtr ctx;
  if (tls) {
    std::string why;
    ctx = make_context(*endpoint.tls, why);
    if (!ctx) {
      impl_->fail(Failure::config, why);
      return;
    }
  }
  const auto deadline = Clock::now() + options.connect_timeout;
  if (!impl_->connect_socket(deadline)) return;
  if (tls && !impl_->handshake(ctx.get(), deadline)) return;  // the SSL keeps its own reference
  if (!options.password.empty()) {
    auto r = options.user.empty() ? command({"AUTH", options.password})
                                  : command({"AUTH", options.user, options.password});
    // The password is never part of a message.
    if (r && r->is_error()) impl_->fail(Failure::handshake, "AUTH failed");
    if (!ok()) return;
  }
  if (options.db != 0) {
    auto r = command({"SELECT", std::to_string(options.db)});
    if (r && r->is_error()) impl_->fail(Failure::handshake, "SELECT failed: " + r->str);
  }
}

SyncClient::~SyncClient() = default;
SyncClient::SyncClient(SyncClient&&) noexcept = default;
SyncClient& SyncClient::operator=(SyncClient&&) noexcept = default;

bool SyncClient::ok() const { return impl_ && impl_->usable(); }

Failure SyncClient::failure() const { return impl_ ? impl_->failure : Failure::other; }

std::string SyncClient::error() const { return impl_ ? impl_->error : "moved from"; }

const Endpoint& SyncClient::endpoint() const { return impl_->endpoint; }

std::optional<TlsSession> SyncClient::tls_session() const {
  if (!impl_ || impl_->ssl == nullptr || !SSL_is_init_finished(impl_->ssl)) return std::nullopt;
  TlsSession s;
  s.protocol = SSL_get_version(impl_->ssl);
  X509* cert = SSL_get1_peer_certificate(impl_->ssl);
  if (cert == nullptr) return s;
  std::tm end{};
  if (const ASN1_TIME* t = X509_get0_notAfter(cert);
      t != nullptr && ASN1_TIME_to_tm(t, &end) == 1) {
    s.not_after = std::chrono::system_clock::from_time_t(timegm(&end));
  }
  X509_free(cert);
  return s;
}

std::optional<Reply> SyncClient::command(std::span<const std::string_view> argv) {
  if (!impl_) return std::nullopt;
  return impl_->command(argv);
}

std::optional<Reply> SyncClient::command(std::initializer_list<std::string_view> argv) {
  return command(std::span<const std::string_view>(argv.begin(), argv.size()));
}

std::optional<Reply> SyncClient::command(const std::vector<std::string>& argv) {
  std::vector<std::string_view> views(argv.begin(), argv.end());
  return command(std::span<const std::string_view>(views));
}

bool SyncClient::send(std::span<const std::string_view> argv) {
  if (!ok() || argv.empty()) return false;
  return impl_->send(argv);
}

int SyncClient::fd() const { return ok() ? impl_->fd : -1; }

SyncClient::Read SyncClient::read_reply(Reply* out) {
  if (!ok()) return Read::failed;
  using Next = Impl::Next;
  using Got = Impl::Got;
  // A reply that came with an earlier read needs no new one.
  Next next = impl_->next_reply(out);
  if (next == Next::none) {
    // Everything there is: after `partial` nothing may stay buffered in OpenSSL, where a poll on
    // the socket would not see it.
    short events = POLLIN;
    Got got;
    while ((got = impl_->read_some(events)) == Got::data) {
    }
    if (got == Got::failed) return Read::failed;
    next = impl_->next_reply(out);
  }
  switch (next) {
    case Next::reply:
      return Read::reply;
    case Next::none:
      return Read::partial;
    case Next::failed:
      break;
  }
  return Read::failed;
}

// ---- helpers ------------------------------------------------------------------------------------

bool answers_ping(const Endpoint& endpoint, std::chrono::milliseconds timeout,
                  std::optional<long long> pid) {
  SyncClient c(endpoint, {.connect_timeout = timeout, .command_timeout = timeout});
  auto pong = c.command({"PING"});
  if (!pong || pong->type != Reply::Type::status || pong->str != "PONG") return false;
  if (!pid) return true;
  auto info = c.command({"INFO", "server"});
  if (!info || info->type != Reply::Type::string) return false;
  return info_field(info->str, "process_id") == std::to_string(*pid);
}

std::optional<std::string> info_field(std::string_view info, std::string_view field) {
  for (std::size_t at = 0; at < info.size();) {
    std::size_t end = info.find('\n', at);
    if (end == std::string_view::npos) end = info.size();
    std::string_view line = info.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > field.size() && line.starts_with(field) && line[field.size()] == ':') {
      return std::string(line.substr(field.size() + 1));
    }
    at = end + 1;
  }
  return std::nullopt;
}

}  // namespace redlock::nodes
