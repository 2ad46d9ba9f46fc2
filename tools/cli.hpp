#pragma once
// Shared pieces of redlock-cli: exit codes, global flags, and how subcommands are registered.
// Each subcommand lives in its own file with a `setup_<name>(CLI::App&, Context&)` function that
// adds the subcommand; its CLI11 callback only stores `ctx.action`, which main runs after parsing
// (so the work happens once, outside the parser, whatever CLI11 does with callbacks).

#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "redlock/options.hpp"

namespace redlock::cli {

// Exit codes: the contract in docs/cli.md.
enum Exit : int {
  exit_ok = 0,
  exit_held = 1,       // held by someone else / not held by this token
  exit_usage = 2,      // usage or configuration error
  exit_no_quorum = 3,  // too many nodes down, timing out or answering errors
  exit_lost = 4,       // run: the lock was lost while the command ran
};

// Raised from a subcommand callback for a usage/configuration error; main prints
// "redlock-cli: <message>" on stderr and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Globals {
  std::string nodes;  // -n/--nodes; falls back to REDLOCK_NODES, then the local demo nodes
  bool nodes_given = false;  // -n was on the command line (then it must not be empty)
  bool json = false;
  bool verbose = false;
  bool quiet = false;
  std::string node_timeout;
  std::string connect_timeout;
  std::optional<double> drift_factor;
  std::optional<int> retry_count;
  std::string retry_delay;
  std::string min_uptime;  // also REDLOCK_MIN_UPTIME
};

struct Context {
  Globals globals;
  int exit_code = exit_ok;
  std::function<int()> action;  // set by the chosen subcommand; returns the exit code
};

// The default nodes: what `redlock-cli cluster up` starts.
inline constexpr const char* default_nodes = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,"
                                             "127.0.0.1:7004,127.0.0.1:7005";

// Parses a duration flag or throws UsageError naming the flag and the value.
Millis duration_arg(const std::string& flag, const std::string& text);

// --read / --write flags to a lock mode; throws UsageError when both are given.
LockMode lock_mode(bool read, bool write);

// Builds engine options from the global flags and the environment; throws UsageError.
Options make_options(const Globals& g);

void setup_acquire(CLI::App& app, Context& ctx);
void setup_release(CLI::App& app, Context& ctx);
void setup_extend(CLI::App& app, Context& ctx);
void setup_status(CLI::App& app, Context& ctx);
void setup_run(CLI::App& app, Context& ctx);
void setup_cluster(CLI::App& app, Context& ctx);
void setup_bench(CLI::App& app, Context& ctx);
void setup_demo(CLI::App& app, Context& ctx);

// Turns SIGINT, SIGTERM, SIGHUP and SIGQUIT into a stop request while a lock is being acquired,
// so Ctrl-C during `acquire --wait` or `run --wait` ends the wait at once, with the attempt in
// flight rolled back on every node, instead of killing the process (which would leave the keys of
// that attempt until their ttl) or being ignored until the wait ends.
// Construct it before the Client: it blocks those signals in the calling thread, and the client's
// I/O thread inherits the mask. A watcher thread reads them from a signalfd until disarm(); the
// signals stay blocked afterwards (`run` reads them itself from then on).
class StopOnSignal {
 public:
  StopOnSignal();
  ~StopOnSignal();
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

  [[nodiscard]] std::stop_token token() const { return source_.get_token(); }
  // Stops watching; idempotent. A signal that arrives later stays pending.
  void disarm();
  // The signal that requested the stop, or 0.
  [[nodiscard]] int signal() const { return signal_.load(); }
  // "interrupted by SIGINT", for messages.
  [[nodiscard]] std::string describe() const;

 private:
  void watch();
  std::stop_source source_;
  std::atomic<int> signal_{0};
  int signal_fd_ = -1;
  int wake_fd_ = -1;
  std::thread watcher_;
};

// JSON string escaping for the --json outputs (bytes that are not printable ASCII become \u00XX).
std::string json_string(std::string_view s);

}  // namespace redlock::cli
