#pragma once
// What the node manager's files share (manager.cpp: the processes; manager_settings.cpp: the
// settings and their directory; manager_status.cpp: what it reports; the topologies'
// cluster_topology.cpp and sentinel_topology.cpp). Private to tools/nodes.

#include <sys/types.h>

#include <optional>
#include <string>
#include <system_error>

#include "manager.hpp"

namespace redlock::nodes {

// What the cluster directory and /proc say of one node's process (ClusterManager::inspect()).
struct ClusterManager::Proc {
  std::optional<pid_t> pid;  // what the pid file says
  bool ours = false;         // pid is alive and a redis-server on `port`
  char state = 0;            // /proc state letter when ours ('T': paused)
  int port = 0;              // the port it was started on (node-I.conf), else the computed one
};

}  // namespace redlock::nodes

namespace redlock::nodes::internal {

// In the cluster directory: the settings of the last `up`, and the TLS files of a cluster
// started with --tls.
inline constexpr const char* settings_file = "cluster.conf";
inline constexpr const char* tls_dir = "tls";

[[noreturn]] inline void fail(ClusterError::Kind kind, const std::string& message) {
  throw ClusterError(kind, message);
}

inline std::string errno_text(int err) { return std::generic_category().message(err); }

// "node 3 (127.0.0.1:7003)", for messages.
inline std::string node_name(int index, int port) {
  return "node " + std::to_string(index) + " (127.0.0.1:" + std::to_string(port) + ")";
}

}  // namespace redlock::nodes::internal
