#pragma once
// Private to `redlock-cli demo` (demo.cpp, demo_steps.cpp): the Demo class and the little it needs.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "nodes/manager.hpp"
#include "redlock/client.hpp"

namespace redlock::cli::demo {

using SteadyClock = std::chrono::steady_clock;
using Micros = std::chrono::microseconds;
using nodes::ClusterError;
using nodes::ClusterManager;
using nodes::NodeReport;
using nodes::NodeStatus;
// A node's answer in an operation, and a local process's state.
using Vote = redlock::NodeState;
using ProcState = nodes::ProcessState;

// Locks of steps 2-3: long enough that nothing expires while we look at it.
inline constexpr Millis lock_ttl{10000};
// Locks of the restart scenarios: far above the node timeouts, short enough that waiting one
// ttl out (the delayed restart) keeps the whole demo well under a minute.
inline constexpr Millis restart_ttl{3000};
// --min-uptime of the guarded client: above the age of a node restarted a moment ago.
inline constexpr Millis guard_min_uptime{10000};
// The Sentinel chapter (--topology sentinel): the ttl of every lock, and the restart quarantine of
// every client (Options::restart_quarantine; the library's default is the longest ttl in use, at
// least 30 s). Long enough that A's lock outlives a failover on a busy machine, short enough that
// waiting out the quarantine keeps the chapter near 15 s.
inline constexpr Millis sentinel_ttl{6000};
// The Redis Cluster chapter (--topology cluster): the same for its clients. Longer: A's lock must
// outlive a cluster failover (cluster-node-timeout, 2 s, then an election) and the clients'
// next look at the slot maps (every second) on a busy machine with 18 or more servers.
inline constexpr Millis cluster_ttl{15000};

// Set from SIGINT/SIGTERM/SIGHUP; the demo checks it between operations so that it can still
// restore the nodes before exiting (an abandoned half-killed cluster is worse than a late exit).
inline std::atomic<bool> interrupted{false};
// Set when stdout has gone (`demo | head`): the reader is not coming back, so the demo stops as if
// interrupted and still restores the nodes, instead of being killed by SIGPIPE half-way with
// masters down or left running.
inline std::atomic<bool> output_gone{false};
struct Interrupted {};
struct Abort {};  // a failed check that makes the rest of the demo meaningless
// The demo will not run on these nodes: it would destroy data it did not write. Nothing has been
// changed when this is thrown (only nodes the demo itself started are stopped again).
struct Refused {
  std::string why;
};

// The demo's own keys: every resource it locks is named so. A key of this name that a node
// holds before the demo is a leftover of an interrupted demo (it expires within its ttl).
inline constexpr std::string_view own_key_prefix = "demo:";

// A key that a master held before the demo (the demo did not write it), looked for again at the
// end: the demo must leave the data on nodes it reuses as it found it.
struct KeptKey {
  int node = 0;
  long long db = 0;
  std::string key;
  // When it would have expired by itself; nullopt: it has no expiry.
  std::optional<SteadyClock::time_point> expires;
};

inline void checkpoint() {
  if (interrupted.load()) throw Interrupted{};
}

// Sleeps in small slices so an interrupt is noticed promptly.
inline void nap(Millis d) {
  const auto until = SteadyClock::now() + d;
  while (SteadyClock::now() < until) {
    checkpoint();
    std::this_thread::sleep_for(
        std::min<SteadyClock::duration>(std::chrono::milliseconds(20), until - SteadyClock::now()));
  }
  checkpoint();
}

// ---- text --------------------------------------------------------------------------------------

// Wraps text in an SGR colour sequence, or returns it unchanged when colour is off (a pipe, a
// dumb terminal, NO_COLOR), so the same code prints both.
struct Palette {
  explicit Palette(bool on) : on_(on) {}
  [[nodiscard]] std::string paint(std::string_view text, std::string_view sgr) const {
    if (!on_ || sgr.empty()) return std::string(text);
    return "\x1b[" + std::string(sgr) + "m" + std::string(text) + "\x1b[0m";
  }
  bool on_;
};

inline constexpr std::string_view bold = "1", dim = "2", red = "31", green = "32", yellow = "33",
                                  magenta = "35", cyan = "36", bold_red = "1;31",
                                  bold_green = "1;32";

inline std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

inline std::string lpad(std::string s, std::size_t width) {
  if (s.size() < width) s.insert(0, width - s.size(), ' ');
  return s;
}

inline std::string fmt_ms(Micros us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f ms", static_cast<double>(us.count()) / 1000.0);
  return buf;
}

inline std::string fmt_s(Millis ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

inline std::string_view colour_of(Vote s) {
  switch (s) {
    case Vote::ok:
      return green;
    case Vote::held_by_other:
      return yellow;
    case Vote::excluded:
      return magenta;
    case Vote::pending:
      return dim;
    default:
      return red;
  }
}

// ---- the demonstration -------------------------------------------------------------------------

class Demo {
 public:
  Demo(ClusterManager& m, bool colour)
      : m_(m),
        p_(colour),
        n_(m.settings().count),
        q_(n_ / 2 + 1),
        sentinel_(m.settings().topology == nodes::Topology::sentinel),
        cluster_(m.settings().topology == nodes::Topology::cluster),
        procs_(m.process_count()),
        started_(static_cast<std::size_t>(procs_) + 1, false) {}

  int run();

 private:
  struct Attempt {
    AcquireResult result;
    Micros took{0};
  };

  // Output.
  // Flushed, so a pipe sees progress; no trailing blanks from padded columns.
  void line(std::string s = {}) {
    while (!s.empty() && s.back() == ' ') s.pop_back();
    std::cout << s << std::endl;
    if (!std::cout && !output_gone.exchange(true)) interrupted.store(true);
  }
  void heading(const std::string& s) { line(), line(p_.paint("== " + s + " ==", bold)); }
  void subheading(const std::string& s) { line(), line("  " + p_.paint(s, cyan)); }
  void say(const std::string& s) { line("  " + s); }
  bool check(bool ok, const std::string& what, const std::string& why_not = {});

  // Steps.
  void intro();
  void step_nodes();
  void step_lock();
  void step_kills();
  void step_restart_at_once();
  void step_restart_delayed();
  void step_restart_guarded();
  void step_restore(bool interrupted);
  // The Sentinel chapter (demo_sentinel.cpp), instead of steps 2-4 on a sentinel topology.
  void intro_sentinel();
  void step_sentinel_lock();
  void step_sentinel_failover();
  void step_sentinel_replicated();
  // Votes 1..Q (those the chapter fails over) that said yes.
  [[nodiscard]] int promoted_votes_ok(const std::vector<NodeOutcome>& nodes) const;
  // What the Sentinel and Redis Cluster chapters share (demo_failover.cpp): both fail votes
  // 1..Q over while A holds held_, with the key lost on the promoted masters.
  // "m1..m3" or "c1..c3": the names of votes from..to.
  [[nodiscard]] std::string votes_text(int from, int to) const;
  // Shows what each vote stores and checks that the promoted masters of 1..Q lack A's key.
  void check_promoted_lack_key(const std::string& resource);
  // 3a: U (restart quarantine 0) takes `resource` while A's lock is still valid.
  void show_unguarded_hazard(Client& u, const std::string& resource, Millis ttl);
  // 3b: `who`'s attempt `a` was refused while A's lock is valid, no promoted master gave its vote,
  // one at least was excluded and says `reason`.
  void check_guard_refusal(const Attempt& a, const std::string& who, std::string_view reason);
  // `c` tries every 250 ms until it gets `resource` (at most ttl + 10 s): it must get it only once
  // A's lock has expired. Releases it, then A's.
  void retry_until_a_expired(Client& c, const std::string& who, const std::string& resource,
                             Millis ttl, std::optional<SteadyClock::time_point> first_promotion);
  // Step 4: U, without the quarantine, is refused a resource replicated votes hold.
  void check_unguarded_refused(const std::string& resource, Millis ttl);
  // Whether process I stores `value` at `key`; DEL `key` there.
  [[nodiscard]] bool stores(int index, const std::string& key, const std::string& value) const;
  void delete_on(int index, const std::string& key) const;
  // How many votes store `token` for the resource.
  [[nodiscard]] static int holders(const StatusResult& st, const std::string& token);
  // The Redis Cluster chapter (demo_cluster.cpp), instead of steps 2-4 on a cluster topology.
  void intro_cluster();
  void step_cluster_lock();
  void step_cluster_failover();
  void step_cluster_replicated();
  // Kills the master of `resource`'s slot in clusters c1..cQ and waits until each is whole again
  // (ClusterManager::kill_slot_masters); the killed nodes are restarted by step_restore.
  std::vector<ClusterManager::Failover> fail_over_majority(
      const std::string& resource,
      const std::function<void(const ClusterManager::Failover&)>& on_promoted = {});
  // Waits (at most 5 s) until `c`'s view of every vote of `failovers` names the promoted master
  // as the one serving `resource` (clients ask for the slot map every second).
  bool wait_new_maps(Client& c, const std::string& resource,
                     const std::vector<ClusterManager::Failover>& failovers);

  // Data on the nodes (demo.cpp).
  // Reads every key (but the demo's own) of every running master, with its expiry.
  void snapshot_keys();
  // Throws Refused when a master the demo will kill and restart holds keys it did not write and
  // would not keep them (no appendonly yes + appendfsync always).
  void refuse_to_lose_data(const std::vector<NodeStatus>& status) const;
  // The check at the end: every key of the snapshot is still there, but those that expired.
  void check_keys_kept();

  // Helpers.
  [[nodiscard]] Options options(Millis min_uptime = Millis{0}) const;
  std::string node_name(int i) const {
    return "node " + lpad(std::to_string(i), std::to_string(procs_).size());
  }
  // The I-th vote of an operation: "node I", or "vote I" when it is a Sentinel-managed master or a
  // Redis Cluster.
  std::string vote_name(int i) const {
    return (sentinel_ || cluster_ ? "vote " : "node ") +
           lpad(std::to_string(i), std::to_string(n_).size());
  }
  // A vote's address as shown: "m1 via Sentinel" for a redis+sentinel:// one, "Redis Cluster via
  // 127.0.0.1:7001" for a redis+cluster:// one (its seeds make too long a line).
  [[nodiscard]] std::string shown_address(const std::string& node) const;
  // Sentinel votes of a fresh client are resolved (SENTINEL MASTER, the master's INFO) on its
  // first use: asks the status until every vote answers (at most 3 s), so that its first
  // acquisition shows the votes rather than that start-up.
  void warm_up(Client& c, const std::string& resource);
  // "all 5 masters are up", or "all 13 processes are up" with Sentinel or Redis Clusters.
  [[nodiscard]] std::string all_up_text() const {
    return "all " + std::to_string(procs_) +
           (sentinel_ || cluster_ ? " processes are up" : " masters are up");
  }
  std::string token_label(const std::string& token) const;
  Attempt acquire(Client& c, const std::string& who, const std::string& resource, Millis ttl);
  void print_outcomes(const std::vector<NodeOutcome>& nodes);
  StatusResult show_state(const std::string& resource);
  void print_state(const std::string& resource, const StatusResult& st);
  StatusResult settle(const std::string& resource,
                      const std::function<bool(const StatusResult&)>& done, bool shown = true);
  void release(Client& c, const Lock& lock);
  void kill_node(int i);
  void start_node(int i);
  void kill_majority_and_restart_at_once();
  [[nodiscard]] static int count_state(const std::vector<NodeOutcome>& nodes, Vote s);
  [[nodiscard]] bool keys_only(const StatusResult& st, const std::set<std::string>& allowed) const;

  ClusterManager& m_;
  Palette p_;
  const int n_;                    // votes
  const int q_;                    // quorum
  const bool sentinel_;            // the votes are Sentinel-managed masters (--topology sentinel)
  const bool cluster_;             // the votes are Redis Clusters (--topology cluster)
  const int procs_;                // processes: n_, 2 n_ + 3 with Sentinel, 6 n_ with clusters
  bool durable_ = false;           // killed nodes come back with their keys (AOF, fsync always)
  bool ready_ = false;             // step 1 brought every node up
  std::vector<ProcState> before_;  // by index - 1: each node's state before the demo
  std::vector<bool> started_;      // by index: the demo started it, so the demo stops it
  std::set<int> resumed_;          // paused before the demo: resumed, paused again at the end
  std::set<int> down_;             // killed by the demo and not restarted yet
  std::map<std::string, std::string> labels_;  // token -> "A", "B", ...
  std::set<std::string> resources_;            // every resource used, checked empty at the end
  std::unique_ptr<Client> client_;             // client A of steps 2-3 (a long-lived service)
  Lock held_;  // the Sentinel and Redis Cluster chapters: A's lock of steps 2-3
  int checks_ = 0;
  std::vector<std::string> failures_;
  std::vector<KeptKey> kept_keys_;  // what the masters held before the demo (snapshot_keys)
  bool keys_read_ = false;          // snapshot_keys() ran
  bool keys_capped_ = false;        // a node had more keys than are looked at
  std::string unreadable_;          // masters whose keys could not be read, for messages
};

}  // namespace redlock::cli::demo
