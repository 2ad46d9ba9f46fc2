#include "sentinel_fixture.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "nodes/client.hpp"
#include "support_util.hpp"

namespace redlock::test {
namespace {

using std::chrono::milliseconds;

// A field of a flat [k1, v1, k2, v2, ...] array (SENTINEL MASTER / REPLICAS / SENTINELS entry).
std::string field(const Reply& entry, const std::string& key) {
  for (std::size_t i = 0; i + 1 < entry.elements.size(); i += 2) {
    if (entry.elements[i].str == key) return entry.elements[i + 1].str;
  }
  return {};
}

bool up(const RedisServer& s) { return s.running() && !s.stopped(); }

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("SentinelFixture: cannot write " + path);
}

Reply checked(const RedisServer& s, const std::vector<std::string>& argv) {
  Reply r = s.command(argv);
  if (r.is_error()) {
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    throw std::runtime_error(cmd + " on " + s.address() + ": " + nodes::reply_text(r));
  }
  return r;
}

}  // namespace

SentinelFixture::SentinelFixture(SentinelConfig cfg)
    : cfg_(std::move(cfg)), dir_(make_temp_dir("redlock-sentinel")) {
  try {
    if (cfg_.master_names.empty() || cfg_.sentinels < 1 || cfg_.replicas < 0) {
      throw std::invalid_argument("SentinelFixture: need a name and a sentinel");
    }
    // Data nodes: master + replicas per name, replicas synced before any sentinel starts.
    for (const auto& name : cfg_.master_names) {
      Group& g = groups_[name];
      for (int i = 0; i <= cfg_.replicas; ++i) {
        ServerConfig sc = cfg_.server;
        sc.port = 0;
        // A config file of its own: Sentinel's CONFIG REWRITE records the role it gives the node
        // there, and restart_node() can start it as a replica straight away.
        sc.config_file = data_node_config_file(name, static_cast<std::size_t>(i));
        write_text(sc.config_file, "");
        // Full syncs start at once (the default waits 5 s for more replicas to join).
        std::vector<std::string> args = {"--repl-diskless-sync-delay", "0"};
        args.insert(args.end(), sc.extra_args.begin(), sc.extra_args.end());
        sc.extra_args = std::move(args);
        g.nodes.push_back(std::make_unique<RedisServer>(std::move(sc)));
      }
      for (std::size_t i = 1; i < g.nodes.size(); ++i) g.nodes[i]->replica_of(*g.nodes[0]);
    }
    const bool synced = wait_until(
        [&] {
          for (const auto& [name, g] : groups_) {
            const Reply m = g.nodes[0]->command({"INFO", "replication"});
            if (nodes::info_field(m.str, "connected_slaves") != std::to_string(cfg_.replicas)) {
              return false;
            }
            for (std::size_t i = 1; i < g.nodes.size(); ++i) {
              const Reply r = g.nodes[i]->command({"INFO", "replication"});
              if (nodes::info_field(r.str, "master_link_status") != "up") return false;
            }
          }
          return true;
        },
        cfg_.timeout);
    if (!synced) throw std::runtime_error("SentinelFixture: replicas did not sync");

    // Sentinels, each with its own config file.
    const int quorum = cfg_.quorum > 0 ? cfg_.quorum : cfg_.sentinels / 2 + 1;
    std::ostringstream conf;
    for (const auto& [name, g] : groups_) {
      conf << "sentinel monitor " << name << " 127.0.0.1 " << g.nodes[0]->port() << ' ' << quorum
           << "\n"
           << "sentinel down-after-milliseconds " << name << ' ' << cfg_.down_after.count() << "\n"
           << "sentinel failover-timeout " << name << ' ' << cfg_.failover_timeout.count() << "\n"
           << "sentinel parallel-syncs " << name << " 1\n";
    }
    // Each sentinel is told its own id and the others' (known-sentinel), so that they need not
    // wait for each other's hello messages (published every 2 s) to start with.
    static std::atomic<unsigned> fixtures{0};
    const unsigned fixture_no = ++fixtures;
    std::vector<std::uint16_t> ports;
    std::vector<std::string> ids;
    for (int i = 0; i < cfg_.sentinels; ++i) {
      ports.push_back(free_port());
      char id[41];  // 40 hex digits, unique per process, fixture and sentinel
      std::snprintf(id, sizeof id, "%08x%08x%024x", static_cast<unsigned>(::getpid()), fixture_no,
                    static_cast<unsigned>(i + 1));
      ids.emplace_back(id);
    }
    for (int i = 0; i < cfg_.sentinels; ++i) {
      const std::string path = dir_ + "/sentinel-" + std::to_string(i) + ".conf";
      {
        std::ofstream out(path, std::ios::trunc);
        out << conf.str() << "sentinel myid " << ids[static_cast<std::size_t>(i)] << "\n";
        for (int j = 0; j < cfg_.sentinels; ++j) {
          if (j == i) continue;
          for (const auto& [name, g] : groups_) {
            out << "sentinel known-sentinel " << name << " 127.0.0.1 "
                << ports[static_cast<std::size_t>(j)] << ' ' << ids[static_cast<std::size_t>(j)]
                << "\n";
          }
        }
        if (!out) throw std::runtime_error("SentinelFixture: cannot write " + path);
      }
      ServerConfig sc;
      sc.port = ports[static_cast<std::size_t>(i)];
      sc.executable =
          cfg_.sentinel_executable.empty() ? cfg_.server.executable : cfg_.sentinel_executable;
      sc.config_file = path;
      sc.extra_args = {"--sentinel"};
      sc.startup_timeout = cfg_.server.startup_timeout;
      if (cfg_.server.tls && cfg_.server.tls->tls_only && cfg_.server.tls->replication) {
        sc.tls = cfg_.server.tls;  // TLS-only, and tls-replication for its outgoing links
      }
      for (int attempt = 1;; ++attempt) {
        try {
          sentinels_.push_back(std::make_unique<RedisServer>(sc));
          break;
        } catch (const std::runtime_error& e) {
          // Its port was taken since free_port(): another one (the other sentinels' stale
          // known-sentinel entry is corrected by its hello messages, which carry the same id).
          if (attempt >= 3 ||
              std::string(e.what()).find("Address already in use") == std::string::npos) {
            throw;
          }
          sc.port = free_port();
        }
      }
    }
    wait_until_stable();
  } catch (...) {
    sentinels_.clear();
    groups_.clear();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw;
  }
}

