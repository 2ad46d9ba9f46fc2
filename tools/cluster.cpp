// `redlock-cli cluster`: real redis-server processes on 127.0.0.1 for demonstrations and tests.
// See cluster.hpp for the files kept in the cluster directory and the safety rules.

#include "cluster.hpp"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <system_error>
#include <thread>

#include "cli.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace redlock::cli {

namespace {

constexpr int max_count = 64;
constexpr int min_port = 1024;
constexpr int max_port = 65535;
constexpr auto startup_deadline = 5s;
constexpr auto term_grace = 3s;
constexpr auto ping_timeout = 200ms;
constexpr auto query_timeout = 500ms;
constexpr const char* settings_file = "cluster.conf";

[[noreturn]] void fail(ClusterError::Kind kind, const std::string& message) {
  throw ClusterError(kind, message);
}

std::string errno_text(int err) { return std::generic_category().message(err); }

std::optional<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Whole-string decimal integer; nullopt on anything else (sign, spaces, overflow).
std::optional<long long> parse_int(std::string_view s) {
  if (s.empty()) return std::nullopt;
  long long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// ---- /proc ------------------------------------------------------------------------------------

// The one-letter state of /proc/PID/stat; nullopt if there is no such process.
std::optional<char> proc_state(pid_t pid) {
  auto stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return std::nullopt;
  // The command name in parentheses may itself contain ") ", so look for the last one.
  auto close = stat->rfind(')');
  if (close == std::string::npos || close + 2 >= stat->size()) return std::nullopt;
  return (*stat)[close + 2];
}

// A zombie has exited; it only waits to be reaped, so it counts as gone.
bool alive(pid_t pid) {
  auto st = proc_state(pid);
  return st && *st != 'Z' && *st != 'X';
}

std::string proc_cmdline(pid_t pid) {
  auto raw = read_text("/proc/" + std::to_string(pid) + "/cmdline").value_or("");
  std::replace(raw.begin(), raw.end(), '\0', ' ');
  while (!raw.empty() && raw.back() == ' ') raw.pop_back();
  return raw;
}

// Is `pid` a live redis-server serving `port` (redis rewrites its title to
// "redis-server 127.0.0.1:PORT"), or one just exec'd with our config file (before that rewrite)?
// This is what stands between a stale pid file and signalling an unrelated process.
bool is_our_redis(pid_t pid, int port, const fs::path& conf) {
  if (pid <= 1 || !alive(pid)) return false;
  std::string cmd = proc_cmdline(pid);
  std::string first = cmd.substr(0, cmd.find(' '));
  if (first.find("redis-server") == std::string::npos) return false;
  std::string needle = ":" + std::to_string(port);
  for (auto pos = cmd.find(needle); pos != std::string::npos; pos = cmd.find(needle, pos + 1)) {
    auto after = pos + needle.size();
    if (after == cmd.size() || cmd[after] == ' ') return true;
  }
  return cmd.find(" " + conf.string()) != std::string::npos;
}

// ---- redis ------------------------------------------------------------------------------------

timeval to_timeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

class RedisSync {
 public:
  RedisSync(int port, std::chrono::milliseconds timeout)
      : ctx_(redisConnectWithTimeout("127.0.0.1", port, to_timeval(timeout))) {
    if (ok()) redisSetTimeout(ctx_, to_timeval(timeout));
  }
  ~RedisSync() {
    if (ctx_ != nullptr) redisFree(ctx_);
  }
  RedisSync(const RedisSync&) = delete;
  RedisSync& operator=(const RedisSync&) = delete;

  [[nodiscard]] bool ok() const { return ctx_ != nullptr && ctx_->err == 0; }

  struct FreeReply {
    void operator()(redisReply* r) const { freeReplyObject(r); }
  };
  using Reply = std::unique_ptr<redisReply, FreeReply>;

  // nullptr on an I/O error or timeout; the context is unusable afterwards.
  Reply command(std::initializer_list<std::string_view> args) {
    if (!ok()) return nullptr;
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (auto a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    void* r = redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data());
    return Reply(static_cast<redisReply*>(r));
  }

 private:
  redisContext* ctx_;
};

bool answers_ping(int port) {
  RedisSync c(port, ping_timeout);
  auto r = c.command({"PING"});
  return r && r->type == REDIS_REPLY_STATUS && std::string_view(r->str, r->len) == "PONG";
}

std::string persistence_label(std::string_view appendonly, std::string_view fsync) {
  if (appendonly != "yes") return "none";
  if (fsync == "always") return "aof";
  return "aof-" + std::string(fsync);
}

std::optional<std::string> config_get(RedisSync& c, std::string_view name) {
  auto r = c.command({"CONFIG", "GET", name});
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[1]->str == nullptr) {
    return std::nullopt;
  }
  return std::string(r->element[1]->str, r->element[1]->len);
}

// ---- files and ports --------------------------------------------------------------------------

// Absolute path of redis-server found on PATH, as a shell would find it.
std::string find_redis_server() {
  const char* env_path = std::getenv("PATH");
  std::string path = env_path != nullptr ? env_path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= path.size()) {
    auto end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (dir.empty()) dir = ".";
    fs::path candidate = fs::path(dir) / "redis-server";
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return fs::absolute(candidate).string();
    }
    start = end + 1;
  }
  fail(ClusterError::Kind::usage,
       "redis-server not found on PATH; install the Debian package `redis-server` "
       "(apt-get install redis-server) or put redis-server on PATH");
}

