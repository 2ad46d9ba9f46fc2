#include "core/quorum.hpp"

#include <cmath>

#include "core/server_text.hpp"

namespace redlock::detail {

Decision decide(const Tally& t) noexcept {
  const int q = quorum_of(t.nodes);
  if (t.ok >= q) return Decision::quorum;
  if (t.ok + t.pending() >= q) return Decision::undecided;
  // Out of reach. Which failure it is (held elsewhere, or nodes failing) is known once the
  // refusals alone rule out a quorum, or once the answers still pending could not make them do
  // so; until then the stragglers are waited for, each within its node deadline. Without failed
  // nodes this is always known here: deciding on the failures before the refusals came in
  // reported a lock held on every live node as "no quorum" when one node was down.
  const int spare = t.nodes - q;  // refusals a quorum can survive
  if (t.refused > spare || t.refused + t.pending() <= spare) return Decision::impossible;
  return Decision::undecided;
}

Errc failure_reason(const Tally& t, Errc refusal) noexcept {
  return t.refused > t.nodes - quorum_of(t.nodes) ? refusal : Errc::no_quorum;
}

std::string at_least(const Tally& t) { return t.pending() > 0 ? "at least " : ""; }

std::chrono::microseconds drift(Millis ttl, double drift_factor) noexcept {
  // ttl is at most max_ttl (3.2e10 ms), so this double is exact to well under 1 us.
  double us = std::ceil(static_cast<double>(ttl.count()) * 1000.0 * drift_factor);
  return std::chrono::microseconds{static_cast<std::int64_t>(us)} + std::chrono::milliseconds{2};
}

Validity compute_validity(Millis ttl, double drift_factor, Millis min_validity,
                          BootClock::time_point t1, BootClock::time_point t2) noexcept {
  using std::chrono::microseconds;
  const auto d = drift(ttl, drift_factor);
  // Elapsed time is rounded up so a validity of "exactly zero" never rounds into "positive".
  const auto elapsed_ns = t2 - t1;
  auto elapsed = std::chrono::ceil<microseconds>(elapsed_ns);
  if (elapsed < microseconds{0}) elapsed = microseconds{0};
  const microseconds validity = std::chrono::duration_cast<microseconds>(ttl) - elapsed - d;
  const auto deadline = t1 + std::chrono::duration_cast<BootClock::duration>(ttl) -
                        std::chrono::duration_cast<BootClock::duration>(d);
  return {validity, deadline, validity > std::chrono::duration_cast<microseconds>(min_validity)};
}

std::string breakdown(const std::vector<NodeOutcome>& nodes) {
  std::string out;
  for (int s = 0; s <= static_cast<int>(NodeState::auth_failed); ++s) {
    const auto state = static_cast<NodeState>(s);
    int n = 0;
    const NodeOutcome* first = nullptr;
    bool same_detail = true;
    for (const auto& o : nodes) {
      if (o.state != state) continue;
      ++n;
      if (first == nullptr) first = &o;
      same_detail = same_detail && o.detail == first->detail;
    }
    if (n == 0) continue;
    if (!out.empty()) out += ", ";
    out += std::to_string(n) + " " + to_string(state);
    // What the servers said is the answer to "why": an error or a refused login is shown without
    // -v. A down or timed-out node says the same thing every time and stays short.
    if ((state == NodeState::error || state == NodeState::auth_failed) && !first->detail.empty()) {
      const std::string d = server_text(first->detail, 120);  // (never cut inside a character)
      out += same_detail ? ": " + d : " (" + first->node + ": " + d + "; ...)";
    }
  }
  return out;
}

}  // namespace redlock::detail