SentinelFixture::~SentinelFixture() {
  sentinels_.clear();  // first, so that they do not fail anything over while the nodes go
  groups_.clear();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::vector<std::string> SentinelFixture::sentinel_addresses() const {
  std::vector<std::string> out;
  for (const auto& s : sentinels_) out.push_back(s->address());
  return out;
}

std::string SentinelFixture::sentinel_config_file(std::size_t i) const {
  return sentinels_.at(i)->config().config_file;
}

const SentinelFixture::Group& SentinelFixture::group(const std::string& name) const {
  const auto it = groups_.find(name);
  if (it == groups_.end()) throw std::out_of_range("SentinelFixture: no master named " + name);
  return it->second;
}

std::size_t SentinelFixture::node_count(const std::string& name) const {
  return group(name).nodes.size();
}

RedisServer& SentinelFixture::node(const std::string& name, std::size_t i) {
  return *group(name).nodes.at(i);
}

const RedisServer& SentinelFixture::node(const std::string& name, std::size_t i) const {
  return *group(name).nodes.at(i);
}

std::vector<std::size_t> SentinelFixture::running_sentinels() const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    if (up(*sentinels_[i])) out.push_back(i);
  }
  return out;
}

std::optional<std::string> SentinelFixture::master_address_seen_by(std::size_t s,
                                                                   const std::string& name) const {
  const RedisServer& sen = sentinel(s);
  if (!up(sen)) return std::nullopt;
  const Reply r = sen.command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", name});
  if (r.type != Reply::Type::array || r.elements.size() != 2) return std::nullopt;
  return r.elements[0].str + ":" + r.elements[1].str;
}

