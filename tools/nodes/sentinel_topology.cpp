// The sentinel topology of the node manager (manager.hpp): Sentinel-managed masters with one
// replica each and three sentinels, all local redis-server processes. The configuration of each
// role, who is master now, when the sentinels agree, and a failover as the demo makes it.

#include <algorithm>
#include <random>
#include <sstream>
#include <thread>

#include "cluster_dir.hpp"
#include "manager.hpp"
#include "manager_internal.hpp"

namespace fs = std::filesystem;

namespace redlock::nodes {

using namespace std::chrono_literals;
using namespace dir;
using internal::node_name;

namespace {

constexpr auto query_timeout = 300ms;
// Sentinel's timings: short, for a demonstration (a master silent for 2 s is failed over).
constexpr int down_after_ms = 2000;
constexpr int failover_timeout_ms = 6000;
constexpr auto failover_deadline = 10s;

// A field of a flat [k1, v1, k2, v2, ...] reply (SENTINEL MASTER / REPLICAS / SENTINELS entry).
std::string field(const Reply& entry, std::string_view key) {
  for (std::size_t i = 0; i + 1 < entry.elements.size(); i += 2) {
    if (entry.elements[i].str == key) return entry.elements[i + 1].str;
  }
  return {};
}

// Does this redis.conf start the node as a replica (ours, or Sentinel's CONFIG REWRITE of it)?
bool conf_says_replica(const fs::path& conf) {
  auto text = read_text(conf);
  if (!text) return false;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("replicaof ", 0) == 0 || line.rfind("slaveof ", 0) == 0) return true;
  }
  return false;
}

}  // namespace

std::string ClusterManager::master_name(int vote) { return "m" + std::to_string(vote); }

bool ClusterManager::is_sentinel(int index) const noexcept {
  return settings_.topology == Topology::sentinel && index > 2 * settings_.count &&
         index <= process_count();
}

namespace {

// One command to one of our processes, with a short deadline; nullopt when it does not answer.
std::optional<Reply> ask(const Endpoint& e, std::initializer_list<std::string_view> argv) {
  SyncClient c(e, {.connect_timeout = query_timeout, .command_timeout = query_timeout});
  if (!c.ok()) return std::nullopt;
  return c.command(argv);
}

std::optional<std::string> info_replication(const Endpoint& e, std::string_view name) {
  auto r = ask(e, {"INFO", "replication"});
  if (!r || r->type != Reply::Type::string) return std::nullopt;
  return info_field(r->str, name);
}

}  // namespace

std::optional<int> ClusterManager::current_master(int vote) const {
  for (int s = 2 * settings_.count + 1; s <= process_count(); ++s) {
    if (!live(s)) continue;
    auto r = ask(endpoint(s), {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", master_name(vote)});
    if (!r || r->type != Reply::Type::array || r->elements.size() != 2) continue;
    const auto port = parse_int(r->elements[1].str);
    if (!port || r->elements[0].str != "127.0.0.1") return std::nullopt;
    const int index = static_cast<int>(*port) - settings_.base_port + 1;
    if (vote_of(index) != vote) return std::nullopt;
    return index;
  }
  return std::nullopt;
}

namespace {
// The vote's two data nodes.
std::pair<int, int> pair_of(int vote, int count) { return {vote, vote + count}; }
}  // namespace

std::optional<int> ClusterManager::replica_of_on_start(int index) const {
  const int v = vote_of(index);
  // Who is master now: what the sentinels say, else a running data node of the vote that says
  // role:master, else the first master (everything starts from nothing).
  std::optional<int> m = current_master(v);
  if (!m) {
    const auto [a, b] = pair_of(v, settings_.count);
    for (int i : {a, b}) {
      if (i != index && live(i) && info_replication(endpoint(i), "role") == "master") m = i;
    }
  }
  if (!m) m = v;
  if (*m == index) return std::nullopt;
  return port_of(*m);
}

std::string ClusterManager::data_node_conf(int index) const {
  // Full syncs start at once (the default waits 5 s for more replicas to join).
  std::string text = "repl-diskless-sync-delay 0\n";
  if (settings_.tls) text += "tls-replication yes\n";  // a replica reaches its master over TLS
  if (auto port = replica_of_on_start(index)) {
    text += "replicaof 127.0.0.1 " + std::to_string(*port) + "\n";
  }
  return text;
}

std::string ClusterManager::sentinel_id(int index) {
  if (auto it = sentinel_ids_.find(index); it != sentinel_ids_.end()) return it->second;
  std::string id;
  if (auto text = read_text(node_file(index, ".conf"))) {
    std::istringstream in(*text);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("sentinel myid ", 0) == 0) id = line.substr(14);
    }
  }
  if (id.size() != 40) {
    std::random_device rd;
    static constexpr char hex[] = "0123456789abcdef";
    id.clear();
    for (int i = 0; i < 40; ++i) id += hex[rd() % 16];
  }
  sentinel_ids_[index] = id;
  return id;
}

