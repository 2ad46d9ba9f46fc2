// The job supervision that `run` and `elect` share (run_supervise.hpp).

#include "run_supervise.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "output.hpp"
#include "run_job.hpp"

namespace redlock::cli::run_job {
namespace {

// Read from the signalfd once the job runs: forwarded to the job (SIGCONT and SIGTSTP with a
// little more, see run_job.hpp).
constexpr int forwarded_signals[] = {SIGINT,  SIGTERM,  SIGHUP,  SIGQUIT, SIGUSR1,
                                     SIGUSR2, SIGWINCH, SIGCONT, SIGTSTP};

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

}  // namespace

int status_to_exit(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::vector<std::string> job_environment(const std::vector<std::string>& vars) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view v = *e;
    if (v.starts_with("REDLOCK_RESOURCE=") || v.starts_with("REDLOCK_RESOURCES=") ||
        v.starts_with("REDLOCK_TOKEN=") || v.starts_with("REDLOCK_FENCE=") ||
        v.starts_with("REDLOCK_LEADER_ID=") || v.starts_with("REDLOCK_TERM=") ||
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
  env.insert(env.end(), vars.begin(), vars.end());
  return env;
}

struct Supervisor::RenewNotice {
  std::mutex mu;
  std::string text;
};

Supervisor::Supervisor() : notice_(std::make_shared<RenewNotice>()) {
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : forwarded_signals) sigaddset(&mask, s);
  sigaddset(&mask, SIGCHLD);
  // SIGTTOU only blocked, never read: taking the terminal back from the job works from a
  // background group then.
  sigset_t blocked = mask;
  sigaddset(&blocked, SIGTTOU);
  sigprocmask(SIG_BLOCK, &blocked, &old_mask_);  // before the client's thread exists
  sfd_ = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  lost_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  failing_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (sfd_ < 0 || lost_fd_ < 0 || failing_fd_ < 0) {
    const int err = errno;
    for (int fd : {sfd_, lost_fd_, failing_fd_}) {
      if (fd >= 0) close(fd);
    }
    throw std::runtime_error(std::string("signalfd/eventfd: ") + std::strerror(err));
  }
}

Supervisor::~Supervisor() {
  close(sfd_);
  close(lost_fd_);
  close(failing_fd_);
}

void Supervisor::watch_hold(HoldOptions& hold) {
  hold.on_lost = [fd = lost_fd_](const LossInfo&) {
    std::uint64_t one = 1;
    (void)!write(fd, &one, sizeof one);
  };
  // Extensions are failing: said on stderr by the main thread (this runs on the I/O thread).
  hold.on_renew_failing = [fd = failing_fd_, notice = notice_](const RenewFailure& f) {
    {
      std::lock_guard<std::mutex> hold(notice->mu);
      notice->text = f.message + "; giving up in " + std::to_string(f.give_up_in.count()) +
                     " ms unless an extension succeeds";
    }
    std::uint64_t one = 1;
    (void)!write(fd, &one, sizeof one);
  };
}

Supervisor::Outcome Supervisor::supervise(const Hold& guard,
                                          const std::vector<std::string>& command,
                                          const std::vector<std::string>& env, Millis grace,
                                          const Globals& g, const std::string& what) {
  // A loss or a failing extension of an earlier hold (elect --again) is not this one's.
  std::uint64_t stale;
  (void)!read(lost_fd_, &stale, sizeof stale);
  (void)!read(failing_fd_, &stale, sizeof stale);
  bool lost = false;
  int stop_signal = 0;
  bool cleaning_up = false;  // COMMAND has exited; the rest of its group is being ended
  // (time_point::max(): not planned. Not std::optional: GCC 12 sees it as maybe uninitialized.)
  constexpr auto never = BootClock::time_point::max();
  BootClock::time_point kill_at = never;      // SIGKILL to the group then
  BootClock::time_point given_up_at = never;  // after SIGKILL, stop waiting then
  std::optional<Job> job;
  try {
    job.emplace(command, env, old_mask_);
  } catch (const std::exception&) {
    guard.release();
    throw;
  }
  const auto say = [&](const std::string& what) {
    if (!g.quiet) Stderr() << "redlock-cli: " << what << "\n";
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
    pollfd fds[3] = {{sfd_, POLLIN, 0}, {lost_fd_, POLLIN, 0}, {failing_fd_, POLLIN, 0}};
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
      (void)!read(failing_fd_, &v, sizeof v);
      std::lock_guard<std::mutex> hold(notice_->mu);
      if (!lost) say("extending the " + what + " failed (" + notice_->text + ")");
    }
    if (fds[1].revents & POLLIN) {
      std::uint64_t v;
      (void)!read(lost_fd_, &v, sizeof v);
      if (!lost) {
        lost = true;
        auto info = guard.lost();
        say(what + " lost (" + (info ? info->message : std::string("unknown")) +
            "): sending SIGTERM to " + command.front() + " and its group");
        job->terminate();
        if (kill_at == never && given_up_at == never) kill_at = BootClock::now() + grace;
      }
    }
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo si;
      while (read(sfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
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
          if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT) stop_signal = sig;
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
  if (g.verbose)
    Stderr() << "redlock-cli: released the " << what << " on " << rel.deleted << " node(s)\n";
  return {lost ? exit_lost : exit_code, lost, stop_signal};
}

}  // namespace redlock::cli::run_job
