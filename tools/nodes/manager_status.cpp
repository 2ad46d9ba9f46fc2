// What the node manager reports: the names of its settings and states, one line per node for
// what a command did to it (describe()), and each node's status as its process and its server
// say it (`redlock-cli cluster status`).

#include <charconv>

#include "client.hpp"
#include "cluster_dir.hpp"
#include "manager.hpp"
#include "manager_internal.hpp"
#include "redis_cluster.hpp"

using namespace std::chrono_literals;

namespace redlock::nodes {

using namespace dir;
using namespace internal;

namespace {

constexpr auto query_timeout = 500ms;

std::string persistence_label(std::string_view appendonly, std::string_view fsync) {
  if (appendonly != "yes") return "none";
  if (fsync == "always") return "aof";
  return "aof-" + std::string(fsync);
}

std::optional<std::string> config_get(SyncClient& c, std::string_view name) {
  auto r = c.command({"CONFIG", "GET", name});
  if (!r || r->type != Reply::Type::array || r->elements.size() != 2 ||
      r->elements[1].type != Reply::Type::string) {
    return std::nullopt;
  }
  return r->elements[1].str;
}

}  // namespace

std::optional<long long> parse_int(std::string_view s) {
  if (s.empty()) return std::nullopt;
  long long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

const char* to_string(Persistence p) noexcept { return p == Persistence::aof ? "aof" : "none"; }

const char* to_string(Topology t) noexcept {
  switch (t) {
    case Topology::sentinel:
      return "sentinel";
    case Topology::cluster:
      return "cluster";
    case Topology::standalone:
      break;
  }
  return "standalone";
}

const char* to_string(ProcessState s) noexcept {
  switch (s) {
    case ProcessState::up:
      return "up";
    case ProcessState::paused:
      return "paused";
    case ProcessState::down:
      return "down";
  }
  return "down";
}

std::string describe(const NodeReport& r) {
  std::string n = node_name(r.index, r.port);
  if (!r.role.empty()) n.insert(n.size() - 1, ", " + r.role);
  n += ": ";
  std::string pid = "pid " + std::to_string(r.pid);
  switch (r.outcome) {
    case NodeReport::Outcome::started:
      return n + "started, " + pid;
    case NodeReport::Outcome::already_running:
      return n + "already running, " + pid;
    case NodeReport::Outcome::paused_left:
      return n + "paused, " + pid + "; left as is (`redlock-cli cluster cont " +
             std::to_string(r.index) + "` resumes it)";
    case NodeReport::Outcome::stopped:
      return n + "stopped, " + pid;
    case NodeReport::Outcome::killed:
      return n + "killed (SIGKILL), " + pid;
    case NodeReport::Outcome::stale_removed:
      return n + "pid file named " + pid +
             ", which is not our redis-server; removed the stale pid file";
    case NodeReport::Outcome::paused:
      return n + "paused (SIGSTOP), " + pid;
    case NodeReport::Outcome::already_paused:
      return n + "already paused, " + pid;
    case NodeReport::Outcome::resumed:
      return n + "resumed (SIGCONT), " + pid;
    case NodeReport::Outcome::not_paused:
      return n + "was not paused, " + pid;
  }
  return n;
}

NodeStatus ClusterManager::node_status(int index) const {
  check_index(index);
  Proc p = inspect(index);
  NodeStatus s;
  s.index = index;
  s.port = p.ours ? p.port : port_of(index);
  if (p.ours) {
    s.pid = *p.pid;
    s.state = p.state == 'T' ? ProcessState::paused : ProcessState::up;
  }
  const bool sentinel = is_sentinel(index);
  if (sentinel) {
    s.role = "sentinel";
    s.persistence = "-";  // its config file is its state, rewritten as it learns
  }
  if (const int v = vote_of(index); v != 0) {
    (settings_.topology == Topology::cluster ? s.cluster : s.master_name) = vote_name(v);
  }
  // A paused node accepts the TCP connection and then never answers: do not even try.
  if (s.state == ProcessState::up) {
    Endpoint e = endpoint(index);
    e.port = static_cast<std::uint16_t>(s.port);
    SyncClient c(e, {.connect_timeout = query_timeout, .command_timeout = query_timeout});
    if (auto info = c.command({"INFO", "server"}); info && info->type == Reply::Type::string) {
      if (auto up = info_field(info->str, "uptime_in_seconds")) s.uptime_s = parse_int(*up);
    }
    if (!sentinel) {
      if (auto n = c.command({"DBSIZE"}); n && n->type == Reply::Type::integer) s.keys = n->integer;
      auto aof = config_get(c, "appendonly");
      auto fsync = config_get(c, "appendfsync");
      if (aof && fsync) s.persistence = persistence_label(*aof, *fsync);
      if (auto info = c.command({"INFO", "replication"});
          info && info->type == Reply::Type::string) {
        const auto role = info_field(info->str, "role");
        if (role) s.role = *role == "slave" ? "replica" : *role;
      }
      if (settings_.topology == Topology::cluster && s.role == "master") {
        if (auto nodes = c.command({"CLUSTER", "NODES"});
            nodes && nodes->type == Reply::Type::string) {
          for (const auto& n : parse_cluster_nodes(nodes->str)) {
            if (n.has_flag("myself")) s.slots = n.slots;
          }
        }
      }
    }
  }
  if (s.persistence.empty()) {
    auto pers = read_node_conf(node_file(index, ".conf")).persistence;
    s.persistence = to_string(pers.value_or(settings_.persistence));
  }
  return s;
}

std::vector<NodeStatus> ClusterManager::status() const {
  std::vector<NodeStatus> out;
  for (int i = 1; i <= process_count(); ++i) out.push_back(node_status(i));
  return out;
}

}  // namespace redlock::nodes
