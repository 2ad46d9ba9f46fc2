#include "core/timing.hpp"

#include <algorithm>

namespace redlock::detail {

std::optional<HoldSchedule> hold_schedule(Millis ttl, const HoldOptions& options,
                                          OptionsProblem& problem) {
  if (options.auto_extend && ttl < min_auto_extended_ttl) {
    problem = {"ttl", "a ttl of " + std::to_string(ttl.count()) +
                          " ms is too short to be extended (at least " +
                          std::to_string(min_auto_extended_ttl.count()) + " ms)"};
    return std::nullopt;
  }
  const Millis every = options.extend_every.value_or(ttl / 3);
  if (every <= Millis{0} || every >= ttl) {
    problem = {"extend_every", "extend_every must be positive and below the ttl (" +
                                   std::to_string(ttl.count()) + " ms), got " +
                                   std::to_string(every.count()) + " ms"};
    return std::nullopt;
  }
  // (At least 1 ms past the first extension, so that a usable extend_every always has a usable
  // default.)
  const Millis renew =
      options.renew_deadline.value_or(every + std::max(Millis{1}, (ttl - every) / 2));
  if (renew <= every || renew > ttl) {
    problem = {"renew_deadline", "renew_deadline must be above extend_every (" +
                                     std::to_string(every.count()) + " ms) and at most the ttl (" +
                                     std::to_string(ttl.count()) + " ms), got " +
                                     std::to_string(renew.count()) + " ms"};
    return std::nullopt;
  }
  return HoldSchedule{every, renew};
}

std::optional<OptionsProblem> find_hold_problem(Millis ttl, const HoldOptions& options) {
  OptionsProblem problem;
  if (hold_schedule(ttl, options, problem)) return std::nullopt;
  return problem;
}

ReplicaWait replica_wait(const Options& options, const NodeAddress& address) {
  ReplicaWait w;
  w.replicas = address.min_replicas.value_or(options.min_replicas);
  if (w.replicas <= 0) return {};
  w.timeout = options.replica_timeout.value_or(std::max(Millis{1}, options.node_timeout / 2));
  w.allowance = w.timeout + server_cycle;
  return w;
}

bool any_replicated(const Options& options) {
  return std::any_of(options.nodes.begin(), options.nodes.end(),
                     [&](const NodeAddress& a) { return replica_wait(options, a).replicas > 0; });
}

Millis command_stall_limit(const Options& o) noexcept {
  return std::max(Millis{1000}, o.node_timeout * 10);
}

Millis drain_limit(const Options& o) noexcept { return o.node_timeout * 2; }

Millis discovery_stall_limit(const Options& o) noexcept {
  return std::max(Millis{1000}, o.connect_timeout * 4);
}

Millis allowance_while_connecting(Millis connect_timeout) noexcept { return connect_timeout; }

Millis extend_retry_after(Millis node_timeout, Millis extend_every) noexcept {
  return std::max(node_timeout * 2, extend_every / 10);
}

Millis connection_attempt_delay(Millis connect_timeout) noexcept {
  return std::clamp(connect_timeout / 4, Millis{10}, Millis{250});
}

Millis writer_mark_ttl(const Options& o) noexcept {
  return std::max(Millis{500}, 2 * (o.retry_delay + o.retry_jitter) + o.node_timeout);
}

}  // namespace redlock::detail
