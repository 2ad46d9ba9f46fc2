// chaos-driver: the safety harness (docs: tests/chaos/README.md, spec: design/testing.md).
//
// For each fault mix: start N redis-server nodes (tests/support fixture), the oracle (in this
// process, never faulted), W chaos-worker processes, and the nemesis (this process's main thread);
// run for a while; heal; stop the workers; check what the oracle saw. Prints one table row per
// mix and exits non-zero if a "must be zero" mix shows a violation or the harness misbehaved.
//
//   chaos-driver --short [--seed S]            the run of `meson test --suite chaos` (~1.5 min)
//   chaos-driver --minutes N [--seed S]        soak: N minutes split over the mixes
//   chaos-driver --mix a,b --seconds 20        some mixes, each for 20 s
// Other options: --workers W (4) --nodes N (5) --resources R (2) --ttl-ms T (1500)
//   --tls (the nodes listen with TLS, the workers use rediss:// and the fixture's CA)
//   --report FILE (append the table as markdown) --verbose (nemesis events as they happen)
//   --keep-logs --no-netns --list
//   --election-ignore-validity (the election mix's candidates lead on after a loss: it must fail)
//   --strict (every mix counts as must-be-zero: the lease-breaking ones then fail the run, which
//   shows the checker catches what they do)

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "checker.hpp"
#include "cluster_fixture.hpp"
#include "common.hpp"
#include "nemesis.hpp"
#include "oracle.hpp"
#include "partition.hpp"
#include "redis_fixture.hpp"
#include "sentinel_fixture.hpp"
#include "tls_fixture.hpp"
#include "workers.hpp"

namespace fs = std::filesystem;
using namespace chaos;

