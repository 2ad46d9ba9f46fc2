#include "redis_fixture.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include "nodes/launcher.hpp"
#include "nodes/process.hpp"

namespace redlock::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr const char* kLoopback = "127.0.0.1";

// ---------------------------------------------------------------------------------------------
// helpers

nodes::SyncClient connect(std::uint16_t port, milliseconds timeout,
                          const std::optional<nodes::Tls>& tls) {
  nodes::Endpoint endpoint = nodes::Endpoint::local(port);
  endpoint.tls = tls;
  nodes::SyncClient c(endpoint, {.connect_timeout = timeout, .command_timeout = timeout});
  if (!c.ok()) {
    throw RedisIoError("connect 127.0.0.1:" + std::to_string(port) + ": " + c.error(), c.failure());
  }
  return c;
}

Reply run_command(nodes::SyncClient& c, std::uint16_t port, const std::vector<std::string>& argv) {
  if (argv.empty()) throw std::invalid_argument("command: empty argv");
  auto r = c.command(argv);
  if (!r) {
    throw RedisIoError(argv.front() + " on 127.0.0.1:" + std::to_string(port) + ": " + c.error(),
                       c.failure());
  }
  return std::move(*r);
}

// REDLOCK_TEST_REDIS_SERVER, else PATH, else Debian's package location (even with a trimmed PATH).
std::string find_redis_server() {
  return nodes::find_redis_server({.override_variable = "REDLOCK_TEST_REDIS_SERVER",
                                   .extra_dirs = {"/usr/bin", "/usr/sbin"}})
      .value_or("");
}

// `in_memory`: the directory of a server that fsyncs every write (appendfsync always) goes on a
// tmpfs when there is one. On a disk, every such server of a test shares one filesystem, and one
// stall of it (another process writing) delays them all at once by up to several hundred ms,
// which turns into timeouts in tests that have nothing to do with disks. What appendfsync always
// is for in these tests (an acknowledged write survives kill -9) holds on a tmpfs too.
std::string make_temp_dir(bool in_memory) {
  std::string base = "/tmp";
  if (in_memory && ::access("/dev/shm", W_OK | X_OK) == 0) base = "/dev/shm";
  // Unix socket paths are limited to 107 bytes: only use TMPDIR when it is short.
  else if (const char* t = std::getenv("TMPDIR"); t && *t && std::strlen(t) <= 60)
    base = t;
  std::string tmpl = base + "/redlock-redis-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) {
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + tmpl);
  }
  return std::string(buf.data());
}

std::string read_tail(const std::string& path, std::uintmax_t from, std::size_t max_bytes) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return "(no " + path + ")";
  if (size <= from) return {};
  std::uintmax_t start = from;
  if (size - start > max_bytes) start = size - max_bytes;
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(start));
  std::string s(static_cast<std::size_t>(size - start), '\0');
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  s.resize(static_cast<std::size_t>(in.gcount()));
  return s;
}

std::string describe_status(int st) {
  if (WIFEXITED(st)) return "exit code " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return "killed by signal " + std::to_string(WTERMSIG(st));
  return "status " + std::to_string(st);
}

void expect_ok(const Reply& r, const std::string& what) {
  if (!r.is_status("OK")) throw std::runtime_error(what + ": " + nodes::reply_text(r));
}

}  // namespace

// -----------------------------------------------------------------------------------------------

std::uint16_t free_port() {
  static std::mutex mu;
  static std::set<std::uint16_t> handed_out;
  const std::lock_guard<std::mutex> lock(mu);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "free_port: socket");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      const int e = errno;
      ::close(fd);
      throw std::system_error(e, std::generic_category(), "free_port: bind");
    }
    ::close(fd);
    const std::uint16_t port = ntohs(addr.sin_port);
    if (handed_out.insert(port).second) return port;
  }
  throw std::runtime_error("free_port: no unused port found");
}

