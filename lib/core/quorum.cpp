#include "core/quorum.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "core/capabilities.hpp"
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

namespace {

// t1 + ttl - drift: the end of a lease taken at t1, never later than the nodes' expiry.
BootClock::time_point lease_end(Millis ttl, std::chrono::microseconds d,
                                BootClock::time_point t1) noexcept {
  return t1 + std::chrono::duration_cast<BootClock::duration>(ttl) -
         std::chrono::duration_cast<BootClock::duration>(d);
}

}  // namespace

Validity compute_validity(Millis ttl, double drift_factor, Millis min_validity,
                          BootClock::time_point t1, BootClock::time_point t2) noexcept {
  using std::chrono::microseconds;
  const auto d = drift(ttl, drift_factor);
  // Elapsed time is rounded up so a validity of "exactly zero" never rounds into "positive".
  const auto elapsed_ns = t2 - t1;
  auto elapsed = std::chrono::ceil<microseconds>(elapsed_ns);
  if (elapsed < microseconds{0}) elapsed = microseconds{0};
  const microseconds validity = std::chrono::duration_cast<microseconds>(ttl) - elapsed - d;
  return {validity, lease_end(ttl, d, t1),
          validity > std::chrono::duration_cast<microseconds>(min_validity)};
}

BootClock::time_point validity_used_up_at(Millis ttl, double drift_factor, Millis min_validity,
                                          BootClock::time_point t1) noexcept {
  return lease_end(ttl, drift(ttl, drift_factor), t1) -
         std::chrono::duration_cast<BootClock::duration>(min_validity);
}

bool refused_by_configuration(const NodeOutcome& o) {
  if (o.state == NodeState::auth_failed) return true;
  if (o.state != NodeState::down && o.state != NodeState::error && o.state != NodeState::excluded)
    return false;
  const std::string_view d = o.detail;
  // An ACL user without a command it needs ("NOPERM this user has no permissions to run ...").
  if (d.find("NOPERM") != std::string_view::npos) return true;
  // The same refused to a script's redis.call, which says no NOPERM: Redis 7.0's "The user
  // executing the script can't run this command or subcommand" (or "... can't access at least
  // one of the keys ...", "... can't publish to the channel ..."), Valkey's "ACL failure in
  // script: User u has no permissions to run the 'incr' command".
  if (d.find("The user executing the script can't") != std::string_view::npos) return true;
  // A node that refuses scripts asked to run one, or a native command forced on a node without
  // it (core/capabilities.hpp): the same on every try.
  if (d.starts_with(cannot_run_prefix)) return true;
  if (d.find("ACL failure in script") != std::string_view::npos) return true;
  // TLS (net/tls.cpp's words): our verification of the server's certificate, or the server's
  // alert refusing ours ("tlsv13 alert certificate required", "tlsv1 alert unknown ca").
  if (d.find("certificate verify failed") != std::string_view::npos) return true;
  return d.find("TLS handshake failed") != std::string_view::npos &&
         d.find("alert") != std::string_view::npos &&
         (d.find("certificate") != std::string_view::npos ||
          d.find("unknown ca") != std::string_view::npos);
}

Errc failure_reason(const Tally& t, const std::vector<NodeOutcome>& nodes, Errc refusal) {
  const Errc why = failure_reason(t, refusal);
  if (why != Errc::no_quorum) return why;
  const auto refused = std::count_if(nodes.begin(), nodes.end(), refused_by_configuration);
  return refused > t.nodes - quorum_of(t.nodes) ? Errc::refused : why;
}

}  // namespace redlock::detail