std::vector<std::optional<std::string>> SentinelFixture::master_addresses(
    const std::string& name) const {
  std::vector<std::optional<std::string>> out;
  for (std::size_t i = 0; i < sentinels_.size(); ++i)
    out.push_back(master_address_seen_by(i, name));
  return out;
}

std::optional<std::size_t> SentinelFixture::index_of_address(const std::string& name,
                                                             const std::string& addr) const {
  const Group& g = group(name);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i]->address() == addr) return i;
  }
  return std::nullopt;
}

std::size_t SentinelFixture::current_master_index(const std::string& name) const {
  std::optional<std::string> agreed;
  for (std::size_t s : running_sentinels()) {
    const auto a = master_address_seen_by(s, name);
    if (!a)
      throw std::runtime_error("SentinelFixture: sentinel " + std::to_string(s) +
                               " reports no master for " + name);
    if (agreed && *agreed != *a) {
      throw std::runtime_error("SentinelFixture: sentinels disagree on " + name + ": " + *agreed +
                               " vs " + *a);
    }
    agreed = a;
  }
  if (!agreed) throw std::logic_error("SentinelFixture: no sentinel is running");
  const auto idx = index_of_address(name, *agreed);
  if (!idx) throw std::runtime_error("SentinelFixture: master " + *agreed + " is not ours");
  return *idx;
}

RedisServer& SentinelFixture::current_master(const std::string& name) {
  return node(name, current_master_index(name));
}

std::string SentinelFixture::why_unstable() const {
  const std::vector<std::size_t> live = running_sentinels();
  if (live.empty()) return "no sentinel is running";
  for (const auto& [name, g] : groups_) {
    std::size_t m = 0;
    try {
      m = current_master_index(name);
    } catch (const std::exception& e) {
      return e.what();
    }
    const RedisServer& master = *g.nodes[m];
    if (!up(master)) return name + ": master " + master.address() + " is not running";
    const Reply mi = master.command({"INFO", "replication"});
    if (nodes::info_field(mi.str, "role") != "master")
      return name + ": " + master.address() + " no master";
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      if (i == m || !up(*g.nodes[i])) continue;
      const Reply ri = g.nodes[i]->command({"INFO", "replication"});
      if (nodes::info_field(ri.str, "role") != "slave" ||
          nodes::info_field(ri.str, "master_port") != std::to_string(master.port()) ||
          nodes::info_field(ri.str, "master_link_status") != "up") {
        return name + ": " + g.nodes[i]->address() + " is not a synced replica of " +
               master.address();
      }
    }
    for (std::size_t s : live) {
      const std::string who = "sentinel " + std::to_string(s) + " (" + sentinel(s).address() + ")";
      const Reply mm = checked(sentinel(s), {"SENTINEL", "MASTER", name});
      if (field(mm, "flags") != "master") {
        return who + ": " + name + " flags " + field(mm, "flags");
      }
      const Reply reps = checked(sentinel(s), {"SENTINEL", "REPLICAS", name});
      for (std::size_t i = 0; i < g.nodes.size(); ++i) {
        if (i == m || !up(*g.nodes[i])) continue;
        bool seen = false;
        for (const Reply& e : reps.elements) {
          if (field(e, "name") != g.nodes[i]->address()) continue;
          seen = field(e, "flags") == "slave" && field(e, "master-link-status") == "ok" &&
                 field(e, "master-port") == std::to_string(master.port());
        }
        if (!seen) return who + ": does not list " + g.nodes[i]->address() + " as a good replica";
      }
      const Reply sens = checked(sentinel(s), {"SENTINEL", "SENTINELS", name});
      std::size_t known = 0;
      std::string flags;
      for (const Reply& e : sens.elements) {
        flags += (flags.empty() ? "" : " ") + field(e, "flags");
        // "master_down" (it voted the old master down) may linger after a failover: harmless.
        const std::string f = field(e, "flags");
        if (f.find("s_down") == std::string::npos && f.find("disconnected") == std::string::npos) {
          ++known;
        }
      }
      if (known + 1 < live.size()) {
        return who + ": knows " + std::to_string(known) + " of the " +
               std::to_string(live.size() - 1) + " other sentinels of " + name +
               " (flags: " + flags + ")";
      }
    }
  }
  return {};
}

