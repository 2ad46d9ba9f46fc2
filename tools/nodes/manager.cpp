// The node manager's processes: real redis-server processes on 127.0.0.1 for demonstrations and
// tests, started, checked, signalled and stopped by the pid files of the cluster directory. See
// manager.hpp for the files kept there and the safety rules; manager_settings.cpp has the
// settings and the directory, manager_status.cpp what the manager reports.

#include "manager.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <set>
#include <thread>

#include "client.hpp"
#include "cluster_dir.hpp"
#include "launcher.hpp"
#include "manager_internal.hpp"
#include "process.hpp"
#include "redis_cluster.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace redlock::nodes {

using namespace dir;
using namespace internal;

namespace {

// Generous: on a loaded machine (a busy disk under appendfsync always, a TLS handshake behind other
// work) a node can take seconds to answer its first PING, and a start reported failed while the
// node comes up anyway leaves the caller retrying against its own node.
constexpr auto startup_deadline = 20s;
constexpr auto sentinel_agree_deadline = 20s;
constexpr auto term_grace = 3s;
constexpr auto ping_timeout = 1s;

// The redis-server to start: $REDLOCK_REDIS_SERVER when set (the path of another server binary,
// e.g. /usr/bin/valkey-server), else redis-server on PATH; or ClusterError{usage}.
std::string redis_server_path() {
  constexpr const char* variable = "REDLOCK_REDIS_SERVER";
  if (auto exe = find_redis_server({.override_variable = variable, .extra_dirs = {}})) return *exe;
  if (const char* v = std::getenv(variable); v != nullptr && *v != '\0') {
    fail(ClusterError::Kind::usage, std::string(variable) + "=" + v +
                                        ": not an executable file (give its path, e.g. "
                                        "/usr/bin/valkey-server)");
  }
  fail(ClusterError::Kind::usage,
       "redis-server not found on PATH; install the Debian package `redis-server` "
       "(apt-get install redis-server) or put redis-server on PATH");
}

template <class Pred>
bool wait_for(Pred pred, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
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
  if (p.pid && is_redis_on(*p.pid, p.port, conf)) {
    p.ours = true;
    p.state = proc_state(*p.pid).value_or('?');
  }
  return p;
}

std::string ClusterManager::listen_conf(int port) const {
  if (!settings_.tls) return "port " + std::to_string(port) + "\n";
  // TLS only (see ClusterSettings::tls). "port 0" comes first: read_node_conf() takes the
  // tls-port as the node's port then.
  const fs::path d = settings_.dir / tls_dir;
  return "port 0\ntls-port " + std::to_string(port) + "\ntls-cert-file " +
         conf_quote((d / "server.crt").string()) + "\ntls-key-file " +
         conf_quote((d / "server.key").string()) + "\ntls-ca-cert-file " +
         conf_quote((d / "ca.crt").string()) + "\ntls-auth-clients optional\n";
}

bool ClusterManager::live(int index) const {
  const Proc p = inspect(index);
  return p.ours && p.state != 'T';
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

  std::string text =
      "# written by redlock-cli cluster at every start of node " + std::to_string(index) + "\n";
  text += listen_conf(port);
  text +=
      "bind 127.0.0.1\nprotected-mode no\ndaemonize no\n"
      "dir " +
      conf_quote(data.string()) + "\nlogfile " + conf_quote(log.string()) + "\nsave \"\"\n";
  // RDB snapshots stay off in both modes: with aof, the log alone is the durable state.
  text += settings_.persistence == Persistence::aof ? "appendonly yes\nappendfsync always\n"
                                                    : "appendonly no\n";
  const bool sentinel = is_sentinel(index);
  if (sentinel) {
    // Sentinel keeps its state (masters, replicas, other sentinels, epochs) in its config file:
    // one that exists is used as it is.
    if (!fs::exists(conf, ec)) write_file_atomic(conf, sentinel_conf(index));
  } else {
    if (settings_.topology == Topology::sentinel) text += data_node_conf(index);
    if (settings_.topology == Topology::cluster) {
      text += cluster_node_conf() + "cluster-port " + std::to_string(choose_bus_port(index)) + "\n";
    }
    write_file_atomic(conf, text);
  }
  std::error_code size_ec;
  const auto log_size = fs::file_size(log, size_ec);
  log_start_[index] = size_ec ? 0 : log_size;

  std::vector<std::string> args{conf.string()};
  if (sentinel) args.emplace_back("--sentinel");
  pid_t pid = 0;
  try {
    pid = launch({.exe = redis_server,
                  .args = std::move(args),
                  .output = log,
                  .output_mode = 0644,
                  .lifetime = Launch::Lifetime::detached});
  } catch (const LaunchError& e) {
    if (e.stage() == LaunchError::Stage::output) fail(K::usage, e.what());
    fail(K::failed, "cannot start " + node_name(index, port) + ": " + e.what());
  }
  write_file_atomic(node_file(index, ".pid"), std::to_string(pid) + "\n");
  return pid;
}

void ClusterManager::wait_ready(std::vector<std::pair<int, pid_t>>& nodes,
                                const std::string& redis_server) {
  std::vector<std::pair<int, pid_t>> pending = nodes;
  std::vector<std::string> problems;
  std::map<int, int> restarts;  // node -> starts again after a port was taken
  constexpr int max_restarts = 5;
  const auto deadline = std::chrono::steady_clock::now() + startup_deadline;
  while (!pending.empty()) {
    for (auto it = pending.begin(); it != pending.end();) {
      auto [index, pid] = *it;
      if (answers_ping(endpoint(index), ping_timeout)) {
        it = pending.erase(it);
      } else if (!alive(pid) && restarts[index] < max_restarts &&
                 port_taken_at_start(log_since_start(index)).has_value()) {
        // Taken between our check and its bind. Its own port is its address, so it gets it
        // again a moment later; a cluster bus port is replaced (choose_bus_port no longer
        // offers the taken one).
        const int taken = *port_taken_at_start(log_since_start(index));
        if (taken == port_of(index)) std::this_thread::sleep_for(100ms);
        ++restarts[index];
        remove_file(node_file(index, ".pid"));
        const pid_t again = spawn(index, redis_server);
        it->second = again;
        for (auto& n : nodes) {
          if (n.first == index) n.second = again;
        }
        ++it;
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
                       ") did not answer PING within " + std::to_string(startup_deadline.count()) +
                       " s; it is left running\n" + log_tail(node_file(index, ".log"), 8));
  }
  if (!problems.empty()) {
    std::string msg;
    for (auto& p : problems) msg += (msg.empty() ? "" : "\n") + p;
    fail(ClusterError::Kind::failed, msg);
  }
}

std::string ClusterManager::log_since_start(int index) const {
  const auto text = read_text(node_file(index, ".log")).value_or("");
  const auto it = log_start_.find(index);
  const std::size_t from = it == log_start_.end() ? 0 : static_cast<std::size_t>(it->second);
  return from <= text.size() ? text.substr(from) : text;
}

int ClusterManager::bus_port_of(int index) const {
  return read_node_conf(node_file(index, ".conf"))
      .bus_port.value_or(port_of(index) + settings_.bus_port_offset);
}

int ClusterManager::choose_bus_port(int index) const {
  std::set<int> others;  // the nodes' own ports, and the bus ports the other nodes have or prefer
  for (int j = 1; j <= process_count(); ++j) {
    others.insert(port_of(j));
    if (j != index) {
      others.insert(bus_port_of(j));
      others.insert(port_of(j) + settings_.bus_port_offset);
    }
  }
  auto usable = [&](int p) {
    return p >= min_port && p <= max_port && others.count(p) == 0 && port_busy(p).empty();
  };
  const int preferred = port_of(index) + settings_.bus_port_offset;
  if (usable(preferred)) return preferred;
  if (const int last = bus_port_of(index); usable(last)) return last;
  const int above = settings_.base_port + process_count() - 1 + settings_.bus_port_offset;
  for (int p = above + 1; p <= max_port; ++p) {
    if (usable(p)) return p;
  }
  fail(ClusterError::Kind::refused, "the cluster bus of " + node_name(index, port_of(index)) +
                                        ": port " + std::to_string(preferred) +
                                        " is taken and no port above it is free");
}

std::vector<NodeReport> ClusterManager::up() {
  using K = ClusterError::Kind;
  const std::string redis_server = redis_server_path();
  DirLock lock(settings_.dir);
  const std::string down_hint = "; run `redlock-cli cluster down` first to change the settings";

  std::vector<NodeReport> reports;
  std::vector<std::pair<int, pid_t>> running;
  std::vector<int> to_start;
  const auto saved = load_saved(settings_.dir);
  for (int i = 1; i <= process_count(); ++i) {
    Proc p = inspect(i);
    if (!p.ours) {
      to_start.push_back(i);
      continue;
    }
    if (p.port != port_of(i)) {
      fail(K::refused, node_name(i, p.port) + " is running on port " + std::to_string(p.port) +
                           ", not " + std::to_string(port_of(i)) + down_hint);
    }
    const NodeConf conf = read_node_conf(node_file(i, ".conf"));
    if (conf.persistence && *conf.persistence != settings_.persistence) {
      fail(K::refused, node_name(i, p.port) + " is running with persistence " +
                           to_string(*conf.persistence) + ", not " +
                           to_string(settings_.persistence) + down_hint);
    }
    if (conf.tls != settings_.tls) {
      fail(K::refused, node_name(i, p.port) + " is running " +
                           (conf.tls ? "with TLS, and --tls was not given"
                                     : "without TLS, and --tls was given") +
                           down_hint);
    }
    if (saved && saved->topology != settings_.topology) {
      fail(K::refused, node_name(i, p.port) + " is running in the " + to_string(saved->topology) +
                           " topology, not " + to_string(settings_.topology) + down_hint);
    }
    if (saved && settings_.topology == Topology::cluster && saved->replicas != settings_.replicas) {
      fail(K::refused, node_name(i, p.port) + " is running in clusters with " +
                           std::to_string(saved->replicas) + " replicas per master, not " +
                           std::to_string(settings_.replicas) + down_hint);
    }
    if (saved && settings_.topology == Topology::cluster &&
        saved->bus_port_offset != settings_.bus_port_offset) {
      fail(K::refused, node_name(i, p.port) + " is running with bus port offset " +
                           std::to_string(saved->bus_port_offset) + ", not " +
                           std::to_string(settings_.bus_port_offset) + down_hint);
    }
    bool paused = p.state == 'T';
    reports.push_back(
        {i, p.port, *p.pid,
         paused ? NodeReport::Outcome::paused_left : NodeReport::Outcome::already_running});
    if (!paused) running.emplace_back(i, *p.pid);
  }
  for (int j : pid_file_indices(settings_.dir)) {
    if (j <= process_count()) continue;
    if (Proc p = inspect(j); p.ours) {
      fail(K::refused, node_name(j, p.port) + " is running but the node count is " +
                           std::to_string(settings_.count) +
                           (settings_.topology == Topology::sentinel
                                ? " (" + std::to_string(process_count()) + " processes)"
                                : std::string()) +
                           down_hint);
    }
  }
  // Check every port before starting anything, so a conflict leaves the machine as it was.
  for (int i : to_start) {
    if (auto [what, why] = ports_busy(i); !why.empty()) {
      std::string who =
          answers_ping(Endpoint::local(static_cast<std::uint16_t>(port_of(i))), ping_timeout)
              ? "another Redis server"
              : "another process";
      fail(K::refused, what + " is already in use by " + who + " (not a node started from " +
                           settings_.dir.string() + "): " + why);
    }
  }
  const bool fresh = running.empty() && reports.empty();
  ensure_certificates(fresh);
  if (fresh && settings_.topology == Topology::cluster) prepare_fresh_clusters(saved);
  save_settings();
  if (fresh) {
    // From nothing, the data nodes start with their first roles: the sentinels' configs of an
    // earlier run (which may name other masters) are made again too.
    for (int i = 1; i <= process_count(); ++i) {
      if (is_sentinel(i)) remove_file(node_file(i, ".conf"));
    }
  }
  std::vector<std::pair<int, pid_t>> started;
  auto start = [&](bool sentinels) {
    for (int i : to_start) {
      if (is_sentinel(i) != sentinels) continue;
      remove_file(node_file(i, ".pid"));  // stale: its process is gone or is not ours
      pid_t pid = spawn(i, redis_server);
      started.emplace_back(i, pid);
      reports.push_back({i, port_of(i), pid, NodeReport::Outcome::started});
    }
  };
  start(/*sentinels=*/false);
  if (std::any_of(to_start.begin(), to_start.end(), [&](int i) { return is_sentinel(i); })) {
    // A sentinel learns the replicas from the master's INFO, which it reads when it connects
    // and then only every 10 s: the replicas must be attached before the sentinels start.
    std::vector<std::pair<int, pid_t>> data = running;
    data.insert(data.end(), started.begin(), started.end());
    wait_ready(data, redis_server);
    for (auto& s : started) {
      for (auto& d : data) {
        if (d.first == s.first) s.second = d.second;
      }
    }
  }
  start(/*sentinels=*/true);
  running.insert(running.end(), started.begin(), started.end());
  wait_ready(running, redis_server);
  // A node started again (a port taken at its start) has another pid.
  for (auto& r : reports) {
    for (auto& n : running) {
      if (n.first == r.index) r.pid = n.second;
    }
  }
  std::sort(reports.begin(), reports.end(), [](auto& a, auto& b) { return a.index < b.index; });
  if (settings_.topology == Topology::sentinel) {
    // Every sentinel must know every replica (learnt from the master's INFO) before a failover
    // can promote it, and the other sentinels (for the quorum of an automatic failover).
    wait_sentinels_agree(sentinel_agree_deadline);
  }
  if (settings_.topology == Topology::cluster) form_clusters();
  if (settings_.topology != Topology::standalone) {
    for (auto& r : reports) r.role = role_label(r.index);
  }
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
    return std::none_of(victims.begin(), victims.end(),
                        [](const Victim& v) { return alive(v.pid); });
  };
  if (!wait_for(all_gone, term_grace)) {
    for (auto& v : victims) {
      // Re-check: in the grace period the pid may have exited and been reused.
      if (is_redis_on(v.pid, v.port, v.conf)) {
        ::kill(v.pid, SIGKILL);
        reports[v.report].outcome = NodeReport::Outcome::killed;
      }
    }
    if (!wait_for(all_gone, 2s)) {
      std::string msg;
      for (auto& v : victims) {
        if (alive(v.pid))
          msg += (msg.empty() ? "" : "; ") + std::string("pid ") + std::to_string(v.pid);
      }
      fail(ClusterError::Kind::failed, "still alive after SIGKILL: " + msg);
    }
  }
  for (auto& r : reports) remove_file(node_file(r.index, ".pid"));
  return reports;
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
  // socket: wait until the port (and a cluster node's bus port) is free, so an immediate `start`
  // does not find it taken.
  (void)wait_for([&] { return port_busy(p.port).empty(); }, 2s);
  if (settings_.topology == Topology::cluster) {
    (void)wait_for([&] { return port_busy(bus_port_of(index)).empty(); }, 2s);
  }
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
  const std::string redis_server = redis_server_path();
  {
    DirLock lock(settings_.dir);
    check_can_start(index);
  }
  // Not under the lock: other nodes may be killed or paused while this one waits.
  if (delay.count() > 0) std::this_thread::sleep_for(delay);
  DirLock lock(settings_.dir);
  check_can_start(index);
  if (!fs::exists(settings_.dir / settings_file)) save_settings();
  ensure_certificates(/*fresh=*/false);
  remove_file(node_file(index, ".pid"));
  std::vector<std::pair<int, pid_t>> started{{index, spawn(index, redis_server)}};
  wait_ready(started, redis_server);
  const pid_t pid = started.front().second;
  if (settings_.topology == Topology::cluster) {
    // Back in its cluster (as a replica, when it was failed over meanwhile), synced.
    const int v = vote_of(index);
    std::string why;
    if (!wait_for([&] { return (why = cluster_problem(v)).empty(); }, startup_deadline)) {
      fail(ClusterError::Kind::failed,
           node_name(index, port_of(index)) + " started (pid " + std::to_string(pid) +
               ") but cluster " + vote_name(v) + " is not whole within " +
               std::to_string(startup_deadline.count()) + " s: " + why + "; it is left running");
    }
  }
  return {index, port_of(index), pid, NodeReport::Outcome::started,
          settings_.topology == Topology::standalone ? std::string() : role_label(index)};
}

void ClusterManager::require_dir(int index) const {
  if (!fs::is_directory(settings_.dir)) {
    fail(ClusterError::Kind::refused, node_name(index, port_of(index)) +
                                          " is not running (no cluster in " +
                                          settings_.dir.string() + ")");
  }
}

void ClusterManager::check_can_start(int index) const {
  using K = ClusterError::Kind;
  check_index(index);
  Proc p = inspect(index);
  if (p.ours) {
    fail(K::refused, node_name(index, p.port) + " is already running (pid " +
                         std::to_string(*p.pid) + (p.state == 'T' ? ", paused" : "") + ")");
  }
  if (auto [what, why] = ports_busy(index); !why.empty()) {
    fail(K::refused, what + " is already in use by another process: " + why);
  }
}

std::pair<std::string, std::string> ClusterManager::ports_busy(int index) const {
  const int port = port_of(index);
  const std::string node = std::to_string(index);
  if (auto why = port_busy(port); !why.empty()) {
    return {"port " + std::to_string(port) + " (node " + node + ")", why};
  }
  return {};
}

void ClusterManager::wait_no_problem(const std::function<std::string()>& problem,
                                     std::chrono::milliseconds limit, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::string why;
  while (!(why = problem()).empty()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      fail(ClusterError::Kind::failed,
           what + " within " + std::to_string(limit.count() / 1000) + " s: " + why +
               "; the processes are left running (`redlock-cli cluster down` stops them)");
    }
    std::this_thread::sleep_for(50ms);
  }
}

}  // namespace redlock::nodes
