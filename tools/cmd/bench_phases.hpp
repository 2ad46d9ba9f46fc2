#pragma once
// What `redlock-cli bench` measures: the phases of the cycle benchmark, their latency statistics,
// and the sweep for keys left behind. bench.cpp runs them and reports; this is the measuring.

#include <chrono>
#include <string>
#include <vector>

#include "redlock/options.hpp"

namespace redlock::cli::bench {

using Clock = std::chrono::steady_clock;

[[nodiscard]] double us_between(Clock::time_point a, Clock::time_point b);
[[nodiscard]] Clock::duration seconds_of(double s);

// Latency distribution of one phase (microseconds).
struct Stats {
  std::size_t count = 0;
  double p50 = 0, p99 = 0, p999 = 0, max = 0, mean = 0;
};

// Nearest-rank percentiles: every figure is a latency that was actually observed.
[[nodiscard]] Stats stats_of(std::vector<double> v);

// Process CPU time (all threads: the caller and the client's I/O thread).
[[nodiscard]] double cpu_us();
// Resident set size from /proc/self/status, in kB (0 if unreadable).
[[nodiscard]] long rss_kb();
// Bytes the allocator has handed out and not yet got back (all arenas). Beside the RSS it tells
// live memory that grows (a leak, a container that keeps growing) from pages the allocator keeps.
[[nodiscard]] long heap_kb();

[[nodiscard]] std::string fmt(double v, int decimals = 1);
// "rlbench-<random hex>:", the prefix of every key of one run.
[[nodiscard]] std::string random_prefix();

// One line on stderr, rewritten in place, only when stderr is a terminal: scripts and pipes
// capturing stderr get no carriage-return noise.
class Progress {
 public:
  explicit Progress(bool enabled);
  ~Progress() { clear(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  void show(const std::string& text);
  void clear();

 private:
  bool enabled_;
  bool shown_ = false;
  Clock::time_point last_{};
};

struct PhaseResult {
  std::string name;
  Stats cycle;
  Stats acquire;  // sequential phase only
  Stats release;  // sequential phase only
  double elapsed_s = 0;
  double per_s = 0;
  double cpu_us_per_op = 0;
  int concurrency = 0;
  long errors = 0;
  std::string first_error;
};

struct CycleRun {
  // rtt, fan-out quorum, fan-out all, sequential, then one per concurrency level.
  std::vector<PhaseResult> phases;
  // One acquire + release over raw connections, paired with the sequential cycles like the
  // fan-outs: a SET NX to every node, at the quorum the documented release to every node, until
  // all have answered both. The floor of a cycle, not only of its two fan-outs apart.
  PhaseResult raw_cycle;
  int quorum = 0;
  static constexpr std::size_t first_level = 4;
};

// One round of the algorithm without the library: a plain SET sent to every node at once over raw
// connections, timed until a quorum has answered, `samples` times (fewer if no quorum answered).
[[nodiscard]] std::vector<double> fanout_quorum_us(const Options& options, const std::string& key,
                                                   int samples);

// Runs every phase of the cycle benchmark against `options.nodes`, each for `seconds`: the probes
// paired with sequential cycles, then `levels` locks in flight. Keys start with `prefix`.
[[nodiscard]] CycleRun measure_cycles(Options options, const std::string& prefix,
                                      const AcquireOptions& opts, double seconds,
                                      const std::vector<int>& levels, Progress& progress);

// What the servers behind `nodes` have done so far, summed over all of them (a cluster vote's
// masters included): commands processed and CPU time (user + system). Read before and after a
// measurement, the difference is its server cost; nodes that cannot be asked are left out.
struct ServerWork {
  double commands = 0;
  double cpu_us = 0;
};
[[nodiscard]] ServerWork server_work(const std::vector<NodeAddress>& nodes, const TlsOptions& tls);

struct Sweep {
  long keys_left = 0;
  int unchecked = 0;  // nodes that could not be asked (down, paused)
};

// Counts and deletes what is left under `prefix` on every node. Run it after the Client is gone,
// so rollbacks and releases it still had queued have reached the nodes.
[[nodiscard]] Sweep sweep(const std::vector<NodeAddress>& nodes, const TlsOptions& tls,
                          const std::string& prefix);

}  // namespace redlock::cli::bench
