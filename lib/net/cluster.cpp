// A Redis Cluster as one vote. The node asks the cluster for its slot map (`CLUSTER SLOTS`: at
// start, every second, and soon after a redirection), keeps one standalone node (standalone.cpp:
// its handshake, restart guard, replicated votes and wake-up subscriber) per master, and sends
// each command to the master of its keys' slot:
// - `MOVED slot host:port`: the slot has a new owner: the map is corrected for that slot, a fresh
//   map is asked for, and the command goes to the new owner;
// - `ASK slot host:port`: the slot is being migrated and the key is not here: `ASKING` and the
//   command go to the importing master, once;
// - `TRYAGAIN`, `CLUSTERDOWN` and any other error are the answer (no vote, with the reason);
// all within the command's own deadline (a redirection that runs out of it is a timeout).
// A multi-resource command whose keys live in several slots goes out as one command per slot
// (core/slots.hpp), and the vote is yes only if every part granted.
//
// Promotion: when a slot's master is a server this node knew as a replica, or one that says
// (INFO replication, master_replid2) it was promoted since its process started and that this node
// first met after its first slot map, its answers wait out the restart quarantine from when this
// node learned of it, as a restarted server's do: asynchronous replication may have lost the key.
// A process that starts after the failover cannot tell (neither CLUSTER SLOTS nor INFO carries
// the time of a promotion); replicated votes (Options::min_replicas) are the defence then.
//
// The quarantine follows the keys, not only the server: a slot that leaves a master whose answers
// are excluded (migrated away, MOVED), or whose master is gone from the slot map (failed over),
// carries the exclusion for one quarantine from when this node saw it move, and an answer that an
// ASK from an excluded master led to is excluded as that master's would be. Otherwise the keys a
// promotion lost would be vouched for by another master: a migrating source without the key
// answers ASK, and the importing master grants.

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "net/cluster_node.hpp"

