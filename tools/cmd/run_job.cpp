// The processes of `redlock-cli run`'s job: run_job.hpp says what they are and why.

#include "run_job.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace redlock::cli::run_job {
namespace {

std::runtime_error sys_error(const std::string& what) {
  return std::runtime_error(what + ": " + std::strerror(errno));
}

ssize_t read_one(int fd, char* c) {
  ssize_t n;
  do {
    n = ::read(fd, c, 1);
  } while (n < 0 && errno == EINTR);
  return n;
}

void say(const char* text) { (void)!::write(STDERR_FILENO, text, std::strlen(text)); }

// The child that becomes COMMAND, between fork and exec. run has other threads (the client's
// I/O thread), so only async-signal-safe calls here.
[[noreturn]] void exec_command(char* const* argv, char* const* envp, const sigset_t& mask,
                               pid_t parent, int go_rd, int go_wr) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // run died before the line above took effect
  ::close(go_wr);
  char go = 0;
  // End of file: run gave up, or died, before the watchdog was in place. Never run unguarded.
  if (read_one(go_rd, &go) != 1) ::_exit(127);
  ::close(go_rd);
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);
  ::execvpe(argv[0], argv, envp);
  const int err = errno;
  say("redlock-cli: cannot run ");
  say(argv[0]);
  say(": ");
  const char* why = ::strerrordesc_np(err);  // a static string: safe here, unlike strerror
  say(why != nullptr ? why : "error");
  say("\n");
  ::_exit(err == ENOENT ? 127 : 126);
}

// The watchdog (run_job.hpp): also a fork of the multi-threaded run, so async-signal-safe calls
// only, and it never returns.
[[noreturn]] void watch(int live_rd, pid_t group) {
  ::setpgid(0, 0);  // a signal to run's process group does not reach it
  sigset_t all;
  ::sigfillset(&all);
  ::sigprocmask(SIG_BLOCK, &all, nullptr);
  // Nothing of run's stays open in here: its sockets, signalfd, terminal and standard streams
  // (a reader of run's stdout must see end of file when run ends, not when this does).
  if (live_rd > 0) ::close_range(0, static_cast<unsigned>(live_rd) - 1, 0);
  ::close_range(static_cast<unsigned>(live_rd) + 1, ~0U, 0);
  ::prctl(PR_SET_NAME, "redlock-watch");
  char done = 0;
  if (read_one(live_rd, &done) != 1) ::kill(-group, SIGKILL);  // run is gone: so is its job
  ::_exit(0);
}

}  // namespace

Job::Job(const std::vector<std::string>& argv, const std::vector<std::string>& envp,
         const sigset_t& exec_mask) {
  // Prepared before fork: the children may not allocate.
  std::vector<char*> av, ev;
  for (const auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  for (const auto& e : envp) ev.push_back(const_cast<char*>(e.c_str()));
  ev.push_back(nullptr);

  // Orphans of the job (a script's background children, once the script has exited) become our
  // children, so that we reap them and can tell when the group is empty. Not fatal if refused.
  (void)::prctl(PR_SET_CHILD_SUBREAPER, 1);

  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) throw sys_error("pipe");
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const auto e = sys_error("fork");
    ::close(go[0]);
    ::close(go[1]);
    throw e;
  }
  if (pid == 0) exec_command(av.data(), ev.data(), exec_mask, parent, go[0], go[1]);
  ::close(go[0]);
  group_ = pid;
  // Here too, not only in the child: the group must exist before the terminal is handed to it.
  ::setpgid(pid, pid);

  int live[2];
  pid_t w = -1;
  if (::pipe2(live, O_CLOEXEC) == 0) {
    w = ::fork();
    if (w == 0) watch(live[0], pid);
    ::close(live[0]);
    if (w < 0) ::close(live[1]);
  }
  if (w < 0) {
    const auto e = sys_error("cannot start the watchdog");
    ::close(go[1]);  // COMMAND reads end of file and exits without running
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    throw e;
  }
  watchdog_ = w;
  live_fd_ = live[1];

  // The terminal goes to the job when run has it in the foreground.
  const int tty = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (tty >= 0 && ::tcgetpgrp(tty) == ::getpgrp() && ::tcsetpgrp(tty, group_) == 0) {
    tty_ = tty;
  } else if (tty >= 0) {
    ::close(tty);
  }

  const char go_byte = 'g';
  (void)!::write(go[1], &go_byte, 1);
  ::close(go[1]);
}

Job::~Job() {
  if (!status_ || !empty()) {
    signal(SIGKILL);
    for (int i = 0; i < 250 && !(status_ && empty()); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      reap();
    }
  }
  finish();
}

void Job::signal(int sig) const {
  if (!finished_) ::kill(-group_, sig);
}

void Job::terminate() const {
  signal(SIGTERM);
  signal(SIGCONT);
}

bool Job::empty() const {
  // EPERM: a member we may not signal (a set-user-ID program) is still a member.
  return ::kill(-group_, 0) != 0 && errno == ESRCH;
}

void Job::reap() {
  while (true) {
    int st = 0;
    const pid_t p = ::waitpid(-1, &st, WNOHANG | WUNTRACED);
    if (p <= 0) return;
    if (p == group_) {
      if (WIFEXITED(st) || WIFSIGNALED(st)) {
        status_ = st;
      } else if (WIFSTOPPED(st) && tty_ >= 0 &&
                 (WSTOPSIG(st) == SIGTSTP || WSTOPSIG(st) == SIGTTIN || WSTOPSIG(st) == SIGTTOU)) {
        // Stopped from the terminal (Ctrl-Z): the job is ours and run's together, as the shell
        // sees it. Take the terminal back and stop run's own group (run with it; the SIGTSTP
        // this sends run itself is ignored, as it comes from run).
        take_terminal_back();
        ::kill(0, SIGTSTP);
        ::kill(::getpid(), SIGSTOP);
      }
    } else if (p == watchdog_) {
      watchdog_ = -1;
      if (!finished_) watchdog_lost_ = true;
    }
    // Anything else: an orphan of the group, reparented to us (the subreaper), now reaped.
  }
}

void Job::resume() {
  if (tty_ >= 0 && ::tcgetpgrp(tty_) == ::getpgrp()) ::tcsetpgrp(tty_, group_);
  signal(SIGCONT);
}

void Job::suspend() {
  signal(SIGTSTP);
  take_terminal_back();
  ::kill(::getpid(), SIGSTOP);
}

void Job::take_terminal_back() {
  // Only from the job: a terminal the shell has taken meanwhile stays the shell's. (SIGTTOU is
  // blocked in run, so this works from a background group too.)
  if (tty_ >= 0 && ::tcgetpgrp(tty_) == group_) ::tcsetpgrp(tty_, ::getpgrp());
}

void Job::finish() {
  if (finished_) return;
  take_terminal_back();
  finished_ = true;
  if (tty_ >= 0) ::close(tty_);
  tty_ = -1;
  if (live_fd_ >= 0) {
    const char done = 'd';
    (void)!::write(live_fd_, &done, 1);
    ::close(live_fd_);
    live_fd_ = -1;
  }
  // It exits as soon as it has read that; not waited for forever (someone may have stopped it).
  for (int i = 0; i < 100 && watchdog_ > 0; ++i) {
    if (::waitpid(watchdog_, nullptr, WNOHANG) == watchdog_) watchdog_ = -1;
    if (watchdog_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace redlock::cli::run_job
