#pragma once
// What one node can do beyond plain commands, probed at each (re)connect: a failover or an upgrade
// changes the server behind an address, so a capability is never remembered across connections,
// and never guessed from a version string (a proxy may report one server's version and forward to
// another, and managed offerings rename or remove commands).
//
// The probe asks the server about its own commands: `COMMAND INFO` answers one element per name
// asked, nil for a command the server does not have (also one removed by `rename-command EVAL ""`),
// and `COMMAND DOCS SET` lists SET's arguments, among them the token IFEQ where SET has it. A
// user without +command permission gets NOPERM: the node is then "not probed" and keeps using
// scripts, as every node did before the probe existed. Pure parsing, no I/O.

#include <string>
#include <vector>

#include "core/reply.hpp"

namespace redlock::detail {

struct Capabilities {
  bool probed = false;      // false: not asked, or the probe was refused/unreadable -> use scripts
  bool scripts = true;      // EVAL and EVALSHA exist (not renamed away)
  bool set_ifeq = false;    // SET key value IFEQ cmp PX ms   (Valkey >= 8.1, Redis >= 8.4)
  bool delifeq = false;     // DELIFEQ key value               (Valkey >= 9.0)
  bool delex_ifeq = false;  // DELEX key IFEQ value            (Redis >= 8.4)

  // A compare-and-delete without a script (DELIFEQ preferred: its reply needs no second look).
  [[nodiscard]] bool native_release() const noexcept { return probed && (delifeq || delex_ifeq); }
  // A compare-and-set-ttl without a script.
  [[nodiscard]] bool native_extend() const noexcept { return probed && set_ifeq; }

  friend bool operator==(const Capabilities&, const Capabilities&) = default;
};

// The probe's commands, to send in this order at each (re)connect (encoded argument lists).
[[nodiscard]] std::vector<std::vector<std::string>> capability_probe_commands();
// Reads the probe's replies (same order). Never throws; an error reply or an unreadable shape
// leaves the affected capability false (scripts stay the safe choice).
[[nodiscard]] Capabilities parse_capabilities(const std::vector<Reply>& replies);
// "scripts, SET IFEQ, DELIFEQ" style, for status -v / doctor / logs.
[[nodiscard]] std::string describe(const Capabilities&);

}  // namespace redlock::detail
