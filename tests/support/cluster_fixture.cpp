#include "cluster_fixture.hpp"

#include <algorithm>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>

#include "nodes/client.hpp"
#include "support_util.hpp"

namespace redlock::test {
namespace {

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t end = s.find(sep, start);
    if (end == std::string_view::npos) end = s.size();
    if (end > start) out.emplace_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::vector<ClusterNodeView> parse_nodes(const std::string& text) {
  std::vector<ClusterNodeView> out;
  for (const std::string& line : split(text, '\n')) {
    std::string l = line;
    if (!l.empty() && l.back() == '\r') l.pop_back();
    const std::vector<std::string> f = split(l, ' ');
    if (f.size() < 8) continue;
    ClusterNodeView v;
    v.id = f[0];
    // ip:port@cport[,hostname]
    std::string addr = f[1].substr(0, f[1].find(','));
    const auto at = addr.find('@');
    const auto colon = addr.rfind(':', at);
    if (colon != std::string::npos) {
      v.ip = addr.substr(0, colon);
      v.port = static_cast<std::uint16_t>(std::stoi(addr.substr(colon + 1, at - colon - 1)));
      if (at != std::string::npos) {
        v.bus_port = static_cast<std::uint16_t>(std::stoi(addr.substr(at + 1)));
      }
    }
    v.flags = split(f[2], ',');
    v.master_id = f[3] == "-" ? std::string() : f[3];
    v.connected = f[7] == "connected";
    for (std::size_t k = 8; k < f.size(); ++k) {
      if (f[k].front() == '[') continue;  // [slot->-id] / [slot-<-id]: migration state
      const auto dash = f[k].find('-');
      const int a = std::stoi(f[k].substr(0, dash));
      const int b = dash == std::string::npos ? a : std::stoi(f[k].substr(dash + 1));
      v.slots.emplace_back(a, b);
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

}  // namespace

bool ClusterNodeView::has_flag(const std::string& f) const {
  return std::find(flags.begin(), flags.end(), f) != flags.end();
}

ClusterFixture::ClusterFixture(ClusterConfig cfg) : cfg_(std::move(cfg)) {
  if (cfg_.masters < 1 || cfg_.replicas_per_master < 0) {
    throw std::invalid_argument("ClusterFixture: need at least one master");
  }
  const bool tls_bus = cfg_.server.tls && cfg_.server.tls->cluster;
  const int total = cfg_.masters * (1 + cfg_.replicas_per_master);
  const std::string timeout = std::to_string(cfg_.node_timeout.count());
  for (int i = 0; i < total; ++i) {
    ServerConfig sc = cfg_.server;
    sc.port = free_port_with_bus_twin();
    if (tls_bus) {
      sc.tls->port = free_port_with_bus_twin();
      sc.tls->replication = true;
    }
    // clang-format off
    std::vector<std::string> args = {
        "--cluster-enabled", "yes",
        "--cluster-config-file", "nodes.conf",  // in the node's --dir
        "--cluster-node-timeout", timeout,
        // A replica may always be promoted, however stale (tests kill masters on purpose), and
        // replicas stay where the test put them.
        "--cluster-replica-validity-factor", "0",
        "--cluster-allow-replica-migration", "no",
        // Full syncs start at once (the default waits 5 s for more replicas to join).
        "--repl-diskless-sync-delay", "0",
    };
    // clang-format on
    args.insert(args.end(), sc.extra_args.begin(), sc.extra_args.end());  // the test's win
    sc.extra_args = std::move(args);
    Node n;
    for (int attempt = 1;; ++attempt) {
      try {
        n.server = std::make_unique<RedisServer>(sc);
        break;
      } catch (const std::runtime_error& e) {
        // The port or its bus twin was taken since we checked: another pair (a fixed port makes
        // RedisServer retry the same one until startup_timeout, then give up).
        if (attempt >= 3 ||
            std::string(e.what()).find("Address already in use") == std::string::npos)
          throw;
        sc.port = free_port_with_bus_twin();
        if (tls_bus) sc.tls->port = free_port_with_bus_twin();
      }
    }
    n.announced_port = tls_bus ? n.server->tls_port() : n.server->port();
    nodes_.push_back(std::move(n));
  }
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Reply id = must(i, {"CLUSTER", "MYID"});
    nodes_[i].id = id.str;
  }
  // Slots and distinct config epochs first (SET-CONFIG-EPOCH only works on a node that knows no
  // other node), then introduce everybody to node 0.
  const auto masters = static_cast<std::size_t>(cfg_.masters);
  for (std::size_t m = 0; m < masters; ++m) {
    const int first = static_cast<int>(m * kSlots / masters);
    const int last = static_cast<int>((m + 1) * kSlots / masters) - 1;
    (void)must(m, {"CLUSTER", "ADDSLOTSRANGE", std::to_string(first), std::to_string(last)});
    (void)must(m, {"CLUSTER", "SET-CONFIG-EPOCH", std::to_string(m + 1)});
  }
  for (std::size_t i = 1; i < nodes_.size(); ++i) {
    (void)must(i, {"CLUSTER", "MEET", "127.0.0.1", std::to_string(nodes_[0].announced_port)});
  }
  const bool met = wait_until(
      [&] {
        for (std::size_t i = 0; i < nodes_.size(); ++i) {
          const auto v = view(i);
          if (v.size() != nodes_.size()) return false;
          for (const auto& n : v) {
            if (n.has_flag("handshake") || n.has_flag("noaddr") || !n.connected) return false;
          }
        }
        return true;
      },
      cfg_.timeout);
  if (!met) throw std::runtime_error("ClusterFixture: nodes did not meet\n" + describe_views());
  const auto replicas = static_cast<std::size_t>(cfg_.replicas_per_master);
  for (std::size_t m = 0; m < masters; ++m) {
    for (std::size_t r = 0; r < replicas; ++r) {
      (void)must(masters + m * replicas + r, {"CLUSTER", "REPLICATE", nodes_[m].id});
    }
  }
  // Everybody agrees on who replicates whom, then on the rest.
  const bool roles = wait_until(
      [&] {
        for (std::size_t i = 0; i < nodes_.size(); ++i) {
          for (const auto& n : view(i)) {
            const auto idx = index_of_id(n.id);
            if (!idx) return false;
            const bool want_master = *idx < masters;
            if (want_master != n.has_flag("master")) return false;
            if (!want_master && n.master_id != nodes_[(*idx - masters) / replicas].id) {
              return false;
            }
          }
        }
        return true;
      },
      cfg_.timeout);
  if (!roles) {
    throw std::runtime_error("ClusterFixture: replicas not seen everywhere\n" + describe_views());
  }
  wait_until_stable();
}

ClusterFixture::~ClusterFixture() = default;

Reply ClusterFixture::must(std::size_t i, const std::vector<std::string>& argv) const {
  Reply r = node(i).command(argv);
  if (r.is_error()) {
    throw std::runtime_error("ClusterFixture: " + join(argv, " ") + " on node " +
                             std::to_string(i) + " (" + node(i).address() + "): " + r.to_string());
  }
  return r;
}

std::optional<std::size_t> ClusterFixture::index_of_id(const std::string& id) const {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].id == id) return i;
  }
  return std::nullopt;
}

