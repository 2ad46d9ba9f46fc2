// redlock-cli bench [--seconds S] [--concurrency C] [--ttl DUR]
// redlock-cli bench --hold N [--soak S] [--ttl DUR]
//
// A benchmark, not a test (docs: testing.md, "Benchmarks, not timed tests"): it prints figures
// and the limit they are compared with, measured in the same run, and never fails on speed.
//
// Phases (each bounded by --seconds):
//   sequential  try_acquire + try_release through redlock::Client, one after the other. Each
//               cycle is paired with two raw probes over synchronous connections, so
//               floor and cycle share the load of this (shared, noisy) machine:
//                 rtt      one plain SET to the first node: the round trip no cycle can beat;
//                 fan-out  one SET written to every node at once, timed to the quorum-th and to
//                          the last answer: what the machine itself allows for N nodes;
//   C=...       `C` locks in flight on distinct resources, each slot chaining acquire_async ->
//               release_async -> acquire_async ... from the callbacks.
// --hold N keeps N locks with auto-extension for --soak seconds and samples the RSS instead.
//
// Every key is named "<random prefix>:..." so runs on shared nodes do not collide, and at the end
// every reachable node is swept for that prefix: what was still there is reported as keys_left
// (should be 0: every cycle releases what it took) and deleted.

#include <malloc.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "bench_handoff.hpp"
#include "bench_phases.hpp"
#include "cli.hpp"
#include "json.hpp"
#include "output.hpp"
#include "redlock/client.hpp"

