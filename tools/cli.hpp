#pragma once
// Shared pieces of redlock-cli: exit codes, global flags, and how a subcommand describes itself.
//
// Each subcommand lives in tools/cmd/<name>.cpp and returns a `Command`: plain data naming its
// options, help texts and footer, with pointers to where the parsed values go, and the function
// that runs it. main.cpp is the only file that includes CLI11: it turns these descriptions into
// CLI11 calls, parses, and runs the `run` of the command chosen. (Debian's CLI11 2.1.2 is
// header-only and predates its precompiled mode; every file that included it took a minute or more
// to compile.)

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "redlock/guard.hpp"
#include "redlock/lock.hpp"
#include "redlock/options.hpp"

namespace redlock::cli {

// Exit codes: the contract in docs/cli.md.
enum Exit : int {
  exit_ok = 0,
  exit_held = 1,       // held by someone else / not held by this token
  exit_usage = 2,      // usage or configuration error
  exit_no_quorum = 3,  // too many nodes down, timing out or answering errors
  exit_lost = 4,       // run: the lock was lost while the command ran
  exit_refused = 5,    // refused by the nodes' configuration (auth, ACL, TLS): not retried
};

// Raised from a subcommand for a usage/configuration error; main prints
// "redlock-cli: <message>" on stderr and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Globals {
  std::string nodes;         // -n/--nodes; falls back to REDLOCK_NODES, then the local demo nodes
  bool nodes_given = false;  // -n was on the command line (then it must not be empty)
  // --password-file (also REDLOCK_PASSWORD_FILE), else REDLOCK_PASSWORD: the password of every
  // node whose address has none, so that it need not be in -n (any user can read a process's
  // command line) or REDLOCK_NODES.
  std::string password_file;
  bool json = false;
  bool verbose = false;
  bool quiet = false;
  std::string node_timeout;
  std::string connect_timeout;
  std::optional<double> drift_factor;
  std::optional<int> retry_count;
  std::string retry_delay;
  std::string min_uptime;           // also REDLOCK_MIN_UPTIME
  std::string max_ttl;              // also REDLOCK_MAX_TTL: Options::max_ttl
  std::optional<int> min_replicas;  // replicated votes (WAIT)
  std::string replica_timeout;
  std::string key_prefix;  // --key-prefix: Options::key_prefix
  // TLS (redis-cli's names), each also from the environment (REDLOCK_TLS=1, REDLOCK_CACERT, ...).
  bool tls = false;  // --tls: TLS to every host:port address too (rediss:// always is)
  std::string cacert, cacertdir, cert, key, sni;
  bool insecure = false;
  bool no_wake_ups = false;  // --no-wake-ups: Options::wake_ups off (poll only)
  std::string commands;      // --commands auto|scripts|native, also REDLOCK_COMMANDS
};

// ---- the declaration layer ---------------------------------------------------------------------

// Where a parsed value goes. The pointee's type decides how the text is converted and the type
// name that --help shows (TEXT, INT, FLOAT, ...); a bool is a flag, a vector takes every value.
using Target = std::variant<bool*, std::string*, std::vector<std::string>*, double*,
                            std::optional<int>*, std::optional<double>*>;

struct Option {
  std::string names;  // "-n,--nodes", "--ttl", or the name of a positional ("resource")
  Target target;
  std::string help;
  std::string type_name = {};  // shown instead of the type's own name when not empty
  bool required = false;
  std::string needs = {};     // the name of an option of the same command this one needs
  std::string excludes = {};  // the name of an option of the same command this one excludes
};

struct Command {
  std::string name;
  std::string description;
  std::string footer = {};  // also shown by the subcommands (as CLI11 inherits it)
  std::vector<Option> options = {};
  // At most one is chosen. A command that has them lets them and itself take the global flags
  // after their names too (CLI11's fallthrough), as every command does.
  std::vector<Command> subcommands = {};
  // For a command that ends with `-- COMMAND [ARGS...]` (run): the words after the first "--"
  // that follows the command's name, taken as they are (none of them is parsed as an option);
  // left empty (nullopt) when there is no "--".
  std::optional<std::vector<std::string>>* rest = nullptr;
  // Runs when this is the command chosen (the last one named on the command line), after the
  // whole line was parsed. Returns the exit status; throws UsageError for a usage error.
  std::function<int()> run = {};
  // Owns what the targets point into, for as long as the description lives.
  std::shared_ptr<void> storage = {};
};

// The subcommands, in the order --help lists them. `g` is filled in by the parser before any
// `run` is called.
[[nodiscard]] Command acquire_command(const Globals& g);
[[nodiscard]] Command release_command(const Globals& g);
[[nodiscard]] Command extend_command(const Globals& g);
[[nodiscard]] Command status_command(const Globals& g);
[[nodiscard]] Command run_command(const Globals& g);
[[nodiscard]] Command elect_command(const Globals& g);
[[nodiscard]] Command leader_command(const Globals& g);
[[nodiscard]] Command observe_command(const Globals& g);
[[nodiscard]] Command cluster_command(const Globals& g);
[[nodiscard]] Command bench_command(const Globals& g);
[[nodiscard]] Command demo_command(const Globals& g);
[[nodiscard]] Command doctor_command(const Globals& g);

// ---- shared helpers (common.cpp) ---------------------------------------------------------------

