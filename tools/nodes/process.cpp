#include "process.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <string_view>
#include <system_error>

extern char** environ;

namespace redlock::nodes {
namespace {

std::optional<std::string> read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace

std::optional<char> proc_state(pid_t pid) {
  auto stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return std::nullopt;
  // The command name in parentheses may itself contain ") ", so look for the last one.
  auto close = stat->rfind(')');
  if (close == std::string::npos || close + 2 >= stat->size()) return std::nullopt;
  return (*stat)[close + 2];
}

bool alive(pid_t pid) {
  auto st = proc_state(pid);
  return st && *st != 'Z' && *st != 'X';
}

std::string proc_cmdline(pid_t pid) {
  auto raw = read_text("/proc/" + std::to_string(pid) + "/cmdline").value_or("");
  std::replace(raw.begin(), raw.end(), '\0', ' ');
  while (!raw.empty() && raw.back() == ' ') raw.pop_back();
  return raw;
}

bool is_redis_on(pid_t pid, int port, const std::filesystem::path& conf) {
  if (pid <= 1 || !alive(pid)) return false;
  std::string cmd = proc_cmdline(pid);
  std::string first = cmd.substr(0, cmd.find(' '));
  if (first.find("redis-server") == std::string::npos) return false;
  std::string needle = ":" + std::to_string(port);
  for (auto pos = cmd.find(needle); pos != std::string::npos; pos = cmd.find(needle, pos + 1)) {
    auto after = pos + needle.size();
    if (after == cmd.size() || cmd[after] == ' ') return true;
  }
  return cmd.find(" " + conf.string()) != std::string::npos;
}

std::string port_busy(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "socket: " + std::generic_category().message(errno);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string why;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 1) != 0) {
    why = std::generic_category().message(errno);
  }
  ::close(fd);
  return why;
}

pid_t waitpid_eintr(pid_t pid, int* status, int options) {
  pid_t r;
  do {
    r = ::waitpid(pid, status, options);
  } while (r < 0 && errno == EINTR);
  return r;
}

std::vector<std::string> environment_without_preload() {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view v(*e);
    if (v.starts_with("LD_PRELOAD=") || v.starts_with("FAKETIME") ||
        v.starts_with("DONT_FAKE_MONOTONIC=")) {
      continue;
    }
    out.emplace_back(v);
  }
  return out;
}

}  // namespace redlock::nodes