void SentinelFixture::wait_until_stable() const { wait_until_stable_for(cfg_.timeout); }

void SentinelFixture::wait_until_stable_for(std::chrono::milliseconds limit) const {
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
      limit, milliseconds(50));
  if (!ok) {
    std::string all;
    for (const auto& [name, g] : groups_) all += describe(name);
    throw std::runtime_error("SentinelFixture: not stable after " + std::to_string(limit.count()) +
                             " ms: " + why + "\n" + all);
  }
}

std::string SentinelFixture::describe(const std::string& name) const {
  std::ostringstream os;
  const Group& g = group(name);
  os << "--- " << name << "\n";
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    os << "node " << i << " " << g.nodes[i]->address();
    if (!up(*g.nodes[i])) {
      os << ": down\n";
      continue;
    }
    try {
      const Reply r = g.nodes[i]->command({"INFO", "replication"}, milliseconds(500));
      os << " role " << nodes::info_field(r.str, "role").value_or("?") << " master_port "
         << nodes::info_field(r.str, "master_port").value_or("-") << "\n";
    } catch (const std::exception& e) {
      os << ": " << e.what() << "\n";
    }
  }
  for (std::size_t s = 0; s < sentinels_.size(); ++s) {
    os << "sentinel " << s << " " << sentinel(s).address();
    if (!up(sentinel(s))) {
      os << ": down\n";
      continue;
    }
    try {
      // TILT (the sentinel's timer ran over 2 s late: a stall) stops it acting for 30 s.
      const Reply info = sentinel(s).command({"INFO", "sentinel"}, milliseconds(500));
      os << " tilt " << nodes::info_field(info.str, "sentinel_tilt").value_or("?") << " since "
         << nodes::info_field(info.str, "sentinel_tilt_since_seconds").value_or("?") << " s";
      os << " master " << master_address_seen_by(s, name).value_or("(none)") << "; replicas:";
      const Reply reps = sentinel(s).command({"SENTINEL", "REPLICAS", name}, milliseconds(500));
      for (const Reply& e : reps.elements) {
        os << " " << field(e, "name") << "[" << field(e, "flags") << ","
           << field(e, "master-link-status") << "]";
      }
      const Reply sens = sentinel(s).command({"SENTINEL", "SENTINELS", name}, milliseconds(500));
      os << "; sentinels:";
      for (const Reply& e : sens.elements) {
        os << " " << field(e, "name") << "[" << field(e, "flags") << "]";
      }
      os << "\n";
    } catch (const std::exception& e) {
      os << ": " << e.what() << "\n";
    }
  }
  return os.str();
}

std::size_t SentinelFixture::wait_for_new_master(const std::string& name, std::size_t old_master,
                                                 const char* what,
                                                 std::chrono::milliseconds limit) {
  std::optional<std::size_t> promoted;
  const bool ok = wait_until(
      [&] {
        const std::size_t m = current_master_index(name);  // throws while they disagree
        if (m == old_master) return false;
        const Reply r = node(name, m).command({"INFO", "replication"});
        if (nodes::info_field(r.str, "role") != "master") return false;
        promoted = m;
        return true;
      },
      limit, milliseconds(50));
  if (!ok) {
    throw std::runtime_error(std::string("SentinelFixture: ") + what + " of " + name +
                             " not seen within " + std::to_string(limit.count()) + " ms\n" +
                             describe(name));
  }
  return *promoted;
}

void SentinelFixture::make_replica(const std::string& name, std::size_t i, std::size_t master) {
  // What Sentinel would send, only sooner. "OK Already connected to specified master" is fine.
  const Reply r =
      node(name, i).command({"REPLICAOF", "127.0.0.1", std::to_string(node(name, master).port())});
  if (r.type != Reply::Type::status || r.str.rfind("OK", 0) != 0) {
    throw std::runtime_error("SentinelFixture: REPLICAOF on " + node(name, i).address() + ": " +
                             nodes::reply_text(r));
  }
}

