#pragma once
// Private to `redlock-cli run` (run.cpp): the processes of the job run under the lock.
//
// The lock protects the work of COMMAND *and of every process it starts*, so no process of the
// job may outlive the lock, whatever happens to `run`:
//
//   run (holds the lock, extends it; PR_SET_CHILD_SUBREAPER)
//    |-- COMMAND   leader of a new process group G; its children, and theirs, stay in G.
//    |             PR_SET_PDEATHSIG(SIGKILL): it dies with run's main thread.
//    `-- watchdog  a small fork of run, in a process group of its own, every signal blocked.
//                  It waits on a pipe whose only write end run holds. When run ends normally
//                  it first writes one byte; end of file without it means run died (kill -9,
//                  a crash, the OOM killer), and the watchdog sends SIGKILL to G.
//
// Why these pieces: PR_SET_PDEATHSIG only reaches the direct child, so a job script's own
// children would survive a kill -9 of run; only something outside run can act after run is
// gone, and the smallest such thing is a process that holds no state and waits on a pipe.
// A pipe (rather than polling getppid()) notices the death at once, and without a race: the
// kernel closes run's end however run ends. The watchdog is in a process group of its own, so
// a signal to run's group (a shell's `kill %1`, or kill -9 of the whole job) does not take it
// along; it blocks every catchable signal, so only a deliberate SIGKILL of its pid stops it
// (run then notices and warns). COMMAND waits until the watchdog is in place before it
// executes, so the job never runs unguarded. A process group, rather than a walk of the process
// tree, is what the kernel can signal atomically, including processes being forked at that very
// moment. Becoming a subreaper lets run reap the group's orphans itself, so it can tell when
// the group is really empty (a zombie still counts as a member, and a container's init may
// never reap it). A process that leaves the group on purpose (setsid, setpgid) is out of
// reach, as with flock(1) and timeout(1).
//
// The terminal: when run has it in the foreground, G gets it while COMMAND runs (so that an
// interactive command can read it, and Ctrl-C / Ctrl-Z reach the whole job), and run takes it
// back before it exits. When the job is stopped from the terminal, run stops too, so that the
// shell sees its job stopped; `fg` / `bg` continue run, which continues the job.

#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace redlock::cli::run_job {

class Job {
 public:
  // Starts COMMAND (argv, envp: as for execvpe) in a new process group with the signal mask
  // `exec_mask`, and the watchdog. Throws std::runtime_error when a pipe or fork fails;
  // nothing is left running then. Must be called from the thread that will stay (the main
  // thread): PR_SET_PDEATHSIG fires when the forking thread ends.
  Job(const std::vector<std::string>& argv, const std::vector<std::string>& envp,
      const sigset_t& exec_mask);
  // If the group still has processes: SIGKILL to all of them, and they are reaped. Then as
  // finish().
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  [[nodiscard]] pid_t group() const noexcept { return group_; }

  // Sends `sig` to every process of the job (nothing once the group is empty).
  void signal(int sig) const;
  // SIGTERM, and SIGCONT so that a stopped process can act on it.
  void terminate() const;

  // Reaps what has ended (COMMAND, orphans of the group, the watchdog). Call on SIGCHLD. When
  // COMMAND was stopped from the terminal, stops run's own process group (see above).
  void reap();
  // `run` was continued (SIGCONT): the terminal goes back to the job if run has it, and the
  // job is continued.
  void resume();
  // `run` got SIGTSTP from someone: the job is stopped, then run itself.
  void suspend();

  // COMMAND's wait status once it has ended.
  [[nodiscard]] std::optional<int> command_status() const noexcept { return status_; }
  // True when no process of the group is left (COMMAND included).
  [[nodiscard]] bool empty() const;
  // The watchdog ended without being told (someone SIGKILLed it): reported once by run.
  [[nodiscard]] bool watchdog_lost() const noexcept { return watchdog_lost_; }

  // Gives the terminal back to run's group and tells the watchdog that run is done. Call once
  // the group is empty; idempotent.
  void finish();

 private:
  void take_terminal_back();

  pid_t group_ = -1;  // COMMAND's pid, the id of its process group
  pid_t watchdog_ = -1;
  int live_fd_ = -1;  // write end of the watchdog's pipe
  int tty_ = -1;      // the controlling terminal, when the job got it in the foreground
  std::optional<int> status_;
  bool watchdog_lost_ = false;
  bool finished_ = false;
};

}  // namespace redlock::cli::run_job
