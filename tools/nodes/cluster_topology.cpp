// The cluster topology of the node manager (manager.hpp): `count` Redis Clusters of local
// redis-server processes (`cluster-enabled yes`), one vote each. A node's configuration, forming
// the clusters and waiting until they are whole (the one implementation in redis_cluster.hpp, which
// the test fixture uses too), and a failover as the demo makes it: the master of a key's slot
// killed, its replica promoted by the cluster itself.

#include <sstream>
#include <thread>

#include "cluster_dir.hpp"
#include "manager.hpp"
#include "manager_internal.hpp"
#include "redis_cluster.hpp"

namespace fs = std::filesystem;

namespace redlock::nodes {

using namespace std::chrono_literals;
using namespace dir;
using internal::node_name;

namespace {

// Generous: 18 processes gossiping on a busy 2-core machine take their time.
constexpr auto query_timeout = 1000ms;
constexpr auto form_deadline = 30s;      // each wait of forming a cluster
constexpr auto whole_deadline = 30s;     // `up`: until every cluster is whole
constexpr auto failover_deadline = 30s;  // a killed master's replica promoted, the cluster whole

// The node lines of a nodes.conf (the `vars` line left out), as CLUSTER NODES would give them.
std::vector<ClusterNodeView> read_nodes_conf(const fs::path& file) {
  auto text = read_text(file);
  if (!text) return {};
  std::string lines;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("vars ", 0) != 0) lines += line + "\n";
  }
  return parse_cluster_nodes(lines);
}

}  // namespace

// One cluster's nodes as redis_cluster.hpp sees them: member i is process first + i. Which nodes
// run is read once, when the object is made: make a new one after killing or starting a node.
class ClusterManager::ClusterVote final : public ClusterMembers {
 public:
  ClusterVote(const ClusterManager& m, int vote)
      : m_(m), vote_(vote), first_(m.first_of_cluster(vote)) {
    for (int i = 0; i < m.cluster_size(); ++i) live_.push_back(m.live(first_ + i));
    ids_.resize(live_.size());
    if (auto text = read_text(ids_file())) {
      std::istringstream in(*text);
      for (std::string line; std::getline(in, line);) {
        const auto space = line.find(' ');
        const auto index = parse_int(line.substr(0, space));
        if (space == std::string::npos || !index || *index < first_ ||
            *index >= first_ + static_cast<int>(ids_.size())) {
          continue;
        }
        ids_[static_cast<std::size_t>(*index - first_)] = line.substr(space + 1);
      }
    }
  }

  [[nodiscard]] std::size_t size() const override { return live_.size(); }
  [[nodiscard]] bool live(std::size_t i) const override { return live_.at(i); }
  [[nodiscard]] Reply command(std::size_t i, const std::vector<std::string>& argv) const override {
    SyncClient c(m_.endpoint(index(i)),
                 {.connect_timeout = query_timeout, .command_timeout = query_timeout});
    auto r = c.ok() ? c.command(argv) : std::nullopt;
    if (!r) throw std::runtime_error(name(i) + ": " + argv.front() + ": " + c.error());
    return std::move(*r);
  }
  [[nodiscard]] std::string id(std::size_t i) const override {
    if (ids_.at(i).empty() && live(i)) ids_[i] = must(i, {"CLUSTER", "MYID"}).str;
    return ids_[i];
  }
  [[nodiscard]] std::uint16_t announced_port(std::size_t i) const override {
    return static_cast<std::uint16_t>(m_.port_of(index(i)));
  }
  [[nodiscard]] std::uint16_t bus_port(std::size_t i) const override {
    return static_cast<std::uint16_t>(m_.bus_port_of(index(i)));
  }
  [[nodiscard]] std::string name(std::size_t i) const override {
    return node_name(index(i), m_.port_of(index(i)));
  }

  [[nodiscard]] int index(std::size_t i) const { return first_ + static_cast<int>(i); }
  [[nodiscard]] fs::path ids_file() const {
    return m_.settings_.dir / ("cluster-" + std::to_string(vote_) + ".ids");
  }
  // After forming: every node's id, for later processes (a node that is down has none to ask).
  void save_ids() const {
    std::string text;
    for (std::size_t i = 0; i < size(); ++i) text += std::to_string(index(i)) + " " + id(i) + "\n";
    write_file_atomic(ids_file(), text);
  }

 private:
  const ClusterManager& m_;
  int vote_;
  int first_;
  std::vector<bool> live_;
  mutable std::vector<std::string> ids_;
};

int ClusterManager::cluster_size() const noexcept {
  return cluster_masters * (1 + settings_.replicas);
}