// Empty if 127.0.0.1:port can be listened on, else why not. Binding is the only reliable test:
// a connect would miss a socket that is bound but not listening yet. SO_REUSEADDR, as redis uses,
// so the TIME_WAIT left by a just-killed node does not count as taken.
std::string port_busy(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "socket: " + errno_text(errno);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string why;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 1) != 0) {
    why = errno_text(errno);
  }
  ::close(fd);
  return why;
}

std::string log_tail(const fs::path& log, std::size_t lines) {
  auto text = read_text(log);
  if (!text || text->empty()) return "  (" + log.string() + " is empty)";
  std::deque<std::string> last;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    last.push_back(line);
    if (last.size() > lines) last.pop_front();
  }
  std::string out = "  last lines of " + log.string() + ":";
  for (auto& l : last) out += "\n    " + l;
  return out;
}

void write_file_atomic(const fs::path& path, const std::string& content) {
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    if (!out.flush()) fail(ClusterError::Kind::usage, "cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fail(ClusterError::Kind::usage, "cannot write " + path.string() + ": " + ec.message());
}

void remove_file(const fs::path& path) {
  std::error_code ec;
  fs::remove(path, ec);
}

// redis.conf string quoting (sdssplitargs): double quotes with backslash escapes.
std::string conf_quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (ch == '\n') {
      out += "\\n";
      continue;
    }
    out += ch;
  }
  return out + "\"";
}

// Serialises state changes between concurrent CLIs on the same directory. Held only for the
// duration of one call; CLOEXEC so redis never inherits it.
class DirLock {
 public:
  explicit DirLock(const fs::path& dir) {
    fs::path p = dir / "cluster.lock";
    fd_ = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0) fail(ClusterError::Kind::usage, "cannot open " + p.string() + ": " + errno_text(errno));
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~DirLock() { ::close(fd_); }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

template <class Pred>
bool wait_for(Pred pred, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

std::string node_name(int index, int port) {
  return "node " + std::to_string(index) + " (127.0.0.1:" + std::to_string(port) + ")";
}

}  // namespace

// ---- names ------------------------------------------------------------------------------------

const char* to_string(Persistence p) noexcept { return p == Persistence::aof ? "aof" : "none"; }

const char* to_string(NodeState s) noexcept {
  switch (s) {
    case NodeState::up: return "up";
    case NodeState::paused: return "paused";
    case NodeState::down: return "down";
  }
  return "down";
}

std::string describe(const NodeReport& r) {
  std::string n = node_name(r.index, r.port) + ": ";
  std::string pid = "pid " + std::to_string(r.pid);
  switch (r.outcome) {
    case NodeReport::Outcome::started: return n + "started, " + pid;
    case NodeReport::Outcome::already_running: return n + "already running, " + pid;
    case NodeReport::Outcome::paused_left:
      return n + "paused, " + pid + "; left as is (`redlock-cli cluster cont " +
             std::to_string(r.index) + "` resumes it)";
    case NodeReport::Outcome::stopped: return n + "stopped, " + pid;
    case NodeReport::Outcome::killed: return n + "killed (SIGKILL), " + pid;
    case NodeReport::Outcome::stale_removed:
      return n + "pid file named " + pid + ", which is not our redis-server; removed the stale pid file";
    case NodeReport::Outcome::paused: return n + "paused (SIGSTOP), " + pid;
    case NodeReport::Outcome::already_paused: return n + "already paused, " + pid;
    case NodeReport::Outcome::resumed: return n + "resumed (SIGCONT), " + pid;
    case NodeReport::Outcome::not_paused: return n + "was not paused, " + pid;
  }
  return n;
}

// ---- ClusterManager ---------------------------------------------------------------------------

struct ClusterManager::Proc {
  std::optional<pid_t> pid;  // what the pid file says
  bool ours = false;         // pid is alive and a redis-server on `port`
  char state = 0;            // /proc state letter when ours ('T': paused)
  int port = 0;              // the port it was started on (node-I.conf), else the computed one
};

ClusterManager::ClusterManager(ClusterSettings settings, bool create_dir) : settings_(std::move(settings)) {
  using K = ClusterError::Kind;
  if (settings_.count < 1 || settings_.count > max_count) {
    fail(K::usage, "node count " + std::to_string(settings_.count) + " is out of range (1.." +
                       std::to_string(max_count) + ")");
  }
  if (settings_.base_port < min_port || settings_.base_port > max_port) {
    fail(K::usage, "base port " + std::to_string(settings_.base_port) + " is out of range (" +
                       std::to_string(min_port) + ".." + std::to_string(max_port) + ")");
  }
  if (settings_.base_port + settings_.count - 1 > max_port) {
    fail(K::usage, "base port " + std::to_string(settings_.base_port) + " with " +
                       std::to_string(settings_.count) + " nodes would put node " +
                       std::to_string(settings_.count) + " on port " +
                       std::to_string(settings_.base_port + settings_.count - 1) +
                       ", above 65535");
  }
  if (settings_.dir.empty()) settings_.dir = default_dir();
  std::error_code ec;
  settings_.dir = fs::absolute(settings_.dir, ec);
  const std::string what = "cluster directory " + settings_.dir.string();
  if (!create_dir && !fs::exists(settings_.dir, ec)) return;
  if (!fs::is_directory(settings_.dir, ec)) {
    fs::create_directories(settings_.dir.parent_path(), ec);  // mkdir below reports the failure
    // 0700: pid files decide what gets signalled, so nobody else may write them.
    if (::mkdir(settings_.dir.c_str(), 0700) != 0 && errno != EEXIST) {
      fail(K::usage, what + ": cannot create it: " + errno_text(errno));
    }
  }
  if (!fs::is_directory(settings_.dir, ec)) fail(K::usage, what + ": not a directory");
  if (::access(settings_.dir.c_str(), W_OK | X_OK) != 0) {
    fail(K::usage, what + ": not writable: " + errno_text(errno));
  }
}

fs::path ClusterManager::default_dir() {
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (xdg != nullptr && xdg[0] == '/' && ::access(xdg, W_OK | X_OK) == 0) {
    return fs::path(xdg) / "redlock-cluster";
  }
  // In /tmp another user could have created the directory first; refuse it then rather than
  // write pid files someone else controls.
  fs::path p = "/tmp/redlock-cluster-" + std::to_string(::getuid());
  struct stat st {};
  if (::lstat(p.c_str(), &st) == 0 && (!S_ISDIR(st.st_mode) || st.st_uid != ::getuid())) {
    fail(ClusterError::Kind::usage,
         "cluster directory " + p.string() + " is not a directory owned by you; pass --dir");
  }
  return p;
}

std::optional<ClusterSettings> ClusterManager::load_saved(const fs::path& dir) {
  auto text = read_text(dir / settings_file);
  if (!text) return std::nullopt;
  ClusterSettings s;
  s.dir = dir;
  std::istringstream in(*text);
  const std::string where = (dir / settings_file).string();
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    auto bad = [&] {
      fail(ClusterError::Kind::usage, where + ": bad " + key + " '" + value + "'; fix or remove the file");
    };
    if (key == "count" || key == "base_port") {
      auto v = parse_int(value);
      if (!v || *v < 0 || *v > max_port) bad();
      (key == "count" ? s.count : s.base_port) = static_cast<int>(*v);
    } else if (key == "persistence") {
      if (value == "none") s.persistence = Persistence::none;
      else if (value == "aof") s.persistence = Persistence::aof;
      else bad();
    }
  }
  return s;
}

