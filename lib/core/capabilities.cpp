#include "core/capabilities.hpp"

#include <array>
#include <cstddef>
#include <string_view>

namespace redlock::detail {

namespace {

// The commands asked about with COMMAND INFO, in the order of its answer's elements.
constexpr std::array<std::string_view, 4> asked = {"DELIFEQ", "DELEX", "EVAL", "EVALSHA"};
enum : std::size_t { delifeq_at, delex_at, eval_at, evalsha_at };

bool is_text(const Reply& r) noexcept {
  return r.type == Reply::Type::string || r.type == Reply::Type::status;
}

bool equal_ignoring_case(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

enum class Known { present, absent, unreadable };

// One element of COMMAND INFO's answer: nil when the server has no such command, else an array
// whose first element is the command's name.
Known command_known(const Reply& r, std::string_view name) noexcept {
  if (r.type == Reply::Type::nil) return Known::absent;
  if (r.type == Reply::Type::array && !r.elements.empty() && is_text(r.elements[0]) &&
      equal_ignoring_case(r.elements[0].str, name))
    return Known::present;
  return Known::unreadable;
}

// The value after `key` in a flat field/value array (how RESP2 sends a map), or nullptr.
const Reply* field(const Reply& map, std::string_view key) noexcept {
  if (map.type != Reply::Type::array) return nullptr;
  for (std::size_t i = 0; i + 1 < map.elements.size(); i += 2) {
    if (is_text(map.elements[i]) && map.elements[i].str == key) return &map.elements[i + 1];
  }
  return nullptr;
}

// Whether an argument list of COMMAND DOCS (each argument a field/value array, a block or oneof
// nesting its own "arguments") has an argument whose token is `token`. Depth-bounded: the reader
// bounds nesting too, but this must not trust it to.
bool has_token(const Reply& arguments, std::string_view token, int depth) noexcept {
  if (depth > 8 || arguments.type != Reply::Type::array) return false;
  for (const auto& argument : arguments.elements) {
    const Reply* t = field(argument, "token");
    if (t != nullptr && is_text(*t) && equal_ignoring_case(t->str, token)) return true;
    const Reply* nested = field(argument, "arguments");
    if (nested != nullptr && has_token(*nested, token, depth + 1)) return true;
  }
  return false;
}

// COMMAND DOCS SET answers {"set", {..., "arguments", [...]}}.
bool set_has_ifeq(const Reply& docs) noexcept {
  if (docs.type != Reply::Type::array) return false;
  for (std::size_t i = 0; i + 1 < docs.elements.size(); i += 2) {
    if (!is_text(docs.elements[i]) || !equal_ignoring_case(docs.elements[i].str, "set")) continue;
    const Reply* arguments = field(docs.elements[i + 1], "arguments");
    return arguments != nullptr && has_token(*arguments, "IFEQ", 0);
  }
  return false;
}

}  // namespace

std::vector<std::vector<std::string>> capability_probe_commands() {
  std::vector<std::string> info = {"COMMAND", "INFO"};
  for (auto name : asked) info.emplace_back(name);
  return {std::move(info), {"COMMAND", "DOCS", "SET"}};
}

Capabilities parse_capabilities(const std::vector<Reply>& replies) {
  Capabilities caps;
  if (replies.empty()) return caps;
  const Reply& info = replies[0];
  if (info.type != Reply::Type::array || info.elements.size() != asked.size()) return caps;
  std::array<Known, asked.size()> known{};
  for (std::size_t i = 0; i < asked.size(); ++i) {
    known[i] = command_known(info.elements[i], asked[i]);
  }
  caps.probed = true;
  caps.delifeq = known[delifeq_at] == Known::present;
  caps.delex_ifeq = known[delex_at] == Known::present;
  // Only a clear "no such command" takes scripts away: anything unreadable keeps them.
  caps.scripts = known[eval_at] != Known::absent && known[evalsha_at] != Known::absent;
  caps.set_ifeq = replies.size() > 1 && set_has_ifeq(replies[1]);
  return caps;
}

NativeKind native_kind(const Command& call) noexcept {
  if (!call.script) return NativeKind::none;
  if (*call.script == ScriptId::release) {
    if (call.numkeys == 1 && call.args.size() == 2) return NativeKind::release;
    // KEYS lock, mark, queue, heartbeats, handoff; ARGV token, channel (LockKind::release with
    // wake). With a handed waiter (a third ARGV) the release also clears that waiter's
    // registration: script only.
    if (call.numkeys == 5 && call.args.size() == 7) return NativeKind::release_waking;
    return NativeKind::none;
  }
  if (*call.script == ScriptId::extend && call.numkeys == 1 && call.args.size() == 3)
    return NativeKind::extend;
  return NativeKind::none;
}

std::optional<NativeForm> native_form(NativeKind kind, const Capabilities& caps) noexcept {
  if (!caps.probed) return std::nullopt;
  if (kind == NativeKind::release || kind == NativeKind::release_waking) {
    if (caps.delifeq) return NativeForm::delifeq;
    if (caps.delex_ifeq) return NativeForm::delex_ifeq;
  }
  if (kind == NativeKind::extend && caps.set_ifeq) return NativeForm::set_ifeq;
  return std::nullopt;
}

std::optional<NativeForm> chosen_form(NativeKind kind, const Capabilities& caps,
                                      Options::Commands commands) noexcept {
  if (commands == Options::Commands::scripts) return std::nullopt;
  const auto form = native_form(kind, caps);
  if (kind == NativeKind::release_waking && commands == Options::Commands::automatic &&
      caps.scripts)
    return std::nullopt;
  return form;
}

Command native_command(const Command& call, NativeForm form) {
  const std::string_view key = call.args[0];
  const std::string_view token = call.args[static_cast<std::size_t>(call.numkeys)];
  switch (form) {
    case NativeForm::delifeq:
      return Command::plain({"DELIFEQ", key, token});
    case NativeForm::delex_ifeq:
      return Command::plain({"DELEX", key, "IFEQ", token});
    case NativeForm::set_ifeq:
      return Command::plain({"SET", key, token, "IFEQ", token, "PX", call.args[2]});
  }
  return {};
}

void to_script_reply(NativeForm form, Reply& reply) {
  if (form != NativeForm::set_ifeq) return;
  if (reply.is_status("OK")) {
    reply = Reply{Reply::Type::integer, 1, {}, {}};
  } else if (reply.type == Reply::Type::nil) {
    reply = Reply{Reply::Type::integer, 0, {}, {}};
  }
}

bool refuses_native(const Reply& reply) noexcept {
  return reply.is_error() &&
         (reply.str.starts_with("ERR unknown command") ||
          reply.str.starts_with("ERR syntax error") ||
          reply.str.starts_with("ERR unknown subcommand") || reply.str.starts_with("NOPERM"));
}

namespace {

std::string_view needs_script(ScriptId id) {
  switch (id) {
    case ScriptId::acquire_fenced:
    case ScriptId::fence_raise:
      return "a fenced lock";
    case ScriptId::acquire_multi:
    case ScriptId::release_multi:
    case ScriptId::extend_multi:
      return "a lock over several resources";
    case ScriptId::acquire_read:
    case ScriptId::acquire_write:
    case ScriptId::release_read:
    case ScriptId::extend_read:
      return "a read-write lock";
    case ScriptId::ticket_take:
    case ScriptId::acquire_fair:
    case ScriptId::fair_leave:
    case ScriptId::fair_rollback:
      return "a fair lock";
    case ScriptId::mark_waiting:
      return "a wake-up mark";
    case ScriptId::status:
      return "status";
    default:
      return "this command";
  }
}

}  // namespace

std::optional<std::string> cannot_run(const Command& call, NativeKind kind,
                                      const Capabilities& caps, Options::Commands commands,
                                      std::string_view node) {
  if (!caps.probed) return std::nullopt;
  // Built only for an answer: this runs for every command sent to every node.
  const auto at = [node] { return std::string(cannot_run_prefix) + std::string(node) + " "; };
  if (kind != NativeKind::none) {
    const bool native = chosen_form(kind, caps, commands).has_value();
    if (commands == Options::Commands::native && !native) {
      return at() + "has no " +
             (kind == NativeKind::extend ? "SET IFEQ" : "DELIFEQ or DELEX IFEQ") +
             " (commands=native; it has: " + describe(caps) + ")";
    }
    if (!native && !caps.scripts) {
      return at() + "refuses scripts (EVAL/EVALSHA) and has no " +
             (kind == NativeKind::extend ? "SET IFEQ" : "DELIFEQ or DELEX IFEQ") +
             (commands == Options::Commands::scripts ? " allowed (commands=scripts)" : "");
    }
    return std::nullopt;
  }
  if (call.script && !caps.scripts) {
    return at() + "refuses scripts (EVAL/EVALSHA), and " + std::string(needs_script(*call.script)) +
           " needs one";
  }
  return std::nullopt;
}

std::string_view name(NativeForm form) noexcept {
  switch (form) {
    case NativeForm::delifeq:
      return "DELIFEQ";
    case NativeForm::delex_ifeq:
      return "DELEX IFEQ";
    case NativeForm::set_ifeq:
      return "SET IFEQ";
  }
  return "?";
}

std::string describe(const Capabilities& caps) {
  if (!caps.probed) return "not probed (scripts)";
  std::string out;
  auto add = [&out](std::string_view what) {
    if (!out.empty()) out += ", ";
    out += what;
  };
  if (caps.scripts) add("scripts");
  if (caps.set_ifeq) add("SET IFEQ");
  if (caps.delifeq) add("DELIFEQ");
  if (caps.delex_ifeq) add("DELEX IFEQ");
  return out.empty() ? "none" : out;
}

}  // namespace redlock::detail