int ClusterManager::first_of_cluster(int vote) const noexcept {
  return (vote - 1) * cluster_size() + 1;
}

std::string ClusterManager::cluster_node_conf() const {
  std::string text =
      "cluster-enabled yes\n"
      // In the node's directory (`dir`), kept across its restarts: its identity and its view.
      "cluster-config-file nodes.conf\n"
      "cluster-node-timeout " +
      std::to_string(cluster_node_timeout_ms) +
      "\n"
      // A replica may always be promoted, however stale (the demo kills masters on purpose), and
      // replicas stay with the master they were given.
      "cluster-replica-validity-factor 0\n"
      "cluster-allow-replica-migration no\n"
      // Full syncs start at once (the default waits 5 s for more replicas to join).
      "repl-diskless-sync-delay 0\n";
  // The bus and replication over TLS too; the cluster then announces the TLS ports.
  if (settings_.tls) text += "tls-cluster yes\ntls-replication yes\n";
  return text;
}

std::string ClusterManager::cluster_role_label(int index) const {
  const int v = vote_of(index);
  if (v == 0) return {};
  const ClusterVote c(*this, v);
  const auto i = static_cast<std::size_t>(index - first_of_cluster(v));
  std::string role;
  if (c.live(i)) {
    try {
      role = info_field(c.command(i, {"INFO", "replication"}).str, "role").value_or("");
    } catch (const std::runtime_error&) {
    }
  }
  if (role.empty()) {  // down or not answering: as its nodes.conf last said, else as it started
    role = i < static_cast<std::size_t>(cluster_masters) ? "master" : "slave";
    for (const auto& n : read_nodes_conf(node_file(index, "") / "nodes.conf")) {
      if (n.has_flag("myself")) role = n.has_flag("slave") ? "slave" : "master";
    }
  }
  return (role == "slave" ? "replica " : "master ") + vote_name(v);
}

void ClusterManager::prepare_fresh_clusters(const std::optional<ClusterSettings>& saved) const {
  // The same clusters can start again from their nodes.conf files (each node knows the others and
  // its role; a node's data must belong to its slots) when they were formed with these settings.
  const bool same = saved && saved->topology == Topology::cluster &&
                    saved->replicas == settings_.replicas &&
                    saved->base_port == settings_.base_port && saved->tls == settings_.tls &&
                    saved->bus_port_offset == settings_.bus_port_offset;
  for (int v = 1; v <= settings_.count; ++v) {
    const ClusterVote c(*this, v);
    std::error_code ec;
    bool reuse = same && v <= saved->count && fs::exists(c.ids_file(), ec);
    for (std::size_t i = 0; reuse && i < c.size(); ++i) {
      reuse = read_nodes_conf(node_file(c.index(i), "") / "nodes.conf").size() == c.size();
    }
    if (reuse) continue;
    remove_file(c.ids_file());
    for (std::size_t i = 0; i < c.size(); ++i) {
      // Its cluster state, and data that may lie in slots it will not serve (a master with keys
      // in a slot nobody owns takes the slot, and forming then fails).
      const fs::path data = node_file(c.index(i), "");
      fs::remove_all(data, ec);
      if (ec) {
        throw ClusterError(ClusterError::Kind::usage,
                           "cannot empty " + data.string() + ": " + ec.message());
      }
    }
  }
}

void ClusterManager::form_clusters() {
  using K = ClusterError::Kind;
  const std::string left =
      "; the processes are left running (`redlock-cli cluster down` stops "
      "them, and a later `up` forms new clusters)";
  for (int v = 1; v <= settings_.count; ++v) {
    const ClusterVote c(*this, v);
    std::size_t blank = 0, live = 0;
    std::string a_blank, a_formed;
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (!c.live(i)) continue;
      ++live;
      bool fresh = false;
      try {
        fresh = cluster_node_blank(c, i);
      } catch (const std::runtime_error& e) {
        throw ClusterError(K::failed, "cluster " + vote_name(v) + ": " + e.what() + left);
      }
      (fresh ? a_blank : a_formed) = c.name(i);
      if (fresh) ++blank;
    }
    if (blank == 0) continue;  // formed before: it only has to be whole again (below)
    if (blank != c.size() || live != c.size()) {
      remove_file(c.ids_file());  // so that `down` + `up` starts this one afresh
      throw ClusterError(
          K::failed,
          "cluster " + vote_name(v) + ": " + a_blank + " knows no other node, but " +
              (a_formed.empty() ? "not every node runs" : a_formed + " is in a cluster") + left);
    }
    try {
      form_cluster(c, {.masters = cluster_masters, .replicas_per_master = settings_.replicas},
                   form_deadline);
    } catch (const std::runtime_error& e) {
      throw ClusterError(K::failed, "cluster " + vote_name(v) + ": " + e.what() + left);
    }
    c.save_ids();
  }
  wait_clusters_whole(whole_deadline);
}

