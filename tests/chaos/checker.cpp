#include "checker.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace chaos {
namespace {

double ms(std::int64_t ns) { return static_cast<double>(ns) / 1e6; }

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

const char* end_name(Interval::End e) {
  switch (e) {
    case Interval::End::leave:
      return "left";
    case Interval::End::died:
      return "died";
    case Interval::End::mix_end:
      return "open at end";
  }
  return "?";
}

std::string describe(const Interval& iv, std::int64_t t0) {
  std::ostringstream os;
  os << "worker " << iv.slot << " (pid " << iv.pid << ") fence "
     << (iv.fence ? std::to_string(*iv.fence) : "-") << " in " << fmt("%.1f", ms(iv.enter_ns - t0))
     << ".." << fmt("%.1f", ms(iv.leave_ns - t0)) << " ms (" << end_name(iv.end)
     << ", validity left at enter " << iv.remaining_at_enter_us / 1000 << " ms, at leave "
     << iv.remaining_at_leave_us / 1000 << " ms" << (iv.paused_inside ? ", paused inside" : "")
     << ")";
  return os.str();
}

double percentile(std::vector<long long> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto idx = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return static_cast<double>(v[std::min(idx, v.size() - 1)]) / 1000.0;
}

}  // namespace

void check(const OracleRecord& rec, MixResult& r) {
  const auto& a = rec.acq;
  r.attempts = a.attempts;
  r.acquired = a.acquired;
  r.entered = a.entered;
  r.skipped_low_validity = a.skipped;
  r.rechecks = a.rechecks;
  r.errors = a.errors;
  r.wall_skew_s = a.max_wall_skew_s;
  r.availability =
      a.attempts ? 100.0 * static_cast<double>(a.acquired) / static_cast<double>(a.attempts) : 0;
  r.p50_ms = percentile(a.latency_us, 0.50);
  r.p99_ms = percentile(a.latency_us, 0.99);

  std::int64_t t0 = 0;
  for (const auto& iv : rec.intervals) {
    if (t0 == 0 || iv.enter_ns < t0) t0 = iv.enter_ns;
  }

  // (a) overlaps, per resource: every pair of intervals that share time.
  std::vector<std::vector<const Interval*>> by_res(rec.resources.size());
  for (const auto& iv : rec.intervals) {
    by_res[static_cast<std::size_t>(iv.resource)].push_back(&iv);
    if (iv.paused_inside) ++r.paused_inside;
    // (d) the holder left after its own deadline
    // (a leadership never ends after its deadline: the oracle caps it there)
    if (!iv.leadership && iv.end == Interval::End::leave && iv.remaining_at_leave_us < 0) {
      ++r.late_exits;
      if (r.details.size() < 12) r.details.push_back("late exit: " + describe(iv, t0));
    }
  }
  std::int64_t longest = 0;
  for (std::size_t res = 0; res < by_res.size(); ++res) {
    auto& v = by_res[res];
    std::sort(v.begin(), v.end(),
              [](const Interval* x, const Interval* y) { return x->enter_ns < y->enter_ns; });
    for (std::size_t i = 0; i < v.size(); ++i) {
      for (std::size_t j = i + 1; j < v.size() && v[j]->enter_ns < v[i]->leave_ns; ++j) {
        const std::int64_t ov = std::min(v[i]->leave_ns, v[j]->leave_ns) - v[j]->enter_ns;
        if (ov <= 0) continue;
        ++r.overlaps;
        longest = std::max(longest, ov);
        if (r.details.size() < 12) {
          r.details.push_back("overlap on r" + std::to_string(res) + " for " + fmt("%.1f", ms(ov)) +
                              " ms: " + describe(*v[i], t0) + " / " + describe(*v[j], t0));
        }
      }
    }
  }
  r.longest_overlap_ms = ms(longest);

  // (g) in the order the leaderships began, every term above all the terms before it.
  for (const auto& v : by_res) {
    const Interval* highest = nullptr;
    for (const Interval* iv : v) {
      if (!iv->leadership || !iv->fence) continue;
      r.election = true;
      if (highest != nullptr && *iv->fence <= *highest->fence) {
        ++r.term_inversions;
        if (r.details.size() < 12)
          r.details.push_back("term inversion: " + describe(*iv, t0) + " began after " +
                              describe(*highest, t0));
      }
      if (highest == nullptr || *iv->fence > *highest->fence) highest = iv;
    }
  }

  // (b), (c)
  for (std::size_t res = 0; res < rec.resources.size(); ++res) {
    const auto& s = rec.resources[res];
    r.increments += s.accepted_writes;
    r.lost_increments += s.accepted_writes - s.value;
    r.stale_writes_accepted += s.clobbered_writes;
    r.fence_regressions += s.fence_regressions;
    r.stale_rejected += s.rejected_reads + s.rejected_writes;
    r.fifo_violations += s.fifo_violations;
    r.ticket_ties += s.ticket_ties;
  }

  for (const auto& e : rec.protocol_errors) r.harness_errors.push_back("protocol: " + e);
  for (const auto& e : rec.stale_writes) r.details.push_back("stale write accepted: " + e);
  for (const auto& e : rec.fifo_breaks) r.details.push_back("out of FIFO order: " + e);
  if (r.ticket_ties != 0) {
    r.details.push_back(std::to_string(r.ticket_ties) +
                        " holders had the same ticket as the previous one (overlapping ticket "
                        "rounds, served in waiter-id order)");
  }

  if (r.must_be_zero) {
    auto need_zero = [&](const char* what, double v) {
      if (v != 0) r.violations.push_back(std::string(what) + " = " + fmt("%g", v));
    };
    need_zero(r.election ? "overlapping leaderships" : "overlapping critical sections",
              static_cast<double>(r.overlaps));
    need_zero("lost increments", static_cast<double>(r.lost_increments));
    need_zero("stale writes accepted", static_cast<double>(r.stale_writes_accepted));
    need_zero("fence regressions", static_cast<double>(r.fence_regressions));
    need_zero("term inversions", static_cast<double>(r.term_inversions));
    need_zero("stale fences rejected", static_cast<double>(r.stale_rejected));
    need_zero("exits after the deadline", static_cast<double>(r.late_exits));
    if (r.fifo_checked)
      need_zero("holders out of FIFO order", static_cast<double>(r.fifo_violations));
    if (r.entered == 0)
      r.harness_errors.push_back("no critical section was entered: the mix proves nothing");
  }
}

