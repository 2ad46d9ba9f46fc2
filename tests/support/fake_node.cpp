#include "fake_node.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <list>
#include <random>
#include <string_view>
#include <system_error>
#include <utility>

namespace redlock::test {
namespace {

using Clock = std::chrono::steady_clock;

// Marker prefixes for Responder results (NUL first: no RESP reply starts with it).
constexpr std::string_view kCloseMarker{"\0FAKENODE-CLOSE\0", 16};
constexpr std::string_view kResetMarker{"\0FAKENODE-RESET\0", 16};

constexpr std::size_t kMaxBulk = 64u << 20;  // refuse absurd requests instead of buffering them

std::string upper(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

std::string bulk(const std::string& s) {
  return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
}

// SHA-1 (FIPS 180-4), hex: how Redis names a script. Independent of the library's copy on purpose.
std::string sha1_hex(const std::string& data) {
  auto rotl = [](std::uint32_t x, int n) { return (x << n) | (x >> (32 - n)); };
  std::uint32_t h[5] = {0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u, 0xC3D2E1F0u};
  std::string msg = data;
  const std::uint64_t bit_len = static_cast<std::uint64_t>(data.size()) * 8;
  msg += static_cast<char>(0x80);
  while (msg.size() % 64 != 56) msg += '\0';
  for (int i = 7; i >= 0; --i) msg += static_cast<char>((bit_len >> (8 * i)) & 0xff);
  for (std::size_t off = 0; off < msg.size(); off += 64) {
    std::uint32_t w[80];
    for (int i = 0; i < 16; ++i) {
      const auto* p = reinterpret_cast<const unsigned char*>(msg.data() + off + 4 * i);
      w[i] = (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) |
             (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
    }
    for (int i = 16; i < 80; ++i) w[i] = rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; ++i) {
      std::uint32_t f, k;
      if (i < 20) {
        f = (b & c) | (~b & d), k = 0x5A827999u;
      } else if (i < 40) {
        f = b ^ c ^ d, k = 0x6ED9EBA1u;
      } else if (i < 60) {
        f = (b & c) | (b & d) | (c & d), k = 0x8F1BBCDCu;
      } else {
        f = b ^ c ^ d, k = 0xCA62C1D6u;
      }
      const std::uint32_t t = rotl(a, 5) + f + e + k + w[i];
      e = d, d = c, c = rotl(b, 30), b = a, a = t;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
  }
  char out[41];
  std::snprintf(out, sizeof out, "%08x%08x%08x%08x%08x", h[0], h[1], h[2], h[3], h[4]);
  return std::string(out, 40);
}

std::string random_hex40() {
  std::random_device rd;
  std::mt19937_64 gen((std::uint64_t{rd()} << 32) ^ rd());
  static constexpr char hex[] = "0123456789abcdef";
  std::string s(40, '0');
  for (auto& ch : s) ch = hex[gen() & 15];
  return s;
}

enum class ParseResult { complete, incomplete, bad };

// Parses a number terminated by CRLF at buf[pos..]. Advances pos past the CRLF.
ParseResult parse_number_line(const std::string& buf, std::size_t& pos, long long& out) {
  const std::size_t eol = buf.find("\r\n", pos);
  if (eol == std::string::npos)
    return buf.size() - pos > 32 ? ParseResult::bad : ParseResult::incomplete;
  if (eol == pos) return ParseResult::bad;
  long long v = 0;
  bool neg = false;
  std::size_t i = pos;
  if (buf[i] == '-') neg = true, ++i;
  if (i == eol) return ParseResult::bad;
  for (; i < eol; ++i) {
    if (buf[i] < '0' || buf[i] > '9' || v > (1LL << 40)) return ParseResult::bad;
    v = v * 10 + (buf[i] - '0');
  }
  out = neg ? -v : v;
  pos = eol + 2;
  return ParseResult::complete;
}

// One request from buf[pos..]: RESP multibulk or an inline command. On `complete`, pos is advanced
// past it; argv may be empty (blank inline line) and is then ignored.
ParseResult parse_request(const std::string& buf, std::size_t& pos,
                          std::vector<std::string>& argv) {
  argv.clear();
  if (pos >= buf.size()) return ParseResult::incomplete;
  std::size_t p = pos;
  if (buf[p] == '*') {
    ++p;
    long long n = 0;
    if (auto r = parse_number_line(buf, p, n); r != ParseResult::complete) return r;
    if (n > 1024 * 1024) return ParseResult::bad;
    if (n <= 0) {  // "*0" / "*-1": nothing to run
      pos = p;
      return ParseResult::complete;
    }
    for (long long i = 0; i < n; ++i) {
      if (p >= buf.size()) return ParseResult::incomplete;
      if (buf[p] != '$') return ParseResult::bad;
      ++p;
      long long len = 0;
      if (auto r = parse_number_line(buf, p, len); r != ParseResult::complete) return r;
      if (len < 0 || static_cast<unsigned long long>(len) > kMaxBulk) return ParseResult::bad;
      const auto ulen = static_cast<std::size_t>(len);
      if (buf.size() - p < ulen + 2) return ParseResult::incomplete;
      if (buf.compare(p + ulen, 2, "\r\n") != 0) return ParseResult::bad;
      argv.emplace_back(buf, p, ulen);
      p += ulen + 2;
    }
    pos = p;
    return ParseResult::complete;
  }
  // Inline command (e.g. from `nc`/telnet): whitespace-separated words up to LF.
  const std::size_t eol = buf.find('\n', p);
  if (eol == std::string::npos)
    return buf.size() - p > kMaxBulk ? ParseResult::bad : ParseResult::incomplete;
  std::string word;
  for (std::size_t i = p; i < eol; ++i) {
    const char ch = buf[i];
    if (ch == ' ' || ch == '\t' || ch == '\r') {
      if (!word.empty()) argv.push_back(std::move(word)), word.clear();
    } else {
      word += ch;
    }
  }
  if (!word.empty()) argv.push_back(std::move(word));
  pos = eol + 1;
  return ParseResult::complete;
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

}  // namespace

enum class CloseMode { none, fin, rst };

struct FakeNode::Connection {
  struct Pending {
    Clock::time_point due;
    std::string bytes;
    CloseMode then = CloseMode::none;
  };
  int fd = -1;
  std::string in;
  std::string out;
  std::deque<Pending> pending;
  Clock::time_point last_due{};
  CloseMode close_after_flush = CloseMode::none;  // set once the closing reply moved to `out`
  bool closing = false;                           // a close was queued: ignore further input
  bool dead = false;
};

FakeNode::FakeNode(Responder responder, std::chrono::milliseconds delay, std::uint16_t port,
                   std::string host)
    : host_(std::move(host)),
      responder_(std::make_shared<const Responder>(std::move(responder))),
      delay_(delay) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::system_error(errno, std::generic_category(), "FakeNode socket");
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (::inet_pton(AF_INET, host_.c_str(), &addr.sin_addr) != 1) {
    ::close(listen_fd_);
    throw std::system_error(EINVAL, std::generic_category(), "FakeNode host " + host_);
  }
  addr.sin_port = htons(port);
  socklen_t len = sizeof addr;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 128) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      ::pipe2(wake_pipe_, O_NONBLOCK | O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(listen_fd_);
    throw std::system_error(e, std::generic_category(),
                            "FakeNode listen on " + host_ + ":" + std::to_string(port));
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { run(); });
}

FakeNode::~FakeNode() {
  stop_.store(true);
  wake();
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

std::string FakeNode::address() const { return host_ + ":" + std::to_string(port_); }

std::size_t FakeNode::commands_seen() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return commands_.size();
}

std::vector<std::vector<std::string>> FakeNode::commands() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return commands_;
}

std::size_t FakeNode::connections_accepted() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return connections_accepted_;
}