std::string ClusterManager::cluster_problem(int vote) const {
  std::string why = ClusterVote(*this, vote).problem();
  return why.empty() ? why : "cluster " + vote_name(vote) + ": " + why;
}

std::string ClusterManager::cluster_problem() const {
  if (settings_.topology != Topology::cluster) {
    throw ClusterError(ClusterError::Kind::usage, "not the cluster topology");
  }
  for (int v = 1; v <= settings_.count; ++v) {
    if (auto why = cluster_problem(v); !why.empty()) return why;
  }
  return {};
}

void ClusterManager::wait_clusters_whole(std::chrono::milliseconds limit) const {
  wait_no_problem([this] { return cluster_problem(); }, limit, "the clusters were not whole");
}

std::optional<int> ClusterManager::slot_owner(int vote, const std::string& key) const {
  if (settings_.topology != Topology::cluster || vote < 1 || vote > settings_.count) {
    throw ClusterError(ClusterError::Kind::usage, "cluster " + std::to_string(vote) +
                                                      ": no such "
                                                      "cluster");
  }
  const ClusterVote c(*this, vote);
  try {
    const auto slot = c.key_slot(key);
    const auto owner = slot ? c.owner_of_slot(*slot) : std::nullopt;
    if (owner) return c.index(*owner);
  } catch (const std::runtime_error&) {
  }
  return std::nullopt;
}

std::vector<ClusterManager::Failover> ClusterManager::kill_slot_masters(
    const std::vector<int>& votes, const std::string& key,
    const std::function<void(const Failover&)>& on_promoted) {
  using K = ClusterError::Kind;
  struct Pending {
    Failover f;
    std::vector<int> candidates;  // the master's running replicas
    bool whole = false;
  };
  std::vector<Pending> pending;
  for (int v : votes) {
    const auto owner = slot_owner(v, key);
    if (!owner) {
      throw ClusterError(K::failed, "cluster " + vote_name(v) + " does not say who serves " + key);
    }
    const ClusterVote c(*this, v);
    Pending p{{v, *owner, 0, {}}, {}};
    for (std::size_t i = 0; i < c.size(); ++i) {
      try {
        if (c.index(i) != *owner && c.live(i) && c.master_of(i) &&
            c.index(*c.master_of(i)) == *owner) {
          p.candidates.push_back(c.index(i));
        }
      } catch (const std::runtime_error&) {
      }
    }
    if (p.candidates.empty()) {
      throw ClusterError(K::refused, "cluster " + vote_name(v) + ": " +
                                         node_name(*owner, port_of(*owner)) + ", the master of " +
                                         key + "'s slot, has no running replica to promote");
    }
    pending.push_back(std::move(p));
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& p : pending) kill(p.f.old_master);
  const auto deadline = t0 + failover_deadline;
  for (;;) {
    bool done = true;
    for (auto& p : pending) {
      if (p.f.new_master == 0) {
        const ClusterVote c(*this, p.f.vote);
        for (int candidate : p.candidates) {
          const auto i = static_cast<std::size_t>(candidate - first_of_cluster(p.f.vote));
          bool master = false;
          try {
            master = c.live(i) && c.is_master(i);
          } catch (const std::runtime_error&) {
          }
          if (!master) continue;
          p.f.new_master = candidate;
          p.f.took = std::chrono::duration_cast<std::chrono::milliseconds>(
              std::chrono::steady_clock::now() - t0);
          if (on_promoted) on_promoted(p.f);
          break;
        }
      }
      if (p.f.new_master != 0 && !p.whole) p.whole = cluster_problem(p.f.vote).empty();
      done = done && p.whole;
    }
    if (done) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string which;
      for (const auto& p : pending) {
        if (p.whole) continue;
        which += (which.empty() ? "" : "; ") + vote_name(p.f.vote) + ": " +
                 (p.f.new_master == 0 ? "no replica was promoted" : cluster_problem(p.f.vote));
      }
      throw ClusterError(K::failed, "the failover did not complete within " +
                                        std::to_string(failover_deadline.count()) + " s (" + which +
                                        ")");
    }
    std::this_thread::sleep_for(20ms);
  }
  std::vector<Failover> out;
  for (const auto& p : pending) out.push_back(p.f);
  return out;
}

}  // namespace redlock::nodes