std::uint16_t free_low_port() {
  static std::mutex mu;
  static std::set<std::uint16_t> handed_out;
  static std::minstd_rand rng(std::random_device{}());
  const std::lock_guard<std::mutex> lock(mu);
  std::uniform_int_distribution<int> pick(10000, 17999);  // (the ranges: redis_fixture.hpp)
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const auto port = static_cast<std::uint16_t>(pick(rng));
    if (handed_out.count(port) != 0) continue;
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "free_low_port: socket");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    // No SO_REUSEADDR: a port with a connection in TIME_WAIT counts as taken.
    const bool bindable = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    if (bindable) {
      handed_out.insert(port);
      return port;
    }
  }
  throw std::runtime_error("free_low_port: no free port found in 10000-17999");
}

bool redis_server_available() { return !find_redis_server().empty(); }

Reply command_at(std::uint16_t port, const std::vector<std::string>& argv,
                 std::chrono::milliseconds timeout, const std::optional<nodes::Tls>& tls) {
  nodes::SyncClient c = connect(port, timeout, tls);
  return run_command(c, port, argv);
}

// -----------------------------------------------------------------------------------------------
// RedisServer

RedisServer::RedisServer(ServerConfig cfg) : RedisServer(std::move(cfg), DeferReady{}) {
  // The delegated constructor has completed, so the destructor cleans up if this throws.
  wait_ready();
}

namespace {
std::optional<TlsServerOptions>& default_tls_slot() {
  static std::optional<TlsServerOptions> slot;
  return slot;
}
}  // namespace

void set_default_server_tls(std::optional<TlsServerOptions> tls) {
  default_tls_slot() = std::move(tls);
}
const std::optional<TlsServerOptions>& default_server_tls() { return default_tls_slot(); }

RedisServer::RedisServer(ServerConfig cfg, DeferReady) : cfg_(std::move(cfg)) {
  if (!cfg_.tls) cfg_.tls = default_tls_slot();
  auto_port_ = cfg_.port == 0;
  port_ = auto_port_ ? pick_port() : cfg_.port;
  init_tls();
  dir_ = make_temp_dir(cfg_.aof_always);
  try {
    spawn();
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw;
  }
}

RedisServer::~RedisServer() { destroy(); }

RedisServer::RedisServer(RedisServer&& other) noexcept
    : cfg_(std::move(other.cfg_)),
      auto_port_(other.auto_port_),
      port_(other.port_),
      dir_(std::move(other.dir_)),
      log_offset_(other.log_offset_),
      pid_(std::exchange(other.pid_, -1)),
      stopped_(std::exchange(other.stopped_, false)),
      tls_port_(other.tls_port_) {
  other.dir_.clear();
}

RedisServer& RedisServer::operator=(RedisServer&& other) noexcept {
  if (this != &other) {
    destroy();
    cfg_ = std::move(other.cfg_);
    auto_port_ = other.auto_port_;
    port_ = other.port_;
    dir_ = std::move(other.dir_);
    other.dir_.clear();
    log_offset_ = other.log_offset_;
    pid_ = std::exchange(other.pid_, -1);
    stopped_ = std::exchange(other.stopped_, false);
    tls_port_ = other.tls_port_;
  }
  return *this;
}

void RedisServer::destroy() noexcept {
  kill();  // only syscalls: cannot throw
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    dir_.clear();
  }
}

std::string RedisServer::address() const {
  return std::string(kLoopback) + ":" + std::to_string(port_);
}

std::string RedisServer::unix_path() const {
  return cfg_.unix_socket ? dir_ + "/redis.sock" : std::string();
}

std::string RedisServer::log_path() const { return dir_ + "/redis.log"; }

std::string RedisServer::log_tail(std::size_t max_bytes) const {
  return read_tail(log_path(), 0, max_bytes);
}

pid_t RedisServer::pid() const { return running() ? pid_ : -1; }