void FakeNode::set_responder(Responder responder) {
  auto p = std::make_shared<const Responder>(std::move(responder));
  const std::lock_guard<std::mutex> lock(mu_);
  responder_ = std::move(p);
}

void FakeNode::set_delay(std::chrono::milliseconds delay) {
  const std::lock_guard<std::mutex> lock(mu_);
  delay_ = delay;
}

void FakeNode::close_connections() {
  std::unique_lock<std::mutex> lock(mu_);
  const std::uint64_t want = ++drop_requested_;
  lock.unlock();
  wake();
  lock.lock();
  drop_cv_.wait(lock, [&] { return drop_done_ >= want || stop_.load(); });
}

void FakeNode::wake() {
  const char b = 1;
  ssize_t ignored = ::write(wake_pipe_[1], &b, 1);  // EAGAIN (pipe full) is fine: already awake
  (void)ignored;
}

std::string FakeNode::close_after(const std::string& bytes) {
  return std::string(kCloseMarker) + bytes;
}

std::string FakeNode::reset_after(const std::string& bytes) {
  return std::string(kResetMarker) + bytes;
}

void FakeNode::handle_command(Connection& c, std::vector<std::string> argv,
                              Clock::time_point arrived) {
  std::shared_ptr<const Responder> responder;
  std::chrono::milliseconds delay;
  {
    const std::lock_guard<std::mutex> lock(mu_);
    commands_.push_back(argv);
    responder = responder_;
    delay = delay_;
  }
  std::optional<std::string> reply;
  try {
    if (*responder) reply = (*responder)(argv);
  } catch (...) {
    reply = "-ERR fake node responder threw\r\n";
  }
  if (!reply) return;  // never answer this one
  Connection::Pending p;
  p.due = std::max(arrived + delay, c.last_due);  // keep replies in order
  c.last_due = p.due;
  std::string_view r(*reply);
  if (r.starts_with(kCloseMarker)) {
    p.then = CloseMode::fin;
    r.remove_prefix(kCloseMarker.size());
  } else if (r.starts_with(kResetMarker)) {
    p.then = CloseMode::rst;
    r.remove_prefix(kResetMarker.size());
  }
  p.bytes.assign(r);
  if (p.then != CloseMode::none) c.closing = true;
  c.pending.push_back(std::move(p));
}