namespace {

// mixed: even worker slots take fenced locks, odd ones plain SET NX locks, on the same resources,
// so both acquire paths are checked (the oracle checks the fences it gets).
enum class Fencing { off, on, mixed };

struct Mix {
  std::string name;
  bool must_be_zero = true;
  std::vector<Fault> faults;
  bool aof = false;             // nodes: appendonly yes + appendfsync always
  bool durable = false;         // clients: durable_nodes = true
  long min_node_uptime_ms = 0;  // clients' restart guard
  // -1: library default; -2: 2 x ttl; -3: ttl + drift (the library's rule, the longest ttl in use
  // plus drift, without its 30 s floor)
  long restart_quarantine_ms = -2;
  Fencing fence = Fencing::mixed;
  // Fair (FIFO) locks for every worker (unfenced: fair locks exclude fencing), wake-ups on. The
  // checker then also wants the holders of a resource in ticket order, which only holds while no
  // waiter loses its place: a worker paused, killed or cut off while queued stops refreshing its
  // heartbeat, drops out of the queue and re-joins with its old ticket, ahead of holders that came
  // meanwhile. So fair mixes have node faults only (see README.md here, "Fair locks").
  bool fair = false;
  bool fifo = true;      // fair: holders out of ticket order fail the mix (false: reported)
  bool in_short = true;  // part of --short (the fair mixes are the chaos-fair test instead)
  bool faketime = false;
  bool partition = false;
  // The votes are Sentinel-managed masters (SentinelFixture: one replica each, 3 sentinels)
  // instead of standalone nodes; the sentinel faults delete the lock keys on a promoted replica
  // this often (percent), as if replication had lost them.
  bool sentinel = false;
  // > 0: the votes are this many Redis Clusters (ClusterFixture: 3 masters with one replica each)
  // instead of standalone nodes; their promotions delete the lock keys as the Sentinel ones do.
  int clusters = 0;
  int delete_key_percent = 0;
  // Candidates of one election (worker.cpp --election) instead of lock workers: 3 of them, on
  // the first resource's name; the checker wants zero overlapping leaderships and zero term
  // inversions. cs_min_ms..cs_max_ms is then how long a leader leads before it resigns.
  bool election = false;
  long ttl_ms = 0;  // 0: the run's --ttl-ms
  long cs_min_ms = 5, cs_max_ms = 50;
  double short_seconds = 6;
  double weight = 3;  // share of a --minutes run
  std::string about;
};

std::vector<Mix> all_mixes() {
  using F = Fault;
  std::vector<Mix> m;
  m.push_back(
      {.name = "baseline", .faults = {}, .short_seconds = 4, .weight = 1, .about = "no faults"});
  m.push_back({.name = "node-kill-delayed",
               .faults = {F::node_kill_delayed},
               .short_seconds = 8,
               .about = "kill -9 of up to N-Q nodes, restarted empty after more than one ttl"});
  m.push_back({.name = "node-kill-aof",
               .faults = {F::node_kill_aof},
               .aof = true,
               .durable = true,
               .about = "kill -9 of up to N-Q nodes with appendfsync always, restarted at once; "
                        "clients durable_nodes"});
  m.push_back({.name = "node-pause",
               .faults = {F::node_pause},
               .about = "SIGSTOP of 1..N-Q+1 nodes for 50 ms .. 2 ttl"});
  m.push_back({.name = "client-pause-acquire",
               .faults = {F::client_pause_acquire},
               .about = "SIGSTOP of a worker while it acquires, 20 ms .. 2 ttl"});
  m.push_back(
      {.name = "client-kill",
       .faults = {F::client_kill},
       .about = "kill -9 of a worker (half of them inside the critical section), respawned"});
  m.push_back({.name = "clock-jump",
               .faults = {F::clock_jump},
               .faketime = true,
               .about = "the workers' wall clock jumps by -1 d .. +1 y (libfaketime)"});
  m.push_back(
      {.name = "partition",
       .faults = {F::partition},
       .partition = true,
       .about = "nftables drops between some workers and some nodes (root, private netns)"});
  m.push_back({.name = "all-safe",
               .faults = {F::node_kill_delayed, F::node_pause, F::client_pause_acquire,
                          F::client_kill, F::clock_jump, F::partition},
               .faketime = true,
               .partition = true,
               .short_seconds = 8,
               .weight = 4,
               .about = "every must-be-zero fault together"});
  m.push_back({.name = "holder-pause",
               .must_be_zero = false,
               .faults = {F::holder_pause},
               .fence = Fencing::off,
               .short_seconds = 6,
               .weight = 1,
               .about = "SIGSTOP of a holder inside its critical section for ttl+0.2 .. ttl+1 s"});
  m.push_back({.name = "holder-pause-fenced",
               .must_be_zero = false,
               .faults = {F::holder_pause},
               .fence = Fencing::on,
               .short_seconds = 6,
               .weight = 1,
               .about = "the same, with fencing"});
  m.push_back({.name = "restart-empty",
               .must_be_zero = false,
               .faults = {F::restart_empty},
               .min_node_uptime_ms = 0,
               .restart_quarantine_ms = 0,
               .fence = Fencing::off,
               .cs_min_ms = 100,
               .cs_max_ms = 300,
               .short_seconds = 6,
               .weight = 1,
               .about = "kill -9 of a majority restarted at once without data; restart guard off"});
  m.push_back({.name = "restart-empty-fenced",
               .must_be_zero = false,
               .faults = {F::restart_empty},
               .min_node_uptime_ms = 0,
               .restart_quarantine_ms = 0,
               .fence = Fencing::on,
               .cs_min_ms = 100,
               .cs_max_ms = 300,
               .short_seconds = 6,
               .weight = 1,
               .about = "the same, with fencing"});
  m.push_back({.name = "fair-baseline",
               .faults = {},
               .fence = Fencing::off,
               .fair = true,
               .in_short = false,
               .short_seconds = 4,
               .weight = 1,
               .about = "fair locks, no faults"});
  m.push_back({.name = "fair-node-kill-delayed",
               .faults = {F::node_kill_delayed},
               .fence = Fencing::off,
               .fair = true,
               .in_short = false,
               .short_seconds = 6,
               .weight = 2,
               .about = "fair locks; kill -9 of up to N-Q nodes, restarted empty after a ttl"});
  // A release hands the lock to the first waiter (direct handoff): one killed, or paused while it
  // waits, may be handed it and never take it; the lock must still go to one holder at a time.
  // FIFO is not checked: a killed waiter's successor takes a new ticket.
  m.push_back({.name = "fair-client-faults",
               .faults = {F::client_kill, F::client_pause_acquire},
               .fence = Fencing::off,
               .fair = true,
               .fifo = false,
               .in_short = false,
               .short_seconds = 6,
               .weight = 2,
               .about = "fair locks; kill -9 and SIGSTOP of waiting workers (direct handoff)"});
  // FIFO holds here too since 644b4ed (a paused node that granted after the attempt had given up
  // kept the waiter out of its queue): tests/chaos/README.md, "Fair locks".
  m.push_back({.name = "fair-node-pause",
               .faults = {F::node_pause},
               .fence = Fencing::off,
               .fair = true,
               .in_short = false,
               .short_seconds = 6,
               .weight = 2,
               .about = "fair locks; SIGSTOP of 1..N-Q+1 nodes for 50 ms .. 2 ttl"});
  // Sentinel votes (issue 18): failovers, forced and after a kill -9 of a master, with the lock
  // keys lost on the promoted replica 3 times in 4. The promoted replica's votes wait out the
  // restart quarantine, the library's rule: ttl + drift (a held key lost at the promotion expires
  // by then). Clients follow a failover only when Sentinel announces it, about
  // a second after the promotion, so a lost key matters only to a holder still inside then:
  // ttl 3 s and critical sections of 0.5-2.5 s (half the forced failovers come right after an
  // ENTER). Unfenced: a failover may lose fence counters too, which fencing does not promise to
  // survive (README.md here).
  m.push_back({.name = "sentinel-failover",
               .faults = {F::sentinel_failover, F::sentinel_failover, F::sentinel_kill_master},
               .restart_quarantine_ms = -3,
               .fence = Fencing::off,
               .in_short = false,
               .sentinel = true,
               .delete_key_percent = 75,
               .ttl_ms = 3000,
               .cs_min_ms = 500,
               .cs_max_ms = 2500,
               .short_seconds = 10,
               .weight = 2,
               .about = "Sentinel votes: SENTINEL FAILOVER of 1..Q votes, kill -9 of a master; "
                        "keys lost on the promoted replica; ttl 3 s"});
  m.push_back({.name = "sentinel-failover-unguarded",
               .must_be_zero = false,
               .faults = {F::sentinel_failover},
               .restart_quarantine_ms = 0,
               .fence = Fencing::off,
               .in_short = false,
               .sentinel = true,
               .delete_key_percent = 100,
               .ttl_ms = 3000,
               .cs_min_ms = 500,
               .cs_max_ms = 2500,
               .short_seconds = 10,
               .weight = 1,
               .about = "the same failovers, keys always lost, restart quarantine 0 (no guard); "
                        "ttl 3 s"});
  // Redis Cluster votes (issue 17): 3 votes, each a cluster of 3 masters with one replica each.
  // The lock keys' slots move between masters (at once, or with an ASK phase under load), and
  // their masters fail over: kill -9 and the cluster's own election (the killed node started
  // again later, as a replica), or CLUSTER FAILOVER [FORCE]; in 1..Q votes at once, a majority
  // right after an ENTER half the time; 3 promotions in 4 delete the lock keys on the new master
  // as soon as it says it is one. Workers are long-lived clients that follow the slot map: a
  // master they knew as a replica, or that was promoted since it started, waits out the restart
  // quarantine (ttl + drift here, as in the Sentinel mixes). ttl 3 s and critical sections of
  // 0.5-2.5 s: a kill takes the cluster 1.5-2.5 s to fail over, a manual failover well under one.
  m.push_back({.name = "cluster-migrate-failover",
               .faults = {F::cluster_migrate, F::cluster_migrate, F::cluster_failover,
                          F::cluster_kill_master},
               .restart_quarantine_ms = -3,
               .fence = Fencing::off,
               .in_short = false,
               .clusters = 3,
               .delete_key_percent = 75,
               .ttl_ms = 3000,
               .cs_min_ms = 500,
               .cs_max_ms = 2500,
               .short_seconds = 10,
               .weight = 2,
               .about =
                   "3 Redis Cluster votes: slots of the lock keys migrated, their masters "
                   "failed over (kill -9, CLUSTER FAILOVER); keys lost on promotion; ttl 3 s"});
  m.push_back({.name = "cluster-failover-unguarded",
               .must_be_zero = false,
               .faults = {F::cluster_failover},
               .restart_quarantine_ms = 0,
               .fence = Fencing::off,
               .in_short = false,
               .clusters = 3,
               .delete_key_percent = 100,
               .ttl_ms = 3000,
               .cs_min_ms = 500,
               .cs_max_ms = 2500,
               .short_seconds = 10,
               .weight = 1,
               .about = "the manual failovers, keys always lost, restart quarantine 0 (no guard); "
                        "ttl 3 s"});
  // Leader election (issue 44): 3 candidates campaign on one name with redlock::Election and lead
  // 0.2-3 s (two ttl: extended on the way) before they resign. Nodes killed (restarted empty
  // after a ttl, restart quarantine 2 ttl) and paused; candidates killed (half of them while
  // leading), paused while campaigning, and leaders paused past their validity: a leadership
  // ends at the earlier of the loss and its deadline, so none of these may overlap two.
  m.push_back({.name = "election",
               .faults = {F::node_kill_delayed, F::node_pause, F::client_kill, F::leader_pause,
                          F::client_pause_acquire},
               .fence = Fencing::on,
               .in_short = false,
               .election = true,
               .cs_min_ms = 100,
               .cs_max_ms = 1500,
               .short_seconds = 15,
               .weight = 3,
               .about = "3 candidates of one election: kills and pauses of nodes and "
                        "candidates, leaders paused past their validity"});
  return m;
}

struct Settings {
  std::string worker_exe;
  std::uint64_t seed = 0;
  bool seed_given = false;
  bool short_mode = false;
  double minutes = 0;
  double seconds = 0;
  std::vector<std::string> only;
  int workers = 4;
  int nodes = 5;
  int resources = 2;
  long ttl_ms = 1500;
  std::string report;
  bool verbose = false;
  bool keep_logs = false;
  bool netns = true;
  bool list = false;
  bool strict = false;  // every mix must be zero (a check that the checker can fail)
  bool tls = false;     // nodes listen with TLS and the workers use it (rediss://)
  // The election mix's candidates lead on after a loss (worker.cpp): the checker must fail it.
  bool election_ignore_validity = false;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "chaos-driver: %s\n(see the comment at the top of tests/chaos/driver.cpp)\n",
               why.c_str());
  std::exit(2);
}

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage("missing value for " + k);
      return argv[++i];
    };
    try {
      if (k == "--short")
        s.short_mode = true;
      else if (k == "--minutes")
        s.minutes = std::stod(val());
      else if (k == "--seconds")
        s.seconds = std::stod(val());
      else if (k == "--seed") {
        s.seed = std::stoull(val());
        s.seed_given = true;
      } else if (k == "--mix")
        s.only = split_csv(val());
      else if (k == "--workers")
        s.workers = std::stoi(val());
      else if (k == "--nodes")
        s.nodes = std::stoi(val());
      else if (k == "--resources")
        s.resources = std::stoi(val());
      else if (k == "--ttl-ms")
        s.ttl_ms = std::stol(val());
      else if (k == "--worker")
        s.worker_exe = val();
      else if (k == "--report")
        s.report = val();
      else if (k == "--verbose")
        s.verbose = true;
      else if (k == "--keep-logs")
        s.keep_logs = true;
      else if (k == "--no-netns")
        s.netns = false;
      else if (k == "--tls")
        s.tls = true;
      else if (k == "--list")
        s.list = true;
      else if (k == "--strict")
        s.strict = true;
      else if (k == "--election-ignore-validity")
        s.election_ignore_validity = true;
      else
        usage("unknown option " + k);
    } catch (const std::logic_error&) {
      usage("bad value for " + k);
    }
  }
  if (s.workers < 2 || s.nodes < 3 || s.resources < 1 || s.ttl_ms < 500)
    usage("need >= 2 workers, >= 3 nodes, ttl >= 500 ms");
  if (!s.short_mode && s.minutes <= 0 && s.seconds <= 0 && !s.list) s.short_mode = true;
  if (s.worker_exe.empty()) {
    s.worker_exe = (fs::read_symlink("/proc/self/exe").parent_path() / "chaos-worker").string();
  }
  if (!s.seed_given) s.seed = std::random_device{}() % 1000000000ULL;
  return s;
}