std::string ClusterManager::sentinel_conf(int index) {
  const fs::path data = node_file(index, "");
  const int first = 2 * settings_.count + 1;
  const int quorum = sentinel_count / 2 + 1;
  std::string text = "# written by redlock-cli cluster for sentinel node " + std::to_string(index) +
                     "; Sentinel rewrites it with what it learns (kept across its restarts)\n" +
                     listen_conf(port_of(index)) +
                     // TLS to the data nodes and the other sentinels too
                     (settings_.tls ? "tls-replication yes\n" : "") +
                     "bind 127.0.0.1\nprotected-mode no\ndaemonize no\n"
                     "dir " +
                     conf_quote(data.string()) + "\nlogfile " +
                     conf_quote(node_file(index, ".log").string()) + "\n" + "sentinel myid " +
                     sentinel_id(index) + "\n";
  for (int v = 1; v <= settings_.count; ++v) {
    const std::string name = master_name(v);
    // The master now (the other sentinels' view when one runs), so a sentinel that lost its
    // config does not watch a replica as a master.
    const auto master_port = replica_of_on_start(v);
    const int m = master_port ? *master_port - settings_.base_port + 1 : v;
    text += "sentinel monitor " + name + " 127.0.0.1 " + std::to_string(port_of(m)) + " " +
            std::to_string(quorum) + "\n";
    text += "sentinel down-after-milliseconds " + name + " " + std::to_string(down_after_ms) + "\n";
    text += "sentinel failover-timeout " + name + " " + std::to_string(failover_timeout_ms) + "\n";
    text += "sentinel parallel-syncs " + name + " 1\n";
    // The others, so that they need not wait for each other's hello messages (every 2 s).
    for (int k = first; k <= process_count(); ++k) {
      if (k == index) continue;
      text += "sentinel known-sentinel " + name + " 127.0.0.1 " + std::to_string(port_of(k)) + " " +
              sentinel_id(k) + "\n";
    }
  }
  return text;
}

std::string ClusterManager::sentinel_role_label(int index) const {
  if (is_sentinel(index)) return "sentinel";
  const int v = vote_of(index);
  if (v == 0) return {};
  std::string role = live(index) ? info_replication(endpoint(index), "role").value_or("") : "";
  if (role.empty()) role = conf_says_replica(node_file(index, ".conf")) ? "slave" : "master";
  return (role == "slave" ? "replica " : "master ") + master_name(v);
}

