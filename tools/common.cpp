#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>

#include "cli.hpp"
#include "core/timing.hpp"
#include "core/validate.hpp"
#include "output.hpp"

namespace redlock::cli {

Millis duration_arg(const std::string& flag, const std::string& text) {
  std::string err;
  auto d = parse_duration(text, err, BareNumbers::refused);
  if (!d) throw UsageError(flag + ": " + err);
  return *d;
}

[[noreturn]] void refuse(const OptionsProblem& problem, const GivenFlags& given,
                         const std::string& what) {
  const auto it = given.find(problem.field);
  if (it == given.end()) throw UsageError(what + ": " + problem.reason);
  const Given& from = it->second;
  throw UsageError(from.from + ": " +
                   (from.text.empty() ? "" : "'" + printable(from.text) + "': ") + problem.reason);
}

void check_acquisition(const std::vector<std::string>& resources, const AcquireOptions& options,
                       const Options& client_options, const GivenFlags& given) {
  if (auto p = detail::find_acquire_problem(resources, options, client_options))
    refuse(*p, given, "cannot acquire");
}

void check_holding(Millis ttl, const HoldOptions& hold, const GivenFlags& given) {
  if (auto p = detail::find_hold_problem(ttl, hold)) refuse(*p, given, "cannot hold");
}

void check_held_lock(const std::vector<std::string>& resources, const std::string& token,
                     std::optional<Millis> ttl, const Options& client_options,
                     const GivenFlags& given, const std::string& what) {
  auto p = ttl ? detail::find_extend_problem(resources, token, *ttl, client_options)
               : detail::find_token_problem(resources, token, client_options.key_prefix);
  if (p) refuse(*p, given, what);
}

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// The library's log messages as redlock-cli shows them (make_options() installs it as the
// logger). The library calls it on its I/O thread and flush_warnings() runs on the main thread,
// hence the mutex.
class LogSink {
 public:
  void configure(bool verbose, bool quiet, std::size_t nodes) {
    std::lock_guard lock(mutex_);
    verbose_ = verbose;
    quiet_ = quiet;
    nodes_ = nodes;
  }

  void log(LogLevel level, std::string_view msg) {
    std::lock_guard lock(mutex_);
    // The warnings about the nodes' configuration are what an operator must fix (eviction of
    // lock keys, fence counters that a restart loses). The library says them once per node;
    // they are kept and said once per kind by flush().
    if (level >= LogLevel::warning && collect(msg)) return;
    if (!verbose_) return;
    // A node that stays unreachable fails every reconnect (with backoff): say it again only when
    // the reason changes or after the node was connected in between.
    static constexpr std::string_view connect_failed = ": connect failed: ";
    static constexpr std::string_view lost = ": connection lost: ";
    if (auto at = msg.find(connect_failed); at != std::string_view::npos) {
      auto& last = connect_failures_[std::string(msg.substr(0, at))];
      const std::string_view why = msg.substr(at + connect_failed.size());
      if (last == why) return;
      last = why;
    } else if (auto at = msg.find(lost); at != std::string_view::npos) {
      connect_failures_.erase(std::string(msg.substr(0, at)));
    }
    Stderr() << "redlock: " << msg << "\n";
  }

  void flush() {
    std::lock_guard lock(mutex_);
    if (!quiet_) {
      for (const auto& k : kinds_) Stderr() << "redlock: warning: " << summary(k) << "\n";
    }
    kinds_.clear();
  }

 private:
  // "<node><marker><value>: <advice>", said once per node; `value` is why ("appendonly no").
  struct Pattern {
    std::string_view marker;
    std::string_view kind;
  };
  static constexpr Pattern patterns_[] = {
      {": fencing on a node with ", "fencing"},
      {": maxmemory-policy is ", "maxmemory-policy"},
  };
  struct Kept {
    std::string_view kind;
    std::string value;
    std::string advice;
    std::vector<std::string> nodes;
  };

  bool collect(std::string_view msg) {
    for (const auto& p : patterns_) {
      const auto at = msg.find(p.marker);
      if (at == std::string_view::npos) continue;
      std::string_view rest = msg.substr(at + p.marker.size());
      const auto colon = rest.find(": ");
      if (colon == std::string_view::npos) continue;
      std::string value(rest.substr(0, colon));
      std::string advice(rest.substr(colon + 2));
      auto it = std::find_if(kinds_.begin(), kinds_.end(),
                             [&](const Kept& k) { return k.kind == p.kind && k.value == value; });
      if (it == kinds_.end()) it = kinds_.insert(kinds_.end(), {p.kind, value, advice, {}});
      it->nodes.emplace_back(msg.substr(0, at));
      return true;
    }
    return false;
  }