namespace redlock::net {
namespace cluster {

std::string without_time_left(const std::string& why) {
  const auto at = why.rfind(" (");
  return at != std::string::npos && why.ends_with(" ms left)") ? why.substr(0, at) : why;
}

// --- Master ---------------------------------------------------------------------------------

void Master::on_replication(std::optional<bool> promoted_since_start) {
  // A master met only after the first map (through a redirection or a newer map) that was a
  // replica when its process started has been promoted, at the latest now.
  if (met_after_first_map && promoted_since_start.value_or(false) && !promotion_noted) {
    promotion_noted = true;
    promotion.promoted(BootClock::now(),
                       "master " + address + " was promoted from replica (a cluster failover)");
    log(LogLevel::warning, address +
                               " was promoted from replica: its answers wait out the restart "
                               "quarantine");
  }
}
std::optional<std::string> Master::exclusion(BootClock::time_point now) const {
  if (!node) return untrusted;
  if (auto why = promotion.exclusion(now, /*durable=*/false, restart_quarantine())) return why;
  if (auto why = node->vote_exclusion(now)) return "master " + address + ": " + *why;
  return std::nullopt;
}

Master* ClusterNode::any_master() const {
  for (const auto& [addr, m] : masters_) {
    if (!m->retired) return m;
  }
  return nullptr;
}

Master& ClusterNode::master_at(ClusterEndpoint e) {
  if (e.host.empty()) e.host = asking_on_.host;
  const std::string key = host_port(e.host, e.port);
  if (auto it = masters_.find(key); it != masters_.end()) return *it->second;
  Master& ref = adopt(std::make_unique<Master>(*this, e));
  ref.met_after_first_map = have_map_;
  ref.last_in_map = BootClock::now();
  masters_.emplace(key, &ref);
  const auto trusted = trust(e.host, e.port);
  if (!trusted.trusted) {
    ref.untrusted = "master " + trusted.why_not;
    ref.closed = true;
    host_.log(LogLevel::warning, name_ + ": " + ref.untrusted);
    return ref;
  }
  ref.node = master_node(ref, e.host, e.port, trusted.verify_name);
  if (closing_) {
    ref.node->close();
  } else {
    ref.node->start();
  }
  return ref;
}

void ClusterNode::apply(const std::vector<detail::SlotRange>& map, BootClock::time_point at) {
  // The table first (core/slots.hpp: every slot it names is checked there): a map it refuses
  // makes no master and changes nothing.
  std::string error;
  const auto owner = detail::slot_owners(map, error);
  if (!owner) {
    next_topology(error);
    return;
  }
  const bool first = !have_map_;
  std::vector<Master*> range_master(map.size(), nullptr);
  std::set<std::string> replicas;
  for (std::size_t i = 0; i < map.size(); ++i) {
    const auto& range = map[i];
    Master& m = master_at(range.master);
    range_master[i] = &m;
    m.last_in_map = at;
    if (!range.master_id.empty()) {
      if (!first && replica_ids_.count(range.master_id) != 0) {
        m.promotion.promoted(
            at, "master " + m.address + " was a replica in the last slot map (a cluster failover)");
        host_.log(LogLevel::warning, name_ + ": " + m.address +
                                         " was promoted from replica: its answers wait out the "
                                         "restart quarantine");
      }
      m.id = range.master_id;
    }
    replicas.insert(range.replica_ids.begin(), range.replica_ids.end());
  }
  std::vector<Master*> owners(detail::cluster_slots, nullptr);
  for (std::size_t s = 0; s < owners.size(); ++s) {
    if ((*owner)[s] != detail::no_owner) owners[s] = range_master[(*owner)[s]];
  }
  if (!first) taint_moved_slots(owners, at);
  slots_ = std::move(owners);
  replica_ids_ = std::move(replicas);
  map_error_.clear();
  resubscribe_all();
  if (!first) return;
  have_map_ = true;
  if (const Master* m = slots_[0]; m != nullptr) {
    identity_ = "cluster " + (m->id.empty() ? m->address : m->id);
    host_.on_server_identified(index_);
  }
  waiting_.release([this](const PendingCommands::Command& c) {
    return send(c.req, c.deadline, *c.sink, c.tag, c.sent);
  });
}

// A new map moves slots from `slots_` to `owners`: those that leave a master whose answers are
// excluded now, or a master that serves no slot any more (failed over: killed, or a replica now),
// are tainted. A migration between live masters taints nothing.
void ClusterNode::taint_moved_slots(const std::vector<Master*>& owners, BootClock::time_point at) {
  const std::set<const Master*> serving(owners.begin(), owners.end());
  std::map<const Master*, std::optional<std::string>> why_of;  // per old owner, asked once
  auto reason = [&](const Master* old) -> const std::optional<std::string>& {
    auto it = why_of.find(old);
    if (it != why_of.end()) return it->second;
    std::optional<std::string> why = old->exclusion(at);
    if (why) why = without_time_left(*why);
    if (!why && serving.count(old) == 0) why = "it serves no slot any more: a failover";
    return why_of.emplace(old, std::move(why)).first->second;
  };
  // Consecutive slots with the same old owner and reason become one range.
  constexpr auto n = static_cast<unsigned>(detail::cluster_slots);
  unsigned start = 0;
  const Master* run_owner = nullptr;
  for (unsigned s = 0; s <= n; ++s) {  // one past the end closes the last range
    const Master* old = s < n ? slots_[s] : nullptr;
    const bool moved = old != nullptr && owners[s] != old && reason(old).has_value();
    if (run_owner != nullptr && (!moved || old != run_owner)) {
      taint(start, s - 1, at, run_owner->address, *reason(run_owner));
      run_owner = nullptr;
    }
    if (moved && run_owner == nullptr) {
      start = s;
      run_owner = old;
    }
  }
}

void ClusterNode::retire_unused() {
  std::set<const Master*> serving(slots_.begin(), slots_.end());
  const auto now = BootClock::now();
  std::erase_if(taints_, [now](const Taint& t) { return now >= t.until; });
  for (auto it = masters_.begin(); it != masters_.end();) {
    Master& m = *it->second;
    if (serving.count(&m) != 0 || now - m.last_in_map < retire_after) {
      ++it;
      continue;
    }
    host_.log(LogLevel::debug, name_ + ": " + m.address + " serves no slot any more");
    retire(m);  // (its subscriptions are made again below, on the slot's owner)
    it = masters_.erase(it);
  }
  drop_closed_masters();
  resubscribe_all();
}

}  // namespace cluster

std::unique_ptr<Node> make_cluster_node(uv_loop_t* loop, NodeHost& host, int index,
                                        TransportMaker transport, const NodeAddress& address,
                                        const Options& options, NodeMetrics* metrics) {
  return std::make_unique<cluster::ClusterNode>(loop, host, index, std::move(transport), address,
                                                options, metrics);
}

}  // namespace redlock::net