// The default nodes: what `redlock-cli cluster up` starts.
inline constexpr const char* default_nodes =
    "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,"
    "127.0.0.1:7004,127.0.0.1:7005";
// The same in a few words, for messages.
inline constexpr const char* default_nodes_summary = "127.0.0.1:7001-7005";

// Parses a duration flag (or variable) or throws UsageError naming it and the value. A unit is
// required (docs/cli.md, "Durations"): a bare `30` is refused with a suggestion, a lone `0` is
// zero. Whether the value can be used (a ttl that is positive, at most 365 days, longer than its
// drift allowance, ...) is the library's one check to say: see refuse() and the check_ helpers.
[[nodiscard]] Millis duration_arg(const std::string& flag, const std::string& text);

// Where a setting of a command came from, for a message about it: the flag (or variable) and the
// text given there (empty for a switch, a number, or a value the library's reason names itself).
struct Given {
  std::string from;
  std::string text;
};
// By the library's name of the setting (OptionsProblem::field: "ttl", "wait", "identity", ...).
using GivenFlags = std::map<std::string, Given, std::less<>>;

// A problem the library's own check found, as the usage error that names the flag (and the text)
// it came from: "--ttl: '0': ttl must be positive, got 0 ms". A field that no flag set is reported
// as "<what>: <reason>".
[[noreturn]] void refuse(const OptionsProblem& problem, const GivenFlags& given,
                         const std::string& what);

// --read / --write flags to a lock mode; throws UsageError when both are given.
[[nodiscard]] LockMode lock_mode(bool read, bool write);

// --tls, else REDLOCK_TLS (1/true/yes or 0/false/no; anything else is UsageError).
[[nodiscard]] bool tls_wanted(const Globals& g);

// Options::tls from the TLS flags and their REDLOCK_ variables (a flag wins over its variable).
// Prints the one-line warning of --insecure on stderr (not with -q), once per process. The files
// are checked by the library when the client is made: one that cannot be used is an
// std::invalid_argument naming it, which main() reports as a usage error (exit 2) before
// anything is sent.
[[nodiscard]] TlsOptions make_tls_options(const Globals& g);

// True when neither -n nor REDLOCK_NODES named the nodes: the local `cluster up` nodes are used.
[[nodiscard]] bool default_nodes_used(const Globals& g);

// Builds engine options from the global flags and the environment; throws UsageError.
// The password of --password-file / REDLOCK_PASSWORD_FILE / REDLOCK_PASSWORD goes to every node
// whose address has none (`redis://user:@host` names a user for it). A list of one or two nodes
// gets a one-time warning on stderr (not with -q) saying what its quorum means.
// Its logger is the CLI's sink for the library's messages: with -v every message (connection
// events included), else only the warnings about the nodes' configuration; never any with -q.
// Those configuration warnings come once per node from the library; the sink keeps them and
// flush_warnings() says each kind once, in one line naming the nodes.
[[nodiscard]] Options make_options(const Globals& g);

// Prints the collected configuration warnings on stderr, one line per kind, and forgets them.
// main() calls it before exiting; `run` also calls it before starting the command, so that they
// come before the command's own output. Thread-safe.
void flush_warnings();

// The library's own checks, each made once before anything is sent (the Engine would refuse the
// same with Errc::invalid_argument): UsageError naming the flag, see refuse().
// An acquisition: the resources, the ttl (positive, at most 365 days, longer than its drift
// allowance, within the declared --max-ttl), the election's identity, how the lock kinds combine.
void check_acquisition(const std::vector<std::string>& resources, const AcquireOptions& options,
                       const Options& client_options, const GivenFlags& given);
// A hold of a lock of `ttl` (run, elect, bench --hold: auto-extended): the ttl long enough to be
// extended, the renew deadline within it.
void check_holding(Millis ttl, const HoldOptions& hold, const GivenFlags& given);
// A held lock given by its token (release; extend with its new `ttl`): the token, the resources.
void check_held_lock(const std::vector<std::string>& resources, const std::string& token,
                     std::optional<Millis> ttl, const Options& client_options,
                     const GivenFlags& given, const std::string& what);

// How `acquire` and `run` try again, as a shell user expects. Without --wait a lock held by
// someone else is an answer, as with `flock -n`: one attempt, and exit 1 at once. No quorum
// (nodes down, timing out or answering errors) is usually transient (a restart, a failover, a
// busy node), so it is tried again up to --retry-count times, --retry-delay (+- jitter) apart.
// With --wait, and for fair locks, the library's own loop retries both until the wait ends.
//
//   AcquireRetry retry(options, acquire_options, stop);   // sets acquire_options.retry_count
//   do res = client.try_acquire(resources, acquire_options); while (retry.again(res));
class AcquireRetry {
 public:
  AcquireRetry(const Options& client, AcquireOptions& acquire, std::stop_token stop, bool verbose);
  // After an attempt: sleeps and returns true when another is due. Sets res.attempts to the
  // attempts made so far in all. A stop request ends the sleep and returns false.
  [[nodiscard]] bool again(AcquireResult& res);

 private:
  bool own_loop_ = false;  // the CLI retries (no --wait, not fair)
  int left_ = 0;
  Millis delay_{0};
  Millis jitter_{0};
  std::stop_token stop_;
  bool verbose_ = false;
  int attempts_ = 0;
};

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

}  // namespace redlock::cli
