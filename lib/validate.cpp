#include "validate.hpp"

#include <set>
#include <string_view>

#include "quorum.hpp"

namespace redlock {
namespace detail {

std::optional<std::string> check_resources(const std::vector<std::string>& resources) {
  if (resources.empty()) return "no resource given";
  std::set<std::string_view> seen;
  for (const auto& r : resources) {
    if (r.empty()) return "empty resource name";
    if (r.size() > max_resource_bytes) {
      return "resource name of " + std::to_string(r.size()) + " bytes is longer than the limit of " +
             std::to_string(max_resource_bytes);
    }
    if (!seen.insert(r).second) return "resource '" + r + "' given twice";
  }
  return std::nullopt;
}

std::optional<std::string> check_ttl(Millis ttl, double drift_factor) {
  if (ttl <= Millis{0}) return "ttl must be positive, got " + std::to_string(ttl.count()) + " ms";
  if (ttl > max_ttl) {
    return "ttl of " + std::to_string(ttl.count()) + " ms exceeds the maximum of " +
           std::to_string(max_ttl.count()) + " ms";
  }
  // validity = ttl - elapsed - drift: a ttl that the drift allowance alone uses up can never give
  // a valid lock, whatever the network does, so it is a bad argument rather than a failure.
  if (const auto d = drift(ttl, drift_factor); d >= ttl) {
    return "ttl of " + std::to_string(ttl.count()) + " ms is not longer than the clock-drift allowance (" +
           std::to_string(d.count()) + " us): no lock taken with it could ever be valid";
  }
  return std::nullopt;
}

}  // namespace detail

std::optional<std::string> check_options(const Options& o) {
  if (o.nodes.empty()) return "no nodes configured";
  if (o.nodes.size() > 64) return "too many nodes: " + std::to_string(o.nodes.size()) + " (at most 64)";
  if (o.node_timeout <= Millis{0}) {
    return "node_timeout must be positive, got " + std::to_string(o.node_timeout.count()) + " ms";
  }
  if (o.connect_timeout <= Millis{0}) {
    return "connect_timeout must be positive, got " + std::to_string(o.connect_timeout.count()) + " ms";
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
  if (o.restart_quarantine && *o.restart_quarantine < Millis{0}) return "restart_quarantine must be >= 0";
  std::set<std::string> seen;
  for (const auto& n : o.nodes) {
    std::string id = n.transport == NodeAddress::Transport::unix_socket ? n.path : n.host + "|" + std::to_string(n.port);
    if (!seen.insert(id).second) return "node " + n.to_string() + " appears twice (it would vote twice)";
  }
  return std::nullopt;
}

std::optional<std::string> check_acquire(const std::vector<std::string>& resources, const AcquireOptions& o,
                                         double drift_factor) {
  if (auto why = detail::check_resources(resources)) return why;
  if (auto why = detail::check_ttl(o.ttl, drift_factor)) return why;
  if (o.wait && *o.wait < Millis{0}) return "wait must be >= 0";
  if (o.retry_count && *o.retry_count < 0) return "retry_count must be >= 0";
  if (o.fence && resources.size() > 1) return "fencing takes one resource per lock";
  if (o.mode != LockMode::exclusive && resources.size() > 1) return "read and write locks take one resource";
  if (o.fair && (o.mode != LockMode::exclusive || o.fence || resources.size() > 1)) {
    return "a fair lock is an exclusive lock on one resource, without fencing";
  }
  if (o.fair && (o.heartbeat_ttl < Millis{100} || o.heartbeat_ttl > max_ttl)) {
    return "heartbeat_ttl must be at least 100 ms";
  }
  if (o.mode != LockMode::exclusive && o.fence) return "fencing is offered on exclusive locks only";
  return std::nullopt;
}

}  // namespace redlock
