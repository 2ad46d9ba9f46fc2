#pragma once
// Error codes for the outcomes a caller can tell apart, and the per-node record that explains them.

#include <chrono>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "redlock/export.hpp"

namespace redlock {

enum class Errc {
  contended = 1,  // enough nodes hold the key for someone else that a quorum was impossible
  no_quorum,      // not enough nodes answered OK because of failures (down, timeout, errors)
  expired,   // the validity was used up before a quorum answered OK (or the lock's deadline passed)
  not_held,  // release/extend: the token is held on too few nodes
  invalid_argument,  // bad resource, ttl or options; nothing was sent
  cancelled,         // the caller cancelled the operation
  shutdown,          // the client/engine was closed before the operation finished
  // Enough nodes refused this client's configuration that no quorum is possible until it is
  // fixed, so nothing is retried: credentials or database refused (AUTH, SELECT), a permission
  // the ACL user lacks (NOPERM), or TLS (the server's certificate failed verification, or the
  // server refused ours). The per-node record says which.
  refused,
};

[[nodiscard]] REDLOCK_API const std::error_category& category() noexcept;
[[nodiscard]] REDLOCK_API std::error_code make_error_code(Errc e) noexcept;

// What one node said during one operation.
enum class NodeState {
  ok,             // acquired / extended / released here
  held_by_other,  // acquire: the key exists with another value
  not_held,       // release/extend: our token is not there
  timeout,        // no answer within node_timeout (the command may still have run)
  down,           // not connected
  error,          // an error reply (READONLY, OOM, WRONGTYPE, NOAUTH, ...): see detail
  excluded,       // answered OK but the vote was not counted (restart guard): see detail
  pending,        // had not answered when the outcome was decided (its answer is still handled)
  auth_failed,    // the server refused this client's credentials or database (AUTH, ACL, SELECT):
                  // nothing was sent after that on this connection; detail has the server's words
};

[[nodiscard]] REDLOCK_API const char* to_string(NodeState s) noexcept;

struct NodeOutcome {
  std::string node;  // display address, never with a password
  NodeState state = NodeState::down;
  // Error text or reason for exclusion; empty when nothing to add. A server's own words are
  // made safe to print: at most 200 bytes, control characters and non-UTF-8 bytes as "\xNN", an
  // echo of the command's arguments cut off, runs of 32+ hex digits (tokens) as "<hex>".
  std::string detail;
  std::chrono::microseconds latency{0};  // from send to answer (or to the deadline)
};

// The per-node record of one operation in a few words, for a one-line message: each state with
// its count, in NodeState order ("3 ok, 2 timeout"), and with a failed state its reason, so that
// the line names the cause without the per-node table. When every node in the state gave the
// same reason: "3 down: TLS handshake failed: certificate verify failed: certificate has
// expired"; else the most common reason with its count: "3 down (2 of them: Connection
// refused)"; when no reason repeats, the first with its node: "2 excluded (10.0.0.5:6379:
// restart guard: ...; ...)". A reason is cut at 120 bytes; an exclusion's "(N ms left)", which
// differs on every node, is left out. The library's error messages end with this summary.
[[nodiscard]] REDLOCK_API std::string summarize(const std::vector<NodeOutcome>& nodes);

// Thrown by the throwing overloads. Carries the same per-node record as the result types.
class REDLOCK_API Error : public std::system_error {
 public:
  Error(std::error_code ec, const std::string& what, std::vector<NodeOutcome> nodes)
      : std::system_error(ec, what), nodes_(std::move(nodes)) {}
  [[nodiscard]] const std::vector<NodeOutcome>& nodes() const noexcept { return nodes_; }

 private:
  std::vector<NodeOutcome> nodes_;
};

}  // namespace redlock

template <>
struct std::is_error_code_enum<redlock::Errc> : std::true_type {};