bool RedisServer::running() const {
  if (pid_ <= 0) return false;
  int st = 0;
  const pid_t r = nodes::waitpid_eintr(pid_, &st, WNOHANG);
  if (r == 0) return true;
  // r == pid_: it died on its own and is now reaped; -1 (ECHILD): not ours to wait for any more.
  pid_ = -1;
  stopped_ = false;
  return false;
}

void RedisServer::spawn() {
  const std::string exe = cfg_.executable.empty() ? find_redis_server() : cfg_.executable;
  if (exe.empty()) {
    throw std::runtime_error("redis-server not found in PATH (or REDLOCK_TEST_REDIS_SERVER)");
  }
  // clang-format off
  std::vector<std::string> args = {"--port", std::to_string(port_),
                                   "--bind", kLoopback,
                                   "--dir", dir_,
                                   "--daemonize", "no",
                                   "--logfile", log_path(),
                                   "--protected-mode", "no",
                                   "--enable-debug-command", "local",
                                   "--save", ""};
  // clang-format on
  if (cfg_.aof_always) {
    args.insert(args.end(), {"--appendonly", "yes", "--appendfsync", "always"});
  } else {
    args.insert(args.end(), {"--appendonly", "no"});
  }
  if (cfg_.unix_socket) {
    args.insert(args.end(), {"--unixsocket", unix_path(), "--unixsocketperm", "700"});
  }
  if (!cfg_.config_file.empty()) args.insert(args.begin(), cfg_.config_file);  // must come first
  if (cfg_.tls) {
    const std::vector<std::string> tls = tls_args();
    args.insert(args.end(), tls.begin(), tls.end());
  }
  args.insert(args.end(), cfg_.extra_args.begin(), cfg_.extra_args.end());

  std::error_code ec;
  const auto size = std::filesystem::file_size(log_path(), ec);
  log_offset_ = ec ? 0 : size;
  pid_ = nodes::launch({.exe = exe,
                        .args = std::move(args),
                        .output = dir_ + "/redis.out",
                        .lifetime = nodes::Launch::Lifetime::child,
                        .environment = nodes::environment_without_preload()});
  stopped_ = false;
}

