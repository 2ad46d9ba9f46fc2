// redlock-cli run RESOURCE... [--ttl DUR] [--wait DUR] [--grace DUR] [-E N] -- COMMAND [ARGS...]
//
// flock(1) across machines: acquire (one lock over all the resources, as `acquire a b`), run
// COMMAND with the lock in its environment, extend the lock automatically while it runs, release
// it when COMMAND exits, and exit with its status.
// If the lock is lost, COMMAND gets SIGTERM, then SIGKILL after the grace period, and run exits 4.
//
// Signals: they are blocked in every thread before the client starts and read from a signalfd,
// so none can land in the I/O thread. While the lock is being acquired (`--wait`), SIGINT, SIGTERM,
// SIGHUP and SIGQUIT cancel the acquisition and `run` exits 128+N without starting COMMAND.
// Once COMMAND runs, signals sent to `run` by a process (kill) are forwarded to
// COMMAND; signals the terminal sends to the whole foreground group already reach COMMAND, which
// shares run's process group, and are not sent twice.

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "cli.hpp"
#include "output.hpp"
#include "redlock/client.hpp"

namespace redlock::cli {
namespace {

struct RunArgs {
  std::vector<std::string> resources;  // before "--"
  std::vector<std::string> command;    // after "--" (main.cpp's split_rest)
  std::optional<int> conflict_exit_code;
  std::string ttl = "30s";
  std::string wait;
  std::string grace = "5s";
  bool fence = false;
  bool read = false;
  bool write = false;
  bool fair = false;
};

constexpr int forwarded_signals[] = {SIGINT,  SIGTERM, SIGHUP,   SIGQUIT,
                                     SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT};

int status_to_exit(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

pid_t spawn(const std::vector<std::string>& command, const sigset_t& old_mask,
            const std::vector<std::string>& resources, const std::string& token,
            std::optional<std::uint64_t> fence) {
  // Everything the child needs is prepared before fork: the client's I/O thread exists, so the
  // child may only make async-signal-safe calls.
  std::vector<char*> argv;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::string env_resource = "REDLOCK_RESOURCE=" + resources.front();
  std::string env_resources = "REDLOCK_RESOURCES=";
  for (std::size_t i = 0; i < resources.size(); ++i)
    env_resources += (i == 0 ? "" : "\n") + resources[i];
  std::string env_token = "REDLOCK_TOKEN=" + token;
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "REDLOCK_RESOURCE=", 17) != 0 &&
        std::strncmp(*e, "REDLOCK_RESOURCES=", 18) != 0 &&
        std::strncmp(*e, "REDLOCK_TOKEN=", 14) != 0 &&
        std::strncmp(*e, "REDLOCK_FENCE=", 14) != 0) {
      envp.push_back(*e);
    }
  }
  std::string env_fence = fence ? "REDLOCK_FENCE=" + std::to_string(*fence) : std::string();
  envp.push_back(env_resource.data());
  envp.push_back(env_resources.data());
  envp.push_back(env_token.data());
  if (fence) envp.push_back(env_fence.data());
  envp.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    execvpe(argv[0], argv.data(), envp.data());
    const char* msg = "redlock-cli: cannot run command: ";
    (void)!write(2, msg, std::strlen(msg));
    const char* err = std::strerror(errno);
    (void)!write(2, err, std::strlen(err));
    (void)!write(2, "\n", 1);
    _exit(errno == ENOENT ? 127 : 126);
  }
  return pid;
}