  std::string summary(const Kept& k) const {
    const std::size_t n = k.nodes.size();
    std::string count = (n == nodes_ && n > 1 ? "all " : "") + std::to_string(n) +
                        (n == nodes_ || nodes_ == 0 ? "" : " of " + std::to_string(nodes_)) +
                        (n == 1 ? " node" : " nodes");
    std::string list;
    for (const auto& node : k.nodes) list += (list.empty() ? "" : ", ") + node;
    std::string advice = k.advice;
    if (n > 1) {
      if (auto its = advice.find(" its "); its != std::string::npos)
        advice.replace(its, 5, " their ");
    }
    if (k.kind == "fencing") {
      return "fencing on " + count + " with " + k.value + " (" + list + "): " + advice;
    }
    return std::string(k.kind) + " " + k.value + " on " + count + " (" + list + "): " + advice;
  }

  std::mutex mutex_;
  bool verbose_ = false;
  bool quiet_ = false;
  std::size_t nodes_ = 0;
  std::vector<Kept> kinds_;                              // in the order first seen
  std::map<std::string, std::string> connect_failures_;  // node -> the reason last shown
};

LogSink& log_sink() {
  static LogSink sink;
  return sink;
}

}  // namespace

bool tls_wanted(const Globals& g) {
  if (g.tls) return true;
  const char* v = env("REDLOCK_TLS");
  if (v == nullptr) return false;
  const std::string_view t = v;
  if (t == "1" || t == "true" || t == "yes") return true;
  if (t == "0" || t == "false" || t == "no") return false;
  throw UsageError("REDLOCK_TLS: '" + std::string(t) +
                   "': expected 1, true or yes, or 0, false or no");
}

TlsOptions make_tls_options(const Globals& g) {
  TlsOptions t;
  t.enabled = tls_wanted(g);
  auto pick = [](const std::string& flag, const char* variable) {
    if (!flag.empty()) return flag;
    const char* v = env(variable);
    return v != nullptr ? std::string(v) : std::string();
  };
  t.ca_file = pick(g.cacert, "REDLOCK_CACERT");
  t.ca_dir = pick(g.cacertdir, "REDLOCK_CACERTDIR");
  t.cert_file = pick(g.cert, "REDLOCK_CERT");
  t.key_file = pick(g.key, "REDLOCK_KEY");
  t.server_name = pick(g.sni, "REDLOCK_SNI");
  if (g.insecure) {
    t.insecure_skip_verify = true;
  } else if (const char* v = env("REDLOCK_INSECURE")) {
    const std::string_view s = v;
    if (s != "0" && s != "1" && s != "true" && s != "false" && s != "yes" && s != "no")
      throw UsageError("REDLOCK_INSECURE: '" + std::string(s) +
                       "': expected 1, true or yes, or 0, false or no");
    t.insecure_skip_verify = s == "1" || s == "true" || s == "yes";
  }
  // Caught here rather than by the library, whose message would name the node: the pair is one
  // setting of the whole command line.
  if (t.cert_file.empty() != t.key_file.empty()) {
    throw UsageError(t.cert_file.empty() ? "--key needs --cert (the client certificate)"
                                         : "--cert needs --key (the certificate's private key)");
  }
  return t;
}

bool default_nodes_used(const Globals& g) { return g.nodes.empty() && !env("REDLOCK_NODES"); }