void print_table(std::ostream& out, const std::vector<MixResult>& results) {
  out << "| mix | must be 0 | fence | faults | attempts | avail % | p50 ms | p99 ms | entered | "
         "skipped | "
         "overlaps | longest ms | lost incr | stale acc | fence regr | stale rej | late exits | "
         "fifo viol | verdict |\n";
  out << "|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n";
  for (const auto& r : results) {
    if (r.skipped) {
      out << "| " << r.name << " | " << (r.must_be_zero ? "yes" : "no")
          << " | | skipped: " << r.skip_reason << " | | | | | | | | | | | | | | | skipped |\n";
      continue;
    }
    std::string faults;
    for (const auto& [k, v] : r.faults)
      faults += (faults.empty() ? "" : ", ") + k + " " + std::to_string(v);
    if (faults.empty()) faults = "none";
    std::string verdict = !r.harness_errors.empty() ? "HARNESS ERROR"
                          : !r.violations.empty()   ? "FAIL"
                          : r.must_be_zero          ? "ok"
                                                    : "reported";
    out << "| " << r.name << " | " << (r.must_be_zero ? "yes" : "no") << " | " << r.fencing << " | "
        << faults << " | " << r.attempts << " | " << fmt("%.1f", r.availability) << " | "
        << fmt("%.1f", r.p50_ms) << " | " << fmt("%.1f", r.p99_ms) << " | " << r.entered << " | "
        << r.skipped_low_validity << " | " << r.overlaps << " | "
        << fmt("%.1f", r.longest_overlap_ms) << " | " << r.lost_increments << " | "
        << r.stale_writes_accepted << " | "
        << (r.election ? std::to_string(r.term_inversions) + " (terms)"
                       : std::to_string(r.fence_regressions))
        << " | " << r.stale_rejected << " | " << r.late_exits << " | "
        << (!r.fair ? std::string("-")
                    : std::to_string(r.fifo_violations) + (r.fifo_checked ? "" : " (reported)"))
        << " | " << verdict << " |\n";
  }
}

void print_details(std::ostream& out, const std::vector<MixResult>& results,
                   bool with_nemesis_log) {
  for (const auto& r : results) {
    if (r.skipped) continue;
    const bool trouble = r.failed();
    if (!trouble && !with_nemesis_log && r.details.empty() && r.errors.empty()) continue;
    out << "\n### " << r.name << " (seed " << r.seed << ", " << fmt("%.0f", r.seconds) << " s)\n";
    for (const auto& v : r.violations) out << "- VIOLATION: " << v << "\n";
    for (const auto& e : r.harness_errors) out << "- HARNESS ERROR: " << e << "\n";
    for (const auto& d : r.details) out << "- " << d << "\n";
    if (!r.errors.empty()) {
      out << "- failed acquisitions:";
      for (const auto& [k, v] : r.errors) out << " " << k << " " << v << ";";
      out << "\n";
    }
    if (with_nemesis_log || trouble) {
      out << "- nemesis:\n";
      for (const auto& l : r.nemesis_log) out << "    " << l << "\n";
    }
  }
}

}  // namespace chaos