std::uint64_t mix_seed(std::uint64_t seed, const std::string& name) {
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a of the name, so a mix replays alone too
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return seed ^ h;
}

std::string find_faketime() {
  if (const char* e = std::getenv("CHAOS_FAKETIME_LIB"); e != nullptr && *e != 0) {
    return fs::exists(e) ? e : "";
  }
  for (const char* dir :
       {"/usr/lib/x86_64-linux-gnu/faketime", "/usr/lib/aarch64-linux-gnu/faketime",
        "/usr/lib/faketime", "/usr/local/lib/faketime"}) {
    for (const char* lib : {"libfaketimeMT.so.1", "libfaketime.so.1"}) {
      fs::path p = fs::path(dir) / lib;
      if (fs::exists(p)) return p.string();
    }
  }
  return "";
}

bool port_free(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// N consecutive free ports below the ephemeral range, so a restarted node finds its port free
// (a client's outgoing connection can never sit on it).
std::uint16_t pick_base_port(int n, std::mt19937_64& rng) {
  for (int tries = 0; tries < 200; ++tries) {
    const auto base =
        static_cast<std::uint16_t>(std::uniform_int_distribution<int>(20000, 30000 - n)(rng));
    bool ok = true;
    for (int i = 0; i < n && ok; ++i) ok = port_free(static_cast<std::uint16_t>(base + i));
    if (ok) return base;
  }
  throw std::runtime_error("no free port range found in 20000..30000");
}

struct Env {
  std::string faketime_lib;
  bool in_netns = false;
  std::optional<std::string> no_partition;
  const redlock::test::TlsFixture* tls = nullptr;  // --tls: the certificates
};

MixResult run_mix(const Mix& mix, const Settings& s, const Env& env, double seconds) {
  MixResult r;
  r.name = mix.name;
  r.must_be_zero = mix.must_be_zero || s.strict;
  r.fencing = mix.fair                    ? "fair"
              : mix.fence == Fencing::on  ? "on"
              : mix.fence == Fencing::off ? "off"
                                          : "half";
  r.fair = mix.fair;
  r.fifo_checked = mix.fair && mix.fifo;
  r.seed = mix_seed(s.seed, mix.name);
  r.seconds = seconds;
  if (mix.faketime && env.faketime_lib.empty()) {
    if (mix.name == "clock-jump") {
      r.skipped = true;
      r.skip_reason = "libfaketime not installed (apt-get install libfaketime)";
      return r;
    }
  }
  if (mix.partition && env.no_partition && mix.name == "partition") {
    r.skipped = true;
    r.skip_reason = "no partitions: " + *env.no_partition;
    return r;
  }
  if ((mix.sentinel || mix.clusters > 0) && env.tls != nullptr) {
    r.skipped = true;
    r.skip_reason = "the Sentinel and cluster mixes run without --tls";
    return r;
  }

  std::mt19937_64 rng(r.seed);
  char tmpl[] = "/tmp/redlock-chaos-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  const std::string dir = tmpl;
  ::chmod(dir.c_str(), 0755);  // workers may run under other uids (partition)

  std::vector<Fault> faults;
  for (Fault f : mix.faults) {
    if (f == Fault::clock_jump && env.faketime_lib.empty()) continue;
    if (f == Fault::partition && env.no_partition) continue;
    faults.push_back(f);
  }
  const bool use_faketime = mix.faketime && !env.faketime_lib.empty();
  const bool use_partition = mix.partition && !env.no_partition;

  redlock::test::ServerConfig cfg;
  cfg.aof_always = mix.aof;
  cfg.port = pick_base_port(s.nodes, rng);
  {
    // Sentinel mixes: the votes are the fixture's master names, and there are no standalone
    // nodes (the nemesis' node faults are not part of these mixes).
    std::unique_ptr<redlock::test::SentinelFixture> sentinels;
    std::vector<std::string> master_names;
    if (mix.sentinel) {
      redlock::test::SentinelConfig sc;
      for (int i = 1; i <= s.nodes; ++i) master_names.push_back("m" + std::to_string(i));
      sc.master_names = master_names;
      sc.replicas = 1;
      sc.sentinels = 3;
      sc.server = cfg;
      sentinels = std::make_unique<redlock::test::SentinelFixture>(sc);
    }
    // Cluster mixes: each vote a Redis Cluster, 3 masters with a replica each.
    std::vector<std::unique_ptr<redlock::test::ClusterFixture>> clusters;
    for (int i = 0; i < mix.clusters; ++i) {
      redlock::test::ClusterConfig cc;
      cc.masters = 3;
      cc.replicas_per_master = 1;
      cc.server = cfg;
      clusters.push_back(std::make_unique<redlock::test::ClusterFixture>(cc));
    }
    std::unique_ptr<redlock::test::RedisCluster> cluster;
    if (!mix.sentinel && mix.clusters == 0)
      cluster = std::make_unique<redlock::test::RedisCluster>(s.nodes, cfg);
    // The ports the workers use: the TLS ones with --tls (the fixture keeps its plaintext ports).
    std::vector<std::uint16_t> ports;
    for (std::size_t i = 0; cluster && i < cluster->size(); ++i)
      ports.push_back(env.tls != nullptr ? (*cluster)[i].tls_port() : (*cluster)[i].port());

    std::unique_ptr<Partitioner> partitioner;
    if (use_partition) {
      partitioner = std::make_unique<Partitioner>(ports);
      if (!partitioner->ok()) r.harness_errors.push_back(partitioner->error());
    }

    Oracle oracle(dir + "/oracle.sock", s.resources, mix.fence != Fencing::off);
    ::chmod(oracle.socket_path().c_str(), 0777);

    WorkerSettings ws;
    // The workers run from a copy in the (world-readable) temp dir: in the partition mix they run
    // as other uids, which cannot reach a build tree under a private directory (a checkout in
    // root's home or under `mktemp -d`).
    ws.exe = dir + "/chaos-worker";
    {
      std::error_code ec;
      std::filesystem::copy_file(s.worker_exe, ws.exe,
                                 std::filesystem::copy_options::overwrite_existing, ec);
      if (ec)
        throw std::runtime_error("cannot copy " + s.worker_exe + " to " + ws.exe + ": " +
                                 ec.message());
      ::chmod(ws.exe.c_str(), 0755);
    }
    ws.socket_path = oracle.socket_path();
    if (env.tls != nullptr) {
      for (std::size_t i = 0; i < ports.size(); ++i)
        ws.nodes_csv +=
            (i ? "," : "") + std::string("rediss://127.0.0.1:") + std::to_string(ports[i]);
      // A copy the workers can read whatever their uid (the fixture's directory is private).
      ws.tls_ca_file = dir + "/ca.crt";
      std::filesystem::copy_file(env.tls->ca_cert(), ws.tls_ca_file,
                                 std::filesystem::copy_options::overwrite_existing);
      ::chmod(ws.tls_ca_file.c_str(), 0644);
    } else if (sentinels) {
      const auto addrs = sentinels->sentinel_addresses();
      for (std::size_t i = 0; i < master_names.size(); ++i) {
        ws.nodes_csv +=
            (i ? "," : "") + std::string("redis+sentinel://") + addrs.at(0) + "/" + master_names[i];
        for (std::size_t j = 1; j < addrs.size(); ++j)
          ws.nodes_csv += (j == 1 ? "?sentinel=" : "&sentinel=") + addrs[j];
      }
    } else if (!clusters.empty()) {
      // redis+cluster://first?seed=second&seed=...: every node of the cluster is a seed.
      for (std::size_t i = 0; i < clusters.size(); ++i) {
        const auto seeds = clusters[i]->seed_addresses();
        ws.nodes_csv += (i ? "," : "") + std::string("redis+cluster://") + seeds.at(0);
        for (std::size_t j = 1; j < seeds.size(); ++j)
          ws.nodes_csv += (j == 1 ? "?seed=" : "&seed=") + seeds[j];
      }
    } else {
      ws.nodes_csv = cluster->nodes_csv();
    }
    for (int i = 0; i < s.resources; ++i) ws.resources.push_back("chaos:r" + std::to_string(i));
    ws.election = mix.election;
    ws.election_ignore_validity = s.election_ignore_validity;
    if (mix.election) {
      ws.resources.resize(1);  // one election
      ws.wait_ms = 2 * (mix.ttl_ms > 0 ? mix.ttl_ms : s.ttl_ms);
    }
    const long ttl_ms = mix.ttl_ms > 0 ? mix.ttl_ms : s.ttl_ms;
    ws.ttl_ms = ttl_ms;
    ws.cs_min_ms = mix.cs_min_ms;
    ws.cs_max_ms = mix.cs_max_ms;
    ws.fence = mix.fence != Fencing::off;
    ws.fence_even_slots_only = mix.fence == Fencing::mixed;
    ws.fair = mix.fair;
    // A node keeps its clock while SIGSTOPped: one paused for longer than the waiters' heartbeat
    // ttl drops every waiter when it resumes, and whoever polls it first is then first in line
    // there, whatever its ticket (with a majority paused, that is a quorum: FIFO breaks, as when
    // a waiter is paused). The fair mixes keep the heartbeat above the longest node pause (2 ttl).
    if (mix.fair) ws.heartbeat_ttl_ms = 2 * ttl_ms + 1000;
    ws.durable = mix.durable;
    ws.min_node_uptime_ms = mix.min_node_uptime_ms;
    ws.restart_quarantine_ms = mix.restart_quarantine_ms == -2   ? 2 * ttl_ms
                               : mix.restart_quarantine_ms == -3 ? ttl_ms + ttl_ms / 100 + 2
                                                                 : mix.restart_quarantine_ms;
    if (use_faketime) {
      ws.faketime_lib = env.faketime_lib;
      ws.faketime_file = dir + "/faketime";
      std::ofstream(ws.faketime_file) << "+0\n";
      ::chmod(ws.faketime_file.c_str(), 0644);
    }
    if (use_partition) ws.run_as_uid_base = Partitioner::base_uid;
    ws.log_path = dir + "/workers.log";
    ws.seed = r.seed;

    {
      const int workers = mix.election ? 3 : s.workers;
      WorkerPool pool(ws, workers);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (oracle.connected() < static_cast<std::size_t>(workers) &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (oracle.connected() < static_cast<std::size_t>(workers)) {
        r.harness_errors.push_back("workers did not connect to the oracle (see " + ws.log_path +
                                   ")");
      }

      NemesisSettings ns;
      ns.faults = faults;
      ns.ttl_ms = ttl_ms;
      ns.faketime_file = ws.faketime_file;
      ns.partitioner = partitioner.get();
      ns.sentinels = sentinels.get();
      ns.master_names = master_names;
      ns.lock_keys = ws.resources;
      ns.delete_key_percent = mix.delete_key_percent;
      for (const auto& c : clusters) ns.clusters.push_back(c.get());
      ns.verbose = s.verbose;
      Nemesis nemesis(ns, cluster.get(), pool, oracle, r.seed);
      nemesis.run(static_cast<long>(seconds * 1000));
      pool.terminate_all(5000);

      r.faults = nemesis.counts();
      r.nemesis_log = nemesis.log();
      for (const auto& e : nemesis.errors()) r.harness_errors.push_back("nemesis: " + e);
      for (const auto& c : pool.crashes())
        r.harness_errors.push_back("worker exited by itself: " + c);
    }
    check(oracle.finish(), r);
  }
  if (use_faketime && r.wall_skew_s < 10 && r.faults.count("clock-jump") != 0) {
    r.details.push_back(
        "note: the workers' wall clock never looked faked (libfaketime not effective?)");
  }
  if (use_faketime)
    r.details.push_back("workers' wall clock was off by up to " + std::to_string(r.wall_skew_s) +
                        " s");
  if (r.failed() || s.keep_logs) {
    r.details.push_back("logs kept in " + dir);
  } else {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s = parse(argc, argv);
  std::vector<Mix> mixes = all_mixes();
  if (s.list) {
    for (const auto& m : mixes) {
      std::printf("%-22s %-9s %s\n", m.name.c_str(), m.must_be_zero ? "must-be-0" : "reported",
                  m.about.c_str());
    }
    return 0;
  }
  if (!s.only.empty()) {
    for (const auto& o : s.only) {
      if (std::none_of(mixes.begin(), mixes.end(), [&](const Mix& m) { return m.name == o; }))
        usage("unknown mix " + o);
    }
    std::erase_if(mixes, [&](const Mix& m) {
      return std::find(s.only.begin(), s.only.end(), m.name) == s.only.end();
    });
  }
  if (s.only.empty() && s.short_mode && s.minutes <= 0 && s.seconds <= 0) {
    std::erase_if(mixes, [](const Mix& m) { return !m.in_short; });
  }
  if (!redlock::test::redis_server_available()) {
    std::printf("chaos: SKIP: redis-server not found\n");
    return 77;
  }
  if (!fs::exists(s.worker_exe)) usage("worker not found: " + s.worker_exe);

  Env env;
  // As root, run in a private network namespace (before any thread exists): its own loopback,
  // so nothing else on the machine can take our ports, and nftables rules touch only us.
  std::optional<std::string> netns_error;
  if (s.netns && ::geteuid() == 0) {
    netns_error = enter_private_netns();
    env.in_netns = !netns_error;
  }
  env.no_partition = partition_unavailable(env.in_netns);
  if (env.no_partition && netns_error) *env.no_partition += " (" + *netns_error + ")";
  env.faketime_lib = find_faketime();
  std::unique_ptr<redlock::test::TlsFixture> tls;
  if (s.tls) {
    tls = std::make_unique<redlock::test::TlsFixture>();
    redlock::test::set_default_server_tls(tls->server_options("no"));
    env.tls = tls.get();
  }

  double total_weight = 0;
  for (const auto& m : mixes) total_weight += m.weight;
  auto seconds_for = [&](const Mix& m) {
    if (s.seconds > 0) return s.seconds;
    if (s.minutes > 0) return s.minutes * 60.0 * m.weight / total_weight;
    return m.short_seconds;
  };

  std::ostringstream cmd;
  cmd << "scripts/chaos.sh";  // passes its arguments to chaos-driver unchanged
  if (s.short_mode && s.minutes <= 0 && s.seconds <= 0) cmd << " --short";
  if (s.tls) cmd << " --tls";
  if (s.minutes > 0) cmd << " --minutes " << s.minutes;
  if (s.seconds > 0) cmd << " --seconds " << s.seconds;
  if (!s.only.empty()) {
    cmd << " --mix ";
    for (std::size_t i = 0; i < s.only.size(); ++i) cmd << (i ? "," : "") << s.only[i];
  }
  cmd << " --seed " << s.seed;
  std::printf("chaos: seed %llu (replay: %s)\n", static_cast<unsigned long long>(s.seed),
              cmd.str().c_str());
  std::printf(
      "chaos: %d nodes%s, %d workers, %d resources, ttl %ld ms; faketime: %s; partitions: %s\n",
      s.nodes, s.tls ? " over TLS" : "", s.workers, s.resources, s.ttl_ms,
      env.faketime_lib.empty() ? "not installed" : env.faketime_lib.c_str(),
      env.no_partition ? env.no_partition->c_str() : "yes (private network namespace)");
  std::fflush(stdout);

  std::vector<MixResult> results;
  const auto t_start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < mixes.size(); ++i) {
    const Mix& m = mixes[i];
    const double secs = seconds_for(m);
    std::printf("[%zu/%zu] %-22s %5.0f s  %s ... ", i + 1, mixes.size(), m.name.c_str(), secs,
                m.about.c_str());
    std::fflush(stdout);
    MixResult r;
    try {
      r = run_mix(m, s, env, secs);
    } catch (const std::exception& e) {
      r.name = m.name;
      r.must_be_zero = m.must_be_zero;
      r.harness_errors.push_back(std::string("exception: ") + e.what());
    }
    if (r.skipped) {
      std::printf("skipped (%s)\n", r.skip_reason.c_str());
    } else {
      std::printf("%s: %lld acquired, %lld entered, %lld overlaps",
                  r.failed() ? (r.violations.empty() ? "HARNESS ERROR" : "FAIL") : "done",
                  r.acquired, r.entered, r.overlaps);
      if (r.fair) std::printf(", %lld out of FIFO order", r.fifo_violations);
      std::printf("\n");
    }
    std::fflush(stdout);
    results.push_back(std::move(r));
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();

  long long zero_acq = 0;
  bool failed = false;
  for (const auto& r : results) {
    if (r.must_be_zero && !r.skipped) zero_acq += r.acquired;
    failed = failed || r.failed();
  }
  std::ostringstream table;
  print_table(table, results);
  std::printf("\n%s", table.str().c_str());
  std::ostringstream details;
  print_details(details, results, s.verbose);
  std::printf("%s", details.str().c_str());
  std::printf("\nchaos: %lld acquisitions in must-be-zero mixes, %.0f s; seed %llu\n", zero_acq,
              elapsed, static_cast<unsigned long long>(s.seed));
  std::printf("chaos: %s\n", failed ? "FAILED (see above; replay with the same --seed)" : "ok");

  if (!s.report.empty()) {
    std::ofstream out(s.report, std::ios::app);
    out << "Command: `" << cmd.str() << "` (" << s.nodes << " nodes, " << s.workers << " workers, "
        << s.resources << " resources, ttl " << s.ttl_ms << " ms), "
        << static_cast<long long>(elapsed) << " s, " << zero_acq
        << " acquisitions in must-be-zero mixes.\n\n";
    out << table.str();
    out << details.str() << "\n";
  }
  return failed ? 1 : 0;
}
