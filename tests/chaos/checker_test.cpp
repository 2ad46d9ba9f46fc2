// chaos-checker-test: the checker on synthetic histories, so that a checker that stopped seeing
// overlapping leaderships or term inversions fails here, whatever the election mix happened to
// do in a run. (The run-level counterpart: `chaos-driver --mix election
// --election-ignore-validity` makes candidates lead on after a loss, and must fail.)

#include "checker.hpp"

#include <cstdio>
#include <initializer_list>
#include <string>

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  }
}

struct Lead {
  int slot;
  std::uint64_t term;
  std::int64_t start_ms, end_ms;
};

// Leaderships of one election, as the oracle records them (already capped at their deadlines).
chaos::MixResult check_leaderships(std::initializer_list<Lead> leads) {
  chaos::OracleRecord rec;
  rec.resources.resize(1);
  for (const Lead& l : leads) {
    chaos::Interval iv;
    iv.slot = l.slot;
    iv.leadership = true;
    iv.fence = l.term;
    iv.enter_ns = 1'000'000'000 + l.start_ms * 1'000'000;
    iv.leave_ns = 1'000'000'000 + l.end_ms * 1'000'000;
    iv.valid_until_ns = iv.leave_ns;
    rec.intervals.push_back(iv);
    ++rec.acq.entered;
  }
  chaos::MixResult r;
  r.name = "election";
  check(rec, r);
  return r;
}

}  // namespace

int main() {
  {
    auto r = check_leaderships({{0, 5, 0, 100}, {1, 6, 100, 200}, {2, 9, 250, 400}});
    expect(!r.failed() && r.overlaps == 0 && r.term_inversions == 0,
           "one leader at a time with growing terms passes");
  }
  {
    auto r = check_leaderships({{0, 5, 0, 150}, {1, 6, 100, 200}});
    expect(r.failed() && r.overlaps == 1 && r.longest_overlap_ms == 50.0,
           "two leaders for 50 ms are one overlap of 50 ms, and fail the mix");
  }
  {
    auto r = check_leaderships({{0, 7, 0, 100}, {1, 6, 120, 200}});
    expect(r.failed() && r.term_inversions == 1 && r.overlaps == 0,
           "a later leader with a lower term is a term inversion, and fails the mix");
  }
  {
    auto r = check_leaderships({{0, 7, 0, 100}, {1, 7, 120, 200}});
    expect(r.failed() && r.term_inversions == 1, "a later leader with the same term is one too");
  }
  {
    // Recorded out of order (a leader paused before it told the oracle): the order is by start.
    auto r = check_leaderships({{1, 8, 120, 200}, {0, 7, 0, 100}});
    expect(!r.failed() && r.term_inversions == 0, "the order is the leaderships' start");
  }
  std::printf("chaos-checker-test: %s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