std::uint16_t ClusterFixture::announced_port(std::size_t i) const {
  return nodes_.at(i).announced_port;
}

std::string ClusterFixture::address(std::size_t i) const {
  return "127.0.0.1:" + std::to_string(announced_port(i));
}

std::vector<std::string> ClusterFixture::seed_addresses() const {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (node(i).running() && !node(i).stopped()) out.push_back(address(i));
  }
  return out;
}

std::string ClusterFixture::seed_address() const { return address(any_running()); }

std::size_t ClusterFixture::any_running() const {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (node(i).running() && !node(i).stopped()) return i;
  }
  throw std::logic_error("ClusterFixture: no node is running");
}

int ClusterFixture::key_slot(const std::string& key) const {
  const Reply r = must(any_running(), {"CLUSTER", "KEYSLOT", key});
  return static_cast<int>(r.integer);
}

std::vector<ClusterNodeView> ClusterFixture::view(std::size_t i) const {
  const Reply r = must(i, {"CLUSTER", "NODES"});
  return parse_nodes(r.str);
}

std::size_t ClusterFixture::owner_of_slot(int slot) const {
  for (const auto& n : view(any_running())) {
    for (const auto& [a, b] : n.slots) {
      if (slot >= a && slot <= b) {
        if (const auto idx = index_of_id(n.id)) return *idx;
      }
    }
  }
  throw std::runtime_error("ClusterFixture: nobody owns slot " + std::to_string(slot));
}

