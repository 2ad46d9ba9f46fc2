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
  expired,   // a quorum answered OK but the validity was used up (or the lock's deadline passed)
  not_held,  // release/extend: the token is held on too few nodes
  invalid_argument,  // bad resource, ttl or options; nothing was sent
  cancelled,         // the caller cancelled the operation
  shutdown,          // the client/engine was closed before the operation finished
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