namespace {

// Overwrites a password copy of ours before its memory is freed.
void wipe(std::string& s) noexcept {
  explicit_bzero(s.data(), s.size());
  s.clear();
}

// The file's one line, without its line end. Its contents never appear in a message.
std::string read_password_file(const std::string& what, const std::string& path) {
  constexpr std::size_t limit = 64 * 1024;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UsageError(what + " " + path + ": " + std::strerror(errno));
  std::string text(limit + 1, '\0');
  std::size_t got = 0;
  ssize_t n = 0;
  while (got < text.size() && (n = ::read(fd, text.data() + got, text.size() - got)) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      wipe(text);
      throw UsageError(what + " " + path + ": " + std::strerror(err));
    }
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  std::string password(text.data(), got);
  wipe(text);
  if (got > limit) {
    wipe(password);
    throw UsageError(what + " " + path + ": longer than 64 KiB (a password file holds one line)");
  }
  if (password.ends_with('\n')) password.pop_back();
  if (password.ends_with('\r')) password.pop_back();
  const bool several_lines = password.find('\n') != std::string::npos;
  const bool empty = password.empty();
  if (several_lines || empty) {
    wipe(password);
    throw UsageError(what + " " + path + (empty ? ": empty" : ": more than one line"));
  }
  return password;
}

// The password for nodes without one: --password-file, else REDLOCK_PASSWORD_FILE or
// REDLOCK_PASSWORD (both set is a usage error: which one was meant?). nullopt: none given.
std::optional<std::string> shared_password(const Globals& g) {
  if (!g.password_file.empty()) return read_password_file("--password-file", g.password_file);
  const char* file = env("REDLOCK_PASSWORD_FILE");
  const char* password = env("REDLOCK_PASSWORD");
  if (file != nullptr && password != nullptr) {
    throw UsageError("REDLOCK_PASSWORD and REDLOCK_PASSWORD_FILE are both set: unset one of them");
  }
  if (file != nullptr) return read_password_file("REDLOCK_PASSWORD_FILE:", file);
  if (password != nullptr) return std::string(password);
  return std::nullopt;
}

// Gives every node without a password of its own the shared one; a node that names a user and
// still has no password is a usage error (nothing would authenticate it).
void fill_in_passwords(std::vector<NodeAddress>& nodes, const Globals& g) {
  struct Wiped {  // however this ends
    std::optional<std::string> password;
    ~Wiped() {
      if (password) wipe(*password);
    }
  } shared{shared_password(g)};
  for (auto& n : nodes) {
    if (n.password.empty() && shared.password) n.password = *shared.password;
    if (!n.user.empty() && n.password.empty()) {
      throw UsageError("node " + n.to_string() + " names the user '" + n.user +
                       "' but no password: give it with --password-file FILE, "
                       "REDLOCK_PASSWORD_FILE or REDLOCK_PASSWORD");
    }
  }
}

// A list of one or two nodes is legal but has no fault tolerance; say so once per process (a
// command may make several clients), unless -q.
void warn_small_quorum(std::size_t nodes, bool quiet) {
  static std::atomic<bool> said{false};
  if (nodes > 2 || quiet || said.exchange(true)) return;
  Stderr() << "redlock-cli: warning: "
           << (nodes == 1
                   ? "1 node: a quorum of 1 of 1, so a lock is as safe as that one server and "
                     "none can be taken while it is down"
                   : "2 nodes: a quorum of 2 of 2, so either node down stops every lock (no "
                     "more tolerance of a failure than 1 node)")
           << "; Redlock wants 3 or 5 independent masters\n";
}

// The one line an operator must not miss, said once however many clients a command makes.
void warn_insecure(const Options& o, bool quiet) {
  static std::atomic<bool> said{false};
  bool any = o.tls.insecure_skip_verify;
  for (const auto& n : o.nodes) any = any || (n.tls && n.tls_override.insecure);
  if (!any || quiet || said.exchange(true)) return;
  Stderr() << "redlock-cli: warning: TLS certificates are not verified (--insecure): anyone on "
              "the path can impersonate the nodes\n";
}
}  // namespace

Options make_options(const Globals& g) {
  Options o;
  o.tls = make_tls_options(g);
  if (g.nodes_given && g.nodes.empty()) throw UsageError("--nodes: empty node list");
  // An empty variable is the same mistake as `-n ""` (a script's unset variable): refused, not
  // replaced by the local demo nodes.
  const char* env_nodes = std::getenv("REDLOCK_NODES");
  if (g.nodes.empty() && env_nodes != nullptr && *env_nodes == '\0')
    throw UsageError("REDLOCK_NODES: empty node list (unset it to use the local nodes)");
  std::string list = !g.nodes.empty()       ? g.nodes
                     : env("REDLOCK_NODES") ? std::string(env("REDLOCK_NODES"))
                                            : std::string(default_nodes);
  std::string err;
  auto nodes = parse_node_list(list, err);
  if (!nodes) throw UsageError(err);
  o.nodes = std::move(*nodes);
  fill_in_passwords(o.nodes, g);
  o.key_prefix = g.key_prefix;
  o.wake_ups = !g.no_wake_ups;
  {
    const char* from = !g.commands.empty() ? "--commands" : "REDLOCK_COMMANDS";
    const std::string form = !g.commands.empty()       ? g.commands
                             : env("REDLOCK_COMMANDS") ? std::string(env("REDLOCK_COMMANDS"))
                                                       : std::string("auto");
    if (form == "auto") {
      o.commands = Options::Commands::automatic;
    } else if (form == "scripts") {
      o.commands = Options::Commands::scripts;
    } else if (form == "native") {
      o.commands = Options::Commands::native;
    } else {
      throw UsageError(std::string(from) + ": '" + printable(form) +
                       "' is not one of auto, scripts, native");
    }
  }
  // Each setting is parsed here and checked once, by the library's own check (the one the Engine
  // makes), whose complaint is reported under the flag or variable the value came from, with the
  // text as given.
  GivenFlags given;
  const auto duration = [&](const char* field, const char* flag, const std::string& text,
                            const char* variable = nullptr) -> std::optional<Millis> {
    if (!text.empty()) {
      given[field] = {flag, text};
      return duration_arg(flag, text);
    }
    if (const char* v = variable ? env(variable) : nullptr) {
      given[field] = {variable, v};
      return duration_arg(variable, v);
    }
    return std::nullopt;
  };
  given["nodes"] = {g.nodes.empty() && env("REDLOCK_NODES") ? "REDLOCK_NODES" : "--nodes", ""};
  if (auto d = duration("node_timeout", "--node-timeout", g.node_timeout)) o.node_timeout = *d;
  if (auto d = duration("connect_timeout", "--connect-timeout", g.connect_timeout))
    o.connect_timeout = *d;
  if (g.drift_factor) {
    given["drift_factor"] = {"--drift-factor", ""};
    o.drift_factor = *g.drift_factor;
  }
  if (g.retry_count) {
    given["retry_count"] = {"--retry-count", ""};
    o.retry_count = *g.retry_count;
  }
  if (auto d = duration("retry_delay", "--retry-delay", g.retry_delay)) {
    o.retry_delay = *d;
    o.retry_jitter = std::min(o.retry_jitter, o.retry_delay / 2);
  }
  if (auto d = duration("min_node_uptime", "--min-uptime", g.min_uptime, "REDLOCK_MIN_UPTIME"))
    o.min_node_uptime = *d;
  o.max_ttl = duration("max_ttl", "--max-ttl", g.max_ttl, "REDLOCK_MAX_TTL");
  if (g.min_replicas) {
    given["min_replicas"] = {"--min-replicas", ""};
    o.min_replicas = *g.min_replicas;
  }
  o.replica_timeout = duration("replica_timeout", "--replica-timeout", g.replica_timeout);
  if (auto p = find_options_problem(o)) refuse(*p, given, p->field);
  warn_insecure(o, g.quiet);
  warn_small_quorum(o.nodes.size(), g.quiet);
  log_sink().configure(g.verbose, g.quiet, o.nodes.size());
  o.logger = [](LogLevel level, std::string_view msg) { log_sink().log(level, msg); };
  return o;
}

