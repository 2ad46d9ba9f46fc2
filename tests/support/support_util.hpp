// Test support: small helpers shared by the TLS, cluster and sentinel fixtures.
//
// run_process() runs a tool (openssl, redis-cli, ...) by fork/exec, never through a shell, and
// only ever signals the pid it started.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace redlock::test {

struct ProcessResult {
  int exit_code = -1;      // WEXITSTATUS, -1 when it did not exit normally
  int term_signal = 0;     // WTERMSIG when it was killed by a signal
  bool timed_out = false;  // we SIGKILLed it after `timeout`
  std::string output;      // stdout and stderr, interleaved
  [[nodiscard]] bool ok() const { return exit_code == 0 && !timed_out; }
  [[nodiscard]] std::string describe() const;  // "exit code 1", "killed by signal 9", ...
};

// Runs argv[0] (a path, or a name looked up in PATH) with argv, stdin from /dev/null, stdout and
// stderr captured. The child dies with the calling thread (PR_SET_PDEATHSIG) and gets the test's
// environment minus LD_PRELOAD / FAKETIME*. When it outlives `timeout` it is SIGKILLed (by its
// pid) and reaped. Throws std::system_error if it cannot be started (fork, exec failure).
[[nodiscard]] ProcessResult run_process(
    const std::vector<std::string>& argv,
    std::chrono::milliseconds timeout = std::chrono::seconds{20}, const std::string& cwd = "");

// Absolute path of an executable `name` in PATH (plus /usr/bin:/usr/sbin), "" when none.
[[nodiscard]] std::string find_executable(const std::string& name);

// The valkey-server executable when installed ("" otherwise): pass it as
// ServerConfig::executable (or REDLOCK_TEST_REDIS_SERVER) to run a fixture on Valkey.
[[nodiscard]] std::string valkey_server_path();

// A fresh directory /tmp/<prefix>-XXXXXX (or under a short $TMPDIR). The caller removes it.
[[nodiscard]] std::string make_temp_dir(const std::string& prefix);

// A port P on 127.0.0.1 such that P and P + 10000 (Redis Cluster's bus port) were both free a
// moment ago. Both lie below the kernel's ephemeral range (P in [18000, 19999]), so an outgoing
// connection cannot take them meanwhile, and apart from the other tests' ranges (redis_fixture.hpp:
// free_low_port). Never returns the same P, or a twin of an earlier P, twice
// in one process. Thread-safe.
[[nodiscard]] std::uint16_t free_port_with_bus_twin();

// Calls `pred` every `poll` until it returns true (then true) or `timeout` passed (then false).
// Exceptions from `pred` count as "not yet".
bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
                std::chrono::milliseconds poll = std::chrono::milliseconds{20});

// Milliseconds since `t0` on the steady clock.
[[nodiscard]] long long elapsed_ms(std::chrono::steady_clock::time_point t0);

}  // namespace redlock::test
