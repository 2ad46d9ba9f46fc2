#pragma once
// The checker: turns what the oracle recorded in one mix into the figures of the report, and
// says which of them are violations.
//
// (a) overlapping critical sections on a resource (count of overlapping pairs, longest overlap);
// (b) lost increments (accepted writes minus the counter's final value) and stale writes accepted
//     (a write whose read was replaced meanwhile);
// (c) fence regressions (an ENTER whose fence is not above every earlier ENTER's on the resource:
//     fences accepted out of order) and stale fences the oracle rejected;
// (d) exits after the holder's own deadline (the worker's remaining() at LEAVE was negative);
// (e) availability (acquired / attempts) and acquire latency p50/p99;
// (g) the election mix: term inversions (a leadership that began after another with a term not
//     above it); its overlaps are (a) over the leaderships, each capped at its validity deadline.
// (f) fair locks, where the mix checks it: holders served out of FIFO order (a holder whose ticket
//     is below the previous holder's on the resource).

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "oracle.hpp"

namespace chaos {

struct MixResult {
  std::string name;
  bool must_be_zero = true;
  std::string fencing = "on";  // on, off, half (even workers fenced, odd ones plain)
  bool skipped = false;
  std::string skip_reason;
  double seconds = 0;
  std::uint64_t seed = 0;
  std::map<std::string, long long> faults;
  long long attempts = 0, acquired = 0, entered = 0, skipped_low_validity = 0, rechecks = 0;
  double availability = 0;  // percent
  double p50_ms = 0, p99_ms = 0;
  long long overlaps = 0;
  double longest_overlap_ms = 0;
  long long lost_increments = 0;
  long long stale_writes_accepted = 0;
  long long fence_regressions = 0;
  long long stale_rejected = 0;
  long long late_exits = 0;
  long long paused_inside = 0;
  bool fair = false;          // fair locks: (f) is counted
  bool fifo_checked = false;  // ... and must be zero (otherwise only reported)
  long long fifo_violations = 0;
  bool election = false;          // leaderships, not critical sections: (g) is counted
  long long term_inversions = 0;  // (g)
  long long ticket_ties = 0;  // successive holders with the same ticket (allowed: waiter-id order)
  long long increments = 0;   // accepted writes
  long long wall_skew_s = 0;  // largest wall-clock offset the workers showed
  std::map<std::string, long long> errors;  // failed acquisitions by reason
  std::vector<std::string> violations;      // (a)-(d), and (f) where checked, in a must-be-zero mix
  std::vector<std::string> harness_errors;  // protocol errors, worker crashes, nemesis errors
  std::vector<std::string> details;         // a few overlaps etc., for the log
  std::vector<std::string> nemesis_log;

  [[nodiscard]] bool failed() const { return !violations.empty() || !harness_errors.empty(); }
};

// Fills the figures of `r` from `rec` and decides the violations (for a must-be-zero mix).
void check(const OracleRecord& rec, MixResult& r);

// The report: one table row per mix, then the details of anything that went wrong.
void print_table(std::ostream& out, const std::vector<MixResult>& results);
void print_details(std::ostream& out, const std::vector<MixResult>& results, bool with_nemesis_log);

}  // namespace chaos
