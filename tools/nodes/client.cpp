#include "client.hpp"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <cerrno>
#include <cstdio>
#include <utility>

namespace redlock::nodes {
namespace {

timeval to_timeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

// hiredis reports a deadline that passed as a plain I/O error: tell it apart by errno (EAGAIN from
// a socket timeout, ETIMEDOUT from a connect) or, when errno was overwritten, by the text.
bool looks_like_timeout(int saved_errno, std::string_view errstr) {
  if (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK || saved_errno == ETIMEDOUT) return true;
  return errstr.find("temporarily unavailable") != std::string_view::npos ||
         errstr.find("timed out") != std::string_view::npos;
}

Failure classify(const redisContext* c, int saved_errno) {
  switch (c->err) {
    case 0:
      return Failure::none;
    case REDIS_ERR_IO:
      return looks_like_timeout(saved_errno, c->errstr) ? Failure::timeout : Failure::io;
    case REDIS_ERR_EOF:
      return Failure::eof;
    case REDIS_ERR_PROTOCOL:
      return Failure::protocol;
    case REDIS_ERR_OOM:
      return Failure::oom;
    default:
      return Failure::other;
  }
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
  redisContext* c = nullptr;
  Failure failure = Failure::none;
  std::string error;  // set with `failure`

  ~Impl() {
    if (c != nullptr) redisFree(c);
  }

  void fail(Failure f, std::string why) {
    if (failure != Failure::none) return;  // the first cause is the one worth reporting
    failure = f;
    error = std::move(why);
  }
  void fail_from_context(int saved_errno) {
    const Failure f = classify(c, saved_errno);
    fail(f == Failure::none ? Failure::other : f, c->errstr[0] != '\0' ? c->errstr : "I/O error");
  }
  [[nodiscard]] bool usable() const { return c != nullptr && failure == Failure::none; }

  std::optional<Reply> command(std::span<const std::string_view> argv) {
    if (!usable() || argv.empty()) return std::nullopt;
    std::vector<const char*> args;
    std::vector<std::size_t> lens;
    args.reserve(argv.size());
    lens.reserve(argv.size());
    for (auto a : argv) {
      args.push_back(a.data());
      lens.push_back(a.size());
    }
    errno = 0;
    ReplyPtr r(static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(args.size()), args.data(), lens.data())));
    const int saved = errno;
    if (!r) {
      fail_from_context(saved);
      return std::nullopt;
    }
    return convert(r.get());
  }
};

SyncClient::SyncClient(const Endpoint& endpoint, const ClientOptions& options)
    : impl_(std::make_unique<Impl>()) {
  impl_->endpoint = endpoint;
  const timeval connect_tv = to_timeval(options.connect_timeout);
  errno = 0;
  impl_->c = endpoint.kind == Endpoint::Kind::unix_socket
                 ? redisConnectUnixWithTimeout(endpoint.path.c_str(), connect_tv)
                 : redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port, connect_tv);
  const int saved = errno;
  if (impl_->c == nullptr) {
    impl_->fail(Failure::oom, "out of memory");
    return;
  }
  if (impl_->c->err != 0) {
    impl_->fail_from_context(saved);
    return;
  }
  if (redisSetTimeout(impl_->c, to_timeval(options.command_timeout)) != REDIS_OK) {
    impl_->fail_from_context(errno);
    return;
  }
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
  redisContext* c = impl_->c;
  std::vector<const char*> args;
  std::vector<std::size_t> lens;
  for (auto a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  errno = 0;
  if (redisAppendCommandArgv(c, static_cast<int>(args.size()), args.data(), lens.data()) !=
      REDIS_OK) {
    impl_->fail_from_context(errno);
    return false;
  }
  int done = 0;
  while (!done) {
    errno = 0;
    if (redisBufferWrite(c, &done) != REDIS_OK) {
      impl_->fail_from_context(errno);
      return false;
    }
  }
  return true;
}

int SyncClient::fd() const { return ok() ? impl_->c->fd : -1; }

SyncClient::Read SyncClient::read_reply(Reply* out) {
  if (!ok()) return Read::failed;
  redisContext* c = impl_->c;
  void* raw = nullptr;
  // A reply that came with the previous read needs no new one (which would block).
  if (redisGetReplyFromReader(c, &raw) == REDIS_OK && raw == nullptr) {
    errno = 0;
    if (redisBufferRead(c) != REDIS_OK) {
      impl_->fail_from_context(errno);
      return Read::failed;
    }
    if (redisGetReplyFromReader(c, &raw) != REDIS_OK) {
      impl_->fail_from_context(errno);
      return Read::failed;
    }
  } else if (raw == nullptr) {
    impl_->fail_from_context(errno);
    return Read::failed;
  }
  if (raw == nullptr) return Read::partial;
  ReplyPtr r(static_cast<redisReply*>(raw));
  if (out != nullptr) *out = convert(r.get());
  return Read::reply;
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