void flush_warnings() { log_sink().flush(); }

AcquireRetry::AcquireRetry(const Options& client, AcquireOptions& acquire, std::stop_token stop,
                           bool verbose)
    : own_loop_(!acquire.wait && !acquire.fair),
      left_(acquire.retry_count.value_or(client.retry_count)),
      delay_(client.retry_delay),
      jitter_(client.retry_jitter),
      stop_(std::move(stop)),
      verbose_(verbose) {
  if (own_loop_) acquire.retry_count = 0;
}

bool AcquireRetry::again(AcquireResult& res) {
  attempts_ += res.attempts;
  res.attempts = attempts_;
  if (!own_loop_ || res || res.error != Errc::no_quorum || left_ <= 0) return false;
  --left_;
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<long long> dist(-jitter_.count(), jitter_.count());
  const Millis sleep{std::max<long long>(0, delay_.count() + dist(rng))};
  if (verbose_) {
    Stderr() << "redlock-cli: attempt " << attempts_ << ": " << res.message << "; trying again in "
             << sleep.count() << " ms\n";
  }
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  return !cv.wait_for(lock, stop_, sleep, [] { return false; }) && !stop_.stop_requested();
}

namespace {
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, s);
  return set;
}
}  // namespace

StopOnSignal::StopOnSignal() {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal_fd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (signal_fd_ < 0 || wake_fd_ < 0) {
    const int err = errno;
    if (signal_fd_ >= 0) close(signal_fd_);
    if (wake_fd_ >= 0) close(wake_fd_);
    throw std::runtime_error(std::string("signalfd/eventfd: ") + std::strerror(err));
  }
  watcher_ = std::thread([this] { watch(); });
}

StopOnSignal::~StopOnSignal() {
  disarm();
  close(signal_fd_);
  close(wake_fd_);
}

void StopOnSignal::disarm() {
  if (!watcher_.joinable()) return;
  const std::uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
  watcher_.join();
}

void StopOnSignal::watch() {
  while (true) {
    pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents & POLLIN) return;
    signalfd_siginfo si;
    if (read(signal_fd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si) && signal_ == 0) {
      signal_ = static_cast<int>(si.ssi_signo);
      source_.request_stop();  // the engine cancels the acquisition on its own thread
    }
  }
}

std::string StopOnSignal::describe() const {
  const int s = signal_.load();
  const char* abbrev = sigabbrev_np(s);
  return std::string("interrupted by ") +
         (abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(s));
}

LockMode lock_mode(bool read, bool write) {
  if (read && write) throw UsageError("--read and --write exclude each other");
  return read ? LockMode::read : write ? LockMode::write : LockMode::exclusive;
}

}  // namespace redlock::cli
