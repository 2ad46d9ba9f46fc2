#pragma once
// What `run` and `elect` share once the lock is held (run.cpp, elect.cpp): COMMAND in its own
// process group (run_job.hpp), the hold's loss and failing extensions turned into events of the
// main thread, signals forwarded to the job, and the end: the job's exit status, or the loss.

#include <signal.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "redlock/guard.hpp"

namespace redlock::cli::run_job {

// COMMAND's wait status as an exit code: its own, 128+N for signal N.
[[nodiscard]] int status_to_exit(int status);

// The environment for COMMAND: ours with `vars` ("NAME=value") set and no password: the job (and
// whatever it starts) gets no credential of ours. REDLOCK_PASSWORD is dropped, REDLOCK_NODES keeps
// its nodes without their passwords (or is dropped when it does not parse); REDLOCK_PASSWORD_FILE,
// a path, stays. Inherited lock and leader variables (an outer run's) are dropped as well.
[[nodiscard]] std::vector<std::string> job_environment(const std::vector<std::string>& vars);

class Supervisor {
 public:
  // Blocks the signals forwarded to the job and SIGCHLD (SIGTTOU too) in the calling thread and
  // reads them from a signalfd: construct it before the Client, whose I/O thread inherits the
  // mask. Throws std::runtime_error.
  Supervisor();
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Sets the hold's on_lost and on_renew_failing to wake supervise() (they run on the I/O thread).
  void watch_hold(HoldOptions& hold);

  struct Outcome {
    int exit_code = 0;  // COMMAND's (status_to_exit), or exit_lost
    bool lost = false;
    int stop_signal = 0;  // SIGINT, SIGTERM, SIGHUP or SIGQUIT forwarded to the job (the last)
  };
  // What supervise() needs of the hold: release it, and why it was lost.
  struct Hold {
    std::function<ReleaseResult()> release;
    std::function<std::optional<LossInfo>()> lost;
  };
  // Starts COMMAND with `env` and supervises it while `guard` holds: on a loss its group gets
  // SIGTERM, then SIGKILL after `grace`; processes that outlive COMMAND get the same. Signals to us
  // are forwarded to the group. Once the group is empty, releases `guard`. `what` names the lock
  // in messages ("lock on 'job'"). Throws std::runtime_error (nothing is left running then, and
  // the guard is released) when COMMAND cannot be started.
  Outcome supervise(const Hold& guard, const std::vector<std::string>& command,
                    const std::vector<std::string>& env, Millis grace, const Globals& g,
                    const std::string& what);

 private:
  struct RenewNotice;
  sigset_t old_mask_;
  int sfd_ = -1;
  int lost_fd_ = -1;
  int failing_fd_ = -1;
  std::shared_ptr<RenewNotice> notice_;
};

}  // namespace redlock::cli::run_job
