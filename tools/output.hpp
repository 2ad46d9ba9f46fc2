#pragma once
// How results look: exit codes and names of errors, per-node tables (stderr, -v), and the --json
// objects of the lock commands (json.hpp, the one JSON writer, stays out of the command files).

#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "cli.hpp"
#include "redlock/error.hpp"
#include "redlock/leader.hpp"
#include "redlock/lock.hpp"

namespace redlock::cli {

// Exit code for an operation's error (0 when none).
[[nodiscard]] int exit_code_for(std::error_code ec);
// The short name of an error for JSON ("contended", "no_quorum", ...); empty when none.
[[nodiscard]] std::string error_name(std::error_code ec);

// Text for stderr, written whole (one write(2) under one lock) when the block goes out of scope:
// `Stderr() << "redlock-cli: " << what << "\n";`. With -v the library logs from its I/O thread
// while the main thread reports, and a line of one must never be cut by a line of the other
// (a stress run saw "  1 attempt" split in two by a log line). Everything the CLI writes on
// stderr while a client may be alive goes through it, the library's log lines too.
class Stderr {
 public:
  Stderr() = default;
  Stderr(const Stderr&) = delete;
  Stderr& operator=(const Stderr&) = delete;
  ~Stderr();
  template <class T>
  Stderr& operator<<(const T& value) {
    text_ << value;
    return *this;
  }

 private:
  std::ostringstream text_;
};
// Writes `text` on stderr in one piece, under the lock Stderr uses.
void write_stderr(std::string_view text);

// Per-node outcomes, one per line, aligned.
[[nodiscard]] std::string nodes_table(const std::vector<NodeOutcome>& nodes);
// Prints "redlock-cli: <what>: <message>" on stderr. With -q only what exit status 1 means (held
// elsewhere / not held: an answer a script asked for) is left out; failures that need someone to
// look (no quorum, an interruption) are still printed.
void report_failure(const Globals& g, std::error_code ec, const std::string& what,
                    const std::string& message, const std::vector<NodeOutcome>& nodes);

// `bytes` for a table: control and non-ASCII bytes escaped as in the JSON outputs, no quotes.
[[nodiscard]] std::string printable(std::string_view bytes);

// The --json object of each lock command, one line on stdout. The names are the same in all of
// them (the man page's JSON OUTPUT lists them, and tests/cli/test_json_docs.py holds the two
// together): `nodes` is the number of configured nodes, `per_node` the array of per-node records.
void print_acquire_json(const std::vector<std::string>& resources, const AcquireResult& res,
                        std::size_t nodes, int quorum);
void print_release_json(const std::vector<std::string>& resources, const std::string& token,
                        const ReleaseResult& res, std::size_t nodes);
void print_extend_json(const std::vector<std::string>& resources, const std::string& token,
                       Millis ttl, const ExtendResult& res, std::size_t nodes);
// status: the verdict (named `verdict_name`) beside the per-node records.
void print_status_json(const std::string& resource, const StatusResult& res, std::size_t nodes,
                       const StatusVerdict& verdict, std::string_view verdict_name);

// leader and observe: who leads `name` (`id`, `term`, `since_ms`, `validity_ms`; null when nobody
// leads or no quorum can tell, which `error` then says).
void print_leader_json(const std::string& name, const LeaderResult& res);

}  // namespace redlock::cli
