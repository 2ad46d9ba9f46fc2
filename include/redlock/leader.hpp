#pragma once
// Who leads an election (redlock/election.hpp): the value types a leader read hands out, shared
// by the Engine (async) and the Election (blocking, observe).

#include <cstdint>
#include <optional>
#include <string>
#include <system_error>

#include "redlock/export.hpp"
#include "redlock/options.hpp"

namespace redlock {

// A leader, as a quorum of the nodes stores it: the same identity, token and settled term on each.
struct Leader {
  std::string id;          // the identity it campaigned with
  std::uint64_t term = 0;  // its term: its fence, grown strictly from leader to leader
  Millis since{0};         // how long it has led, by the nodes' clocks (the quorum-th longest)
  Millis validity{0};      // until fewer than a quorum hold it, unless it is extended
};

struct LeaderResult {
  // Empty: a quorum answered and `leader` says who leads. Errc::no_quorum: too few nodes answered
  // to tell (those that did not could hold or not hold a leader's record).
  std::error_code error;
  std::string message;
  std::optional<Leader> leader;  // nullopt: nobody leads (no identity holds on a quorum)
  int answered = 0;              // nodes that answered the read
  int nodes = 0;                 // nodes asked
  [[nodiscard]] explicit operator bool() const noexcept { return !error; }
};

// Whether two reads tell the same thing: both unknown, both nobody, or the same leader's term.
// (A term is given once: the same term is the same leadership.) What observe reports changes of.
[[nodiscard]] REDLOCK_API bool same_leadership(const LeaderResult& a,
                                               const LeaderResult& b) noexcept;

// The largest identity accepted, in bytes.
inline constexpr std::size_t max_identity_bytes = 256;
// Why `id` cannot be a candidate's identity (empty, longer than max_identity_bytes, or with a
// control character, so that every line that prints it stays one line), naming it; or nullopt.
[[nodiscard]] REDLOCK_API std::optional<std::string> check_identity(std::string_view id);

}  // namespace redlock
