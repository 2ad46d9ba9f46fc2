#include "launcher.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>

#include "process.hpp"

extern char** environ;

namespace redlock::nodes {
namespace {

bool is_executable(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

std::string absolute(const std::string& p) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(p, ec);
  return ec ? p : abs.string();
}

void close_quietly(int fd) {
  if (fd >= 0) ::close(fd);
}

// Moves fd to a number >= 3 (so the child's dup2 onto 0..3 cannot clobber it), keeping CLOEXEC.
int raise_fd(int fd) {
  if (fd < 0 || fd >= 3) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  ::close(fd);
  return moved;
}

// Reads exactly one int; false on EOF (the writer closed its end, e.g. by a successful exec).
bool read_int(int fd, int& v) {
  ssize_t n;
  do {
    n = ::read(fd, &v, sizeof v);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(sizeof v);
}

void write_int(int fd, int v) { (void)!::write(fd, &v, sizeof v); }

struct ChildSetup {
  const char* exe;
  char* const* argv;
  char* const* envp;
  int devnull;
  int output;
  int exec_error;  // write end: the exec's errno, or EOF on success (CLOEXEC)
  int pid_report;  // write end, detached only: the grandchild's pid from the middle process
  pid_t parent;
  bool detached;
  int max_fd;
};

// Runs in the forked child: only async-signal-safe calls, no allocation.
[[noreturn]] void exec_child(const ChildSetup& s) {
  if (s.detached) {
    ::setsid();
    const pid_t grandchild = ::fork();
    if (grandchild != 0) {
      write_int(s.pid_report, grandchild > 0 ? grandchild : -errno);
      ::_exit(0);
    }
  } else if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != s.parent) {
    // Die with the forking thread, and cover the race where it already died.
    ::_exit(127);
  }

  // exec keeps the signal mask and ignored dispositions: give redis a clean slate.
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);
  }
  // A detached server must not keep the caller's working directory busy.
  if (s.detached) (void)!::chdir("/");

  if (::dup2(s.devnull, 0) < 0 || ::dup2(s.output, 1) < 0 || ::dup2(s.output, 2) < 0 ||
      ::dup2(s.exec_error, 3) < 0) {
    write_int(s.exec_error, errno);
    ::_exit(127);
  }
  ::fcntl(3, F_SETFD, FD_CLOEXEC);
  // Leak no descriptor of the caller (sockets, locks, test connections) into a long-lived server.
  if (::close_range(4, ~0U, 0) != 0) {
    for (int fd = 4; fd < s.max_fd; ++fd) ::close(fd);
  }
  ::execve(s.exe, s.argv, s.envp);
  write_int(3, errno);
  ::_exit(127);
}

}  // namespace

std::optional<std::string> find_redis_server(const Search& search) {
  if (search.override_variable != nullptr) {
    if (const char* v = std::getenv(search.override_variable); v != nullptr && *v != '\0') {
      if (is_executable(v)) return absolute(v);
      return std::nullopt;
    }
  }
  const char* env_path = std::getenv("PATH");
  std::vector<std::string> dirs;
  const std::string path =
      env_path != nullptr && *env_path != '\0' ? env_path : "/usr/local/bin:/usr/bin:/bin";
  for (std::size_t start = 0; start <= path.size();) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    dirs.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  dirs.insert(dirs.end(), search.extra_dirs.begin(), search.extra_dirs.end());
  for (auto& dir : dirs) {
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/redis-server";
    if (is_executable(candidate)) return absolute(candidate);
  }
  return std::nullopt;
}

pid_t launch(const Launch& l) {
  using Stage = LaunchError::Stage;
  // Everything the child needs is prepared here, before fork().
  std::string arg0 = "redis-server";
  std::vector<char*> argv{arg0.data()};
  for (const auto& a : l.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  if (l.environment) {
    for (const auto& e : *l.environment) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
  }
  const long open_max = ::sysconf(_SC_OPEN_MAX);
  const int max_fd = (open_max <= 0 || open_max > 65536) ? 65536 : static_cast<int>(open_max);

  const int output =
      raise_fd(::open(l.output.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, l.output_mode));
  if (output < 0) throw LaunchError(Stage::output, errno, "cannot open " + l.output.string());
  const int devnull = raise_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  // Two pipes: the exec's errno must not race with the middle process's report of the pid.
  int exec_pipe[2] = {-1, -1}, pid_pipe[2] = {-1, -1};
  const bool detached = l.lifetime == Launch::Lifetime::detached;
  if (devnull < 0 || ::pipe2(exec_pipe, O_CLOEXEC) != 0 ||
      (detached && ::pipe2(pid_pipe, O_CLOEXEC) != 0)) {
    const int err = errno;
    for (int fd : {output, devnull, exec_pipe[0], exec_pipe[1], pid_pipe[0], pid_pipe[1]}) {
      close_quietly(fd);
    }
    throw LaunchError(Stage::start, err, "fork");
  }
  for (int* fd : {&exec_pipe[0], &exec_pipe[1], &pid_pipe[0], &pid_pipe[1]}) *fd = raise_fd(*fd);

  const ChildSetup setup{
      .exe = l.exe.c_str(),
      .argv = argv.data(),
      .envp = l.environment ? envp.data() : environ,
      .devnull = devnull,
      .output = output,
      .exec_error = exec_pipe[1],
      .pid_report = pid_pipe[1],
      .parent = ::getpid(),
      .detached = detached,
      .max_fd = max_fd,
  };
  const pid_t child = ::fork();
  if (child == 0) exec_child(setup);
  const int fork_err = errno;
  for (int fd : {output, devnull, exec_pipe[1], pid_pipe[1]}) close_quietly(fd);
  if (child < 0) {
    close_quietly(exec_pipe[0]);
    close_quietly(pid_pipe[0]);
    throw LaunchError(Stage::start, fork_err, "fork");
  }

  pid_t server = child;
  if (detached) {
    waitpid_eintr(child, nullptr, 0);  // the middle process exits at once
    int reported = 0;
    const bool got = read_int(pid_pipe[0], reported);
    close_quietly(pid_pipe[0]);
    if (!got || reported <= 0) {
      close_quietly(exec_pipe[0]);
      throw LaunchError(Stage::start, got ? -reported : EIO, "fork");
    }
    server = reported;
  }
  // The pipe closes on a successful exec (CLOEXEC); otherwise the child writes its errno.
  int exec_err = 0;
  const bool failed = read_int(exec_pipe[0], exec_err);
  close_quietly(exec_pipe[0]);
  if (failed) {
    if (!detached) waitpid_eintr(child, nullptr, 0);
    throw LaunchError(Stage::exec, exec_err, "exec " + l.exe);
  }
  return server;
}

std::optional<int> port_taken_at_start(std::string_view log) {
  // Redis 7 and Valkey 8 both say, when a listener cannot be made:
  //   # Warning: Could not create server TCP listening socket *:7001: bind: Address already in use
  //   # Failed listening on port 7001 (tcp), aborting.     ("(TCP)", "(tls)", "(cluster)")
  if (log.find("Address already in use") == std::string_view::npos) return std::nullopt;
  constexpr std::string_view marker = "Failed listening on port ";
  const auto at = log.find(marker);
  if (at == std::string_view::npos) return std::nullopt;
  int port = 0;
  const char* first = log.data() + at + marker.size();
  const auto [end, ec] = std::from_chars(first, log.data() + log.size(), port);
  if (ec != std::errc() || end == first || port <= 0) return std::nullopt;
  return port;
}

}  // namespace redlock::nodes