std::size_t SentinelFixture::failover(const std::string& name, Rejoin how) {
  const std::size_t old = current_master_index(name);
  const std::vector<std::size_t> live = running_sentinels();
  if (live.empty()) throw std::logic_error("SentinelFixture: no sentinel is running");
  const Reply r = sentinel(live.front()).command({"SENTINEL", "FAILOVER", name});
  if (!r.is_status("OK"))
    throw std::runtime_error("SentinelFixture: SENTINEL FAILOVER: " + nodes::reply_text(r));
  if (how == Rejoin::now && up(node(name, old))) {
    // Demote the old master as soon as the chosen replica says role:master, before the
    // sentinels switch: their first INFO of the old master then already shows a replica (they
    // poll a replica's INFO only every 10 s, so a later REPLICAOF is seen late).
    std::optional<std::size_t> chosen;
    wait_until(
        [&] {
          for (std::size_t i = 0; i < node_count(name); ++i) {
            if (i == old || !up(node(name, i))) continue;
            const Reply info = node(name, i).command({"INFO", "replication"});
            if (nodes::info_field(info.str, "role") == "master") chosen = i;
          }
          return chosen.has_value();
        },
        cfg_.timeout, milliseconds(5));
    if (chosen) make_replica(name, old, *chosen);
  }
  const std::size_t promoted = wait_for_new_master(name, old, "failover", cfg_.timeout);
  if (how == Rejoin::now && up(node(name, old))) make_replica(name, old, promoted);  // (if raced)
  if (how == Rejoin::now) wait_until_stable();
  if (how == Rejoin::by_sentinel) wait_until_stable_for(by_sentinel_limit());
  return promoted;
}

std::size_t SentinelFixture::kill_master_and_wait_failover(const std::string& name) {
  const std::size_t old = current_master_index(name);
  if (node_count(name) < 2) throw std::logic_error("SentinelFixture: no replica to promote");
  node(name, old).kill();
  const std::size_t promoted =
      wait_for_new_master(name, old, "automatic failover", election_limit());
  wait_until_stable();  // the other replicas follow the new master
  return promoted;
}

void SentinelFixture::restart_node(const std::string& name, std::size_t i, Rejoin how) {
  if (!node(name, i).running()) {
    // Rejoin::now: it starts as a replica of the current master (the sentinels' first INFO of it
    // already says so; a REPLICAOF sent after start could come after that INFO, and the next one
    // is 10 s later). Otherwise as a master, whatever Sentinel's CONFIG REWRITE left there.
    const std::size_t m = current_master_index(name);
    write_text(node(name, i).config().config_file,
               how == Rejoin::now && m != i
                   ? "replicaof 127.0.0.1 " + std::to_string(node(name, m).port()) + "\n"
                   : std::string());
    node(name, i).start();
  }
  if (how == Rejoin::now) wait_until_stable();
  if (how == Rejoin::by_sentinel) wait_until_stable_for(by_sentinel_limit());
}

std::chrono::milliseconds SentinelFixture::by_sentinel_limit() const {
  // Sentinel demotes a returning old master 10-20 s after it sees it (measured: ~20 s).
  return std::max(cfg_.timeout, std::chrono::milliseconds(60000));
}

std::chrono::milliseconds SentinelFixture::election_limit() const {
  // An automatic failover is Sentinel's own doing: down-after, an election that may need another
  // round (no second failover of a master within 2 x failover-timeout), and a sentinel in TILT
  // (its timer ran over 2 s late, e.g. a config fsync behind a disk writer) acts on nothing for
  // 30 s. Seen once under scripts/test.sh --stress: no failover within 30 s (usually 4-8 s).
  return std::max(cfg_.timeout, std::chrono::milliseconds(60000));
}

std::string SentinelFixture::data_node_config_file(const std::string& name, std::size_t i) const {
  std::string safe;
  for (char ch : name) safe += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return dir_ + "/node-" + safe + "-" + std::to_string(i) + ".conf";
}

void SentinelFixture::delete_on_master(const std::string& name, const std::string& key) {
  current_master(name).del(key);
}

}  // namespace redlock::test