std::string ClusterManager::node_list() const {
  std::string out;
  for (int i = 1; i <= settings_.count; ++i) {
    if (i > 1) out += ',';
    out += "127.0.0.1:" + std::to_string(port_of(i));
  }
  return out;
}

fs::path ClusterManager::node_file(int index, const char* suffix) const {
  return settings_.dir / ("node-" + std::to_string(index) + suffix);
}

void ClusterManager::check_index(int index) const {
  if (index < 1 || index > settings_.count) {
    fail(ClusterError::Kind::usage,
         "node " + std::to_string(index) + ": no such node (this cluster has nodes 1.." +
             std::to_string(settings_.count) + ")");
  }
}

void ClusterManager::save_settings() const {
  write_file_atomic(settings_.dir / settings_file,
                    "# redlock-cli cluster: settings of the last `up`\n"
                    "count=" + std::to_string(settings_.count) + "\n" +
                        "base_port=" + std::to_string(settings_.base_port) + "\n" +
                        "persistence=" + to_string(settings_.persistence) + "\n");
}

namespace {

// What node-I.conf says: the port and persistence the node was last started with.
struct NodeConf {
  std::optional<int> port;
  std::optional<Persistence> persistence;
};

NodeConf read_node_conf(const fs::path& conf) {
  NodeConf nc;
  auto text = read_text(conf);
  if (!text) return nc;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("port ", 0) == 0) {
      if (auto v = parse_int(line.substr(5))) nc.port = static_cast<int>(*v);
    } else if (line.rfind("appendonly ", 0) == 0) {
      nc.persistence = line.substr(11) == "yes" ? Persistence::aof : Persistence::none;
    }
  }
  return nc;
}

