// redlock-cli status RESOURCE
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli.hpp"
#include "core/quorum.hpp"
#include "output.hpp"
#include "redlock/client.hpp"

namespace redlock::cli {
namespace {

// Under a node's row: what read-write and fair locks keep beside the lock key (readers, the
// waiting writer, the queue) and the counters, one indented line each, only when present.
void print_lock_details(const NodeKeyState& n, bool verbose) {
  const std::string indent = "    ";
  if (!n.where.empty()) std::cout << indent << "key on: " << n.where << "\n";
  if (verbose && !n.capabilities.empty())
    std::cout << indent << "capabilities: " << n.capabilities << "\n";
  if (n.reader_count > 0) {
    std::cout << indent << "readers (" << n.reader_count << "):";
    for (const auto& r : n.readers) {
      std::cout << " " << printable(r.token) << " (" << r.remaining.count() << "ms)";
    }
    if (n.readers.size() < n.reader_count) std::cout << " ...";
    std::cout << "\n";
  }
  if (n.writer_waiting) {
    std::cout << indent << "writer waiting: " << printable(*n.writer_waiting) << "\n";
  }
  if (n.queue_length > 0) {
    std::cout << indent << "queue (" << n.queue_length << "):";
    for (const auto& w : n.queue) std::cout << " #" << w.ticket << " " << printable(w.id);
    if (n.queue.size() < n.queue_length) std::cout << " ...";
    std::cout << "\n";
  }
  if (n.listening_clients > 0) {
    std::cout << indent << "clients waiting (wake-ups): " << n.listening_clients << "\n";
  }
  if (n.fence || n.ticket) {
    std::cout << indent;
    if (n.fence) std::cout << "fence counter: " << *n.fence << (n.ticket ? "  " : "");
    if (n.ticket) std::cout << "ticket counter: " << *n.ticket;
    std::cout << "\n";
  }
}

// The verdicts' names (--json) and exit codes (cli.md: 0 held on a quorum, 1 free, 3 no quorum
// to tell). Partly held exits 1 like free: the question status answers is whether someone holds
// the lock, and no one can (a holder needs its token on a quorum). The verdict line and the name
// tell the two apart for whoever needs it (an acquisition fails while the keys stay).
struct VerdictInfo {
  StatusVerdict::Kind kind;
  const char* name;
  int exit_code;
};
constexpr VerdictInfo verdicts[] = {
    {StatusVerdict::Kind::held, "held", exit_ok},
    {StatusVerdict::Kind::free, "free", exit_held},
    {StatusVerdict::Kind::partly_held, "partly-held", exit_held},
    {StatusVerdict::Kind::unknown, "no-quorum", exit_no_quorum},
};

const VerdictInfo& info_of(StatusVerdict::Kind kind) {
  for (const auto& v : verdicts) {
    if (v.kind == kind) return v;
  }
  return verdicts[3];
}

// "9.8 s"
std::string seconds(Millis ms) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << static_cast<double>(ms.count()) / 1000.0 << " s";
  return out.str();
}

// The first line: "held on 4 of 5 by 3f2a1b2c... for 9.8 s more", "free", "partly held: ...",
// "no quorum to tell: ...".
std::string verdict_line(const StatusVerdict& v) {
  const std::string of = std::to_string(v.holding) + " of " + std::to_string(v.nodes);
  const std::string answered = std::to_string(v.answered) + " of " + std::to_string(v.nodes) +
                               (v.nodes == 1 ? " node answered" : " nodes answered");
  switch (v.kind) {
    case StatusVerdict::Kind::held: {
      std::string line =
          v.token.empty()
              ? "held for reading by " + std::to_string(v.readers) +
                    (v.readers == 1 ? " reader" : " readers") + " on " + of
              : "held on " + of + " by " +
                    printable(v.token.size() > 8 ? v.token.substr(0, 8) + "..." : v.token);
      return line + (v.remaining ? " for " + seconds(*v.remaining) + " more" : " with no expiry");
    }
    case StatusVerdict::Kind::free:
      return v.answered == v.nodes ? "free" : "free (" + answered + ")";
    case StatusVerdict::Kind::partly_held:
      return "partly held: no token is on a quorum of the nodes (at most on " + of +
             "); no one holds the lock, and none can take it until those keys go";
    case StatusVerdict::Kind::unknown:
      break;
  }
  return "no quorum to tell: " + answered + ", " + std::to_string(v.nodes / 2 + 1) + " needed";
}

// The nodes whose answer refused this client's configuration (a password, an ACL permission, TLS:
// core/quorum.hpp), as a per-node record: when they alone leave too few nodes to tell, status
// exits 5 like every command (cli.md), since no retry can change the answer.
std::vector<NodeOutcome> refusals(const StatusResult& res) {
  std::vector<NodeOutcome> out;
  for (const auto& n : res.nodes) {
    if (n.detail.empty()) continue;
    // The connection's refusal of our credentials reads "AUTH failed: ..." (net/standalone.cpp).
    const NodeState state = n.detail.starts_with("AUTH failed")
                                ? NodeState::auth_failed
                                : (n.up ? NodeState::error : NodeState::down);
    NodeOutcome o{n.node, state, n.detail, {}};
    if (detail::refused_by_configuration(o)) out.push_back(std::move(o));
  }
  return out;
}

int run_status(const std::string& resource, const Globals& g) {
  if (resource.empty()) throw UsageError("empty resource name");
  Client client(make_options(g));
  auto res = client.status(resource);
  const auto verdict = status_verdict(res);
  const auto& info = info_of(verdict.kind);
  int exit_code = info.exit_code;
  if (verdict.kind == StatusVerdict::Kind::unknown) {
    const auto refused = refusals(res);
    const int n = static_cast<int>(res.nodes.size());
    if (static_cast<int>(refused.size()) > n - detail::quorum_of(n)) {
      exit_code = exit_refused;
      Stderr() << "redlock-cli: status: refused: " << summarize(refused) << "\n";
    }
  }
  if (g.json) {
    print_status_json(resource, res, client.options().nodes.size(), verdict, info.name);
    return exit_code;
  }
  // -q (man page): nothing for held (0) or free (1), the exit status says it; no quorum to tell
  // still needs someone to look, so its verdict goes to stderr (a refusal was said above).
  if (g.quiet) {
    if (exit_code == exit_no_quorum)
      Stderr() << "redlock-cli: status: " << verdict_line(verdict) << "\n";
    return exit_code;
  }
  std::cout << verdict_line(verdict) << "\n";
  std::size_t w = 4;
  for (const auto& n : res.nodes) w = std::max(w, n.node.size());
  std::cout << std::left << std::setw(static_cast<int>(w)) << "NODE"
            << "  " << std::setw(5) << "STATE"
            << "  " << std::setw(40) << "VALUE"
            << "  "
            << "TTL\n";
  for (const auto& n : res.nodes) {
    std::string value = n.value ? printable(*n.value)
                                : (n.type.empty() || n.type == "none" ? "-" : "(" + n.type + ")");
    // A key without an expiry is a lock nobody's crash will ever free: say so, rather than show
    // the "-" of a node that has no key at all.
    const bool key_present = n.up && !n.type.empty() && n.type != "none";
    std::string ttl = n.pttl        ? std::to_string(n.pttl->count()) + "ms"
                      : key_present ? "no expiry"
                                    : "-";
    std::cout << std::left << std::setw(static_cast<int>(w)) << n.node << "  " << std::setw(5)
              << (n.up ? "up" : "down") << "  " << std::setw(40) << value << "  " << ttl;
    if (!n.detail.empty()) std::cout << "  (" << n.detail << ")";
    std::cout << "\n";
    print_lock_details(n, g.verbose);
  }
  return exit_code;
}

}  // namespace

Command status_command(const Globals& g) {
  auto resource = std::make_shared<std::string>();
  return {
      .name = "status",
      .description = "Say whether a resource is locked, and what every node stores for it",
      .footer =
          "The first line is the verdict: held on a quorum (by which token, for how long), free,\n"
          "partly held (keys, but no token on a quorum: no one holds it), or no quorum to tell.\n"
          "Exit status: 0 held, 1 free or partly held, 2 usage, 3 no quorum to tell, 5 refused "
          "(the nodes refused our password, ACL permissions or TLS).",
      .options = {{.names = "resource",
                   .target = resource.get(),
                   .help = "Resource name",
                   .required = true}},
      .run = [resource, &g] { return run_status(*resource, g); },
      .storage = resource,
  };
}

}  // namespace redlock::cli
