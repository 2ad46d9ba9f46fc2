// The settings of a local cluster and its directory: the checks of the settings, the cluster
// directory (made 0700: its pid files decide what gets signalled), cluster.conf (written by `up`,
// read back by the other commands), the node list clients use, each node's file names, endpoint
// and TLS certificates, and which vote a process belongs to. manager.hpp says what is kept there.

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "certs.hpp"
#include "cluster_dir.hpp"
#include "manager.hpp"
#include "manager_internal.hpp"

namespace fs = std::filesystem;

namespace redlock::nodes {

using namespace dir;
using namespace internal;

namespace {

// The throwaway CA lives as long as the cluster does (it is made again by an `up` from nothing).
constexpr int cert_days = 365;

}  // namespace

ClusterManager::ClusterManager(ClusterSettings settings, bool create_dir)
    : settings_(std::move(settings)) {
  using K = ClusterError::Kind;
  if (settings_.count < 1 || settings_.count > max_count) {
    fail(K::usage, "node count " + std::to_string(settings_.count) + " is out of range (1.." +
                       std::to_string(max_count) + ")");
  }
  if (settings_.base_port < min_port || settings_.base_port > max_port) {
    fail(K::usage, "base port " + std::to_string(settings_.base_port) + " is out of range (" +
                       std::to_string(min_port) + ".." + std::to_string(max_port) + ")");
  }
  if (settings_.replicas < 0 || settings_.replicas > max_cluster_replicas) {
    fail(K::usage, "replicas " + std::to_string(settings_.replicas) + " is out of range (0.." +
                       std::to_string(max_cluster_replicas) + ")");
  }
  const int top = settings_.base_port + process_count() - 1;
  if (top > max_port) {
    fail(K::usage, "base port " + std::to_string(settings_.base_port) + " with " +
                       std::to_string(process_count()) +
                       (settings_.topology == Topology::standalone ? " nodes" : " processes") +
                       " would put node " + std::to_string(process_count()) + " on port " +
                       std::to_string(top) + ", above 65535");
  }
  if (settings_.topology == Topology::cluster) {
    // The bus ports must be ports, and none the client port of a node.
    const int offset = settings_.bus_port_offset;
    const int low = settings_.base_port + offset, high = top + offset;
    if (low < min_port || high > max_port ||
        (offset < process_count() && -offset < process_count())) {
      fail(K::usage,
           "bus port offset " + std::to_string(offset) +
               " would put the cluster buses of "
               "nodes 1.." +
               std::to_string(process_count()) + " on ports " + std::to_string(low) + ".." +
               std::to_string(high) +
               (low < min_port || high > max_port
                    ? ", outside " + std::to_string(min_port) + ".." + std::to_string(max_port)
                    : ", among the nodes' own ports " + std::to_string(settings_.base_port) + ".." +
                          std::to_string(top)));
    }
  }
  if (settings_.dir.empty()) settings_.dir = default_dir();
  std::error_code ec;
  settings_.dir = fs::absolute(settings_.dir, ec);
  const std::string what = "cluster directory " + settings_.dir.string();
  if (!create_dir && !fs::exists(settings_.dir, ec)) return;
  if (!fs::is_directory(settings_.dir, ec)) {
    fs::create_directories(settings_.dir.parent_path(), ec);  // mkdir below reports the failure
    // 0700: pid files decide what gets signalled, so nobody else may write them.
    if (::mkdir(settings_.dir.c_str(), 0700) != 0 && errno != EEXIST) {
      fail(K::usage, what + ": cannot create it: " + errno_text(errno));
    }
  }
  if (!fs::is_directory(settings_.dir, ec)) fail(K::usage, what + ": not a directory");
  if (::access(settings_.dir.c_str(), W_OK | X_OK) != 0) {
    fail(K::usage, what + ": not writable: " + errno_text(errno));
  }
}

fs::path ClusterManager::default_dir() {
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (xdg != nullptr && xdg[0] == '/' && ::access(xdg, W_OK | X_OK) == 0) {
    return fs::path(xdg) / "redlock-cluster";
  }
  // In /tmp another user could have created the directory first; refuse it then rather than
  // write pid files someone else controls.
  fs::path p = "/tmp/redlock-cluster-" + std::to_string(::getuid());
  struct stat st {};
  if (::lstat(p.c_str(), &st) == 0 && (!S_ISDIR(st.st_mode) || st.st_uid != ::getuid())) {
    fail(ClusterError::Kind::usage,
         "cluster directory " + p.string() + " is not a directory owned by you; pass --dir");
  }
  return p;
}

std::optional<ClusterSettings> ClusterManager::load_saved(const fs::path& dir) {
  auto text = read_text(dir / settings_file);
  if (!text) return std::nullopt;
  ClusterSettings s;
  s.dir = dir;
  std::istringstream in(*text);
  const std::string where = (dir / settings_file).string();
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    auto bad = [&] {
      fail(ClusterError::Kind::usage,
           where + ": bad " + key + " '" + value + "'; fix or remove the file");
    };
    if (key == "count" || key == "base_port") {
      auto v = parse_int(value);
      if (!v || *v < 0 || *v > max_port) bad();
      (key == "count" ? s.count : s.base_port) = static_cast<int>(*v);
    } else if (key == "persistence") {
      if (value == "none")
        s.persistence = Persistence::none;
      else if (value == "aof")
        s.persistence = Persistence::aof;
      else
        bad();
    } else if (key == "tls") {
      if (value != "yes" && value != "no") bad();
      s.tls = value == "yes";
    } else if (key == "topology") {
      if (value == "standalone")
        s.topology = Topology::standalone;
      else if (value == "sentinel")
        s.topology = Topology::sentinel;
      else if (value == "cluster")
        s.topology = Topology::cluster;
      else
        bad();
    } else if (key == "replicas") {
      auto v = parse_int(value);
      if (!v || *v < 0 || *v > max_cluster_replicas) bad();
      s.replicas = static_cast<int>(*v);
    } else if (key == "bus_port_offset") {
      auto v = parse_int(value);
      if (!v || *v < -max_port || *v > max_port) bad();
      s.bus_port_offset = static_cast<int>(*v);
    }
  }
  return s;
}