// Indices of the node-I.pid files present, whatever the current count.
std::vector<int> pid_file_indices(const fs::path& dir) {
  std::vector<int> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind("node-", 0) != 0 || name.size() <= 9 || name.substr(name.size() - 4) != ".pid") continue;
    if (auto v = parse_int(name.substr(5, name.size() - 9)); v && *v >= 1 && *v <= max_port) {
      out.push_back(static_cast<int>(*v));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

ClusterManager::Proc ClusterManager::inspect(int index) const {
  Proc p;
  fs::path conf = node_file(index, ".conf");
  p.port = read_node_conf(conf).port.value_or(port_of(index));
  if (auto text = read_text(node_file(index, ".pid"))) {
    while (!text->empty() && (text->back() == '\n' || text->back() == ' ')) text->pop_back();
    if (auto v = parse_int(*text); v && *v > 1 && *v <= std::numeric_limits<pid_t>::max()) {
      p.pid = static_cast<pid_t>(*v);
    } else {
      p.pid = 0;  // unreadable pid file: stale by definition
    }
  }
  if (p.pid && is_our_redis(*p.pid, p.port, conf)) {
    p.ours = true;
    p.state = proc_state(*p.pid).value_or('?');
  }
  return p;
}

pid_t ClusterManager::spawn(int index, const std::string& redis_server) {
  using K = ClusterError::Kind;
  const int port = port_of(index);
  fs::path data = node_file(index, "");
  fs::path conf = node_file(index, ".conf");
  fs::path log = node_file(index, ".log");
  std::error_code ec;
  fs::create_directories(data, ec);
  if (ec) fail(K::usage, "cannot create " + data.string() + ": " + ec.message());

  std::string text = "# written by redlock-cli cluster at every start of node " + std::to_string(index) +
                     "\nport " + std::to_string(port) +
                     "\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\n"
                     "dir " + conf_quote(data.string()) + "\nlogfile " + conf_quote(log.string()) +
                     "\nsave \"\"\n";
  // RDB snapshots stay off in both modes: with aof, the log alone is the durable state.
  text += settings_.persistence == Persistence::aof ? "appendonly yes\nappendfsync always\n"
                                                    : "appendonly no\n";
  write_file_atomic(conf, text);

  // Everything the children need is prepared here: after fork only async-signal-safe calls are
  // allowed (the demo may run this with other threads alive).
  int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) fail(K::usage, "cannot open " + log.string() + ": " + errno_text(errno));
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int pipe_fds[2];
  if (null_fd < 0 || ::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    int err = errno;
    ::close(log_fd);
    if (null_fd >= 0) ::close(null_fd);
    fail(K::failed, "cannot start " + node_name(index, port) + ": " + errno_text(err));
  }
  const long open_max = std::min(::sysconf(_SC_OPEN_MAX), 65536L);
  // argv[0] must read "redis-server": Debian's binary picks its mode from argv[0]
  // (redis-server is a symlink to redis-check-rdb).
  std::string arg0 = "redis-server", arg1 = conf.string();
  char* argv[] = {arg0.data(), arg1.data(), nullptr};

  // Double fork + setsid: the node outlives this CLI, has no controlling terminal, and is
  // reparented at once, so a long-running caller (demo) never accumulates zombies.
  pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_fds[0]);
    ::setsid();
    pid_t grandchild = ::fork();
    if (grandchild != 0) {
      int v = grandchild > 0 ? grandchild : -errno;
      (void)!::write(pipe_fds[1], &v, sizeof v);
      ::_exit(0);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);
    }
    (void)!::chdir("/");
    ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    // Leak no descriptor of the caller (sockets, the dir lock) into a long-lived server.
#ifdef CLOSE_RANGE_CLOEXEC
    if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
#endif
      for (int fd = 3; fd < open_max; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    ::execv(redis_server.c_str(), argv);
    int err = errno;
    (void)!::write(pipe_fds[1], &err, sizeof err);
    ::_exit(127);
  }
  int fork_err = errno;
  ::close(pipe_fds[1]);
  ::close(log_fd);
  ::close(null_fd);
  if (child < 0) {
    ::close(pipe_fds[0]);
    fail(K::failed, "cannot start " + node_name(index, port) + ": fork: " + errno_text(fork_err));
  }
  while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
  }
  auto read_int = [&](int& v) {
    ssize_t n;
    do n = ::read(pipe_fds[0], &v, sizeof v);
    while (n < 0 && errno == EINTR);
    return n == static_cast<ssize_t>(sizeof v);
  };
  int pid = 0, exec_err = 0;
  bool got_pid = read_int(pid);
  bool exec_failed = got_pid && pid > 0 && read_int(exec_err);  // EOF: exec succeeded
  ::close(pipe_fds[0]);
  if (!got_pid || pid <= 0) {
    fail(K::failed, "cannot start " + node_name(index, port) + ": fork: " + errno_text(got_pid ? -pid : EIO));
  }
  if (exec_failed) {
    fail(K::failed, "cannot start " + node_name(index, port) + ": exec " + redis_server + ": " +
                        errno_text(exec_err));
  }
  write_file_atomic(node_file(index, ".pid"), std::to_string(pid) + "\n");
  return pid;
}