std::size_t ClusterFixture::owner_of_key(const std::string& key) const {
  return owner_of_slot(key_slot(key));
}

std::size_t ClusterFixture::other_master(std::size_t i) const {
  for (std::size_t m : masters()) {
    if (m != i) return m;
  }
  throw std::logic_error("ClusterFixture: no other running master");
}

bool ClusterFixture::is_master(std::size_t i) const {
  for (const auto& n : view(i)) {
    if (n.has_flag("myself")) return n.has_flag("master");
  }
  return false;
}

std::optional<std::size_t> ClusterFixture::master_of(std::size_t replica) const {
  for (const auto& n : view(replica)) {
    if (n.has_flag("myself")) return n.master_id.empty() ? std::nullopt : index_of_id(n.master_id);
  }
  return std::nullopt;
}

std::vector<std::size_t> ClusterFixture::masters() const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (node(i).running() && !node(i).stopped() && is_master(i)) out.push_back(i);
  }
  return out;
}

std::vector<std::size_t> ClusterFixture::replicas_of(std::size_t master) const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (i == master || !node(i).running() || node(i).stopped()) continue;
    if (master_of(i) == master) out.push_back(i);
  }
  return out;
}

std::string ClusterFixture::why_unstable() const {
  std::string reference;
  std::size_t reference_node = 0;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!node(i).running() || node(i).stopped()) continue;
    const std::string where = "node " + std::to_string(i) + " (" + address(i) + ")";
    const Reply info = node(i).command({"CLUSTER", "INFO"});
    if (nodes::info_field(info.str, "cluster_state") != "ok")
      return where + ": cluster_state not ok";
    // Canonical picture of the cluster as node i sees it: role and slots of every node.
    std::vector<ClusterNodeView> v = view(i);
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    std::ostringstream picture;
    int covered = 0;
    for (auto& n : v) {
      const auto idx = index_of_id(n.id);
      if (!idx) return where + ": knows an unknown node " + n.id;
      const bool up = node(*idx).running() && !node(*idx).stopped();
      if (up && (n.has_flag("fail") || n.has_flag("fail?") || n.has_flag("handshake"))) {
        return where + ": flags running node " + std::to_string(*idx) + " " + join(n.flags, ",");
      }
      std::sort(n.slots.begin(), n.slots.end());
      picture << *idx << (n.has_flag("master") ? " master" : " replica-of:" + n.master_id);
      for (const auto& [a, b] : n.slots) {
        picture << ' ' << a << '-' << b;
        covered += b - a + 1;
      }
      picture << '\n';
    }
    if (v.size() != nodes_.size()) return where + ": knows " + std::to_string(v.size()) + " nodes";
    if (covered != kSlots) return where + ": sees " + std::to_string(covered) + " slots covered";
    if (reference.empty()) {
      reference = picture.str();
      reference_node = i;
    } else if (picture.str() != reference) {
      return where + " and node " + std::to_string(reference_node) + " disagree:\n" +
             picture.str() + "vs\n" + reference;
    }
    // A running replica is synced with its master.
    const Reply repl = node(i).command({"INFO", "replication"});
    if (nodes::info_field(repl.str, "role") == "slave" &&
        nodes::info_field(repl.str, "master_link_status") != "up") {
      return where + ": replica link to its master not up";
    }
  }
  if (reference.empty()) return "no node is running";
  return {};
}

void ClusterFixture::wait_until_stable() const {
  std::string why;
  const bool ok = wait_until(
      [&] {
        try {
          why = why_unstable();
        } catch (const std::exception& e) {
          why = e.what();
        }
        return why.empty();
      },
      cfg_.timeout);
  if (!ok) {
    throw std::runtime_error("ClusterFixture: not stable after " +
                             std::to_string(cfg_.timeout.count()) + " ms: " + why + "\n" +
                             describe_views());
  }
}

