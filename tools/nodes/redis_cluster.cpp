// Redis Cluster forming and checking (redis_cluster.hpp).

#include "redis_cluster.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace redlock::nodes {
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

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// Polls `pred` every `poll` until it holds (true) or `timeout` passed (false). An exception
// from `pred` (a node that did not answer this time) counts as "not yet".
template <class Pred>
bool poll_until(Pred pred, std::chrono::milliseconds timeout,
                std::chrono::milliseconds poll = std::chrono::milliseconds{20}) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto holds = [&] {
    try {
      return pred();
    } catch (const std::exception&) {
      return false;
    }
  };
  while (!holds()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(poll);
  }
  return true;
}

std::optional<int> to_int(const std::string& s) {
  try {
    std::size_t used = 0;
    const int v = std::stoi(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace

bool ClusterNodeView::has_flag(const std::string& f) const {
  return std::find(flags.begin(), flags.end(), f) != flags.end();
}

std::vector<ClusterNodeView> parse_cluster_nodes(std::string_view text) {
  std::vector<ClusterNodeView> out;
  for (const std::string& line : split(text, '\n')) {
    std::string l = line;
    if (!l.empty() && l.back() == '\r') l.pop_back();
    const std::vector<std::string> f = split(l, ' ');
    if (f.size() < 8) continue;
    ClusterNodeView v;
    v.id = f[0];
    // ip:port@cport[,hostname]
    const std::string addr = f[1].substr(0, f[1].find(','));
    const auto at = addr.find('@');
    const auto colon = addr.rfind(':', at);
    if (colon != std::string::npos) {
      v.ip = addr.substr(0, colon);
      v.port = static_cast<std::uint16_t>(
          to_int(addr.substr(colon + 1, at == std::string::npos ? at : at - colon - 1))
              .value_or(0));
      if (at != std::string::npos) {
        v.bus_port = static_cast<std::uint16_t>(to_int(addr.substr(at + 1)).value_or(0));
      }
    }
    v.flags = split(f[2], ',');
    v.master_id = f[3] == "-" ? std::string() : f[3];
    v.connected = f[7] == "connected";
    for (std::size_t k = 8; k < f.size(); ++k) {
      if (f[k].front() == '[') continue;  // [slot->-id] / [slot-<-id]: migration state
      const auto dash = f[k].find('-');
      const auto a = to_int(f[k].substr(0, dash));
      const auto b = dash == std::string::npos ? a : to_int(f[k].substr(dash + 1));
      if (a && b) v.slots.emplace_back(*a, *b);
    }
    out.push_back(std::move(v));
  }
  return out;
}

// ---- ClusterMembers ---------------------------------------------------------------------------

Reply ClusterMembers::must(std::size_t i, const std::vector<std::string>& argv) const {
  Reply r = command(i, argv);
  if (r.is_error()) {
    throw std::runtime_error(join(argv, " ") + " on " + name(i) + ": " + reply_text(r));
  }
  return r;
}

std::vector<ClusterNodeView> ClusterMembers::view(std::size_t i) const {
  return parse_cluster_nodes(must(i, {"CLUSTER", "NODES"}).str);
}

std::optional<std::size_t> ClusterMembers::index_of_id(const std::string& node_id) const {
  if (node_id.empty()) return std::nullopt;
  for (std::size_t i = 0; i < size(); ++i) {
    if (id(i) == node_id) return i;
  }
  return std::nullopt;
}

bool ClusterMembers::is_master(std::size_t i) const {
  for (const auto& n : view(i)) {
    if (n.has_flag("myself")) return n.has_flag("master");
  }
  return false;
}

std::optional<std::size_t> ClusterMembers::master_of(std::size_t replica) const {
  for (const auto& n : view(replica)) {
    if (n.has_flag("myself")) return index_of_id(n.master_id);
  }
  return std::nullopt;
}

std::optional<std::size_t> ClusterMembers::owner_of_slot(int slot) const {
  for (std::size_t i = 0; i < size(); ++i) {
    if (!live(i)) continue;
    for (const auto& n : view(i)) {
      for (const auto& [a, b] : n.slots) {
        if (slot >= a && slot <= b) return index_of_id(n.id);
      }
    }
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<int> ClusterMembers::key_slot(const std::string& key) const {
  for (std::size_t i = 0; i < size(); ++i) {
    if (live(i)) return static_cast<int>(must(i, {"CLUSTER", "KEYSLOT", key}).integer);
  }
  return std::nullopt;
}

std::string ClusterMembers::problem() const {
  try {
    std::string reference;
    std::size_t reference_node = 0;
    for (std::size_t i = 0; i < size(); ++i) {
      if (!live(i)) continue;
      const std::string where = name(i);
      const Reply info = command(i, {"CLUSTER", "INFO"});
      if (info_field(info.str, "cluster_state") != "ok") return where + ": cluster_state not ok";
      // Canonical picture of the cluster as node i sees it: role and slots of every node.
      std::vector<ClusterNodeView> v = view(i);
      std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
      std::ostringstream picture;
      int covered = 0;
      for (auto& n : v) {
        const auto idx = index_of_id(n.id);
        if (!idx) return where + ": knows an unknown node " + n.id;
        if (live(*idx) && (n.has_flag("fail") || n.has_flag("fail?") || n.has_flag("handshake"))) {
          return where + ": flags running " + name(*idx) + " " + join(n.flags, ",");
        }
        std::sort(n.slots.begin(), n.slots.end());
        const auto master = index_of_id(n.master_id);
        picture << *idx
                << (n.has_flag("master")
                        ? std::string(" master")
                        : " replica-of:" + (master ? std::to_string(*master) : n.master_id));
        for (const auto& [a, b] : n.slots) {
          picture << ' ' << a << '-' << b;
          covered += b - a + 1;
        }
        picture << '\n';
      }
      if (v.size() != size()) return where + ": knows " + std::to_string(v.size()) + " nodes";
      if (covered != cluster_slot_count) {
        return where + ": sees " + std::to_string(covered) + " slots covered";
      }
      if (reference.empty()) {
        reference = picture.str();
        reference_node = i;
      } else if (picture.str() != reference) {
        return where + " and " + name(reference_node) + " disagree:\n" + picture.str() + "vs\n" +
               reference;
      }
      // A running replica is synced with its master.
      const Reply repl = command(i, {"INFO", "replication"});
      if (info_field(repl.str, "role") == "slave" &&
          info_field(repl.str, "master_link_status") != "up") {
        return where + ": replica link to its master not up";
      }
    }
    if (reference.empty()) return "no node is running";
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string ClusterMembers::describe() const {
  std::ostringstream os;
  for (std::size_t i = 0; i < size(); ++i) {
    os << "--- " << name(i);
    if (!live(i)) {
      os << ": not running (or paused)\n";
      continue;
    }
    try {
      const Reply info = command(i, {"CLUSTER", "INFO"});
      os << " state " << info_field(info.str, "cluster_state").value_or("?") << "\n"
         << command(i, {"CLUSTER", "NODES"}).str;
    } catch (const std::exception& e) {
      os << ": " << e.what() << "\n";
    }
  }
  return os.str();
}

bool ClusterMembers::wait_stable(std::chrono::milliseconds timeout, std::string* why) const {
  std::string last;
  const bool ok = poll_until([&] { return (last = problem()).empty(); }, timeout);
  if (why != nullptr) *why = last;
  return ok;
}

// ---- forming ----------------------------------------------------------------------------------

bool cluster_node_blank(const ClusterMembers& members, std::size_t i) {
  const Reply info = members.must(i, {"CLUSTER", "INFO"});
  return info_field(info.str, "cluster_known_nodes") == "1" &&
         info_field(info.str, "cluster_slots_assigned") == "0";
}

void form_cluster(const ClusterMembers& members, ClusterLayout layout,
                  std::chrono::milliseconds timeout) {
  if (layout.masters < 1 || layout.replicas_per_master < 0 ||
      static_cast<std::size_t>(layout.size()) != members.size()) {
    throw std::invalid_argument("form_cluster: " + std::to_string(members.size()) + " nodes for " +
                                std::to_string(layout.masters) + " masters with " +
                                std::to_string(layout.replicas_per_master) + " replicas each");
  }
  const auto failed = [&](const std::string& what) {
    return std::runtime_error(what + " within " + std::to_string(timeout.count()) + " ms\n" +
                              members.describe());
  };
  // Slots and distinct config epochs first (SET-CONFIG-EPOCH only works on a node that knows no
  // other node), then introduce everybody to node 0.
  const auto masters = static_cast<std::size_t>(layout.masters);
  for (std::size_t m = 0; m < masters; ++m) {
    const auto first = static_cast<int>(m * cluster_slot_count / masters);
    const auto last = static_cast<int>((m + 1) * cluster_slot_count / masters) - 1;
    (void)members.must(m,
                       {"CLUSTER", "ADDSLOTSRANGE", std::to_string(first), std::to_string(last)});
    (void)members.must(m, {"CLUSTER", "SET-CONFIG-EPOCH", std::to_string(m + 1)});
  }
  std::vector<std::string> meet{"CLUSTER", "MEET", "127.0.0.1",
                                std::to_string(members.announced_port(0))};
  if (const auto bus = members.bus_port(0); bus != 0) meet.push_back(std::to_string(bus));
  for (std::size_t i = 1; i < members.size(); ++i) (void)members.must(i, meet);
  const bool met = poll_until(
      [&] {
        for (std::size_t i = 0; i < members.size(); ++i) {
          const auto v = members.view(i);
          if (v.size() != members.size()) return false;
          for (const auto& n : v) {
            if (n.has_flag("handshake") || n.has_flag("noaddr") || !n.connected) return false;
          }
        }
        return true;
      },
      timeout);
  if (!met) throw failed("the nodes did not all meet");
  const auto replicas = static_cast<std::size_t>(layout.replicas_per_master);
  for (std::size_t m = 0; m < masters; ++m) {
    for (std::size_t r = 0; r < replicas; ++r) {
      (void)members.must(masters + m * replicas + r, {"CLUSTER", "REPLICATE", members.id(m)});
    }
  }
  // Everybody agrees on who replicates whom, then on the rest.
  const bool roles = poll_until(
      [&] {
        for (std::size_t i = 0; i < members.size(); ++i) {
          for (const auto& n : members.view(i)) {
            const auto idx = members.index_of_id(n.id);
            if (!idx) return false;
            const bool want_master = *idx < masters;
            if (want_master != n.has_flag("master")) return false;
            if (!want_master && n.master_id != members.id((*idx - masters) / replicas)) {
              return false;
            }
          }
        }
        return true;
      },
      timeout);
  if (!roles) throw failed("the replicas were not seen everywhere");
  std::string why;
  if (!members.wait_stable(timeout, &why)) throw failed("the cluster was not stable (" + why + ")");
}

}  // namespace redlock::nodes