int run_run(const RunArgs& a, const Globals& g) {
  std::vector<std::string> resources = a.resources;
  std::vector<std::string> command = a.command;
  // Without "--", flock(1)'s form: one resource, then the command.
  if (command.empty() && resources.size() > 1) {
    command.assign(resources.begin() + 1, resources.end());
    resources.resize(1);
  }
  if (command.empty()) throw UsageError("no command given (run RESOURCE... -- COMMAND [ARGS...])");
  for (const auto& r : resources) {
    if (r.empty()) throw UsageError("empty resource name");
  }
  if (a.conflict_exit_code && (*a.conflict_exit_code < 0 || *a.conflict_exit_code > 255)) {
    throw UsageError("--conflict-exit-code: " + std::to_string(*a.conflict_exit_code) +
                     " is outside 0..255");
  }
  LockOptions lo;
  lo.acquire.ttl = ttl_arg(a.ttl);
  if (lo.acquire.ttl < Millis{30}) {
    throw UsageError("--ttl: '" + a.ttl + "' is too short to be extended (at least 30ms)");
  }
  if (!a.wait.empty()) {
    auto w = duration_arg("--wait", a.wait);
    if (w.count() > 0) lo.acquire.wait = w;
  }
  const Millis grace = duration_arg("--grace", a.grace);
  lo.hold.auto_extend = true;
  lo.acquire.fence = a.fence;
  lo.acquire.mode = lock_mode(a.read, a.write);
  lo.acquire.fair = a.fair;
  Options opts = make_options(g);
  check_acquisition(resources, lo.acquire, opts);

  sigset_t mask, old_mask;
  sigemptyset(&mask);
  for (int s : forwarded_signals) sigaddset(&mask, s);
  sigaddset(&mask, SIGCHLD);
  sigprocmask(SIG_BLOCK, &mask, &old_mask);  // before the client's thread exists
  int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  int lost_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (sfd < 0 || lost_fd < 0)
    throw std::runtime_error(std::string("signalfd/eventfd: ") + std::strerror(errno));

  StopOnSignal interrupt;  // a signal while acquiring ends the wait; the command is not started
  lo.acquire.stop = interrupt.token();
  AcquireRetry retry(opts, lo.acquire, interrupt.token(), g.verbose);
  Client client(opts);
  lo.hold.on_lost = [lost_fd](const LossInfo&) {
    std::uint64_t one = 1;
    (void)!write(lost_fd, &one, sizeof one);
  };
  Guard guard;
  AcquireResult res;
  do {
    std::tie(guard, res) = client.try_lock(resources, lo);
  } while (retry.again(res));
  interrupt.disarm();
  if (interrupt.signal() != 0) {
    if (res) guard.release();
    report_failure(
        g, make_error_code(Errc::cancelled), "cannot acquire",
        interrupt.describe() + "; nothing is held, " + command.front() + " was not started", {});
    return 128 + interrupt.signal();
  }
  if (!res) {
    report_failure(g, res.error, "cannot acquire", res.message, res.nodes);
    if (g.verbose) {
      std::cerr << "  " << res.attempts << (res.attempts == 1 ? " attempt" : " attempts") << "\n";
    }
    // -E: flock(1)'s conflict exit code, so that a command's own 1 is not taken for "held".
    if (res.error == Errc::contended && a.conflict_exit_code) return *a.conflict_exit_code;
    return exit_code_for(res.error);
  }
  if (g.verbose) {
    std::cerr << "redlock-cli: acquired '" << printable(resources.front()) << "'"
              << (resources.size() > 1 ? " and " + std::to_string(resources.size() - 1) + " more"
                                       : std::string())
              << " (" << res.lock.votes() << "/" << opts.nodes.size() << " votes), running "
              << command.front() << "\n";
  }

  pid_t child = spawn(command, old_mask, resources, res.lock.token(), res.lock.fence());
  if (child < 0) {
    guard.release();
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }

  bool lost = false;
  int exit_code = 1;
  std::optional<BootClock::time_point> kill_at;
  while (true) {
    pollfd fds[2] = {{sfd, POLLIN, 0}, {lost_fd, POLLIN, 0}};
    int timeout = -1;
    if (kill_at) {
      auto left = std::chrono::duration_cast<Millis>(*kill_at - BootClock::now()).count();
      timeout = static_cast<int>(std::max<long long>(0, left));
    }
    int n = poll(fds, 2, timeout);
    if (n < 0 && errno != EINTR) break;
    if (kill_at && BootClock::now() >= *kill_at) {
      kill(child, SIGKILL);
      kill_at.reset();
    }
    if (fds[1].revents & POLLIN) {
      std::uint64_t v;
      (void)!read(lost_fd, &v, sizeof v);
      if (!lost) {
        lost = true;
        auto info = guard.lost();
        if (!g.quiet) {
          std::cerr << "redlock-cli: lock on '" << printable(resources.front()) << "' lost ("
                    << (info ? info->message : std::string("unknown")) << "): sending SIGTERM to "
                    << command.front() << "\n";
        }
        kill(child, SIGTERM);
        kill_at = BootClock::now() + grace;
      }
    }
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
        if (si.ssi_signo == SIGCHLD) continue;
        // A signal the kernel/terminal sent to our process group has reached the child too.
        if (si.ssi_code == SI_USER || si.ssi_code == SI_QUEUE)
          kill(child, static_cast<int>(si.ssi_signo));
      }
    }
    int status = 0;
    pid_t w = waitpid(child, &status, WNOHANG);
    if (w == child) {
      exit_code = status_to_exit(status);
      break;
    }
  }
  auto rel = guard.release();
  if (g.verbose) {
    std::cerr << "redlock-cli: released '" << printable(resources.front()) << "' on " << rel.deleted
              << " node(s)\n";
  }
  close(sfd);
  close(lost_fd);
  return lost ? exit_lost : exit_code;
}

}  // namespace

Command run_command(const Globals& g) {
  auto a = std::make_shared<RunArgs>();
  return {
      .name = "run",
      .description =
          "Run a command while holding a lock (like flock(1), across machines):\n"
          "  run RESOURCE... [OPTIONS] -- COMMAND [ARGS...]",
      .footer =
          "Several resources: one lock over all of them, as with acquire. Without --, the first "
          "word\nis the resource and the rest the command.\n"
          "Exit status: COMMAND's own (128+N if killed by signal N), 1 held elsewhere (or -E's "
          "N),\n2 usage, 3 no quorum, 4 the lock was lost while COMMAND ran.\n"
          "COMMAND sees REDLOCK_RESOURCE (the first resource), REDLOCK_RESOURCES (all, one per "
          "line),\nREDLOCK_TOKEN (and REDLOCK_FENCE with --fence) in its environment.",
      .options =
          {
              {.names = "resource",
               .target = &a->resources,
               .help = "Resource name(s); several = one lock over all of them",
               .required = true},
              {"--ttl", &a->ttl, "Lock ttl; extended every ttl/3 while COMMAND runs (default 30s)"},
              {"--wait", &a->wait,
               "Keep retrying the acquisition this long (default 0: a lock held elsewhere fails "
               "at once, no quorum is retried --retry-count times)"},
              {"--grace", &a->grace,
               "After a loss: SIGTERM, then SIGKILL after this long (default 5s)"},
              {.names = "-E,--conflict-exit-code",
               .target = &a->conflict_exit_code,
               .help = "Exit with N instead of 1 when the lock is held elsewhere (as flock -E), so "
                       "COMMAND's own 1 is not taken for it",
               .type_name = "N"},
              {"--fence", &a->fence, "Take a fencing token and export it as REDLOCK_FENCE"},
              {"--fair", &a->fair, "Wait in a FIFO queue shared by all clients (use with --wait)"},
              {"--read", &a->read, "Hold a shared read lock"},
              {"--write", &a->write, "Hold a write lock (excludes readers)"},
          },
      .rest = &a->command,
      .run = [a, &g] { return run_run(*a, g); },
      .storage = a,
  };
}

}  // namespace redlock::cli
