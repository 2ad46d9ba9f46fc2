// redlock-cli run RESOURCE... [--ttl DUR] [--wait DUR] [--grace DUR] [-E N] -- COMMAND [ARGS...]
//
// flock(1) across machines: acquire (one lock over all the resources, as `acquire a b`), run
// COMMAND with the lock in its environment, extend the lock automatically while it runs, release
// it when COMMAND exits, and exit with its status.
//
// No process of the job outlives the lock. COMMAND runs in a process group of its own, with a
// watchdog that ends the group when run dies, however it dies (run_job.hpp says how and why).
// If the lock is lost, the whole group gets SIGTERM, then SIGKILL after the grace period, and
// run exits 4. Lost includes the renew deadline (--renew-deadline, 2/3 of the ttl by default):
// when no extension has succeeded for that long, run gives up while a third of the ttl is still
// left, so the job can stop before another holder may start; a first failed extension is said
// on stderr when it happens. When COMMAND exits and processes it started are still running, they
// get the same (they would otherwise work on without the lock); then the lock is released.
//
// Signals: they are blocked in every thread before the client starts and read from a signalfd,
// so none can land in the I/O thread. While the lock is being acquired (`--wait`), SIGINT, SIGTERM,
// SIGHUP and SIGQUIT cancel the acquisition and `run` exits 128+N without starting COMMAND.
// Once COMMAND runs, signals sent to run are forwarded to the job's process group. When run has
// the terminal in the foreground, the job gets it, so the terminal's own signals (Ctrl-C, Ctrl-Z)
// go to the job directly.

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>

#include "cli.hpp"
#include "output.hpp"
#include "redlock/client.hpp"
#include "run_job.hpp"