void RedisServer::wait_ready() {
  const auto deadline = steady_clock::now() + cfg_.startup_timeout;
  for (;;) {
    int st = 0;
    const pid_t r = pid_ > 0 ? nodes::waitpid_eintr(pid_, &st, WNOHANG) : -1;
    if (r != 0) {
      pid_ = -1;
      const std::string recent = read_tail(log_path(), log_offset_, 4000);
      const bool port_taken = recent.find("Address already in use") != std::string::npos;
      if (port_taken && steady_clock::now() < deadline) {
        // Someone grabbed the port between free_port() and redis' bind (or it is a restart and a
        // client socket sits on it): pick another port if we may, else retry the same one.
        repick_auto_tls_port();
        if (auto_port_) {
          port_ = pick_port();
        } else {
          std::this_thread::sleep_for(milliseconds(50));
        }
        spawn();
        continue;
      }
      throw std::runtime_error(failure_message("redis-server exited during startup (" +
                                               (r > 0 ? describe_status(st) : "reaped elsewhere") +
                                               ")"));
    }
    if (tls_only()) {
      if (tls_answers_as(pid_)) return;  // (TLS PING + pid check; catches its own errors)
    } else if (nodes::answers_ping(nodes::Endpoint::local(port_), milliseconds(200), pid_)) {
      // Our process must be the one answering, not a foreign server on a recycled port.
      return;
    }
    if (steady_clock::now() >= deadline) {
      throw std::runtime_error(failure_message(
          "no PING answer within " + std::to_string(cfg_.startup_timeout.count()) + " ms"));
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
}

std::string RedisServer::failure_message(const std::string& why) const {
  std::ostringstream os;
  os << "redis-server on " << address() << " (dir " << dir_ << "): " << why
     << "\n--- redis.log (tail) ---\n"
     << read_tail(log_path(), 0, 2000) << "\n--- stdout/stderr (tail) ---\n"
     << read_tail(dir_ + "/redis.out", 0, 1000);
  return os.str();
}

std::uint16_t RedisServer::pick_port() const {
  return cfg_.low_ports ? free_low_port() : free_port();
}

void RedisServer::reap_blocking() {
  if (pid_ > 0) {
    int st = 0;
    nodes::waitpid_eintr(pid_, &st, 0);
  }
  pid_ = -1;
  stopped_ = false;
}

void RedisServer::kill() {
  if (!running()) return;  // also makes sure the pid is still our unreaped child
  ::kill(pid_, SIGKILL);   // works on SIGSTOPped processes too
  reap_blocking();
}

void RedisServer::stop() {
  if (!running()) throw std::logic_error("RedisServer::stop(): " + address() + " is not running");
  if (stopped_) return;
  ::kill(pid_, SIGSTOP);
  int st = 0;
  const pid_t r = nodes::waitpid_eintr(pid_, &st, WUNTRACED);
  if (r == pid_ && (WIFEXITED(st) || WIFSIGNALED(st))) {
    pid_ = -1;
    throw std::runtime_error("RedisServer::stop(): " + address() + " died (" + describe_status(st) +
                             ")");
  }
  stopped_ = true;
}

void RedisServer::cont() {
  if (!running() || !stopped_) return;
  ::kill(pid_, SIGCONT);
  stopped_ = false;
}

void RedisServer::start() {
  if (running()) throw std::logic_error("RedisServer::start(): " + address() + " already running");
  spawn();
  try {
    wait_ready();
  } catch (...) {
    kill();
    throw;
  }
}

void RedisServer::restart(std::chrono::milliseconds down_for) {
  kill();
  if (down_for.count() > 0) std::this_thread::sleep_for(down_for);
  start();
}

Reply RedisServer::command(const std::vector<std::string>& argv) const {
  if (tls_only()) return tls_command(argv, kDefaultCommandTimeout);
  return command_at(port_, argv, kDefaultCommandTimeout);
}

Reply RedisServer::command(const std::vector<std::string>& argv,
                           std::chrono::milliseconds timeout) const {
  if (tls_only()) return tls_command(argv, timeout);
  return command_at(port_, argv, timeout);
}

std::optional<std::string> RedisServer::get(const std::string& key) const {
  Reply r = command({"GET", key});
  if (r.type == Reply::Type::nil) return std::nullopt;
  if (r.type == Reply::Type::string) return std::move(r.str);
  throw std::runtime_error("GET " + key + " on " + address() + ": " + nodes::reply_text(r));
}

void RedisServer::set(const std::string& key, const std::string& value) const {
  expect_ok(command({"SET", key, value}), "SET " + key + " on " + address());
}

long long RedisServer::pttl(const std::string& key) const {
  const Reply r = command({"PTTL", key});
  if (r.type != Reply::Type::integer) {
    throw std::runtime_error("PTTL " + key + " on " + address() + ": " + nodes::reply_text(r));
  }
  return r.integer;
}

bool RedisServer::exists(const std::string& key) const {
  const Reply r = command({"EXISTS", key});
  if (r.type != Reply::Type::integer) {
    throw std::runtime_error("EXISTS " + key + " on " + address() + ": " + nodes::reply_text(r));
  }
  return r.integer > 0;
}

void RedisServer::del(const std::string& key) const {
  const Reply r = command({"DEL", key});
  if (r.type != Reply::Type::integer) {
    throw std::runtime_error("DEL " + key + " on " + address() + ": " + nodes::reply_text(r));
  }
}

void RedisServer::flushall() const { expect_ok(command({"FLUSHALL"}), "FLUSHALL on " + address()); }

void RedisServer::script_flush() const {
  expect_ok(command({"SCRIPT", "FLUSH"}), "SCRIPT FLUSH on " + address());
}

void RedisServer::replica_of(const RedisServer& master) const {
  expect_ok(command({"REPLICAOF", kLoopback, std::to_string(master.port())}),
            "REPLICAOF on " + address());
}

void RedisServer::make_master() const {
  expect_ok(command({"REPLICAOF", "NO", "ONE"}), "REPLICAOF NO ONE on " + address());
}

bool RedisServer::wait_replicated(int replicas, milliseconds timeout) const {
  const auto offset_of = [this] {
    const Reply r = command({"INFO", "replication"});
    const auto offset = nodes::info_field(r.str, "master_repl_offset");
    if (!offset) throw std::runtime_error("INFO replication on " + address() + ": no offset");
    return std::make_pair(r.str, std::stoll(*offset));
  };
  const long long target = offset_of().second;
  const auto deadline = steady_clock::now() + timeout;
  for (;;) {
    // One line per replica: "slave0:ip=...,port=...,state=online,offset=N,lag=..."
    const std::string info = offset_of().first;
    int caught_up = 0;
    for (int i = 0;; ++i) {
      const auto line = nodes::info_field(info, "slave" + std::to_string(i));
      if (!line) break;
      const auto at = line->find("offset=");
      if (line->find("state=online") != std::string::npos && at != std::string::npos &&
          std::stoll(line->substr(at + 7)) >= target) {
        ++caught_up;
      }
    }
    if (caught_up >= replicas) return true;
    if (steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
}

void RedisServer::make_oom() const {
  config_set("maxmemory-policy", "noeviction");
  config_set("maxmemory", "1");
}

void RedisServer::clear_oom() const { config_set("maxmemory", "0"); }

void RedisServer::set_wrong_type(const std::string& key) const {
  del(key);
  const Reply r = command({"RPUSH", key, "not-a-lock"});
  if (r.type != Reply::Type::integer) {
    throw std::runtime_error("RPUSH " + key + " on " + address() + ": " + nodes::reply_text(r));
  }
}

void RedisServer::config_set(const std::string& name, const std::string& value) const {
  expect_ok(command({"CONFIG", "SET", name, value}), "CONFIG SET " + name + " on " + address());
}

std::string RedisServer::run_id() const {
  const Reply r = command({"INFO", "server"});
  if (r.type != Reply::Type::string) {
    throw std::runtime_error("INFO server on " + address() + ": " + nodes::reply_text(r));
  }
  const auto pos = r.str.find("run_id:");
  if (pos == std::string::npos) throw std::runtime_error("INFO server: no run_id on " + address());
  const auto start = pos + 7;
  const auto end = r.str.find_first_of("\r\n", start);
  return r.str.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// -----------------------------------------------------------------------------------------------
// RedisCluster

RedisCluster::RedisCluster(int n, ServerConfig cfg) {
  if (n < 1) throw std::invalid_argument("RedisCluster: n must be >= 1");
  servers_.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    ServerConfig c = cfg;
    if (cfg.port != 0) c.port = static_cast<std::uint16_t>(cfg.port + i);
    // Fork everything first, then wait: start-up overlaps.
    servers_.push_back(
        std::unique_ptr<RedisServer>(new RedisServer(std::move(c), RedisServer::DeferReady{})));
  }
  for (auto& s : servers_) s->wait_ready();
}

std::string RedisCluster::nodes_csv() const {
  std::string out;
  for (const auto& s : servers_) {
    if (!out.empty()) out += ',';
    out += s->address();
  }
  return out;
}

std::vector<std::string> RedisCluster::addresses() const {
  std::vector<std::string> out;
  out.reserve(servers_.size());
  for (const auto& s : servers_) out.push_back(s->address());
  return out;
}

int RedisCluster::count_with_key(const std::string& key) const {
  int n = 0;
  for (const auto& s : servers_) {
    if (!s->running() || s->stopped()) continue;
    if (s->exists(key)) ++n;
  }
  return n;
}

void RedisCluster::heal() {
  for (auto& s : servers_) {
    if (!s->running()) {
      s->start();
    } else if (s->stopped()) {
      s->cont();
    }
  }
}

}  // namespace redlock::test
