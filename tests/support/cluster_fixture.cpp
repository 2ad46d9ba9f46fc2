#include "cluster_fixture.hpp"

#include <algorithm>
#include <stdexcept>
#include <thread>
#include <utility>

#include "support_util.hpp"

namespace redlock::test {

// The fixture's nodes as the tools' Redis Cluster code sees them.
class ClusterFixture::Members final : public nodes::ClusterMembers {
 public:
  explicit Members(const ClusterFixture& f) : f_(f) {}
  [[nodiscard]] std::size_t size() const override { return f_.nodes_.size(); }
  [[nodiscard]] bool live(std::size_t i) const override {
    return f_.node(i).running() && !f_.node(i).stopped();
  }
  [[nodiscard]] Reply command(std::size_t i, const std::vector<std::string>& argv) const override {
    return f_.node(i).command(argv);  // RedisIoError (a std::runtime_error) when no reply came
  }
  [[nodiscard]] std::string id(std::size_t i) const override { return f_.nodes_.at(i).id; }
  [[nodiscard]] std::uint16_t announced_port(std::size_t i) const override {
    return f_.announced_port(i);
  }
  [[nodiscard]] std::string name(std::size_t i) const override {
    return "node " + std::to_string(i) + " (" + f_.address(i) + ")";
  }

 private:
  const ClusterFixture& f_;
};

ClusterFixture::ClusterFixture(ClusterConfig cfg)
    : cfg_(std::move(cfg)), members_(std::make_unique<Members>(*this)) {
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
  try {
    nodes::form_cluster(*members_,
                        {.masters = cfg_.masters, .replicas_per_master = cfg_.replicas_per_master},
                        cfg_.timeout);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("ClusterFixture: ") + e.what());
  }
  // Under load a master can look failed for node_timeout while the cluster forms, and its
  // replica takes over (seen under scripts/test.sh --stress: the self-test found node 5 serving
  // master 2's slots). Every test starts from the documented layout: the master takes its role
  // back.
  for (int m = 0; m < cfg_.masters && cfg_.replicas_per_master > 0; ++m) {
    const auto i = static_cast<std::size_t>(m);
    if (!is_master(i)) manual_failover(i, FailoverMode::graceful);
  }
}

ClusterFixture::~ClusterFixture() = default;

Reply ClusterFixture::must(std::size_t i, const std::vector<std::string>& argv) const {
  try {
    return members_->must(i, argv);
  } catch (const RedisIoError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("ClusterFixture: ") + e.what());
  }
}

std::optional<std::size_t> ClusterFixture::index_of_id(const std::string& id) const {
  return members_->index_of_id(id);
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
  (void)any_running();  // throws when none is
  return *members_->key_slot(key);
}

std::vector<ClusterNodeView> ClusterFixture::view(std::size_t i) const { return members_->view(i); }

std::size_t ClusterFixture::owner_of_slot(int slot) const {
  (void)any_running();
  if (const auto owner = members_->owner_of_slot(slot)) return *owner;
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

bool ClusterFixture::is_master(std::size_t i) const { return members_->is_master(i); }

std::optional<std::size_t> ClusterFixture::master_of(std::size_t replica) const {
  return members_->master_of(replica);
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

std::string ClusterFixture::why_unstable() const { return members_->problem(); }

void ClusterFixture::wait_until_stable() const {
  std::string why;
  if (!members_->wait_stable(cfg_.timeout, &why)) {
    throw std::runtime_error("ClusterFixture: not stable after " +
                             std::to_string(cfg_.timeout.count()) + " ms: " + why + "\n" +
                             describe_views());
  }
}

std::string ClusterFixture::describe_views() const { return members_->describe(); }

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
  if (!r.is_status("OK") && r.str != "NOKEY") {
    throw std::runtime_error("ClusterFixture: MIGRATE: " + nodes::reply_text(r));
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
    if (!r.is_status("OK"))
      throw std::runtime_error("ClusterFixture: CLUSTER FAILOVER: " + nodes::reply_text(r));
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
