#pragma once
// The one redis-server launcher of the tools and the test fixtures: find the binary, fork/exec it
// with a clean slate (signal mask and dispositions reset, stdin from /dev/null, stdout/stderr
// appended to a file, no inherited descriptor), and tell an exec failure from a start.
//
// Two lifetimes:
//   detached  double fork + setsid: the server outlives the caller, has no controlling terminal
//             and is reparented at once, so a long-running caller never accumulates zombies.
//             `redlock-cli cluster` and `demo` keep such nodes in pid files.
//   child     the caller's child, killed when the thread that forked it exits
//             (PR_SET_PDEATHSIG); the caller reaps it. What the test fixtures use, so no test
//             leaves a server behind.
//
// Safe to call with other threads alive: everything the child needs is prepared before fork, and
// the child makes only async-signal-safe calls.

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace redlock::nodes {

struct Search {
  // An environment variable that, when set and not empty, names the binary to use (and nothing
  // else is tried: a bad value is an error, not a fallback).
  const char* override_variable = nullptr;
  // Directories tried after those of PATH.
  std::vector<std::string> extra_dirs;
};

// The absolute path of an executable redis-server, as a shell would find it on PATH (then in
// `search.extra_dirs`), or nullopt.
[[nodiscard]] std::optional<std::string> find_redis_server(const Search& search = {});

struct Launch {
  enum class Lifetime { detached, child };

  std::string exe;                // a path, e.g. from find_redis_server()
  std::vector<std::string> args;  // after argv[0], which is always "redis-server": Debian's
                                  // binary picks its mode from argv[0] (redis-server is a
                                  // symlink to redis-check-rdb)
  std::filesystem::path output;   // stdout and stderr are appended to this file
  mode_t output_mode = 0600;      // if the file is created
  Lifetime lifetime = Lifetime::child;
  // The child's environment ("NAME=value" each); nullopt: this process's.
  std::optional<std::vector<std::string>> environment = {};
};

// Why launch() failed.
class LaunchError : public std::system_error {
 public:
  enum class Stage {
    output,  // the output file could not be opened ("cannot open PATH: ...")
    start,   // pipes or fork failed ("fork: ...")
    exec,    // the exec failed ("exec PATH: ...")
  };
  LaunchError(Stage stage, int err, const std::string& what)
      : std::system_error(err, std::generic_category(), what), stage_(stage) {}
  [[nodiscard]] Stage stage() const noexcept { return stage_; }

 private:
  Stage stage_;
};

// Starts redis-server and returns its pid once the exec has succeeded (not once it answers: see
// answers_ping() in client.hpp). Throws LaunchError.
[[nodiscard]] pid_t launch(const Launch& launch);

// The port a redis-server (or valkey-server) could not listen on because it was taken, from what
// it logged ("Failed listening on port 7001 (tcp), aborting."), or nullopt: for a caller that picks
// a port again. `log` is what the server wrote during this start only.
[[nodiscard]] std::optional<int> port_taken_at_start(std::string_view log);

}  // namespace redlock::nodes