std::string ClusterFixture::describe_views() const {
  std::ostringstream os;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    os << "--- node " << i << " " << node(i).address() << " (announced " << address(i) << ")";
    if (!node(i).running()) {
      os << ": not running\n";
      continue;
    }
    if (node(i).stopped()) {
      os << ": stopped\n";
      continue;
    }
    try {
      const Reply info = node(i).command({"CLUSTER", "INFO"}, std::chrono::milliseconds(500));
      os << " state " << nodes::info_field(info.str, "cluster_state").value_or("?") << "\n"
         << node(i).command({"CLUSTER", "NODES"}, std::chrono::milliseconds(500)).str;
    } catch (const std::exception& e) {
      os << ": " << e.what() << "\n";
    }
  }
  return os.str();
}

// --- slot migration ---------------------------------------------------------------------------

void ClusterFixture::move_keys(int slot, std::size_t from, std::size_t to,
                               const std::vector<std::string>& keys) const {
  if (keys.empty()) return;
  for (const auto& k : keys) {
    if (key_slot(k) != slot) {
      throw std::invalid_argument("ClusterFixture: key " + k + " is not in slot " +
                                  std::to_string(slot));
    }
  }
  std::vector<std::string> argv = {
      "MIGRATE", "127.0.0.1", std::to_string(announced_port(to)), "", "0", "5000", "KEYS"};
  argv.insert(argv.end(), keys.begin(), keys.end());
  const Reply r = must(from, argv);
  if (!r.is_ok() && r.str != "NOKEY") {
    throw std::runtime_error("ClusterFixture: MIGRATE: " + r.to_string());
  }
}