void FakeNode::run() {
  std::list<Connection> conns;
  std::uint64_t drops_handled = 0;
  std::vector<pollfd> pfds;
  std::vector<Connection*> polled;
  std::vector<std::string> argv;
  char buf[16384];

  auto close_conn = [](Connection& c, CloseMode mode) {
    if (c.fd < 0) return;
    if (mode == CloseMode::rst) {
      linger lg{};
      lg.l_onoff = 1;
      lg.l_linger = 0;
      ::setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    ::close(c.fd);
    c.fd = -1;
    c.dead = true;
  };

  while (!stop_.load()) {
    // close_connections() requests
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (drop_requested_ != drops_handled) {
        drops_handled = drop_requested_;
        lock.unlock();
        for (auto& c : conns) close_conn(c, CloseMode::fin);
        conns.clear();
        lock.lock();
        drop_done_ = drops_handled;
        drop_cv_.notify_all();
      }
    }

    // Move due replies to the output buffers, then write what we can.
    const auto now = Clock::now();
    int timeout_ms = -1;
    for (auto& c : conns) {
      while (!c.pending.empty() && c.close_after_flush == CloseMode::none &&
             c.pending.front().due <= now) {
        auto& p = c.pending.front();
        c.out += p.bytes;
        c.close_after_flush = p.then;
        c.pending.pop_front();
      }
      while (!c.out.empty() && !c.dead) {
        const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
        if (n > 0) {
          c.out.erase(0, static_cast<std::size_t>(n));
        } else if (n < 0 && errno == EINTR) {
          continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          break;
        } else {
          close_conn(c, CloseMode::fin);
        }
      }
      if (!c.dead && c.out.empty() && c.close_after_flush != CloseMode::none) {
        close_conn(c, c.close_after_flush);
      }
      if (!c.dead && !c.pending.empty() && c.close_after_flush == CloseMode::none) {
        const auto wait = std::chrono::ceil<std::chrono::milliseconds>(c.pending.front().due - now);
        const int w = static_cast<int>(std::max<long long>(0, wait.count()));
        timeout_ms = timeout_ms < 0 ? w : std::min(timeout_ms, w);
      }
    }
    conns.remove_if([](const Connection& c) { return c.dead; });

    pfds.clear();
    polled.clear();
    pfds.push_back({wake_pipe_[0], POLLIN, 0});
    pfds.push_back({listen_fd_, POLLIN, 0});
    for (auto& c : conns) {
      short ev = POLLIN;
      if (!c.out.empty()) ev |= POLLOUT;
      pfds.push_back({c.fd, ev, 0});
      polled.push_back(&c);
    }
    const int rc = ::poll(pfds.data(), pfds.size(), timeout_ms);
    if (rc < 0) {
      if (errno == EINTR) continue;
      break;  // should not happen; the destructor still joins
    }
    if (pfds[0].revents & POLLIN) {
      while (::read(wake_pipe_[0], buf, sizeof buf) > 0) {
      }
    }
    if (pfds[1].revents & POLLIN) {
      for (;;) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        set_nonblocking(fd);
        Connection c;
        c.fd = fd;
        conns.push_back(std::move(c));
        const std::lock_guard<std::mutex> lock(mu_);
        ++connections_accepted_;
      }
    }
    for (std::size_t i = 0; i < polled.size(); ++i) {
      Connection& c = *polled[i];
      const short re = pfds[i + 2].revents;
      if (!(re & (POLLIN | POLLHUP | POLLERR))) continue;
      const auto arrived = Clock::now();
      bool eof = false;
      for (;;) {
        const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
        if (n > 0) {
          if (!c.closing) c.in.append(buf, static_cast<std::size_t>(n));
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) eof = true;
        break;
      }
      std::size_t pos = 0;
      while (!c.closing) {
        const ParseResult r = parse_request(c.in, pos, argv);
        if (r == ParseResult::incomplete) break;
        if (r == ParseResult::bad) {
          eof = true;
          break;
        }
        if (!argv.empty()) handle_command(c, std::move(argv), arrived);
        argv = {};
      }
      c.in.erase(0, pos);
      if (c.closing) c.in.clear();
      // On EOF from the client, drop the connection (and anything still queued for it).
      if (eof) close_conn(c, CloseMode::fin);
    }
    conns.remove_if([](const Connection& c) { return c.dead; });
  }
  for (auto& c : conns) close_conn(c, CloseMode::fin);
  const std::lock_guard<std::mutex> lock(mu_);
  drop_done_ = drop_requested_;
  drop_cv_.notify_all();
}

