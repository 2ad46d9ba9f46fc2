#include "workers.hpp"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "common.hpp"

extern char** environ;

namespace chaos {
namespace {

std::string describe(int st) {
  if (WIFEXITED(st)) return "exit " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return std::string("signal ") + strsignal(WTERMSIG(st));
  return "status " + std::to_string(st);
}

pid_t waitpid_eintr(pid_t pid, int* st, int flags) {
  for (;;) {
    pid_t r = ::waitpid(pid, st, flags);
    if (r < 0 && errno == EINTR) continue;
    return r;
  }
}

}  // namespace

WorkerPool::WorkerPool(WorkerSettings s, int count)
    : s_(std::move(s)), slots_(static_cast<std::size_t>(count)) {
  for (int i = 0; i < count; ++i) spawn(i);
}

WorkerPool::~WorkerPool() {
  for (auto& sl : slots_) {
    if (sl.pid > 0) {
      ::kill(sl.pid, SIGKILL);
      int st = 0;
      waitpid_eintr(sl.pid, &st, 0);
      sl.pid = -1;
    }
  }
}

void WorkerPool::spawn(int slot) {
  Slot& sl = slots_[static_cast<std::size_t>(slot)];
  ++sl.generation;
  ++spawned_;
  // Everything the child needs is built before fork(): the driver has other threads.
  std::vector<std::string> args = {
      s_.exe,
      "--socket",
      s_.socket_path,
      "--slot",
      std::to_string(slot),
      "--nodes",
      s_.nodes_csv,
      "--resources",
      [&] {
        std::string r;
        for (const auto& x : s_.resources) r += (r.empty() ? "" : ",") + x;
        return r;
      }(),
      "--ttl-ms",
      std::to_string(s_.ttl_ms),
      "--cs-min-ms",
      std::to_string(s_.cs_min_ms),
      "--cs-max-ms",
      std::to_string(s_.cs_max_ms),
      "--margin-ms",
      std::to_string(s_.margin_ms),
      "--wait-ms",
      std::to_string(s_.wait_ms),
      "--fence",
      s_.fence && !(s_.fence_even_slots_only && slot % 2 == 1) ? "1" : "0",
      "--fair",
      s_.fair ? "1" : "0",
      "--heartbeat-ttl-ms",
      std::to_string(s_.heartbeat_ttl_ms),
      "--durable",
      s_.durable ? "1" : "0",
      "--election",
      s_.election ? "1" : "0",
      "--election-ignore-validity",
      s_.election_ignore_validity ? "1" : "0",
      "--min-node-uptime-ms",
      std::to_string(s_.min_node_uptime_ms),
      "--restart-quarantine-ms",
      std::to_string(s_.restart_quarantine_ms),
      "--seed",
      std::to_string(s_.seed * 1000003ULL + static_cast<unsigned>(slot) * 7919ULL +
                     static_cast<unsigned>(sl.generation)),
  };
  if (!s_.tls_ca_file.empty()) args.insert(args.end(), {"--tls-ca", s_.tls_ca_file});
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view v(*e);
    if (v.rfind("LD_PRELOAD=", 0) == 0 || v.rfind("FAKETIME", 0) == 0) continue;
    env.emplace_back(v);
  }
  if (!s_.faketime_lib.empty()) {
    env.push_back("LD_PRELOAD=" + s_.faketime_lib);
    env.push_back("FAKETIME_DONT_FAKE_MONOTONIC=1");
    env.push_back("FAKETIME_TIMESTAMP_FILE=" + s_.faketime_file);
    env.push_back("FAKETIME_CACHE_DURATION=1");
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  const long uid = s_.run_as_uid_base >= 0 ? s_.run_as_uid_base + slot : -1;
  const pid_t parent = ::getpid();
  // A child that cannot become the worker says why through this pipe (the step and its errno);
  // a successful execve closes it (O_CLOEXEC) and the parent reads end-of-file.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe2: " + std::string(std::strerror(errno)));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(report[0]);
    ::close(report[1]);
    throw std::runtime_error("fork: " + std::string(std::strerror(errno)));
  }
  if (pid == 0) {
    ::close(report[0]);
    auto fail = [&](int step) {
      const int what[2] = {step, errno};
      (void)!::write(report[1], what, sizeof what);
      ::_exit(127);
    };
    int fd = ::open(s_.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 2);
      ::dup2(fd, 1);
    }
    if (uid >= 0) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(static_cast<gid_t>(uid)) != 0 ||
          ::setuid(static_cast<uid_t>(uid)) != 0) {
        fail(0);
      }
    }
    // The worker dies with the driver (the main thread forks, and outlives every worker).
    // Set after setuid, which clears it.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(1);
    if (::getppid() != parent) ::_exit(127);  // the driver is already gone
    ::execve(argv[0], argv.data(), envp.data());
    fail(2);
  }
  ::close(report[1]);
  int what[2] = {0, 0};
  ssize_t n;
  do {
    n = ::read(report[0], what, sizeof what);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof what)) {
    int st = 0;
    waitpid_eintr(pid, &st, 0);
    static const char* const steps[] = {"setuid", "prctl(PR_SET_PDEATHSIG)", "execve"};
    std::string who = uid >= 0 ? " as uid " + std::to_string(uid) : std::string();
    throw std::runtime_error(std::string("cannot start worker ") + s_.exe + who + ": " +
                             steps[what[0] >= 0 && what[0] <= 2 ? what[0] : 2] + ": " +
                             std::strerror(what[1]));
  }
  sl.pid = pid;
  sl.stopped = false;
}

