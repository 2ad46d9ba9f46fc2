#pragma once
// The files of a cluster directory (see manager.hpp for the list), for the node manager only.
// Failures to write are ClusterError{usage}: an unusable directory is a configuration problem.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "manager.hpp"

namespace redlock::nodes::dir {

[[nodiscard]] std::optional<std::string> read_text(const std::filesystem::path& path);
// Write to PATH.tmp, then rename: a reader never sees half a file.
void write_file_atomic(const std::filesystem::path& path, const std::string& content);
void remove_file(const std::filesystem::path& path);  // a missing file is not an error
// redis.conf string quoting (sdssplitargs): double quotes with backslash escapes.
[[nodiscard]] std::string conf_quote(const std::string& s);
// "  last lines of LOG:\n    ..." (at most `lines`), for messages about a node that did not start.
[[nodiscard]] std::string log_tail(const std::filesystem::path& log, std::size_t lines);

// Serialises state changes between concurrent CLIs on the same directory. Held only for the
// duration of one call; CLOEXEC so redis never inherits it.
class DirLock {
 public:
  explicit DirLock(const std::filesystem::path& dir);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

// What node-I.conf says: the port, persistence and TLS the node was last started with.
struct NodeConf {
  std::optional<int> port;      // the TLS port when there is no plaintext one
  std::optional<int> bus_port;  // cluster topology: `cluster-port`
  std::optional<Persistence> persistence;
  bool tls = false;
};
[[nodiscard]] NodeConf read_node_conf(const std::filesystem::path& conf);

// Indices of the node-I.pid files present, whatever the current count.
[[nodiscard]] std::vector<int> pid_file_indices(const std::filesystem::path& dir);

}  // namespace redlock::nodes::dir