namespace redlock::cli {
namespace {

using namespace bench;

struct BenchArgs {
  double seconds = 3.0;
  std::optional<int> concurrency;
  std::string ttl = "10s";
  std::optional<int> hold;
  double soak = 60.0;
  std::string handoff;  // --handoff 2,8,32
};

std::vector<int> waiter_counts(const std::string& list) {
  std::vector<int> out;
  std::size_t start = 0;
  for (;;) {
    const auto comma = list.find(',', start);
    const std::string item = list.substr(start, comma == std::string::npos ? comma : comma - start);
    try {
      std::size_t used = 0;
      const int n = std::stoi(item, &used);
      if (used != item.size()) throw std::invalid_argument(item);
      out.push_back(n);
    } catch (const std::exception&) {
      throw UsageError("--handoff: '" + item + "' is not a number of waiters (e.g. 2,8,32)");
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// "<name>_us_p50", "_p99" and "_p999" of a phase, rounded as the table shows them.
void add_stats(Json& j, const std::string& name, const Stats& s) {
  j[name + "_us_p50"] = rounded(s.p50, 1);
  j[name + "_us_p99"] = rounded(s.p99, 1);
  j[name + "_us_p999"] = rounded(s.p999, 1);
}

void print_table(std::ostream& out, const std::vector<PhaseResult>& phases) {
  char line[256];
  std::snprintf(line, sizeof line, "%-24s %9s %9s %9s %9s %11s %12s %7s\n", "phase", "ops",
                "p50 us", "p99 us", "p99.9 us", "ops/s", "cpu us/op", "errors");
  out << line;
  for (const auto& p : phases) {
    // A negative figure is one that does not apply to the phase.
    const std::string per_s = p.per_s < 0 ? "-" : fmt(p.per_s, 0);
    const std::string cpu = p.cpu_us_per_op < 0 ? "-" : fmt(p.cpu_us_per_op);
    std::snprintf(line, sizeof line, "%-24s %9zu %9.1f %9.1f %9.1f %11s %12s %7ld\n",
                  p.name.c_str(), p.cycle.count, p.cycle.p50, p.cycle.p99, p.cycle.p999,
                  per_s.c_str(), cpu.c_str(), p.errors);
    out << line;
    if (p.acquire.count) {
      std::snprintf(line, sizeof line, "%-24s %9s %9.1f %9.1f %9.1f\n", "  acquire", "",
                    p.acquire.p50, p.acquire.p99, p.acquire.p999);
      out << line;
      std::snprintf(line, sizeof line, "%-24s %9s %9.1f %9.1f %9.1f\n", "  release", "",
                    p.release.p50, p.release.p99, p.release.p999);
      out << line;
    }
  }
}

// --ttl, checked by the library as the locks the benchmark takes are (auto-extended with --hold).
Millis checked_ttl(const BenchArgs& a, const Options& options, bool held) {
  AcquireOptions o;
  o.ttl = duration_arg("--ttl", a.ttl);
  const GivenFlags given{{"ttl", {"--ttl", a.ttl}}};
  check_acquisition({"bench"}, o, options, given);
  HoldOptions hold;
  hold.auto_extend = true;
  if (held) check_holding(o.ttl, hold, given);
  return o.ttl;
}

int run_cycles(const BenchArgs& a, const Globals& g) {
  if (!(a.seconds > 0 && a.seconds <= 3600)) throw UsageError("--seconds: must be in (0, 3600]");
  if (a.concurrency && (*a.concurrency < 1 || *a.concurrency > 100000)) {
    throw UsageError("--concurrency: must be in 1..100000, got " + std::to_string(*a.concurrency));
  }
  Options options = make_options(g);
  const Millis ttl = checked_ttl(a, options, false);
  const auto nodes = options.nodes;
  const TlsOptions tls = options.tls;
  const std::string prefix = random_prefix();
  const std::vector<int> levels =
      a.concurrency ? std::vector<int>{*a.concurrency} : std::vector<int>{1, 16, 64, 256};
  Progress progress(!g.quiet);

  AcquireOptions opts;
  opts.ttl = ttl;
  opts.retry_count = 0;  // a retry sleeps retry_delay: it would measure the sleep, not the engine
  const CycleRun run =
      bench::measure_cycles(std::move(options), prefix, opts, a.seconds, levels, progress);
  const std::vector<PhaseResult>& phases = run.phases;
  const int quorum = run.quorum;
  progress.clear();
  const Sweep left = sweep(nodes, tls, prefix);

  // phases: rtt, fan-out quorum, fan-out all, sequential, then one per concurrency level.
  constexpr std::size_t first_level = CycleRun::first_level;
  const PhaseResult& rtt = phases[0];
  const PhaseResult& fan_q = phases[1];
  const PhaseResult& fan_all = phases[2];
  const PhaseResult& seq = phases[3];
  const PhaseResult& top = phases.back();
  long errors = 0;
  for (std::size_t i = 3; i < phases.size(); ++i) errors += phases[i].errors;

  if (g.json) {
    Json j = {{"nodes", nodes.size()},
              {"quorum", quorum},
              {"seconds", rounded(a.seconds, 3)},
              {"ttl_ms", ttl.count()},
              {"prefix", text(prefix)},
              {"rtt_node", text(nodes.front().to_string())}};
    add_stats(j, "rtt", rtt.cycle);
    j["rtt_samples"] = rtt.cycle.count;
    add_stats(j, "fanout_quorum", fan_q.cycle);
    add_stats(j, "fanout_all", fan_all.cycle);
    j["fanout_samples"] = fan_q.cycle.count;
    add_stats(j, "cycle", seq.cycle);
    j["cycles"] = seq.cycle.count;
    j["cycle_us_mean"] = rounded(seq.cycle.mean, 1);
    j["cycle_us_max"] = rounded(seq.cycle.max, 1);
    add_stats(j, "acquire", seq.acquire);
    add_stats(j, "release", seq.release);
    j["sequential_cycles_per_s"] = rounded(seq.per_s, 1);
    j["sequential_cpu_us_per_cycle"] = rounded(seq.cpu_us_per_op, 1);
    j["sequential_errors"] = seq.errors;
    j["cycle_to_rtt"] = rounded(rtt.cycle.p50 > 0 ? seq.cycle.p50 / rtt.cycle.p50 : 0, 2);
    // An acquire can decide at the quorum, a release waits for every node: the fan-out floor of
    // one cycle is the sum of the two.
    const double fan_floor = fan_q.cycle.p50 + fan_all.cycle.p50;
    j["cycle_to_fanout"] = rounded(fan_floor > 0 ? seq.cycle.p50 / fan_floor : 0, 2);
    // The same cycle over raw connections (bench_phases.hpp): what the library itself adds.
    add_stats(j, "raw_cycle", run.raw_cycle.cycle);
    j["raw_cycle_samples"] = run.raw_cycle.cycle.count;
    j["raw_cycle_cpu_us"] = rounded(run.raw_cycle.cpu_us_per_op, 1);  // per raw cycle, -1: none
    // Not the library's: a node that refused the raw cycle's script (then no raw cycle at all).
    j["raw_cycle_errors"] = run.raw_cycle.errors;
    if (!run.raw_cycle.first_error.empty())
      j["raw_cycle_first_error"] = text(run.raw_cycle.first_error);
    j["cycle_to_raw_cycle"] =
        rounded(run.raw_cycle.cycle.p50 > 0 ? seq.cycle.p50 / run.raw_cycle.cycle.p50 : 0, 2);
    // The top-level pair is the highest concurrency run; every level is in "throughput".
    j["concurrency"] = top.concurrency;
    j["cycles_per_s"] = rounded(top.per_s, 1);
    j["cpu_us_per_cycle"] = rounded(top.cpu_us_per_op, 1);
    Json levels_json = Json::array();
    for (std::size_t i = first_level; i < phases.size(); ++i) {
      const auto& p = phases[i];
      Json level = {{"concurrency", p.concurrency},
                    {"cycles_per_s", rounded(p.per_s, 1)},
                    {"cycles", p.cycle.count}};
      add_stats(level, "cycle", p.cycle);
      level["cpu_us_per_cycle"] = rounded(p.cpu_us_per_op, 1);
      level["errors"] = p.errors;
      levels_json.push_back(std::move(level));
    }
    j["throughput"] = std::move(levels_json);
    j["errors"] = errors;
    for (const auto& p : phases) {
      if (!p.first_error.empty()) {
        j["first_error"] = text(p.name + ": " + p.first_error);
        break;
      }
    }
    j["keys_left"] = left.keys_left;
    j["unchecked_nodes"] = left.unchecked;
    print_json(j);
  } else if (!g.quiet) {
    std::cout << "redlock-cli bench: " << nodes.size() << " nodes (quorum " << quorum << "), "
              << fmt(a.seconds) << " s per phase, ttl " << ttl.count() << " ms, rtt to "
              << nodes.front().to_string() << "\n";
    std::vector<PhaseResult> rows = phases;  // the raw cycle beside the other floors
    if (run.raw_cycle.cycle.count)
      rows.insert(rows.begin() + static_cast<std::ptrdiff_t>(first_level - 1), run.raw_cycle);
    print_table(std::cout, rows);
    if (rtt.cycle.p50 > 0 && seq.cycle.count) {
      std::cout << "sequential cycle p50 = " << fmt(seq.cycle.p50 / rtt.cycle.p50, 2)
                << " x rtt p50";
      if (fan_q.cycle.count && fan_all.cycle.count) {
        std::cout << " = " << fmt(seq.cycle.p50 / (fan_q.cycle.p50 + fan_all.cycle.p50), 2)
                  << " x fan-out floor (quorum + all)";
      }
      if (run.raw_cycle.cycle.count) {
        std::cout << " = " << fmt(seq.cycle.p50 / run.raw_cycle.cycle.p50, 2) << " x raw cycle";
      }
      std::cout << "\n";
    }
    std::cout << "keys left: " << left.keys_left;
    if (left.unchecked)
      std::cout << " (" << left.unchecked << " node(s) not reachable, not checked)";
    std::cout << "\n";
  }
  for (const auto& p : phases) {
    if (!p.first_error.empty() && !g.quiet) {
      Stderr() << "redlock-cli: bench: " << p.name << ": " << p.errors
               << " error(s), first: " << p.first_error << "\n";
    }
  }
  if (!run.raw_cycle.first_error.empty() && !g.quiet) {
    Stderr() << "redlock-cli: bench: no raw cycle (the floor without the library): "
             << run.raw_cycle.first_error << "\n";
  }
  if (seq.cycle.count == 0) {
    if (!g.quiet) Stderr() << "redlock-cli: bench: no cycle succeeded\n";
    return exit_no_quorum;
  }
  return exit_ok;
}

// Holds N locks with auto-extension for the soak and samples the RSS: the memory cost of a held
// lock, and whether the watchdog leaks while it keeps extending.
int run_hold(const BenchArgs& a, const Globals& g) {
  const int count = *a.hold;
  if (count < 1 || count > 1000000)
    throw UsageError("--hold: must be in 1..1000000, got " + std::to_string(count));
  if (!(a.soak >= 0 && a.soak <= 86400)) throw UsageError("--soak: must be in [0, 86400] seconds");
  Options options = make_options(g);
  const Millis ttl = checked_ttl(a, options, true);
  const auto nodes = options.nodes;
  const TlsOptions tls = options.tls;
  const std::string prefix = random_prefix();
  Progress progress(!g.quiet);
  auto mb = [](long kb) { return static_cast<double>(kb) / 1024.0; };

  struct Sample {
    double t_s;
    long kb;
    long heap_kb;
  };
  std::vector<Sample> samples;
  long kb_start = 0, kb_locked = 0, kb_trimmed = 0, failed = 0, extensions = 0, lost = 0;
  std::string first_error;
  double take_s = 0, release_s = 0;
  {
    Client client(std::move(options));
    LockOptions lo;
    lo.acquire.ttl = ttl;
    lo.acquire.retry_count = 1;
    lo.hold.auto_extend = true;
    std::vector<Guard> guards;
    guards.reserve(static_cast<std::size_t>(count));
    // Connect first (not measured), so the start figure is a client ready to work.
    if (auto w = client.try_acquire({prefix + "warmup"}, lo.acquire))
      (void)client.try_release(w.lock);
    kb_start = rss_kb();
    const auto t0 = Clock::now();
    for (int i = 0; i < count; ++i) {
      auto [gd, r] = client.try_lock({prefix + "h:" + std::to_string(i)}, lo);
      if (!r) {
        if (failed++ == 0) first_error = error_name(r.error) + ": " + r.error.message();
      } else {
        guards.push_back(std::move(gd));
      }
      progress.show("bench: taking locks  " + std::to_string(i + 1) + "/" + std::to_string(count));
    }
    const auto t1 = Clock::now();
    take_s = std::chrono::duration<double>(t1 - t0).count();
    kb_locked = rss_kb();
    samples.push_back({0.0, kb_locked, heap_kb()});
    const auto end = t1 + seconds_of(a.soak);
    auto next_sample = t1 + std::chrono::seconds(10);
    for (auto now = Clock::now(); now < end; now = Clock::now()) {
      std::this_thread::sleep_for(
          std::min<Clock::duration>(std::chrono::milliseconds(200), end - now));
      now = Clock::now();
      if (now >= next_sample || now >= end) {
        samples.push_back({std::chrono::duration<double>(now - t1).count(), rss_kb(), heap_kb()});
        next_sample += std::chrono::seconds(10);
      }
      progress.show("bench: holding " + std::to_string(guards.size()) + " locks  " +
                    fmt(std::chrono::duration<double>(now - t1).count()) + "/" + fmt(a.soak) +
                    " s  rss " + fmt(mb(samples.back().kb)) + " MB");
    }
    // What the allocator could give back: RSS growth with a flat heap is free memory it keeps,
    // which malloc_trim returns (glibc also releases free pages in the middle of its arenas).
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
    kb_trimmed = rss_kb();
    for (const auto& gd : guards) {
      extensions += gd.extensions();
      if (!gd.owns()) ++lost;
    }
    const auto t2 = Clock::now();
    guards.clear();  // each Guard releases its lock on the nodes
    release_s = std::chrono::duration<double>(Clock::now() - t2).count();
  }
  progress.clear();
  const Sweep left = sweep(nodes, tls, prefix);
  const long kb_end = samples.back().kb;
  long kb_peak = 0;
  for (const auto& s : samples) kb_peak = std::max(kb_peak, s.kb);
  const double per_lock_b = count > failed ? static_cast<double>(kb_locked - kb_start) * 1024.0 /
                                                 static_cast<double>(count - failed)
                                           : 0;

  if (g.json) {
    Json j = {{"mode", "hold"},
              {"nodes", nodes.size()},
              {"locks", count - failed},
              {"failed", failed},
              {"ttl_ms", ttl.count()},
              {"soak_s", rounded(a.soak, 3)},
              {"take_s", rounded(take_s, 3)},
              {"release_s", rounded(release_s, 3)},
              {"rss_mb_start", rounded(mb(kb_start), 2)},
              {"rss_mb_locked", rounded(mb(kb_locked), 2)},
              {"rss_mb_end", rounded(mb(kb_end), 2)},
              {"rss_mb_peak", rounded(mb(kb_peak), 2)},
              {"rss_growth_mb", rounded(mb(kb_end - kb_locked), 2)},
              {"rss_mb_end_trimmed", rounded(mb(kb_trimmed), 2)},
              {"heap_mb_locked", rounded(mb(samples.front().heap_kb), 2)},
              {"heap_mb_end", rounded(mb(samples.back().heap_kb), 2)},
              // Whole bytes, an integer as it always was.
              {"bytes_per_lock", std::llround(per_lock_b)},
              {"extensions", extensions},
              {"lost", lost}};
    Json samples_json = Json::array();
    for (const auto& smp : samples) {
      samples_json.push_back({{"t_s", rounded(smp.t_s, 1)},
                              {"rss_mb", rounded(mb(smp.kb), 2)},
                              {"heap_mb", rounded(mb(smp.heap_kb), 2)}});
    }
    j["samples"] = std::move(samples_json);
    if (!first_error.empty()) j["first_error"] = text(first_error);
    j["keys_left"] = left.keys_left;
    j["unchecked_nodes"] = left.unchecked;
    print_json(j);
  } else if (!g.quiet) {
    std::cout << "redlock-cli bench --hold: " << (count - failed) << " locks held (ttl "
              << ttl.count() << " ms, auto-extend) on " << nodes.size() << " nodes for "
              << fmt(a.soak) << " s\n";
    std::cout << "taken in " << fmt(take_s, 2) << " s, released in " << fmt(release_s, 2) << " s, "
              << extensions << " extensions, " << lost << " lost, " << failed << " failed\n";
    std::cout << "rss at start " << fmt(mb(kb_start)) << " MB, with the locks "
              << fmt(mb(kb_locked)) << " MB (" << fmt(per_lock_b, 0) << " B/lock), end "
              << fmt(mb(kb_end)) << " MB, growth " << fmt(mb(kb_end - kb_locked), 2) << " MB, "
              << fmt(mb(kb_trimmed)) << " MB after malloc_trim\n";
    std::cout << "t (s)    rss (MB)   heap in use (MB)\n";
    for (const auto& smp : samples) {
      char line[64];
      std::snprintf(line, sizeof line, "%6.1f %10.2f %18.2f\n", smp.t_s, mb(smp.kb),
                    mb(smp.heap_kb));
      std::cout << line;
    }
    std::cout << "keys left: " << left.keys_left << "\n";
  }
  if (!first_error.empty() && !g.quiet) {
    Stderr() << "redlock-cli: bench: " << failed << " lock(s) not taken, first: " << first_error
             << "\n";
  }
  return failed == count ? exit_no_quorum : exit_ok;
}

}  // namespace

Command bench_command(const Globals& g) {
  auto a = std::make_shared<BenchArgs>();
  return {
      .name = "bench",
      .description =
          "Measure lock cycle latency and throughput against the nodes, with the raw SET "
          "round trip as the floor (or, with --hold, the memory of many held locks)",
      .footer =
          "Figures only: a benchmark never fails on speed. Keys use a random prefix and are "
          "released (what is left is reported as keys_left, then deleted). Progress goes to "
          "stderr when it is a terminal.",
      .options =
          {
              {.names = "--seconds",
               .target = &a->seconds,
               .help = "Length of each phase in seconds (default 3)",
               .type_name = "S"},
              {.names = "--concurrency",
               .target = &a->concurrency,
               .help = "Locks in flight on distinct resources (default: runs 1, 16, 64 and 256)",
               .type_name = "C"},
              {.names = "--ttl",
               .target = &a->ttl,
               .help = "ttl of the benchmark's locks (default 10s)",
               .type_name = "DUR"},
              {.names = "--hold",
               .target = &a->hold,
               .help = "Instead: hold N locks with auto-extension and sample the RSS",
               .type_name = "N",
               .excludes = "--concurrency"},
              {.names = "--handoff",
               .target = &a->handoff,
               .help = "Instead: one hot lock taken in turn by W clients for each W listed "
                       "(e.g. 2,8,32), plain and fair, wake-ups off and on: handoffs/s and the "
                       "gap from a release to the next acquisition (each row's --seconds in "
                       "slices of about 1 s, taken in turn by the four rows of one count)",
               .type_name = "W,...",
               .excludes = "--concurrency"},
              {.names = "--soak",
               .target = &a->soak,
               .help = "With --hold: how long to hold them, in seconds (default 60)",
               .type_name = "S",
               .needs = "--hold"},
          },
      .run =
          [a, &g] {
            if (!a->handoff.empty()) return run_handoff(waiter_counts(a->handoff), a->seconds, g);
            return a->hold ? run_hold(*a, g) : run_cycles(*a, g);
          },
      .storage = a,
  };
}

}  // namespace redlock::cli
