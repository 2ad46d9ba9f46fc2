#pragma once
// `redlock-cli doctor`: the checks of one vote's servers (doctor_server.cpp), of the ACL of the
// connecting user (doctor_acl.cpp) and of Sentinel and Cluster votes (doctor_votes.cpp);
// doctor.cpp runs them on every vote, compares the clocks, gives the verdict and prints.
//
// Every check talks to the servers over the tools' synchronous client (nodes/client.hpp) and
// reads their answers with the library's own parsers (lib/core): a server is an input, and its
// text reaches the report only through server_text().

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/capabilities.hpp"
#include "core/reply.hpp"
#include "nodes/client.hpp"
#include "redlock/options.hpp"

namespace redlock::cli::doctor {

// A check that could not be made (CONFIG refused on a managed offering, INFO refused to the user)
// is `skip`: it is said, and it does not count against the node.
enum class Level { ok, skip, warn, fail };
[[nodiscard]] const char* to_string(Level level);

struct Check {
  std::string name;  // "reachable", "role", "persistence", "acl-plain", ...
  Level level = Level::ok;
  std::string message;
  std::string brief;  // a word or two for the node's line ("aof always", "noeviction")
};

// The node's clock against ours: one TIME, halfway through its round trip.
struct ClockSample {
  double offset_ms = 0;  // the node's time minus ours
  double rtt_ms = 0;
};

// What the checks of one vote found.
struct VoteReport {
  std::string node;    // the address as configured (never with a password)
  std::string server;  // "redis" / "valkey" (empty when unknown)
  std::string version;
  std::string role;
  std::vector<Check> checks;
  // One per server checked (a cluster vote has one per master), with the prefix of its messages.
  std::vector<std::pair<std::string, ClockSample>> clocks;
  // Refused by configuration, as cli.md's exit 5: AUTH refused, TLS verification failed, or the
  // lock commands refused to the user (ACL).
  bool refused = false;

  void add(std::string name, Level level, std::string message, std::string brief = {}) {
    checks.push_back({std::move(name), level, std::move(message), std::move(brief)});
  }
  [[nodiscard]] Level worst() const;
};

// How long doctor waits: the library's deadlines are tuned for locking (50 ms a command), a check
// may wait longer for a slow server before it calls it down.
struct Deadlines {
  std::chrono::milliseconds connect{1000};
  std::chrono::milliseconds command{1000};
};

struct Context {
  const Options& options;
  Deadlines deadlines;
  std::chrono::milliseconds drift_allowance{0};  // drift_factor * default ttl + 2 ms
};

// Connects to the server `a` (a plain server address: its own credentials and TLS) and runs every
// check of one server on it, adding them to `report`. `prefix` goes before each message (a
// cluster vote's master says which it is). `tls_name`: the name a discovered server's
// certificate must carry (trust_discovered), empty for the address's own.
void check_server(const Context& ctx, const NodeAddress& a, VoteReport& report,
                  const std::string& prefix = {}, const std::string& tls_name = {});

// The ACL checks of the connected user, per feature (doctor_acl.cpp). Plain locks need no script
// on a node that has native compare-and-delete and compare-and-set-ttl (`caps`).
void check_acl(const Context& ctx, nodes::SyncClient& c, const NodeAddress& a,
               const detail::Capabilities& caps, VoteReport& report, const std::string& prefix);

// The server checks that follow from INFO and CONFIG (doctor_server.cpp, for doctor_acl.cpp).
[[nodiscard]] std::optional<std::string> config_get(nodes::SyncClient& c, const std::string& name,
                                                    std::string& why_not);

// A Sentinel vote: the master the sentinels name, how many agree, their quorum; then the master's
// server checks. A Cluster vote: its state, the slots served, the masters; then each master's.
void check_sentinel_vote(const Context& ctx, const NodeAddress& vote, VoteReport& report);
void check_cluster_vote(const Context& ctx, const NodeAddress& vote, VoteReport& report);

// A server's error text as it may be shown.
[[nodiscard]] std::string shown(const nodes::Reply& r);

}  // namespace redlock::cli::doctor
