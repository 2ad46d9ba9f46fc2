#include "client.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <utility>

#include "net/reader.hpp"
#include "net/resp.hpp"
#include "net/transport.hpp"

namespace redlock::nodes {
namespace {

using Clock = std::chrono::steady_clock;
using net::Transport;

// The library's TLS settings for `t`.
net::TlsSettings settings_of(const Tls& t) {
  return {.ca_file = t.ca_file,
          .ca_dir = t.ca_dir,
          .cert_file = t.cert_file,
          .key_file = t.key_file,
          .verify = t.verify};
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

std::string reply_text(const Reply& r) {
  switch (r.type) {
    case Reply::Type::nil:
      return "(nil)";
    case Reply::Type::status:
      return r.str;
    case Reply::Type::error:
      return "(error) " + r.str;
    case Reply::Type::integer:
      return "(integer) " + std::to_string(r.integer);
    case Reply::Type::string: {
      std::string out = "\"";
      for (unsigned char ch : r.str) {
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
    case Reply::Type::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < r.elements.size(); ++i) {
        if (i) out += ", ";
        out += reply_text(r.elements[i]);
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
  // Makes `io` over fd: plain, or TLS with the library's context (it keeps the context and the
  // session, so it outlives `io`).
  std::unique_ptr<net::TransportFactory> transports;
  std::unique_ptr<Transport> io;
  net::Reader reader;
  std::string wire;  // the command being sent, RESP
  Failure failure = Failure::none;
  std::string error;  // set with `failure`

  Impl() = default;
  ~Impl() {
    // The transport first (a TLS close_notify when the stream is still sound; it never waits, the
    // socket is non-blocking), then the fd it runs over.
    io.reset();
    if (fd >= 0) ::close(fd);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void fail(Failure f, std::string why) {
    if (failure != Failure::none) return;  // the first cause is the one worth reporting
    failure = f;
    error = std::move(why);
  }
  [[nodiscard]] bool usable() const { return io && failure == Failure::none; }

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

  // What the transport waits for after Status::again.
  [[nodiscard]] short wanted() const { return io->wants_write() ? POLLOUT : POLLIN; }

  // The failure a transport's `status` (not ok, not again) means.
  void fail_with(Transport::Status status) {
    if (status == Transport::Status::closed) {
      fail(Failure::eof, "connection closed by the server");
    } else {
      // A refusal (a TLS alert, a certificate that did not verify) is configuration, which no
      // retry changes; anything else is the socket's.
      fail(io->refused() ? Failure::handshake : Failure::io, io->error());
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

  // The transport over the connected socket, and its handshake (TLS: verification included).
  bool start_transport(Clock::time_point deadline) {
    io = transports->wrap(fd);
    for (;;) {
      const auto status = io->handshake();
      if (status == Transport::Status::ok) return true;
      if (status == Transport::Status::closed) {  // a close_notify before the handshake ended
        fail(Failure::handshake, "TLS handshake failed: the server closed the connection");
        return false;
      }
      if (status != Transport::Status::again) {
        // In the handshake, a server that hangs up is a refusal too (the transport says so).
        fail(io->refused() ? Failure::handshake : Failure::io, io->error());
        return false;
      }
      if (!wait(wanted(), deadline, "TLS handshake")) return false;
    }
  }

  bool write_all(const char* data, std::size_t len, Clock::time_point deadline) {
    while (len > 0) {
      const auto [status, n] = io->write(data, len);
      if (status == Transport::Status::ok) {
        data += n;
        len -= n;
      } else if (status != Transport::Status::again) {
        fail_with(status);
        return false;
      } else if (!wait(wanted(), deadline, "write")) {
        return false;
      }
    }
    return true;
  }

  enum class Got { data, again, failed };
  // One read of what has arrived, fed to the reader; never waits. After `again`, wanted() says
  // what to wait for.
  Got read_some() {
    char buf[16384];
    const auto [status, n] = io->read(buf, sizeof buf);
    if (status == Transport::Status::again) return Got::again;
    if (status != Transport::Status::ok) {
      fail_with(status);
      return Got::failed;
    }
    if (!reader.feed(buf, n)) {
      fail(Failure::protocol, reader.error());
      return Got::failed;
    }
    return Got::data;
  }

  enum class Next { reply, none, failed };
  Next next_reply(Reply* out) {
    switch (reader.next()) {
      case net::Reader::Next::more:
        return Next::none;
      case net::Reader::Next::error:
        fail(Failure::protocol, reader.error());
        return Next::failed;
      case net::Reader::Next::reply:
        break;
    }
    if (out != nullptr) *out = reader.reply();
    reader.release_reply();
    return Next::reply;
  }

  bool send(std::span<const std::string_view> argv) {
    wire.clear();
    net::resp::append_array_header(wire, argv.size());
    for (auto a : argv) net::resp::append_bulk(wire, a);
    return write_all(wire.data(), wire.size(), Clock::now() + command_timeout);
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
      const Got got = read_some();
      if (got == Got::failed) return std::nullopt;
      if (got == Got::again && !wait(wanted(), deadline, "reply")) return std::nullopt;
    }
  }
};

SyncClient::SyncClient(const Endpoint& endpoint, const ClientOptions& options)
    : impl_(std::make_unique<Impl>()) {
  impl_->endpoint = endpoint;
  impl_->command_timeout = options.command_timeout;
  // The TLS files first: one that cannot be used is our mistake, found before anything is sent.
  if (endpoint.tls && endpoint.kind == Endpoint::Kind::tcp) {
    std::string why;
    auto context = net::TlsContext::create(settings_of(*endpoint.tls), why);
    if (!context) {
      impl_->fail(Failure::config, why);
      return;
    }
    impl_->transports =
        net::tls_transport(std::move(context), endpoint.host, endpoint.tls->server_name);
  } else {
    impl_->transports = net::plain_transport(endpoint.kind == Endpoint::Kind::unix_socket);
  }
  const auto deadline = Clock::now() + options.connect_timeout;
  if (!impl_->connect_socket(deadline) || !impl_->start_transport(deadline)) return;
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
  if (!impl_ || !impl_->io) return std::nullopt;
  return net::tls_peer(*impl_->io);
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
    Got got;
    while ((got = impl_->read_some()) == Got::data) {
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
