#pragma once
// Printing of results shared by the lock subcommands: per-node tables (stderr, -v) and JSON.

#include <string>
#include <system_error>
#include <vector>

#include "cli.hpp"
#include "redlock/error.hpp"

namespace redlock::cli {

// Exit code for an operation's error (0 when none).
int exit_code_for(std::error_code ec);
// The short name of an error for JSON ("contended", "no_quorum", ...).
std::string error_name(std::error_code ec);
// Per-node outcomes, one per line, aligned.
void print_nodes(std::ostream& out, const std::vector<NodeOutcome>& nodes);
// `"per_node":[...]` (without a leading comma).
std::string json_nodes(const std::vector<NodeOutcome>& nodes);
// A JSON array of strings.
std::string json_array(const std::vector<std::string>& items);
// Prints "redlock-cli: <what>: <message>" on stderr. With -q only what exit status 1 means (held
// elsewhere / not held: an answer a script asked for) is left out; failures that need someone to
// look (no quorum, an interruption) are still printed.
void report_failure(const Globals& g, std::error_code ec, const std::string& what,
                    const std::string& message, const std::vector<NodeOutcome>& nodes);

}  // namespace redlock::cli