// ------------------------------------------------------------------------------------------------
// Canned responders

FakeNode::Responder FakeNode::silent() {
  return [](const std::vector<std::string>&) -> std::optional<std::string> { return std::nullopt; };
}

FakeNode::Responder FakeNode::garbage() {
  return [](const std::vector<std::string>&) -> std::optional<std::string> {
    return std::string("?!garbage\r\n");
  };
}

FakeNode::Responder FakeNode::redis_like() {
  const std::string run_id = random_hex40();  // fixed for this responder, like one server run
  return [run_id](const std::vector<std::string>& argv) -> std::optional<std::string> {
    if (argv.empty()) return std::string("+OK\r\n");
    const std::string cmd = upper(argv[0]);
    const std::string sub = argv.size() > 1 ? upper(argv[1]) : std::string();
    if (cmd == "PING") return argv.size() > 1 ? bulk(argv[1]) : std::string("+PONG\r\n");
    if (cmd == "SET") return std::string("+OK\r\n");
    if (cmd == "GET") return std::string("$-1\r\n");
    if (cmd == "PTTL" || cmd == "TTL") return std::string(":-2\r\n");
    if (cmd == "EVAL" || cmd == "EVALSHA" || cmd == "EVAL_RO" || cmd == "EVALSHA_RO") {
      return std::string(":1\r\n");
    }
    if (cmd == "SCRIPT" && sub == "LOAD") {
      return bulk(sha1_hex(argv.size() > 2 ? argv[2] : std::string()));
    }
    if (cmd == "SCRIPT" && sub == "EXISTS") {
      std::string out = "*" + std::to_string(argv.size() - 2) + "\r\n";
      for (std::size_t i = 2; i < argv.size(); ++i) out += ":1\r\n";
      return out;
    }
    if (cmd == "INFO") {
      return bulk("# Server\r\nredis_version:7.0.15\r\nrun_id:" + run_id +
                  "\r\nuptime_in_seconds:1000\r\n");
    }
    if (cmd == "CONFIG" && sub == "GET") return std::string("*0\r\n");
    return std::string("+OK\r\n");  // AUTH, SELECT, CLIENT, anything else
  };
}

FakeNode::Responder FakeNode::reset_mid_reply() {
  Responder base = redis_like();
  return [base](const std::vector<std::string>& argv) -> std::optional<std::string> {
    if (!argv.empty() && upper(argv[0]) == "SET") return close_after("+O");
    return base(argv);
  };
}

}  // namespace redlock::test