void ClusterManager::save_settings() const {
  write_file_atomic(settings_.dir / settings_file,
                    "# redlock-cli cluster: settings of the last `up`\n"
                    "count=" +
                        std::to_string(settings_.count) + "\n" +
                        "base_port=" + std::to_string(settings_.base_port) + "\n" +
                        "persistence=" + to_string(settings_.persistence) + "\n" +
                        "tls=" + (settings_.tls ? "yes" : "no") + "\n" +
                        "topology=" + to_string(settings_.topology) + "\n" +
                        "replicas=" + std::to_string(settings_.replicas) + "\n" +
                        "bus_port_offset=" + std::to_string(settings_.bus_port_offset) + "\n");
}

std::string ClusterManager::node_list() const {
  if (settings_.topology == Topology::cluster) {
    std::string out;
    for (int v = 1; v <= settings_.count; ++v) {
      const int first = first_of_cluster(v);
      out += std::string(v > 1 ? "," : "") +
             (settings_.tls ? "rediss+cluster://" : "redis+cluster://") +
             "127.0.0.1:" + std::to_string(port_of(first));
      for (int k = 1; k < cluster_size(); ++k) {
        out += std::string(k == 1 ? "?" : "&") +
               "seed=127.0.0.1:" + std::to_string(port_of(first + k));
      }
    }
    return out;
  }
  if (settings_.topology == Topology::sentinel) {
    const int first = 2 * settings_.count + 1;  // the sentinels' numbers
    std::string sentinels = "127.0.0.1:" + std::to_string(port_of(first));
    for (int k = 1; k < sentinel_count; ++k) {
      sentinels += std::string(k == 1 ? "?" : "&") +
                   "sentinel=127.0.0.1:" + std::to_string(port_of(first + k));
    }
    std::string out;
    for (int v = 1; v <= settings_.count; ++v) {
      if (v > 1) out += ',';
      const auto q = sentinels.find('?');
      out += (settings_.tls ? "rediss+sentinel://" : "redis+sentinel://") + sentinels.substr(0, q) +
             "/" + master_name(v) + (q == std::string::npos ? "" : sentinels.substr(q));
    }
    return out;
  }
  std::string out;
  for (int i = 1; i <= settings_.count; ++i) {
    if (i > 1) out += ',';
    out += (settings_.tls ? "rediss://127.0.0.1:" : "127.0.0.1:") + std::to_string(port_of(i));
  }
  return out;
}

