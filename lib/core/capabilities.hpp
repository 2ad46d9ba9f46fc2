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

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/command.hpp"
#include "core/reply.hpp"
#include "redlock/options.hpp"

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

// Native commands: the documented compare-and-delete and compare-and-pexpire of a plain lock
// (the release script with one key and no wake channel, the extend script with one key) have a
// native form on nodes that have one; every other script call keeps its script. A release that
// also wakes waiters (release_waking: it names one and takes it off the waiting mark in the same
// step) runs natively only where the node refuses scripts (no waiter can have marked itself
// there: marking is a script) or where commands=native asks for it (waiters then poll).
enum class NativeKind { none, release, release_waking, extend };
enum class NativeForm { delifeq, delex_ifeq, set_ifeq };
inline constexpr std::size_t native_form_count = 3;
[[nodiscard]] NativeKind native_kind(const Command& call) noexcept;
// Whether a node with `caps` runs a call of `kind` natively when `commands` asks so: the form,
// or nullopt for the script.
[[nodiscard]] std::optional<NativeForm> chosen_form(NativeKind kind, const Capabilities& caps,
                                                    Options::Commands commands) noexcept;
// The form a node with `caps` runs a call of `kind` in (DELIFEQ before DELEX: its reply needs no
// second look), or nullopt when it has none.
[[nodiscard]] std::optional<NativeForm> native_form(NativeKind kind,
                                                    const Capabilities& caps) noexcept;
// The native command for `call` (native_kind(call) matches `form`): DELIFEQ key token,
// DELEX key IFEQ token, SET key token IFEQ token PX ms. SET IFEQ never creates a missing key.
[[nodiscard]] Command native_command(const Command& call, NativeForm form);
// The native command's reply as the script's, so that each node's answer is classified the same
// way whichever form it ran: SET IFEQ's OK is 1 and its nil 0; the deletes' integers are already
// the script's (1 deleted, 0 not ours or gone). Anything else is left as it came.
void to_script_reply(NativeForm form, Reply& reply);
// An error reply to a native command that says the server does not run it (an old proxy in
// front of a new server, an ACL without the command): unknown command, syntax error, NOPERM. The
// command did not run: the script is sent instead.
[[nodiscard]] bool refuses_native(const Reply& reply) noexcept;
[[nodiscard]] std::string_view name(NativeForm form) noexcept;

// How a node's per-node record says that a command cannot run there at all (a script on a node
// that refuses them, a native command forced on one without it): the start of its detail. The
// quorum counts such a node as refused by configuration (retrying cannot help).
inline constexpr std::string_view cannot_run_prefix = "cannot run here: ";
// Why `call` (of native kind `kind`) cannot run on the node `node` with `caps` as `commands`
// asks, or nullopt when it can (also whenever the node was not probed: it is sent as before).
// The text starts with cannot_run_prefix and names the node and what is missing.
[[nodiscard]] std::optional<std::string> cannot_run(const Command& call, NativeKind kind,
                                                    const Capabilities& caps,
                                                    Options::Commands commands,
                                                    std::string_view node);

}  // namespace redlock::detail