void ClusterFixture::move_all_keys(int slot, std::size_t from, std::size_t to) const {
  for (;;) {
    const Reply batch = must(from, {"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "100"});
    if (batch.elements.empty()) return;
    std::vector<std::string> keys;
    for (const auto& e : batch.elements) keys.push_back(e.str);
    move_keys(slot, from, to, keys);
  }
}

void ClusterFixture::set_slot_node_everywhere(int slot, std::size_t owner) const {
  const std::string s = std::to_string(slot);
  // The target first, so that it never answers MOVED back to the source, then the source, then
  // the other masters (replicas follow by gossip).
  std::vector<std::size_t> order = {owner};
  if (const auto m = migrations_.find(slot); m != migrations_.end())
    order.push_back(m->second.from);
  for (std::size_t i : masters()) {
    if (std::find(order.begin(), order.end(), i) == order.end()) order.push_back(i);
  }
  for (std::size_t i : order) (void)must(i, {"CLUSTER", "SETSLOT", s, "NODE", nodes_[owner].id});
}

void ClusterFixture::begin_slot_migration(int slot, std::size_t to,
                                          const std::vector<std::string>& keys_to_move) {
  if (slot < 0 || slot >= kSlots) throw std::invalid_argument("ClusterFixture: bad slot");
  if (migrations_.count(slot)) throw std::logic_error("ClusterFixture: slot already migrating");
  const std::size_t from = owner_of_slot(slot);
  if (from == to) throw std::logic_error("ClusterFixture: node already owns the slot");
  if (!is_master(to)) throw std::logic_error("ClusterFixture: target is not a master");
  const std::string s = std::to_string(slot);
  (void)must(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", nodes_[from].id});
  (void)must(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", nodes_[to].id});
  migrations_[slot] = Migration{from, to};
  move_keys(slot, from, to, keys_to_move);
}

void ClusterFixture::finish_slot_migration(int slot) {
  const auto it = migrations_.find(slot);
  if (it == migrations_.end()) throw std::logic_error("ClusterFixture: slot is not migrating");
  const Migration m = it->second;
  move_all_keys(slot, m.from, m.to);
  set_slot_node_everywhere(slot, m.to);
  migrations_.erase(slot);
  const bool agreed = wait_until(
      [&] {
        for (std::size_t i = 0; i < nodes_.size(); ++i) {
          if (!node(i).running() || node(i).stopped()) continue;
          bool ok = false;
          for (const auto& n : view(i)) {
            for (const auto& [a, b] : n.slots) {
              if (slot >= a && slot <= b) ok = n.id == nodes_[m.to].id;
            }
          }
          if (!ok) return false;
        }
        return true;
      },
      cfg_.timeout);
  if (!agreed) {
    throw std::runtime_error("ClusterFixture: slot " + std::to_string(slot) +
                             " move not seen everywhere\n" + describe_views());
  }
  wait_until_stable();
}

void ClusterFixture::migrate_slot(int slot, std::size_t to) {
  if (owner_of_slot(slot) == to) return;
  begin_slot_migration(slot, to);
  finish_slot_migration(slot);
}

// --- failover ---------------------------------------------------------------------------------

std::size_t ClusterFixture::kill_master_and_wait_failover(
    std::size_t m, const std::function<void(std::size_t)>& on_promoted) {
  if (!node(m).running() || !is_master(m)) {
    throw std::logic_error("ClusterFixture: node " + std::to_string(m) +
                           " is not a running master");
  }
  const std::vector<std::size_t> candidates = replicas_of(m);
  if (candidates.empty()) {
    throw std::logic_error("ClusterFixture: master " + std::to_string(m) + " has no replica");
  }
  for (std::size_t r : candidates) wait_out_last_election(r);
  node(m).kill();
  std::optional<std::size_t> promoted;
  const bool seen = wait_until(
      [&] {
        for (std::size_t r : candidates) {
          if (node(r).running() && is_master(r)) promoted = r;
        }
        return promoted.has_value();
      },
      cfg_.timeout, std::chrono::milliseconds(5));
  if (seen && on_promoted) on_promoted(*promoted);
  const bool ok = seen && wait_until([&] { return why_unstable().empty(); }, cfg_.timeout,
                                     std::chrono::milliseconds(50));
  if (!ok) {
    throw std::runtime_error("ClusterFixture: no failover of node " + std::to_string(m) + ": " +
                             why_unstable() + "\n" + describe_views());
  }
  last_election_[*promoted] = std::chrono::steady_clock::now();
  return *promoted;
}

void ClusterFixture::wait_out_last_election(std::size_t replica) const {
  // Redis 7.0 keeps a replica's election state (votes counted) for 4 x node timeout: an election
  // it starts sooner after its previous one "wins" at once with the old, stale votes and epoch,
  // the other nodes keep the slots with the old master, and the cluster fails. So wait that out.
  if (const auto last = last_election_.find(replica); last != last_election_.end()) {
    std::this_thread::sleep_until(last->second + cfg_.node_timeout * 4 +
                                  std::chrono::milliseconds(200));
  }
}

void ClusterFixture::manual_failover(std::size_t replica, FailoverMode mode,
                                     const std::function<void(std::size_t)>& on_promoted) {
  if (is_master(replica)) throw std::logic_error("ClusterFixture: node is already a master");
  std::vector<std::string> argv = {"CLUSTER", "FAILOVER"};
  if (mode == FailoverMode::force) argv.emplace_back("FORCE");
  if (mode == FailoverMode::takeover) argv.emplace_back("TAKEOVER");
  // A manual failover gives up after 5 s (e.g. when the masters refuse to vote because they voted
  // for a replica of the same master less than 2 x node timeout ago): then ask again.
  const auto round = std::max(std::chrono::milliseconds(6000), cfg_.node_timeout * 4);
  if (mode != FailoverMode::takeover) wait_out_last_election(replica);
  const auto deadline = std::chrono::steady_clock::now() + cfg_.timeout;
  bool promoted = false;
  while (!promoted && std::chrono::steady_clock::now() < deadline) {
    const Reply r = must(replica, argv);
    if (!r.is_ok()) throw std::runtime_error("ClusterFixture: CLUSTER FAILOVER: " + r.to_string());
    promoted = wait_until([&] { return is_master(replica); }, round, std::chrono::milliseconds(5));
  }
  if (promoted && on_promoted) on_promoted(replica);
  if (mode != FailoverMode::takeover) last_election_[replica] = std::chrono::steady_clock::now();
  if (!promoted) {
    throw std::runtime_error("ClusterFixture: manual failover to node " + std::to_string(replica) +
                             " did not happen\n" + describe_views());
  }
  wait_until_stable();
}

void ClusterFixture::restart_node(std::size_t i) {
  if (!node(i).running()) node(i).start();
  wait_until_stable();
}

}  // namespace redlock::test