int ClusterManager::process_count() const noexcept {
  switch (settings_.topology) {
    case Topology::sentinel:
      return 2 * settings_.count + sentinel_count;
    case Topology::cluster:
      return settings_.count * cluster_size();
    case Topology::standalone:
      break;
  }
  return settings_.count;
}

int ClusterManager::vote_of(int index) const noexcept {
  if (index < 1 || index > process_count()) return 0;
  switch (settings_.topology) {
    case Topology::sentinel:
      if (index <= settings_.count) return index;
      if (index <= 2 * settings_.count) return index - settings_.count;
      return 0;
    case Topology::cluster:
      return (index - 1) / cluster_size() + 1;
    case Topology::standalone:
      break;
  }
  return 0;
}

std::string ClusterManager::vote_name(int vote) const {
  switch (settings_.topology) {
    case Topology::sentinel:
      return master_name(vote);
    case Topology::cluster:
      return "c" + std::to_string(vote);
    case Topology::standalone:
      break;
  }
  return "node " + std::to_string(vote);
}

std::string ClusterManager::role_label(int index) const {
  return settings_.topology == Topology::cluster ? cluster_role_label(index)
                                                 : sentinel_role_label(index);
}

fs::path ClusterManager::node_file(int index, const char* suffix) const {
  return settings_.dir / ("node-" + std::to_string(index) + suffix);
}

void ClusterManager::check_index(int index) const {
  if (index < 1 || index > process_count()) {
    fail(ClusterError::Kind::usage, "node " + std::to_string(index) +
                                        ": no such node (this cluster has nodes 1.." +
                                        std::to_string(process_count()) + ")");
  }
}

fs::path ClusterManager::ca_file() const {
  return settings_.tls ? settings_.dir / tls_dir / "ca.crt" : fs::path();
}

Endpoint ClusterManager::endpoint(int index) const {
  Endpoint e = Endpoint::local(static_cast<std::uint16_t>(port_of(index)));
  if (settings_.tls) {
    const fs::path d = settings_.dir / tls_dir;
    // Verified like any client would (the CA, IP:127.0.0.1), with the client certificate in case
    // a node was told to require one.
    e.tls = Tls{.ca_file = (d / "ca.crt").string(),
                .cert_file = (d / "client.crt").string(),
                .key_file = (d / "client.key").string()};
  }
  return e;
}

void ClusterManager::ensure_certificates(bool fresh) const {
  if (!settings_.tls) return;
  const fs::path d = settings_.dir / tls_dir;
  std::error_code ec;
  bool complete = true;
  for (const auto& spec : local_cluster_certs(cert_days)) {
    complete = complete && fs::exists(d / (spec.name + ".crt"), ec) &&
               fs::exists(d / (spec.name + ".key"), ec);
  }
  if (complete && !fresh) return;
  if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) {
    fail(ClusterError::Kind::usage, "cannot create " + d.string() + ": " + errno_text(errno));
  }
  try {
    make_certificates(d, local_cluster_certs(cert_days));
  } catch (const CertError& e) {
    fail(ClusterError::Kind::usage,
         std::string("TLS certificates in ") + d.string() + ": " + e.what());
  }
}

}  // namespace redlock::nodes