void ClusterManager::wait_ready(const std::vector<std::pair<int, pid_t>>& nodes) const {
  std::vector<std::pair<int, pid_t>> pending = nodes;
  std::vector<std::string> problems;
  const auto deadline = std::chrono::steady_clock::now() + startup_deadline;
  while (!pending.empty()) {
    for (auto it = pending.begin(); it != pending.end();) {
      auto [index, pid] = *it;
      if (answers_ping(port_of(index))) {
        it = pending.erase(it);
      } else if (!alive(pid)) {
        remove_file(node_file(index, ".pid"));
        problems.push_back(node_name(index, port_of(index)) + " (pid " + std::to_string(pid) +
                           ") exited during startup\n" + log_tail(node_file(index, ".log"), 8));
        it = pending.erase(it);
      } else {
        ++it;
      }
    }
    if (pending.empty() || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(20ms);
  }
  for (auto [index, pid] : pending) {
    problems.push_back(node_name(index, port_of(index)) + " (pid " + std::to_string(pid) +
                       ") did not answer PING within 5 s; it is left running\n" +
                       log_tail(node_file(index, ".log"), 8));
  }
  if (!problems.empty()) {
    std::string msg;
    for (auto& p : problems) msg += (msg.empty() ? "" : "\n") + p;
    fail(ClusterError::Kind::failed, msg);
  }
}

std::vector<NodeReport> ClusterManager::up() {
  using K = ClusterError::Kind;
  const std::string redis_server = find_redis_server();
  DirLock lock(settings_.dir);
  const std::string down_hint = "; run `redlock-cli cluster down` first to change the settings";

  std::vector<NodeReport> reports;
  std::vector<std::pair<int, pid_t>> running;
  std::vector<int> to_start;
  for (int i = 1; i <= settings_.count; ++i) {
    Proc p = inspect(i);
    if (!p.ours) {
      to_start.push_back(i);
      continue;
    }
    if (p.port != port_of(i)) {
      fail(K::refused, node_name(i, p.port) + " is running on port " + std::to_string(p.port) +
                           ", not " + std::to_string(port_of(i)) + down_hint);
    }
    if (auto pers = read_node_conf(node_file(i, ".conf")).persistence; pers && *pers != settings_.persistence) {
      fail(K::refused, node_name(i, p.port) + " is running with persistence " + to_string(*pers) +
                           ", not " + to_string(settings_.persistence) + down_hint);
    }
    bool paused = p.state == 'T';
    reports.push_back({i, p.port, *p.pid,
                       paused ? NodeReport::Outcome::paused_left : NodeReport::Outcome::already_running});
    if (!paused) running.emplace_back(i, *p.pid);
  }
  for (int j : pid_file_indices(settings_.dir)) {
    if (j <= settings_.count) continue;
    if (Proc p = inspect(j); p.ours) {
      fail(K::refused, node_name(j, p.port) + " is running but the node count is " +
                           std::to_string(settings_.count) + down_hint);
    }
  }
  // Check every port before starting anything, so a conflict leaves the machine as it was.
  for (int i : to_start) {
    if (auto why = port_busy(port_of(i)); !why.empty()) {
      std::string who = answers_ping(port_of(i)) ? "another Redis server" : "another process";
      fail(K::refused, "port " + std::to_string(port_of(i)) + " (node " + std::to_string(i) +
                           ") is already in use by " + who + " (not a node started from " +
                           settings_.dir.string() + "): " + why);
    }
  }
  save_settings();
  std::vector<std::pair<int, pid_t>> started;
  for (int i : to_start) {
    remove_file(node_file(i, ".pid"));  // stale: its process is gone or is not ours
    pid_t pid = spawn(i, redis_server);
    started.emplace_back(i, pid);
    reports.push_back({i, port_of(i), pid, NodeReport::Outcome::started});
  }
  std::sort(reports.begin(), reports.end(), [](auto& a, auto& b) { return a.index < b.index; });
  running.insert(running.end(), started.begin(), started.end());
  wait_ready(running);
  return reports;
}

std::vector<NodeReport> ClusterManager::down() {
  if (!fs::is_directory(settings_.dir)) return {};  // nothing was ever started from it
  DirLock lock(settings_.dir);
  std::vector<NodeReport> reports;
  struct Victim {
    std::size_t report;
    pid_t pid;
    int port;
    fs::path conf;
  };
  std::vector<Victim> victims;
  for (int i : pid_file_indices(settings_.dir)) {
    Proc p = inspect(i);
    if (!p.ours) {
      remove_file(node_file(i, ".pid"));
      // A pid file whose process simply exited is not worth a line; one naming a live process
      // that is something else is.
      if (p.pid && *p.pid > 1 && alive(*p.pid)) {
        reports.push_back({i, p.port, *p.pid, NodeReport::Outcome::stale_removed});
      }
      continue;
    }
    // SIGTERM first: a stopped process keeps it pending and acts on it once continued.
    ::kill(*p.pid, SIGTERM);
    if (p.state == 'T') ::kill(*p.pid, SIGCONT);
    victims.push_back({reports.size(), *p.pid, p.port, node_file(i, ".conf")});
    reports.push_back({i, p.port, *p.pid, NodeReport::Outcome::stopped});
  }
  auto all_gone = [&] {
    return std::none_of(victims.begin(), victims.end(), [](const Victim& v) { return alive(v.pid); });
  };
  if (!wait_for(all_gone, term_grace)) {
    for (auto& v : victims) {
      // Re-check: in the grace period the pid may have exited and been reused.
      if (is_our_redis(v.pid, v.port, v.conf)) {
        ::kill(v.pid, SIGKILL);
        reports[v.report].outcome = NodeReport::Outcome::killed;
      }
    }
    if (!wait_for(all_gone, 2s)) {
      std::string msg;
      for (auto& v : victims) {
        if (alive(v.pid)) msg += (msg.empty() ? "" : "; ") + std::string("pid ") + std::to_string(v.pid);
      }
      fail(ClusterError::Kind::failed, "still alive after SIGKILL: " + msg);
    }
  }
  for (auto& r : reports) remove_file(node_file(r.index, ".pid"));
  return reports;
}

NodeStatus ClusterManager::node_status(int index) const {
  check_index(index);
  Proc p = inspect(index);
  NodeStatus s;
  s.index = index;
  s.port = p.ours ? p.port : port_of(index);
  if (p.ours) {
    s.pid = *p.pid;
    s.state = p.state == 'T' ? NodeState::paused : NodeState::up;
  }
  // A paused node accepts the TCP connection and then never answers: do not even try.
  if (s.state == NodeState::up) {
    RedisSync c(s.port, query_timeout);
    if (auto info = c.command({"INFO", "server"}); info && info->type == REDIS_REPLY_STRING) {
      std::string text(info->str, info->len);
      const std::string key = "uptime_in_seconds:";
      if (auto pos = text.find(key); pos != std::string::npos) {
        auto end = text.find_first_of("\r\n", pos);
        s.uptime_s = parse_int(text.substr(pos + key.size(), end - pos - key.size()));
      }
    }
    if (auto n = c.command({"DBSIZE"}); n && n->type == REDIS_REPLY_INTEGER) s.keys = n->integer;
    auto aof = config_get(c, "appendonly");
    auto fsync = config_get(c, "appendfsync");
    if (aof && fsync) s.persistence = persistence_label(*aof, *fsync);
  }
  if (s.persistence.empty()) {
    auto pers = read_node_conf(node_file(index, ".conf")).persistence;
    s.persistence = to_string(pers.value_or(settings_.persistence));
  }
  return s;
}

std::vector<NodeStatus> ClusterManager::status() const {
  std::vector<NodeStatus> out;
  for (int i = 1; i <= settings_.count; ++i) out.push_back(node_status(i));
  return out;
}

NodeReport ClusterManager::kill(int index) {
  check_index(index);
  require_dir(index);
  DirLock lock(settings_.dir);
  Proc p = inspect(index);
  if (!p.ours) fail(ClusterError::Kind::refused, node_name(index, p.port) + " is not running");
  ::kill(*p.pid, SIGKILL);
  if (!wait_for([&] { return !alive(*p.pid); }, 2s)) {
    fail(ClusterError::Kind::failed, node_name(index, p.port) + ": pid " + std::to_string(*p.pid) +
                                         " still alive after SIGKILL");
  }
  // The main thread can be a zombie while redis's other threads still hold the listening
  // socket: wait until the port is free, so an immediate `start` does not find it taken.
  (void)wait_for([&] { return port_busy(p.port).empty(); }, 2s);
  remove_file(node_file(index, ".pid"));
  return {index, p.port, *p.pid, NodeReport::Outcome::killed};
}

NodeReport ClusterManager::stop(int index) {
  check_index(index);
  require_dir(index);
  DirLock lock(settings_.dir);
  Proc p = inspect(index);
  if (!p.ours) fail(ClusterError::Kind::refused, node_name(index, p.port) + " is not running");
  if (p.state == 'T') return {index, p.port, *p.pid, NodeReport::Outcome::already_paused};
  ::kill(*p.pid, SIGSTOP);
  // Return only once it is really stopped, so the caller's next step sees a paused node.
  (void)wait_for([&] { return proc_state(*p.pid).value_or('T') == 'T'; }, 1s);
  return {index, p.port, *p.pid, NodeReport::Outcome::paused};
}

NodeReport ClusterManager::cont(int index) {
  check_index(index);
  require_dir(index);
  DirLock lock(settings_.dir);
  Proc p = inspect(index);
  if (!p.ours) fail(ClusterError::Kind::refused, node_name(index, p.port) + " is not running");
  if (p.state != 'T') return {index, p.port, *p.pid, NodeReport::Outcome::not_paused};
  ::kill(*p.pid, SIGCONT);
  (void)wait_for([&] { return proc_state(*p.pid).value_or('S') != 'T'; }, 1s);
  return {index, p.port, *p.pid, NodeReport::Outcome::resumed};
}

NodeReport ClusterManager::start(int index, std::chrono::milliseconds delay) {
  check_index(index);
  const std::string redis_server = find_redis_server();
  {
    DirLock lock(settings_.dir);
    check_can_start(index);
  }
  // Not under the lock: other nodes may be killed or paused while this one waits.
  if (delay.count() > 0) std::this_thread::sleep_for(delay);
  DirLock lock(settings_.dir);
  check_can_start(index);
  if (!fs::exists(settings_.dir / settings_file)) save_settings();
  remove_file(node_file(index, ".pid"));
  pid_t pid = spawn(index, redis_server);
  wait_ready({{index, pid}});
  return {index, port_of(index), pid, NodeReport::Outcome::started};
}

void ClusterManager::require_dir(int index) const {
  if (!fs::is_directory(settings_.dir)) {
    fail(ClusterError::Kind::refused, node_name(index, port_of(index)) + " is not running (no cluster in " +
                                          settings_.dir.string() + ")");
  }
}

void ClusterManager::check_can_start(int index) const {
  using K = ClusterError::Kind;
  check_index(index);
  Proc p = inspect(index);
  if (p.ours) {
    fail(K::refused, node_name(index, p.port) + " is already running (pid " + std::to_string(*p.pid) +
                         (p.state == 'T' ? ", paused" : "") + ")");
  }
  if (auto why = port_busy(port_of(index)); !why.empty()) {
    fail(K::refused, "port " + std::to_string(port_of(index)) + " (node " + std::to_string(index) +
                         ") is already in use by another process: " + why);
  }
}

// ---- the `cluster` subcommand -----------------------------------------------------------------

namespace {

struct ClusterFlags {
  std::string count, base_port, dir, persistence, delay, node;
};

int int_flag(const char* flag, const std::string& text, int lo, int hi) {
  auto v = parse_int(text);
  if (!v) throw UsageError(std::string(flag) + " " + text + ": not a number");
  if (*v < lo || *v > hi) {
    throw UsageError(std::string(flag) + " " + text + ": must be between " + std::to_string(lo) +
                     " and " + std::to_string(hi));
  }
  return static_cast<int>(*v);
}

// Saved settings of the last `up` in the directory, overridden by the flags actually given.
ClusterSettings resolve(const ClusterFlags& f) {
  std::optional<int> count, base;
  std::optional<Persistence> pers;
  if (!f.count.empty()) count = int_flag("--count", f.count, 1, max_count);
  if (!f.base_port.empty()) base = int_flag("--base-port", f.base_port, min_port, max_port);
  if (!f.persistence.empty()) {
    if (f.persistence == "none") pers = Persistence::none;
    else if (f.persistence == "aof") pers = Persistence::aof;
    else throw UsageError("--persistence " + f.persistence + ": expected none or aof");
  }
  fs::path dir = f.dir.empty() ? ClusterManager::default_dir() : fs::path(f.dir);
  ClusterSettings s = ClusterManager::load_saved(dir).value_or(ClusterSettings{});
  s.dir = dir;
  if (count) s.count = *count;
  if (base) s.base_port = *base;
  if (pers) s.persistence = *pers;
  return s;
}

int node_arg(const std::string& text) {
  auto v = parse_int(text);
  if (!v || *v > max_port || *v < -max_port) throw UsageError("node number '" + text + "': not a number");
  return static_cast<int>(*v);
}

std::string human_uptime(long long s) {
  if (s < 60) return std::to_string(s) + "s";
  char buf[32];
  if (s < 3600) std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  else if (s < 86400) std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s % 3600 / 60);
  else std::snprintf(buf, sizeof buf, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
  return buf;
}

void print_status(const std::vector<NodeStatus>& nodes, bool json) {
  auto opt = [](const auto& o, const char* none) { return o ? std::to_string(*o) : std::string(none); };
  if (json) {
    std::cout << "{\"nodes\":[";
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const auto& n = nodes[i];
      std::cout << (i ? "," : "") << "{\"index\":" << n.index << ",\"port\":" << n.port
                << ",\"pid\":" << opt(n.pid, "null") << ",\"state\":\"" << to_string(n.state)
                << "\",\"uptime_s\":" << opt(n.uptime_s, "null") << ",\"keys\":" << opt(n.keys, "null")
                << ",\"persistence\":\"" << n.persistence << "\"}";  // a fixed label
    }
    std::cout << "]}\n";
    return;
  }
  std::vector<std::vector<std::string>> rows{{"NODE", "PORT", "PID", "STATE", "UPTIME", "KEYS", "PERSISTENCE"}};
  for (const auto& n : nodes) {
    rows.push_back({std::to_string(n.index), std::to_string(n.port), opt(n.pid, "-"), to_string(n.state),
                    n.uptime_s ? human_uptime(*n.uptime_s) : "-", opt(n.keys, "-"), n.persistence});
  }
  std::vector<std::size_t> width(rows[0].size(), 0);
  for (auto& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  for (auto& r : rows) {
    std::string line;
    for (std::size_t c = 0; c < r.size(); ++c) {
      line += r[c];
      if (c + 1 < r.size()) line += std::string(width[c] - r[c].size() + 2, ' ');
    }
    std::cout << line << '\n';
  }
}

enum class Verb { up, down, status, kill, stop, cont, start };

void run(Verb verb, const std::string& name, const ClusterFlags& flags, Context& ctx) {
  const bool quiet = ctx.globals.quiet;
  auto say = [&](const std::string& line) {
    if (!quiet) std::cout << line << std::endl;
  };
  try {
    std::chrono::milliseconds delay{0};
    if (!flags.delay.empty()) delay = duration_arg("--delay", flags.delay);
    std::optional<int> index;
    if (verb == Verb::kill || verb == Verb::stop || verb == Verb::cont || verb == Verb::start) {
      index = node_arg(flags.node);
    }
    // Only the commands that start nodes create the directory: `down --dir /tmp/typo` must not
    // leave a directory behind, nor `kill` turn a mistyped path into an empty cluster.
    ClusterManager m(resolve(flags), verb == Verb::up || verb == Verb::start);
    switch (verb) {
      case Verb::up:
        for (auto& r : m.up()) say(describe(r));
        break;
      case Verb::down: {
        auto reports = m.down();
        if (reports.empty()) say("nothing running in " + m.settings().dir.string());
        for (auto& r : reports) say(describe(r));
        break;
      }
      case Verb::status:
        print_status(m.status(), ctx.globals.json);
        break;
      case Verb::kill: say(describe(m.kill(*index))); break;
      case Verb::stop: say(describe(m.stop(*index))); break;
      case Verb::cont: say(describe(m.cont(*index))); break;
      case Verb::start:
        // Refuse before announcing a wait that would otherwise end in that refusal.
        m.check_can_start(*index);
        if (delay.count() > 0) {
          say("node " + std::to_string(*index) + ": delayed restart, waiting " + flags.delay +
              " before starting it");
        }
        say(describe(m.start(*index, delay)));
        break;
    }
    ctx.exit_code = exit_ok;
  } catch (const ClusterError& e) {
    if (e.kind() == ClusterError::Kind::usage) throw UsageError("cluster " + name + ": " + e.what());
    std::cerr << "redlock-cli: cluster " << name << ": " << e.what() << '\n';
    ctx.exit_code = e.exit_code();
  } catch (const UsageError& e) {
    throw UsageError("cluster " + name + ": " + e.what());
  }
}

void add_settings_flags(CLI::App* app, ClusterFlags& f) {
  app->add_option("--count", f.count, "Number of nodes, 1..64 (default 5, or what `up` saved)")
      ->type_name("N");
  app->add_option("--base-port", f.base_port,
                  "Port of node 1; node I listens on base-port + I - 1 (default 7001, or what `up` saved)")
      ->type_name("PORT");
  app->add_option("--dir", f.dir,
                  "Directory for configs, pid files, logs and data (default "
                  "$XDG_RUNTIME_DIR/redlock-cluster, else /tmp/redlock-cluster-$UID)")
      ->type_name("DIR");
  app->add_option("--persistence", f.persistence,
                  "none (no RDB, no AOF: a killed node comes back empty) or aof (appendonly yes, "
                  "appendfsync always) (default none, or what `up` saved)")
      ->type_name("none|aof");
}

}  // namespace

void setup_cluster(CLI::App& app, Context& ctx) {
  auto flags = std::make_shared<ClusterFlags>();
  CLI::App* cluster = app.add_subcommand(
      "cluster", "Manage local demonstration Redis masters (real redis-server processes on 127.0.0.1)");
  // At most one; none is reported below. With a minimum of 1 CLI11 would answer `cluster bogus`
  // with "A subcommand is required" instead of naming the word it did not understand.
  cluster->require_subcommand(0, 1);
  cluster->fallthrough();
  cluster->callback([cluster, &ctx] {
    if (!cluster->get_subcommands().empty()) return;
    ctx.action = []() -> int {
      throw UsageError("cluster: a command is required: up, down, status, kill I, stop I, cont I or start I "
                       "(see 'redlock-cli cluster --help')");
    };
  });
  add_settings_flags(cluster, *flags);
  cluster->footer(
      "Settings given to `up` are saved in the directory (cluster.conf); later commands without "
      "flags act on that cluster.\nExit status: 0 done, 1 refused (node not running / already "
      "running, port taken) or a node failed to start, 2 usage or configuration error.");

  struct Spec {
    const char* name;
    Verb verb;
    const char* help;
    bool takes_node;
  };
  const Spec specs[] = {
      {"up", Verb::up, "Start every node that is not running and wait until all answer PING", false},
      {"down", Verb::down, "Stop the nodes started from this directory (SIGTERM, then SIGKILL)", false},
      {"status", Verb::status, "One row per node: port, pid, up/paused/down, uptime, keys, persistence", false},
      {"kill", Verb::kill, "SIGKILL node I (a crash: with persistence none it comes back empty)", true},
      {"stop", Verb::stop, "SIGSTOP node I (paused: connections hang, like a partition or a long GC)", true},
      {"cont", Verb::cont, "SIGCONT node I (resume a paused node)", true},
      {"start", Verb::start, "Restart node I (same port and persistence), after --delay if given", true},
  };
  for (const auto& spec : specs) {
    CLI::App* sub = cluster->add_subcommand(spec.name, spec.help);
    sub->fallthrough();
    add_settings_flags(sub, *flags);
    if (spec.takes_node) sub->add_option("I", flags->node, "Node number, 1..count")->required()->type_name("N");
    if (spec.verb == Verb::start) {
      sub->add_option("--delay", flags->delay,
                      "Sleep this long first (250ms, 10s, 2m, 1h, or integer ms): the delayed "
                      "restart that keeps a restarted node from voting for a lock it forgot")
          ->type_name("DUR");
    }
    std::string name = spec.name;
    Verb verb = spec.verb;
    sub->callback([flags, name, verb, &ctx] {
      ctx.action = [flags, name, verb, &ctx] {
        run(verb, name, *flags, ctx);
        return ctx.exit_code;
      };
    });
  }
}

}  // namespace redlock::cli
