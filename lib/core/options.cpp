// options.hpp: the checks of options and acquisition arguments (the addresses they hold are
// parsed in core/address.cpp). Pure functions, no I/O.

#include "redlock/options.hpp"

#include <set>
#include <string>

#include "core/address.hpp"
#include "core/validate.hpp"

namespace redlock {

using detail::quoted;

std::optional<OptionsProblem> find_options_problem(const Options& o) {
  using P = OptionsProblem;
  const auto ms = [](Millis d) { return std::to_string(d.count()) + " ms"; };
  if (o.nodes.empty()) return P{"nodes", "no nodes configured"};
  if (o.nodes.size() > 64)
    return P{"nodes", std::to_string(o.nodes.size()) + " nodes, at most 64 allowed"};
  if (o.node_timeout <= Millis{0})
    return P{"node_timeout", "must be positive, got " + ms(o.node_timeout)};
  if (o.connect_timeout <= Millis{0})
    return P{"connect_timeout", "must be positive, got " + ms(o.connect_timeout)};
  if (!(o.drift_factor >= 0.0 && o.drift_factor < 0.5))
    return P{"drift_factor", "must be in [0, 0.5), got " + std::to_string(o.drift_factor)};
  if (o.retry_count < 0)
    return P{"retry_count", "must be >= 0, got " + std::to_string(o.retry_count)};
  if (o.retry_delay < Millis{0}) return P{"retry_delay", "must be >= 0, got " + ms(o.retry_delay)};
  if (o.retry_jitter < Millis{0})
    return P{"retry_jitter", "must be >= 0, got " + ms(o.retry_jitter)};
  if (o.min_validity < Millis{0})
    return P{"min_validity", "must be >= 0, got " + ms(o.min_validity)};
  if (o.reconnect_min <= Millis{0} || o.reconnect_max < o.reconnect_min)
    return P{"reconnect_min", "the reconnect backoff must satisfy 0 < min <= max"};
  if (o.min_node_uptime < Millis{0})
    return P{"min_node_uptime", "must be >= 0, got " + ms(o.min_node_uptime)};
  if (o.restart_quarantine && *o.restart_quarantine < Millis{0})
    return P{"restart_quarantine", "must be >= 0, got " + ms(*o.restart_quarantine)};
  if (o.max_ttl) {
    if (auto why = detail::check_ttl(*o.max_ttl, o.drift_factor)) return P{"max_ttl", *why};
  }
  if (o.min_replicas < 0 || o.min_replicas > 100)
    return P{"min_replicas", "must be 0-100, got " + std::to_string(o.min_replicas)};
  for (const auto& n : o.nodes) {
    if (n.min_replicas && (*n.min_replicas < 0 || *n.min_replicas > 100)) {
      return P{"nodes", "min_replicas of node " + n.to_string() + " must be 0-100, got " +
                            std::to_string(*n.min_replicas)};
    }
  }
  if (o.replica_timeout &&
      (*o.replica_timeout <= Millis{0} || *o.replica_timeout >= o.node_timeout)) {
    // WAIT 0 waits forever; a WAIT as long as the node's deadline makes every vote late.
    return P{"replica_timeout", "must be positive and below node_timeout (" + ms(o.node_timeout) +
                                    "), got " + ms(*o.replica_timeout)};
  }
  std::set<std::string> seen;
  for (const auto& n : o.nodes) {
    if (!seen.insert(detail::address_identity(n)).second)
      return P{"nodes", "node " + n.to_string() + " appears twice (it would vote twice)"};
    if (!n.user.empty() && n.password.empty()) {
      return P{"nodes",
               "node " + n.to_string() + " names the user " + quoted(n.user) + " but no password"};
    }
  }
  return std::nullopt;
}

std::optional<std::string> check_options(const Options& o) {
  if (auto p = find_options_problem(o)) return p->field + ": " + p->reason;
  return std::nullopt;
}

std::optional<std::string> check_acquire(const std::vector<std::string>& resources,
                                         const AcquireOptions& o, const Options& client) {
  if (auto p = detail::find_acquire_problem(resources, o, client)) return std::move(p->reason);
  return std::nullopt;
}

}  // namespace redlock
