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

#include <iostream>
#include <memory>

#include "cli.hpp"
#include "output.hpp"
#include "redlock/client.hpp"
#include "run_supervise.hpp"

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

// run's variables for COMMAND (run_job::job_environment adds them to ours, without passwords).
std::vector<std::string> lock_variables(const std::vector<std::string>& resources,
                                        const std::string& token,
                                        std::optional<std::uint64_t> fence) {
  std::vector<std::string> vars;
  vars.push_back("REDLOCK_RESOURCE=" + resources.front());
  std::string all = "REDLOCK_RESOURCES=";
  for (std::size_t i = 0; i < resources.size(); ++i) all += (i == 0 ? "" : "\n") + resources[i];
  vars.push_back(std::move(all));
  vars.push_back("REDLOCK_TOKEN=" + token);
  if (fence) vars.push_back("REDLOCK_FENCE=" + std::to_string(*fence));
  return vars;
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
  if (a.conflict_exit_code && (*a.conflict_exit_code < 0 || *a.conflict_exit_code > 255)) {
    throw UsageError("--conflict-exit-code: " + std::to_string(*a.conflict_exit_code) +
                     " is outside 0..255");
  }
  LockOptions lo;
  GivenFlags given{{"ttl", {"--ttl", a.ttl}}};
  lo.acquire.ttl = duration_arg("--ttl", a.ttl);
  if (!a.wait.empty()) {
    auto w = duration_arg("--wait", a.wait);
    if (w.count() > 0) lo.acquire.wait = w;
  }
  const Millis grace = duration_arg("--grace", a.grace);
  lo.hold.auto_extend = true;
  if (!a.renew_deadline.empty()) {
    given["renew_deadline"] = {"--renew-deadline", a.renew_deadline};
    lo.hold.renew_deadline = duration_arg("--renew-deadline", a.renew_deadline);
  }
  lo.acquire.fence = a.fence;
  lo.acquire.mode = lock_mode(a.read, a.write);
  lo.acquire.fair = a.fair;
  Options opts = make_options(g);
  // The library's checks, once each: the acquisition's, and the hold's (the 30 ms rule of an
  // automatically extended lock is core's, core/timing.hpp).
  check_acquisition(resources, lo.acquire, opts, given);
  check_holding(lo.acquire.ttl, lo.hold, given);

  run_job::Supervisor supervisor;  // before the client: its thread inherits the signal mask

  StopOnSignal interrupt;  // a signal while acquiring ends the wait; the command is not started
  lo.acquire.stop = interrupt.token();
  AcquireRetry retry(opts, lo.acquire, interrupt.token(), g.verbose);
  Client client(opts);
  supervisor.watch_hold(lo.hold);
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
      Stderr() << "  " << res.attempts << (res.attempts == 1 ? " attempt" : " attempts") << "\n";
    }
    // -E: flock(1)'s conflict exit code, so that a command's own 1 is not taken for "held".
    if (res.error == Errc::contended && a.conflict_exit_code) return *a.conflict_exit_code;
    return exit_code_for(res.error);
  }
  if (g.verbose) {
    Stderr() << "redlock-cli: acquired '" << printable(resources.front()) << "'"
             << (resources.size() > 1 ? " and " + std::to_string(resources.size() - 1) + " more"
                                      : std::string())
             << " (" << res.lock.votes() << "/" << opts.nodes.size() << " votes), running "
             << command.front() << "\n";
  }

  // The configuration warnings of the acquisition come before the command's own output.
  flush_warnings();

  const auto outcome = supervisor.supervise(
      {[&guard] { return guard.release(); }, [&guard] { return guard.lost(); }}, command,
      run_job::job_environment(lock_variables(resources, res.lock.token(), res.lock.fence())),
      grace, g, "lock on '" + printable(resources.front()) + "'");
  return outcome.exit_code;
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
