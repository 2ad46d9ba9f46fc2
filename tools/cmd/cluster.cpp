// redlock-cli cluster up|down|status|kill I|stop I|cont I|start I: the node manager
// (tools/nodes/manager.hpp) behind the command line.

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli.hpp"
#include "json.hpp"
#include "nodes/manager.hpp"
#include "output.hpp"

namespace fs = std::filesystem;

namespace redlock::cli {

using namespace redlock::nodes;

// ---- the `cluster` subcommand -----------------------------------------------------------------

namespace {

struct ClusterFlags {
  std::string count, base_port, dir, persistence, topology, replicas, bus_port_offset, delay, node;
};

int int_flag(const char* flag, const std::string& text, int lo, int hi) {
  auto v = parse_int(text);
  if (!v) throw UsageError(std::string(flag) + " " + text + ": not a number");
  if (*v < lo || *v > hi) {
    throw UsageError(std::string(flag) + " " + text + ": must be between " + std::to_string(lo) +
                     " and " + std::to_string(hi));
  }
  return static_cast<int>(*v);
}

// Saved settings of the last `up` in the directory, overridden by the flags actually given.
// TLS is what `up` is told (--tls or REDLOCK_TLS), for the other commands what `up` saved.
ClusterSettings resolve(const ClusterFlags& f, bool up, const Globals& g) {
  std::optional<int> count, base;
  std::optional<Persistence> pers;
  if (!f.count.empty()) count = int_flag("--count", f.count, 1, max_count);
  if (!f.base_port.empty()) base = int_flag("--base-port", f.base_port, min_port, max_port);
  if (!f.persistence.empty()) {
    if (f.persistence == "none")
      pers = Persistence::none;
    else if (f.persistence == "aof")
      pers = Persistence::aof;
    else
      throw UsageError("--persistence " + f.persistence + ": expected none or aof");
  }
  std::optional<Topology> topology;
  if (!f.topology.empty()) {
    if (f.topology == "standalone")
      topology = Topology::standalone;
    else if (f.topology == "sentinel")
      topology = Topology::sentinel;
    else if (f.topology == "cluster")
      topology = Topology::cluster;
    else
      throw UsageError("--topology " + f.topology + ": expected standalone, sentinel or cluster");
  }
  std::optional<int> replicas;
  if (!f.replicas.empty()) {
    replicas = int_flag("--replicas", f.replicas, 0, max_cluster_replicas);
  }
  fs::path dir = f.dir.empty() ? ClusterManager::default_dir() : fs::path(f.dir);
  ClusterSettings s = ClusterManager::load_saved(dir).value_or(ClusterSettings{});
  s.dir = dir;
  if (count) s.count = *count;
  if (base) s.base_port = *base;
  if (pers) s.persistence = *pers;
  if (topology) s.topology = *topology;
  if (replicas) {
    if (s.topology != Topology::cluster) {
      throw UsageError("--replicas " + f.replicas + ": only with --topology cluster (the " +
                       to_string(s.topology) + " topology has " +
                       (s.topology == Topology::sentinel ? "one replica per master)" : "none)"));
    }
    s.replicas = *replicas;
  }
  if (!f.bus_port_offset.empty()) {
    if (s.topology != Topology::cluster) {
      throw UsageError("--bus-port-offset " + f.bus_port_offset +
                       ": only with --topology cluster (the " + to_string(s.topology) +
                       " topology has no cluster bus)");
    }
    s.bus_port_offset = int_flag("--bus-port-offset", f.bus_port_offset, -max_port, max_port);
  }
  if (up) s.tls = tls_wanted(g);
  return s;
}

// A word for a POSIX shell: single quotes, a quote inside written '\''.
std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// `cluster env`: what a shell needs to use these nodes, for eval "$(redlock-cli cluster env)".
void print_env(const ClusterManager& m) {
  std::cout << "export REDLOCK_NODES=" << shell_quote(m.node_list()) << '\n';
  if (m.settings().tls) {
    std::cout << "export REDLOCK_CACERT=" << shell_quote(m.ca_file().string()) << '\n';
  } else {
    std::cout << "unset REDLOCK_TLS REDLOCK_CACERT\n";
  }
}

int node_arg(const std::string& text) {
  auto v = parse_int(text);
  if (!v || *v > max_port || *v < -max_port)
    throw UsageError("node number '" + text + "': not a number");
  return static_cast<int>(*v);
}

std::string human_uptime(long long s) {
  if (s < 60) return std::to_string(s) + "s";
  char buf[32];
  if (s < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  else if (s < 86400)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s % 3600 / 60);
  else
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
  return buf;
}

// A master's slot ranges, [[0, 5460], ...]; null for anything else.
Json slots_json(const NodeStatus& n) {
  if (n.slots.empty()) return nullptr;
  Json a = Json::array();
  for (const auto& [first, last] : n.slots) a.push_back({first, last});
  return a;
}

// "0-5460 10923" for a table.
std::string slots_text(const NodeStatus& n) {
  std::string out;
  for (const auto& [first, last] : n.slots) {
    out += (out.empty() ? "" : " ") + std::to_string(first) +
           (last == first ? "" : "-" + std::to_string(last));
  }
  return out;
}

void print_status(const std::vector<NodeStatus>& nodes, bool json, bool roles) {
  auto opt = [](const auto& o, const char* none) {
    return o ? std::to_string(*o) : std::string(none);
  };
  if (json) {
    Json a = Json::array();
    for (const auto& n : nodes) {
      auto opt = [](const auto& o) { return o ? Json(*o) : Json(nullptr); };
      a.push_back({{"index", n.index},
                   {"port", n.port},
                   {"pid", opt(n.pid)},
                   {"state", to_string(n.state)},
                   {"uptime_s", opt(n.uptime_s)},
                   {"keys", opt(n.keys)},
                   {"persistence", n.persistence},  // a fixed label
                   {"role", n.role.empty() ? Json(nullptr) : Json(n.role)},
                   {"master_name", n.master_name.empty() ? Json(nullptr) : Json(n.master_name)},
                   {"cluster", n.cluster.empty() ? Json(nullptr) : Json(n.cluster)},
                   {"slots", slots_json(n)}});
    }
    print_json({{"nodes", std::move(a)}});
    return;
  }
  std::vector<std::vector<std::string>> rows{
      {"NODE", "PORT", "PID", "STATE", "UPTIME", "KEYS", "PERSISTENCE"}};
  if (roles) rows[0].push_back("ROLE");
  for (const auto& n : nodes) {
    rows.push_back({std::to_string(n.index), std::to_string(n.port), opt(n.pid, "-"),
                    to_string(n.state), n.uptime_s ? human_uptime(*n.uptime_s) : "-",
                    opt(n.keys, "-"), n.persistence});
    if (roles) {
      // "master m1", "replica m1", "sentinel", "master c1 slots 0-5460"; "- m1" when a data node
      // does not answer.
      std::string role = n.role.empty() ? "-" : n.role;
      if (!n.master_name.empty()) role += " " + n.master_name;
      if (!n.cluster.empty()) role += " " + n.cluster;
      if (!n.slots.empty()) role += " slots " + slots_text(n);
      rows.back().push_back(role);
    }
  }
  std::vector<std::size_t> width(rows[0].size(), 0);
  for (auto& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  for (auto& r : rows) {
    std::string line;
    for (std::size_t c = 0; c < r.size(); ++c) {
      line += r[c];
      if (c + 1 < r.size()) line += std::string(width[c] - r[c].size() + 2, ' ');
    }
    std::cout << line << '\n';
  }
}

enum class Verb { up, down, status, env, kill, stop, cont, start };

int run(Verb verb, const std::string& name, const ClusterFlags& flags, const Globals& g) {
  const bool quiet = g.quiet;
  auto say = [&](const std::string& line) {
    if (!quiet) std::cout << line << std::endl;
  };
  try {
    std::chrono::milliseconds delay{0};
    if (!flags.delay.empty()) delay = duration_arg("--delay", flags.delay);
    std::optional<int> index;
    if (verb == Verb::kill || verb == Verb::stop || verb == Verb::cont || verb == Verb::start) {
      index = node_arg(flags.node);
    }
    // Only the commands that start nodes create the directory: `down --dir /tmp/typo` must not
    // leave a directory behind, nor `kill` turn a mistyped path into an empty cluster.
    ClusterManager m(resolve(flags, verb == Verb::up, g), verb == Verb::up || verb == Verb::start);
    switch (verb) {
      case Verb::up:
        for (auto& r : m.up()) say(describe(r));
        if (m.settings().topology != Topology::standalone) {
          // The votes: one address per master name, through the sentinels, or per cluster, for
          // -n or REDLOCK_NODES (the default node list does not follow a failover).
          const std::string n = std::to_string(m.settings().count);
          const int r = m.settings().replicas;
          say((m.settings().topology == Topology::sentinel
                   ? n + " Sentinel-managed masters (m1..m" + n + ", one replica each, " +
                         std::to_string(sentinel_count) + " sentinels)"
                   : n + (n == "1" ? " Redis Cluster (c1, " : " Redis Clusters (c1..c" + n + ", ") +
                         std::to_string(cluster_masters) + " masters with " + std::to_string(r) +
                         (r == 1 ? " replica" : " replicas") + " each, the slots split evenly)") +
              "; the votes, for -n or REDLOCK_NODES (eval \"$(redlock-cli cluster env" +
              (flags.dir.empty() ? std::string() : " --dir " + shell_quote(flags.dir)) +
              ")\" sets it):");
          say(m.node_list());
        }
        if (m.settings().tls) {
          say("TLS only; CA certificate " + m.ca_file().string() +
              " (eval \"$(redlock-cli cluster env" +
              (flags.dir.empty() ? std::string() : " --dir " + shell_quote(flags.dir)) +
              ")\" sets REDLOCK_NODES and REDLOCK_CACERT)");
        }
        break;
      case Verb::env:
        print_env(m);
        break;
      case Verb::down: {
        auto reports = m.down();
        if (reports.empty()) say("nothing running in " + m.settings().dir.string());
        for (auto& r : reports) say(describe(r));
        break;
      }
      case Verb::status:
        print_status(m.status(), g.json, m.settings().topology != Topology::standalone);
        break;
      case Verb::kill:
        say(describe(m.kill(*index)));
        break;
      case Verb::stop:
        say(describe(m.stop(*index)));
        break;
      case Verb::cont:
        say(describe(m.cont(*index)));
        break;
      case Verb::start:
        // Refuse before announcing a wait that would otherwise end in that refusal.
        m.check_can_start(*index);
        if (delay.count() > 0) {
          say("node " + std::to_string(*index) + ": delayed restart, waiting " + flags.delay +
              " before starting it");
        }
        say(describe(m.start(*index, delay)));
        break;
    }
    return exit_ok;
  } catch (const ClusterError& e) {
    if (e.kind() == ClusterError::Kind::usage)
      throw UsageError("cluster " + name + ": " + e.what());
    Stderr() << "redlock-cli: cluster " << name << ": " << e.what() << '\n';
    return e.exit_code();
  } catch (const UsageError& e) {
    throw UsageError("cluster " + name + ": " + e.what());
  }
}

std::vector<Option> settings_flags(ClusterFlags& f) {
  return {
      {.names = "--count",
       .target = &f.count,
       .help = "Number of nodes (with --topology sentinel: of masters, with --topology cluster: "
               "of clusters; the votes), 1..64 (default 5, or what `up` saved)",
       .type_name = "N"},
      {.names = "--base-port",
       .target = &f.base_port,
       .help = "Port of node 1; node I listens on base-port + I - 1 (default 7001, or what `up` "
               "saved)",
       .type_name = "PORT"},
      {.names = "--dir",
       .target = &f.dir,
       .help = "Directory for configs, pid files, logs and data (default "
               "$XDG_RUNTIME_DIR/redlock-cluster, else /tmp/redlock-cluster-$UID)",
       .type_name = "DIR"},
      {.names = "--persistence",
       .target = &f.persistence,
       .help = "none (no RDB, no AOF: a killed node comes back empty) or aof (appendonly yes, "
               "appendfsync always) (default none, or what `up` saved)",
       .type_name = "none|aof"},
      {.names = "--topology",
       .target = &f.topology,
       .help =
           "standalone (COUNT independent masters), sentinel (COUNT Sentinel-managed "
           "masters m1..mCOUNT, one replica each, and 3 sentinels: 2*COUNT+3 processes on "
           "consecutive ports, nodes 1..COUNT the first masters, then the replicas, then the "
           "sentinels; the votes are redis+sentinel:// addresses, rediss+sentinel:// with --tls, "
           "see `cluster env`) or cluster (COUNT Redis Clusters c1..cCOUNT, each of 3 masters with "
           "R replicas per master, --replicas: COUNT*3*(1+R) processes on consecutive ports, "
           "grouped by "
           "cluster, each cluster's 3 masters first, then their replicas; every node's cluster "
           "bus on its port + --bus-port-offset; the votes are redis+cluster:// addresses, "
           "rediss+cluster:// with --tls) (default standalone, or what `up` saved)",
       .type_name = "standalone|sentinel|cluster"},
      {.names = "--replicas",
       .target = &f.replicas,
       .help = "With --topology cluster: replicas per master, 0..4 (default 1, or what `up` "
               "saved; with 0 nothing can fail over)",
       .type_name = "R"},
      {.names = "--bus-port-offset",
       .target = &f.bus_port_offset,
       .help = "With --topology cluster: node I's cluster bus listens on its port + N (may be "
               "negative; no bus port may be a node's port); a bus port taken when its node "
               "starts is replaced by a free one (default 10000, Redis's own, or what `up` saved)",
       .type_name = "N"},
  };
}

}  // namespace

Command cluster_command(const Globals& g) {
  auto flags = std::make_shared<ClusterFlags>();
  Command cluster{
      .name = "cluster",
      .description =
          "Manage local demonstration Redis masters (real redis-server processes on 127.0.0.1)",
      .footer =
          "Settings given to `up` are saved in the directory (cluster.conf); later commands "
          "without flags act on that cluster.\nExit status: 0 done, 1 refused (node not "
          "running / already running, port taken) or a node failed to start, 2 usage or "
          "configuration error.",
      .options = settings_flags(*flags),
      .run = []() -> int {
        throw UsageError(
            "cluster: a command is required: up, down, status, env, kill I, stop I, cont I or "
            "start I "
            "(see 'redlock-cli cluster --help')");
      },
      .storage = flags,
  };

  struct Spec {
    const char* name;
    Verb verb;
    const char* help;
    bool takes_node;
  };
  const Spec specs[] = {
      {"up", Verb::up,
       "Start every node that is not running and wait until all answer PING (with --topology "
       "sentinel also until every sentinel lists every replica, with --topology cluster until "
       "every cluster is formed and whole: cluster_state:ok on every node, all agreeing); with "
       "--tls (or REDLOCK_TLS=1) TLS only, with a throwaway CA made in the directory (and with "
       "--topology cluster the cluster bus and replication over TLS too)",
       false},
      {"down", Verb::down, "Stop the nodes started from this directory (SIGTERM, then SIGKILL)",
       false},
      {"status", Verb::status,
       "One row per node: port, pid, up/paused/down, uptime, keys, persistence (and with "
       "--topology sentinel its role: master/replica of mI, or sentinel; with --topology "
       "cluster master/replica of cluster cI, and a master's slots)",
       false},
      {"env", Verb::env,
       "Print the shell commands that point redlock-cli at these nodes: eval \"$(redlock-cli "
       "cluster env)\" (REDLOCK_NODES, and with TLS REDLOCK_CACERT)",
       false},
      {"kill", Verb::kill, "SIGKILL node I (a crash: with persistence none it comes back empty)",
       true},
      {"stop", Verb::stop,
       "SIGSTOP node I (paused: connections hang, like a partition or a long GC)", true},
      {"cont", Verb::cont, "SIGCONT node I (resume a paused node)", true},
      {"start", Verb::start,
       "Restart node I (same port and persistence), after --delay if given (with --topology "
       "cluster it rejoins its cluster, as a replica if it was failed over, and this waits until "
       "the cluster is whole)",
       true},
  };
  for (const auto& spec : specs) {
    Command sub{.name = spec.name, .description = spec.help, .options = settings_flags(*flags)};
    if (spec.takes_node) {
      sub.options.push_back({.names = "I",
                             .target = &flags->node,
                             .help = "Node number, 1..count (with --topology sentinel "
                                     "1..2*count+3: the first masters, their replicas, then "
                                     "the sentinels; with --topology cluster "
                                     "1..count*3*(1+replicas), by cluster)",
                             .type_name = "N",
                             .required = true});
    }
    if (spec.verb == Verb::start) {
      sub.options.push_back({.names = "--delay",
                             .target = &flags->delay,
                             .help =
                                 "Sleep this long first (250ms, 10s, 2m, 1h: a unit is needed): "
                                 "the delayed restart that keeps a restarted node from voting "
                                 "for a lock it forgot",
                             .type_name = "DUR"});
    }
    sub.run = [flags, name = std::string(spec.name), verb = spec.verb, &g] {
      return run(verb, name, *flags, g);
    };
    cluster.subcommands.push_back(std::move(sub));
  }
  return cluster;
}

}  // namespace redlock::cli