namespace redlock::cli {
namespace {

struct RunArgs {
  std::vector<std::string> resources;               // before "--"
  std::optional<std::vector<std::string>> command;  // after "--" (main.cpp's split_rest)
  std::optional<int> conflict_exit_code;
  std::string ttl = "30s";
  std::string wait;
  std::string grace = "5s";
  std::string renew_deadline;  // default: the library's (2/3 of the ttl)
  bool fence = false;
  bool read = false;
  bool write = false;
  bool fair = false;
};

// Read from run's signalfd once the job runs: forwarded to the job (SIGCONT and SIGTSTP with a
// little more, see run_job.hpp).
constexpr int forwarded_signals[] = {SIGINT,  SIGTERM,  SIGHUP,  SIGQUIT, SIGUSR1,
                                     SIGUSR2, SIGWINCH, SIGCONT, SIGTSTP};

int status_to_exit(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// A node list with the passwords taken out, for the job's REDLOCK_NODES: `scheme://user:pw@host`
// becomes `scheme://user:@host` (a redlock-cli in the job fills the password in from
// REDLOCK_PASSWORD_FILE, or refuses naming the node), `scheme://pw@host` becomes
// `scheme://host`. The job still names the same nodes: it must never fall back to the local
// default ones. Credentials end at the last '@' before the path, as for the parser; a ',' in
// them is %2C, so every ',' separates nodes.
std::string without_passwords(std::string_view list) {
  std::string out;
  while (true) {
    const auto comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    const auto scheme = item.find("://");
    const auto from = scheme == std::string_view::npos ? 0 : scheme + 3;
    const auto at = item.substr(from, item.find('/', from) - from).rfind('@');
    if (at != std::string_view::npos) {
      const auto userinfo = item.substr(from, at);
      const auto colon = userinfo.find(':');
      const bool keep_user = colon != std::string_view::npos && colon > 0;
      out += std::string(item.substr(0, from)) +
             (keep_user ? std::string(userinfo.substr(0, colon)) + ":@" : std::string()) +
             std::string(item.substr(from + at + 1));
    } else {
      out += item;
    }
    if (comma == std::string_view::npos) return out;
    out += ',';
    list.remove_prefix(comma + 1);
  }
}

// run's environment for COMMAND, with the lock's variables and without a password: the job
// (and whatever it starts) gets no credential of run's. REDLOCK_PASSWORD is dropped and
// REDLOCK_NODES keeps its nodes without their passwords (or is dropped when it does not parse);
// REDLOCK_PASSWORD_FILE, a path, stays.
std::vector<std::string> job_environment(const std::vector<std::string>& resources,
                                         const std::string& token,
                                         std::optional<std::uint64_t> fence) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view v = *e;
    if (v.starts_with("REDLOCK_RESOURCE=") || v.starts_with("REDLOCK_RESOURCES=") ||
        v.starts_with("REDLOCK_TOKEN=") || v.starts_with("REDLOCK_FENCE=") ||
        v.starts_with("REDLOCK_PASSWORD=")) {
      continue;
    }
    constexpr std::string_view nodes = "REDLOCK_NODES=";
    if (v.starts_with(nodes)) {
      // Unused (-n was given) and malformed, it is dropped: where its ',' are is not known (a
      // raw one in a password would leave a piece of it behind).
      std::string why;  // not shown: it is about a variable this run does not use
      if (parse_node_list(v.substr(nodes.size()), why)) {
        env.push_back(std::string(nodes) + without_passwords(v.substr(nodes.size())));
      }
      continue;
    }
    env.emplace_back(v);
  }
  env.push_back("REDLOCK_RESOURCE=" + resources.front());
  std::string all = "REDLOCK_RESOURCES=";
  for (std::size_t i = 0; i < resources.size(); ++i) all += (i == 0 ? "" : "\n") + resources[i];
  env.push_back(std::move(all));
  env.push_back("REDLOCK_TOKEN=" + token);
  if (fence) env.push_back("REDLOCK_FENCE=" + std::to_string(*fence));
  return env;
}

int run_run(const RunArgs& a, const Globals& g) {
  std::vector<std::string> resources = a.resources;
  std::vector<std::string> command = a.command.value_or(std::vector<std::string>{});
  // Without "--", flock(1)'s form: one resource, then the command.
  if (!a.command && resources.size() > 1) {
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
  if (!a.wait.empty()) {
    auto w = duration_arg("--wait", a.wait);
    if (w.count() > 0) lo.acquire.wait = w;
  }
  const Millis grace = duration_arg("--grace", a.grace);
  lo.hold.auto_extend = true;
  if (!a.renew_deadline.empty())
    lo.hold.renew_deadline = duration_arg("--renew-deadline", a.renew_deadline);
  // The library's check of a hold, once; its complaint named by the flags it is about.
  if (auto why = check_hold(lo.acquire.ttl, lo.hold)) {
    if (a.renew_deadline.empty()) throw UsageError("--ttl: '" + a.ttl + "': " + *why);
    throw UsageError("--renew-deadline: '" + a.renew_deadline + "' with --ttl '" + a.ttl +
                     "': " + *why);
  }
  lo.acquire.fence = a.fence;
  lo.acquire.mode = lock_mode(a.read, a.write);
  lo.acquire.fair = a.fair;
  Options opts = make_options(g);
  check_acquisition(resources, lo.acquire, opts);

  sigset_t mask, old_mask;
  sigemptyset(&mask);
  for (int s : forwarded_signals) sigaddset(&mask, s);
  sigaddset(&mask, SIGCHLD);
  // SIGTTOU only blocked, never read: taking the terminal back from the job works from a
  // background group then.
  sigset_t blocked = mask;
  sigaddset(&blocked, SIGTTOU);
  sigprocmask(SIG_BLOCK, &blocked, &old_mask);  // before the client's thread exists
  int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  int lost_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  int failing_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (sfd < 0 || lost_fd < 0 || failing_fd < 0)
    throw std::runtime_error(std::string("signalfd/eventfd: ") + std::strerror(errno));

  StopOnSignal interrupt;  // a signal while acquiring ends the wait; the command is not started
  lo.acquire.stop = interrupt.token();
  AcquireRetry retry(opts, lo.acquire, interrupt.token(), g.verbose);
  Client client(opts);
  lo.hold.on_lost = [lost_fd](const LossInfo&) {
    std::uint64_t one = 1;
    (void)!write(lost_fd, &one, sizeof one);
  };
  // Extensions are failing: said on stderr by the main thread (this runs on the I/O thread).
  struct RenewNotice {
    std::mutex mu;
    std::string text;
  };
  auto notice = std::make_shared<RenewNotice>();
  lo.hold.on_renew_failing = [failing_fd, notice](const RenewFailure& f) {
    {
      std::lock_guard<std::mutex> hold(notice->mu);
      notice->text = f.message + "; giving up in " + std::to_string(f.give_up_in.count()) +
                     " ms unless an extension succeeds";
    }
    std::uint64_t one = 1;
    (void)!write(failing_fd, &one, sizeof one);
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

  // The configuration warnings of the acquisition come before the command's own output.
  flush_warnings();

  bool lost = false;
  bool cleaning_up = false;  // COMMAND has exited; the rest of its group is being ended
  // (time_point::max(): not planned. Not std::optional: GCC 12 sees it as maybe uninitialized.)
  constexpr auto never = BootClock::time_point::max();
  BootClock::time_point kill_at = never;      // SIGKILL to the group then
  BootClock::time_point given_up_at = never;  // after SIGKILL, stop waiting then
  std::optional<run_job::Job> job;
  try {
    job.emplace(command, job_environment(resources, res.lock.token(), res.lock.fence()), old_mask);
  } catch (const std::exception&) {
    guard.release();
    throw;
  }
  const auto say = [&](const std::string& what) {
    if (!g.quiet) std::cerr << "redlock-cli: " << what << "\n";
  };
  bool warned_watchdog = false;
  while (true) {
    const auto now = BootClock::now();
    if (job->command_status()) {
      if (job->empty()) break;
      if (!cleaning_up && !lost) {
        // It would go on working without the lock once we release it.
        cleaning_up = true;
        say(command.front() + " exited; processes it started are still running: sending SIGTERM");
        job->terminate();
        kill_at = now + grace;
      }
      if (now >= given_up_at) {
        say("processes of " + command.front() + "'s group did not end after SIGKILL");
        break;
      }
    }
    int timeout = -1;
    if (kill_at != never) {
      auto left = std::chrono::ceil<Millis>(kill_at - now).count();
      timeout = static_cast<int>(std::max<long long>(0, left));
    }
    // Members of the group that are not our children end without telling us: look again soon.
    if (job->command_status()) timeout = timeout < 0 ? 20 : std::min(timeout, 20);
    pollfd fds[3] = {{sfd, POLLIN, 0}, {lost_fd, POLLIN, 0}, {failing_fd, POLLIN, 0}};
    if (poll(fds, 3, timeout) < 0 && errno != EINTR) {
      throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    }
    if (BootClock::now() >= kill_at) {
      job->signal(SIGKILL);
      kill_at = never;
      given_up_at = BootClock::now() + std::max(grace, Millis{1000});
    }
    if (fds[2].revents & POLLIN) {
      std::uint64_t v;
      (void)!read(failing_fd, &v, sizeof v);
      std::lock_guard<std::mutex> hold(notice->mu);
      if (!lost)
        say("extending the lock on '" + printable(resources.front()) + "' failed (" + notice->text +
            ")");
    }
    if (fds[1].revents & POLLIN) {
      std::uint64_t v;
      (void)!read(lost_fd, &v, sizeof v);
      if (!lost) {
        lost = true;
        auto info = guard.lost();
        say("lock on '" + printable(resources.front()) + "' lost (" +
            (info ? info->message : std::string("unknown")) + "): sending SIGTERM to " +
            command.front() + " and its group");
        job->terminate();
        if (kill_at == never && given_up_at == never) kill_at = BootClock::now() + grace;
      }
    }
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
        const int sig = static_cast<int>(si.ssi_signo);
        if (sig == SIGCHLD) continue;  // reaped below
        // Our own stop of our process group (the job was stopped from the terminal).
        if (static_cast<pid_t>(si.ssi_pid) == getpid()) continue;
        if (sig == SIGCONT) {
          job->resume();
        } else if (sig == SIGTSTP) {
          job->suspend();
        } else {
          job->signal(sig);
        }
      }
    }
    job->reap();
    if (job->watchdog_lost() && !warned_watchdog) {
      warned_watchdog = true;
      say("the watchdog was killed: if run is killed now, " + command.front() +
          "'s group is not stopped with it");
    }
  }
  job->finish();
  const int exit_code = status_to_exit(job->command_status().value_or(0));
  auto rel = guard.release();
  if (g.verbose) {
    std::cerr << "redlock-cli: released '" << printable(resources.front()) << "' on " << rel.deleted
              << " node(s)\n";
  }
  close(sfd);
  close(lost_fd);
  close(failing_fd);
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
          "COMMAND runs in a process group of its own; no process of it outlives the lock, "
          "also when\nrun is killed (a watchdog, redlock-watch, ends the group). Signals to run "
          "are forwarded to it.\n"
          "Exit status: COMMAND's own (128+N if killed by signal N), 1 held elsewhere (or -E's "
          "N),\n2 usage, 3 no quorum, 4 the lock was lost while COMMAND ran (also when no "
          "extension\nsucceeded before the renew deadline), 5 refused by the nodes' configuration "
          "(auth,\nACL, TLS).\n"
          "COMMAND sees REDLOCK_RESOURCE (the first resource), REDLOCK_RESOURCES (all, one per "
          "line),\nREDLOCK_TOKEN (and REDLOCK_FENCE with --fence) in its environment, and no "
          "password:\nREDLOCK_PASSWORD is removed, REDLOCK_NODES has its passwords taken out.",
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
              {"--renew-deadline", &a->renew_deadline,
               "Give up when no extension has succeeded for this long (default 2/3 of the ttl): "
               "COMMAND then gets SIGTERM with the rest of the validity left to stop"},
              {"--grace", &a->grace,
               "After a loss, or when processes outlive COMMAND: SIGTERM to its process group, "
               "then SIGKILL after this long (default 5s)"},
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