void WorkerPool::kill_and_respawn(int slot) {
  Slot& sl = slots_[static_cast<std::size_t>(slot)];
  if (sl.pid > 0) {
    ::kill(sl.pid, SIGKILL);
    int st = 0;
    waitpid_eintr(sl.pid, &st, 0);
    sl.pid = -1;
  }
  spawn(slot);
}

void WorkerPool::stop(int slot) {
  Slot& sl = slots_[static_cast<std::size_t>(slot)];
  if (sl.pid <= 0 || sl.stopped) return;
  ::kill(sl.pid, SIGSTOP);
  int st = 0;
  const pid_t r = waitpid_eintr(sl.pid, &st, WUNTRACED);
  if (r == sl.pid && (WIFEXITED(st) || WIFSIGNALED(st))) {
    crashes_.push_back("slot " + std::to_string(slot) + " pid " + std::to_string(sl.pid) + ": " +
                       describe(st));
    sl.pid = -1;
    spawn(slot);
    return;
  }
  sl.stopped = true;
}

void WorkerPool::cont(int slot) {
  Slot& sl = slots_[static_cast<std::size_t>(slot)];
  if (sl.pid <= 0 || !sl.stopped) return;
  ::kill(sl.pid, SIGCONT);
  sl.stopped = false;
}

void WorkerPool::check_unexpected_exits() {
  for (int i = 0; i < size(); ++i) {
    Slot& sl = slots_[static_cast<std::size_t>(i)];
    if (sl.pid <= 0) continue;
    int st = 0;
    const pid_t r = waitpid_eintr(sl.pid, &st, WNOHANG);
    if (r == sl.pid) {
      crashes_.push_back("slot " + std::to_string(i) + " pid " + std::to_string(sl.pid) + ": " +
                         describe(st));
      sl.pid = -1;
      spawn(i);
    }
  }
}

void WorkerPool::terminate_all(int grace_ms) {
  for (int i = 0; i < size(); ++i) cont(i);
  for (auto& sl : slots_) {
    if (sl.pid > 0) ::kill(sl.pid, SIGTERM);
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  for (int i = 0; i < size(); ++i) {
    Slot& sl = slots_[static_cast<std::size_t>(i)];
    while (sl.pid > 0) {
      int st = 0;
      const pid_t r = waitpid_eintr(sl.pid, &st, WNOHANG);
      if (r == sl.pid) {
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
          crashes_.push_back("slot " + std::to_string(i) + " pid " + std::to_string(sl.pid) +
                             " at shutdown: " + describe(st));
        }
        sl.pid = -1;
        break;
      }
      if (std::chrono::steady_clock::now() >= end) {
        ::kill(sl.pid, SIGKILL);
        waitpid_eintr(sl.pid, &st, 0);
        sl.pid = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

}  // namespace chaos
