#include "partition.hpp"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace chaos {
namespace {

const char* const kTable = "redlock_chaos";

// Runs nft with `args`; returns its exit status (or -1 if it could not be started).
int nft(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"nft"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  ::posix_spawn_file_actions_init(&fa);
  ::posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  ::posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, "nft", &fa, nullptr, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string set_of(const std::vector<std::string>& items) {
  std::string s = "{ ";
  for (std::size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i];
  return s + " }";
}

}  // namespace

std::optional<std::string> enter_private_netns() {
  if (::unshare(CLONE_NEWNET) != 0)
    return std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string("socket: ") + std::strerror(errno);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  bool ok = ::ioctl(fd, SIOCGIFFLAGS, &ifr) == 0;
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
  ok = ok && ::ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) return std::string("bringing up lo: ") + std::strerror(err);
  return std::nullopt;
}

std::optional<std::string> partition_unavailable(bool in_private_netns) {
  if (::geteuid() != 0) return std::string("not root");
  if (!in_private_netns) return std::string("no private network namespace");
  if (nft({"--version"}) != 0) return std::string("nft not found (Debian package nftables)");
  return std::nullopt;
}

Partitioner::Partitioner(std::vector<std::uint16_t> node_ports) : ports_(std::move(node_ports)) {
  nft({"delete", "table", "inet", kTable});  // left over from a crashed run in this namespace
  if (nft({"add", "table", "inet", kTable}) != 0 ||
      nft({"add", "chain", "inet", kTable, "out",
           "{ type filter hook output priority 0; policy accept; }"}) != 0) {
    error_ = "nft could not create table inet " + std::string(kTable);
    return;
  }
  ok_ = true;
}

Partitioner::~Partitioner() {
  if (ok_) nft({"delete", "table", "inet", kTable});
}

bool Partitioner::cut(const std::vector<int>& slots, const std::vector<int>& nodes,
                      std::string& what) {
  std::vector<std::string> uids, ports;
  std::string ws, ns;
  for (int s : slots) {
    uids.push_back(std::to_string(base_uid + static_cast<uid_t>(s)));
    ws += (ws.empty() ? "" : ",") + std::to_string(s);
  }
  for (int n : nodes) {
    ports.push_back(std::to_string(ports_[static_cast<std::size_t>(n)]));
    ns += (ns.empty() ? "" : ",") + std::to_string(n);
  }
  what = "workers " + ws + " cut off from nodes " + ns;
  if (!ok_) return false;
  return nft({"add", "rule", "inet", kTable, "out", "meta", "skuid", set_of(uids), "tcp", "dport",
              set_of(ports), "drop"}) == 0;
}

void Partitioner::heal() {
  if (ok_) nft({"flush", "chain", "inet", kTable, "out"});
}

}  // namespace chaos