std::string ClusterManager::sentinel_problem() const {
  if (settings_.topology != Topology::sentinel) return {};
  std::vector<int> sentinels;
  for (int s = 2 * settings_.count + 1; s <= process_count(); ++s) {
    if (live(s)) sentinels.push_back(s);
  }
  if (sentinels.empty()) return "no sentinel is running";
  auto who = [&](int s) { return "sentinel " + node_name(s, port_of(s)); };
  for (int v = 1; v <= settings_.count; ++v) {
    const std::string name = master_name(v);
    std::optional<int> agreed;
    for (int s : sentinels) {
      auto r = ask(endpoint(s), {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", name});
      if (!r || r->type != Reply::Type::array || r->elements.size() != 2) {
        return who(s) + " names no master for " + name;
      }
      const auto port = parse_int(r->elements[1].str);
      const int m = port ? static_cast<int>(*port) - settings_.base_port + 1 : 0;
      if (vote_of(m) != v) {
        return who(s) + " names " + r->elements[0].str + ":" + r->elements[1].str +
               " as the master of " + name + ", not one of its nodes";
      }
      if (agreed && *agreed != m) return "the sentinels disagree on the master of " + name;
      agreed = m;
    }
    const int m = *agreed;
    if (!live(m)) return name + ": its master " + node_name(m, port_of(m)) + " is not running";
    if (info_replication(endpoint(m), "role") != "master") {
      return name + ": " + node_name(m, port_of(m)) + " does not say role:master yet";
    }
    const auto [a, b] = pair_of(v, settings_.count);
    const int replica = m == a ? b : a;
    const bool replica_live = live(replica);
    const std::string replica_addr = "127.0.0.1:" + std::to_string(port_of(replica));
    if (replica_live) {
      auto info = ask(endpoint(replica), {"INFO", "replication"});
      if (!info || info->type != Reply::Type::string || info_field(info->str, "role") != "slave" ||
          info_field(info->str, "master_port") != std::to_string(port_of(m)) ||
          info_field(info->str, "master_link_status") != "up") {
        return name + ": " + node_name(replica, port_of(replica)) + " is not a synced replica of " +
               node_name(m, port_of(m)) + " yet";
      }
    }
    for (int s : sentinels) {
      auto mm = ask(endpoint(s), {"SENTINEL", "MASTER", name});
      if (!mm || field(*mm, "flags") != "master") {
        return who(s) + ": " + name + " flags " + (mm ? field(*mm, "flags") : "?");
      }
      if (replica_live) {
        auto reps = ask(endpoint(s), {"SENTINEL", "REPLICAS", name});
        bool seen = false;
        if (reps) {
          for (const Reply& e : reps->elements) {
            if (field(e, "name") != replica_addr) continue;
            seen = field(e, "flags") == "slave" && field(e, "master-link-status") == "ok" &&
                   field(e, "master-port") == std::to_string(port_of(m));
          }
        }
        if (!seen) {
          return who(s) + " does not list " + node_name(replica, port_of(replica)) +
                 " as a replica of " + name + " yet";
        }
      }
      auto sens = ask(endpoint(s), {"SENTINEL", "SENTINELS", name});
      std::size_t known = 0;
      if (sens) {
        for (const Reply& e : sens->elements) {
          const std::string f = field(e, "flags");
          if (f.find("s_down") == std::string::npos && f.find("disconnected") == std::string::npos)
            ++known;
        }
      }
      if (known + 1 < sentinels.size()) {
        return who(s) + " knows " + std::to_string(known) + " of the " +
               std::to_string(sentinels.size() - 1) + " other sentinels of " + name + " yet";
      }
    }
  }
  return {};
}

void ClusterManager::wait_replicas_attached(std::chrono::milliseconds limit) const {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  auto attached = [&] {
    for (int i = 1; i <= 2 * settings_.count; ++i) {
      if (!live(i)) continue;
      auto r = ask(endpoint(i), {"INFO", "replication"});
      if (!r || r->type != Reply::Type::string) return false;
      if (info_field(r->str, "role") == "slave" &&
          info_field(r->str, "master_link_status") != "up") {
        return false;
      }
    }
    return true;
  };
  while (!attached() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
}

void ClusterManager::wait_sentinels_agree(std::chrono::milliseconds limit) const {
  wait_no_problem([this] { return sentinel_problem(); }, limit, "the sentinels did not agree");
}

std::vector<ClusterManager::Failover> ClusterManager::failover(
    const std::vector<int>& votes, const std::function<void(const Failover&)>& on_promoted) {
  using K = ClusterError::Kind;
  if (settings_.topology != Topology::sentinel) {
    throw ClusterError(K::usage, "failover needs the sentinel topology");
  }
  struct Pending {
    Failover f;
    std::chrono::steady_clock::time_point start;
    bool promoted = false;
    bool switched = false;
  };
  std::vector<Pending> pending;
  for (int v : votes) {
    if (v < 1 || v > settings_.count) {
      throw ClusterError(K::usage, "vote " + std::to_string(v) + ": no such master name");
    }
    const auto old = current_master(v);
    if (!old) throw ClusterError(K::failed, "no sentinel names the master of " + master_name(v));
    std::string refusal = "no sentinel is running";
    bool sent = false;
    for (int s = 2 * settings_.count + 1; s <= process_count() && !sent; ++s) {
      if (!live(s)) continue;
      auto r = ask(endpoint(s), {"SENTINEL", "FAILOVER", master_name(v)});
      if (r && r->is_status("OK")) {
        sent = true;
      } else {
        refusal =
            "sentinel " + node_name(s, port_of(s)) + ": " + (r ? r->str : std::string("no answer"));
      }
    }
    if (!sent) {
      throw ClusterError(K::refused,
                         "SENTINEL FAILOVER " + master_name(v) + " was refused: " + refusal);
    }
    pending.push_back({{v, *old, 0, {}}, std::chrono::steady_clock::now()});
  }
  const auto deadline = std::chrono::steady_clock::now() + failover_deadline;
  auto done = [&] {
    return std::all_of(pending.begin(), pending.end(), [](const Pending& p) { return p.switched; });
  };
  while (!done()) {
    for (auto& p : pending) {
      const auto [a, b] = pair_of(p.f.vote, settings_.count);
      const int candidate = p.f.old_master == a ? b : a;
      if (!p.promoted) {
        if (!live(candidate) || info_replication(endpoint(candidate), "role") != "master") continue;
        p.promoted = true;
        p.f.new_master = candidate;
        p.f.took = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - p.start);
        if (on_promoted) on_promoted(p.f);
        // Demote the old master now, before the sentinels switch: their first look at it then
        // already shows a replica (they look at a replica's INFO only every 10 s).
        if (live(p.f.old_master)) {
          (void)ask(endpoint(p.f.old_master),
                    {"REPLICAOF", "127.0.0.1", std::to_string(port_of(candidate))});
        }
      }
      if (!p.switched) {
        bool all = true;
        for (int s = 2 * settings_.count + 1; s <= process_count(); ++s) {
          if (!live(s)) continue;
          // SENTINEL MASTER, as clients ask it: it names the old master until the switch
          // (GET-MASTER-ADDR-BY-NAME names the promoted one a little earlier), and the flags say
          // whether the failover is over.
          auto r = ask(endpoint(s), {"SENTINEL", "MASTER", master_name(p.f.vote)});
          all = all && r && field(*r, "port") == std::to_string(port_of(p.f.new_master)) &&
                field(*r, "flags") == "master";
        }
        p.switched = all;
        // The sentinels may have told the old master something else meanwhile: say it again.
        if (all && live(p.f.old_master) &&
            info_replication(endpoint(p.f.old_master), "role") == "master") {
          (void)ask(endpoint(p.f.old_master),
                    {"REPLICAOF", "127.0.0.1", std::to_string(port_of(p.f.new_master))});
        }
      }
    }
    if (done()) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string which;
      for (const auto& p : pending) {
        if (!p.switched) which += (which.empty() ? "" : ", ") + master_name(p.f.vote);
      }
      throw ClusterError(K::failed, "the failover of " + which + " did not complete within " +
                                        std::to_string(failover_deadline.count()) + " s");
    }
    std::this_thread::sleep_for(5ms);
  }
  std::vector<Failover> out;
  for (const auto& p : pending) out.push_back(p.f);
  return out;
}

}  // namespace redlock::nodes
