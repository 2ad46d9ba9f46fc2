#pragma once
// A command as a value: what a lock kind asks a node to run. The net layer encodes it (RESP) into
// each node's write buffer; a script call goes out as EVALSHA and, after NOSCRIPT, once as EVAL.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/scripts.hpp"

namespace redlock::detail {

struct Command {
  // Set: EVALSHA <sha> <numkeys> <args...> (the first `numkeys` args are keys).
  // Unset: `args` is the whole command line (e.g. SET k v NX PX 100).
  std::optional<ScriptId> script;
  int numkeys = 0;
  std::vector<std::string> args;

  // (Room for a few more args up front: a lock command is built per attempt.)
  static Command plain(std::initializer_list<std::string_view> argv) {
    Command c;
    c.args.reserve(argv.size() + 2);
    for (auto a : argv) c.args.emplace_back(a);
    return c;
  }
  static Command call(ScriptId id, std::vector<std::string> keys) {
    Command c;
    c.script = id;
    c.numkeys = static_cast<int>(keys.size());
    c.args = std::move(keys);
    c.args.reserve(c.args.size() + 5);
    return c;
  }
  // On a temporary (`return Command::plain({...}).arg(ttl);`) these return it as an rvalue, so
  // the command is moved into the caller's, not copied: a copy was three allocations of every
  // acquire and every release.
  Command& arg(std::string_view a) & {
    args.emplace_back(a);
    return *this;
  }
  Command& arg(long long v) & {
    args.push_back(std::to_string(v));
    return *this;
  }
  Command&& arg(std::string_view a) && { return std::move(arg(a)); }
  Command&& arg(long long v) && { return std::move(arg(v)); }
};

}  // namespace redlock::detail
