#include "cluster_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <fstream>
#include <sstream>
#include <system_error>

namespace fs = std::filesystem;

namespace redlock::nodes::dir {

std::optional<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string log_tail(const fs::path& log, std::size_t lines) {
  auto text = read_text(log);
  if (!text || text->empty()) return "  (" + log.string() + " is empty)";
  std::deque<std::string> last;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    last.push_back(line);
    if (last.size() > lines) last.pop_front();
  }
  std::string out = "  last lines of " + log.string() + ":";
  for (auto& l : last) out += "\n    " + l;
  return out;
}

void write_file_atomic(const fs::path& path, const std::string& content) {
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    if (!out.flush()) throw ClusterError(ClusterError::Kind::usage, "cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    throw ClusterError(ClusterError::Kind::usage,
                       "cannot write " + path.string() + ": " + ec.message());
}

void remove_file(const fs::path& path) {
  std::error_code ec;
  fs::remove(path, ec);
}

std::string conf_quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (ch == '\n') {
      out += "\\n";
      continue;
    }
    out += ch;
  }
  return out + "\"";
}

DirLock::DirLock(const fs::path& dir) {
  fs::path p = dir / "cluster.lock";
  fd_ = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    throw ClusterError(ClusterError::Kind::usage,
                       "cannot open " + p.string() + ": " + std::generic_category().message(errno));
  }
  while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
  }
}

DirLock::~DirLock() { ::close(fd_); }

NodeConf read_node_conf(const fs::path& conf) {
  NodeConf nc;
  auto text = read_text(conf);
  if (!text) return nc;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("port ", 0) == 0) {
      // `port 0`: no plaintext listener (TLS only); the node is reached on its tls-port.
      if (auto v = parse_int(line.substr(5)); v && *v != 0) nc.port = static_cast<int>(*v);
    } else if (line.rfind("tls-port ", 0) == 0) {
      if (auto v = parse_int(line.substr(9))) {
        nc.tls = true;
        if (!nc.port) nc.port = static_cast<int>(*v);
      }
    } else if (line.rfind("cluster-port ", 0) == 0) {
      if (auto v = parse_int(line.substr(13)); v && *v > 0) nc.bus_port = static_cast<int>(*v);
    } else if (line.rfind("appendonly ", 0) == 0) {
      nc.persistence = line.substr(11) == "yes" ? Persistence::aof : Persistence::none;
    }
  }
  return nc;
}

std::vector<int> pid_file_indices(const fs::path& dir) {
  std::vector<int> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind("node-", 0) != 0 || name.size() <= 9 || name.substr(name.size() - 4) != ".pid")
      continue;
    if (auto v = parse_int(name.substr(5, name.size() - 9)); v && *v >= 1 && *v <= max_port) {
      out.push_back(static_cast<int>(*v));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace redlock::nodes::dir
