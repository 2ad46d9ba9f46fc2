// options.hpp: the checks of options and acquisition arguments (the addresses they hold are
// parsed in core/address.cpp). Pure functions, no I/O.

#include "redlock/options.hpp"

#include <set>
#include <string>

#include "core/address.hpp"
#include "core/validate.hpp"

namespace redlock {

using detail::quoted;

std::optional<std::string> check_options(const Options& o) {
  if (o.nodes.empty()) return "no nodes configured";
  if (o.nodes.size() > 64)
    return "too many nodes: " + std::to_string(o.nodes.size()) + " (at most 64)";
  if (o.node_timeout <= Millis{0}) {
    return "node_timeout must be positive, got " + std::to_string(o.node_timeout.count()) + " ms";
  }
  if (o.connect_timeout <= Millis{0}) {
    return "connect_timeout must be positive, got " + std::to_string(o.connect_timeout.count()) +
           " ms";
  }
  if (!(o.drift_factor >= 0.0 && o.drift_factor < 0.5)) {
    return "drift_factor must be in [0, 0.5), got " + std::to_string(o.drift_factor);
  }
  if (o.retry_count < 0) return "retry_count must be >= 0, got " + std::to_string(o.retry_count);
  if (o.retry_delay < Millis{0}) return "retry_delay must be >= 0";
  if (o.retry_jitter < Millis{0}) return "retry_jitter must be >= 0";
  if (o.min_validity < Millis{0}) return "min_validity must be >= 0";
  if (o.reconnect_min <= Millis{0} || o.reconnect_max < o.reconnect_min) {
    return "reconnect backoff must satisfy 0 < min <= max";
  }
  if (o.min_node_uptime < Millis{0}) return "min_node_uptime must be >= 0";
  if (o.restart_quarantine && *o.restart_quarantine < Millis{0})
    return "restart_quarantine must be >= 0";
  if (o.max_ttl) {
    if (auto why = detail::check_ttl(*o.max_ttl, o.drift_factor)) return "max_ttl: " + *why;
  }
  if (o.min_replicas < 0 || o.min_replicas > 100)
    return "min_replicas must be 0-100, got " + std::to_string(o.min_replicas);
  for (const auto& n : o.nodes) {
    if (n.min_replicas && (*n.min_replicas < 0 || *n.min_replicas > 100)) {
      return "min_replicas of node " + n.to_string() + " must be 0-100, got " +
             std::to_string(*n.min_replicas);
    }
  }
  if (o.replica_timeout &&
      (*o.replica_timeout <= Millis{0} || *o.replica_timeout >= o.node_timeout)) {
    // WAIT 0 waits forever; a WAIT as long as the node's deadline makes every vote late.
    return "replica_timeout must be positive and below node_timeout (" +
           std::to_string(o.node_timeout.count()) + " ms), got " +
           std::to_string(o.replica_timeout->count()) + " ms";
  }
  std::set<std::string> seen;
  for (const auto& n : o.nodes) {
    if (!seen.insert(detail::address_identity(n)).second)
      return "node " + n.to_string() + " appears twice (it would vote twice)";
    if (!n.user.empty() && n.password.empty())
      return "node " + n.to_string() + " names the user " + quoted(n.user) + " but no password";
  }
  return std::nullopt;
}

std::optional<std::string> check_acquire(const std::vector<std::string>& resources,
                                         const AcquireOptions& o, double drift_factor,
                                         std::string_view key_prefix) {
  if (auto why = detail::check_resources(resources, key_prefix)) return why;
  if (auto why = detail::check_ttl(o.ttl, drift_factor)) return why;
  if (o.wait && *o.wait < Millis{0}) return "wait must be >= 0";
  if (o.retry_count && *o.retry_count < 0) return "retry_count must be >= 0";
  if (o.fence && resources.size() > 1) return "fencing takes one resource per lock";
  if (o.mode != LockMode::exclusive && resources.size() > 1)
    return "read and write locks take one resource";
  if (o.fair && (o.mode != LockMode::exclusive || o.fence || resources.size() > 1)) {
    return "a fair lock is an exclusive lock on one resource, without fencing";
  }
  if (o.fair && (o.heartbeat_ttl < Millis{100} || o.heartbeat_ttl > max_ttl)) {
    return "heartbeat_ttl must be at least 100 ms";
  }
  if (o.mode != LockMode::exclusive && o.fence) return "fencing is offered on exclusive locks only";
  return std::nullopt;
}

std::optional<std::string> check_acquire(const std::vector<std::string>& resources,
                                         const AcquireOptions& o, const Options& client) {
  if (auto why = check_acquire(resources, o, client.drift_factor, client.key_prefix)) return why;
  return detail::check_declared_ttl(o.ttl, client);
}

}  // namespace redlock
