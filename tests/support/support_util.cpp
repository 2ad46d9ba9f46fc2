#include "support_util.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <thread>

#include "nodes/process.hpp"

namespace redlock::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

bool is_executable(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

void close_quietly(int fd) {
  if (fd >= 0) ::close(fd);
}

// Runs in the forked child: async-signal-safe calls only.
[[noreturn]] void exec_child(pid_t parent, int devnull, int out, int errpipe, const char* cwd,
                             const char* exe, char* const* argv, char* const* envp) {
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(127);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  const int sigs[] = {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2};
  for (int s : sigs) ::sigaction(s, &dfl, nullptr);
  int e = 0;
  if (::dup2(devnull, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(out, 2) < 0) e = errno;
  if (e == 0 && cwd && *cwd && ::chdir(cwd) != 0) e = errno;
  if (e == 0) {
    // Nothing else of the test process (its sockets, fixture pipes) reaches the tool.
    if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
      for (int fd = 3; fd < 1024; ++fd) {
        if (fd != errpipe) ::close(fd);
      }
    }
    ::execve(exe, argv, envp);
    e = errno;
  }
  ssize_t ignored = ::write(errpipe, &e, sizeof e);
  (void)ignored;
  ::_exit(127);
}

}  // namespace

std::string ProcessResult::describe() const {
  if (timed_out) return "timed out (killed)";
  if (exit_code >= 0) return "exit code " + std::to_string(exit_code);
  if (term_signal > 0) return "killed by signal " + std::to_string(term_signal);
  return "did not run";
}

std::string find_executable(const std::string& name) {
  if (name.find('/') != std::string::npos) return is_executable(name) ? name : std::string();
  const char* path = std::getenv("PATH");
  std::string dirs = (path && *path) ? path : "/usr/local/bin:/usr/bin:/bin";
  dirs += ":/usr/bin:/usr/sbin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string d = dirs.substr(start, end - start);
    if (d.empty()) d = ".";
    const std::string candidate = d + "/" + name;
    if (is_executable(candidate)) return candidate;
    start = end + 1;
  }
  return {};
}

std::string valkey_server_path() { return find_executable("valkey-server"); }

ProcessResult run_process(const std::vector<std::string>& args, std::chrono::milliseconds timeout,
                          const std::string& cwd) {
  if (args.empty()) throw std::invalid_argument("run_process: empty argv");
  const std::string exe = find_executable(args.front());
  if (exe.empty()) {
    throw std::system_error(ENOENT, std::generic_category(), "run_process: " + args.front());
  }
  // Everything the child needs is prepared before fork().
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::vector<std::string> env = nodes::environment_without_preload();
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int outpipe[2] = {-1, -1};
  int errpipe[2] = {-1, -1};
  if (devnull < 0 || ::pipe2(outpipe, O_CLOEXEC) != 0 || ::pipe2(errpipe, O_CLOEXEC) != 0) {
    const int e = errno;
    close_quietly(devnull);
    for (int fd : {outpipe[0], outpipe[1], errpipe[0], errpipe[1]}) close_quietly(fd);
    throw std::system_error(e, std::generic_category(), "run_process: pipes");
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    exec_child(parent, devnull, outpipe[1], errpipe[1], cwd.c_str(), exe.c_str(), argv.data(),
               envp.data());
  }
  const int fork_errno = errno;
  close_quietly(devnull);
  close_quietly(outpipe[1]);
  close_quietly(errpipe[1]);
  if (pid < 0) {
    close_quietly(outpipe[0]);
    close_quietly(errpipe[0]);
    throw std::system_error(fork_errno, std::generic_category(), "run_process: fork");
  }
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(errpipe[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  close_quietly(errpipe[0]);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    close_quietly(outpipe[0]);
    int st = 0;
    nodes::waitpid_eintr(pid, &st, 0);
    throw std::system_error(child_errno, std::generic_category(), "run_process: exec " + exe);
  }

  ProcessResult result;
  const auto deadline = steady_clock::now() + timeout;
  char buf[4096];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now()).count();
    if (left <= 0) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);  // our own child, not yet reaped: the pid cannot have been recycled
      break;
    }
    pollfd p{outpipe[0], POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    const ssize_t got = ::read(outpipe[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // EOF: the child (and anything it forked that kept the pipe) is done
    result.output.append(buf, static_cast<std::size_t>(got));
  }
  close_quietly(outpipe[0]);
  int st = 0;
  nodes::waitpid_eintr(pid, &st, 0);
  if (WIFEXITED(st)) result.exit_code = WEXITSTATUS(st);
  if (WIFSIGNALED(st)) result.term_signal = WTERMSIG(st);
  return result;
}

std::string make_temp_dir(const std::string& prefix) {
  std::string base = "/tmp";
  // Unix socket paths are limited to 107 bytes: only use TMPDIR when it is short.
  if (const char* t = std::getenv("TMPDIR"); t && *t && std::strlen(t) <= 60) base = t;
  std::string tmpl = base + "/" + prefix + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) {
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + tmpl);
  }
  return std::string(buf.data());
}

namespace {
bool bindable(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}
}  // namespace

std::uint16_t free_port_with_bus_twin() {
  static std::mutex mu;
  static std::set<std::uint16_t> handed_out;  // both ports of every pair
  static std::mt19937 rng(static_cast<std::mt19937::result_type>(
      ::getpid() ^ steady_clock::now().time_since_epoch().count()));
  const std::lock_guard<std::mutex> lock(mu);
  constexpr int kLow = 18000;  // the ranges of every picker: redis_fixture.hpp, free_low_port
  constexpr int kHigh = 19999;
  std::uniform_int_distribution<int> dist(kLow, kHigh);
  for (int attempt = 0; attempt < 2000; ++attempt) {
    const auto port = static_cast<std::uint16_t>(dist(rng));
    const auto twin = static_cast<std::uint16_t>(port + 10000);
    if (handed_out.count(port) || handed_out.count(twin)) continue;
    if (!bindable(port) || !bindable(twin)) continue;
    handed_out.insert(port);
    handed_out.insert(twin);
    return port;
  }
  throw std::runtime_error("free_port_with_bus_twin: no free pair found");
}

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
                std::chrono::milliseconds poll) {
  const auto deadline = steady_clock::now() + timeout;
  for (;;) {
    try {
      if (pred()) return true;
    } catch (const std::exception&) {
      // not yet
    }
    if (steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(poll);
  }
}

long long elapsed_ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<milliseconds>(steady_clock::now() - t0).count();
}

}  // namespace redlock::test
