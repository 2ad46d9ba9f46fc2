// Fuzz target: a node's answers to the capability probe (core/capabilities.hpp), through the
// reader, into parse_capabilities() and describe(). In-process: no server, no socket.
//
// Input: what the server sent (RESP); its first two complete replies are the answers to
// COMMAND INFO and COMMAND DOCS SET. Invariants (checked on the replies independently):
// - the node counts as probed exactly when the first reply is an array of 4 elements; a node
//   not probed claims nothing and keeps scripts;
// - DELIFEQ / DELEX only from an element that is an array naming that command (any case);
//   scripts are taken away only by a nil for EVAL or EVALSHA;
// - SET IFEQ only when the second reply carries the text IFEQ (any case) somewhere;
// - describe() is non-empty printable ASCII naming exactly the capabilities claimed;
// - applied (chosen_form, cannot_run): a native form only for a capability claimed and never
//   with commands=scripts; a call that cannot run is refused with the node's name, and a plain
//   SET NX is never refused.
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/capabilities.hpp"
#include "core/kinds.hpp"
#include "fuzz_check.hpp"
#include "net/reader.hpp"

using namespace redlock;
using namespace redlock::detail;
using redlock::net::Reader;

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool names(const Reply& r, std::string_view name) {
  return r.type == Reply::Type::array && !r.elements.empty() &&
         (r.elements[0].type == Reply::Type::string || r.elements[0].type == Reply::Type::status) &&
         lower(r.elements[0].str) == name;
}

bool mentions_ifeq(const Reply& r) {
  if (lower(r.str) == "ifeq") return true;
  for (const auto& e : r.elements) {
    if (mentions_ifeq(e)) return true;
  }
  return false;
}

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::string what = fuzz::show(bytes.substr(0, 300));
  std::vector<Reply> replies;
  Reader reader;
  if (reader.feed(bytes.data(), bytes.size())) {
    while (replies.size() < 2 && reader.next() == Reader::Next::reply)
      replies.push_back(reader.reply());
  }

  const Capabilities caps = parse_capabilities(replies);
  const bool probed =
      !replies.empty() && replies[0].type == Reply::Type::array && replies[0].elements.size() == 4;
  FUZZ_CHECK(caps.probed == probed, what);
  if (!probed) {
    FUZZ_CHECK(caps == Capabilities{}, what + ": a node not probed claims something");
  } else {
    const auto& e = replies[0].elements;
    FUZZ_CHECK(caps.delifeq == names(e[0], "delifeq"), what + ": DELIFEQ");
    FUZZ_CHECK(caps.delex_ifeq == names(e[1], "delex"), what + ": DELEX");
    FUZZ_CHECK(caps.scripts == (e[2].type != Reply::Type::nil && e[3].type != Reply::Type::nil),
               what + ": scripts");
    FUZZ_CHECK(!caps.set_ifeq || (replies.size() == 2 && mentions_ifeq(replies[1])),
               what + ": SET IFEQ from nothing");
  }
  FUZZ_CHECK(caps.native_release() == (caps.probed && (caps.delifeq || caps.delex_ifeq)), what);
  FUZZ_CHECK(caps.native_extend() == (caps.probed && caps.set_ifeq), what);

  using C = Options::Commands;
  const std::vector<std::string> keys{"k"};
  const auto& plain = kind_for_lock(LockMode::exclusive, 1);
  const Command calls[] = {plain.release(keys, "t", false), plain.release(keys, "t", true),
                           plain.extend(keys, "t", Millis{1000}),
                           plain.acquire(AttemptArgs{keys, "t", Millis{1000}}),
                           kind_for_lock(LockMode::read, 1).release(keys, "t", false)};
  for (const auto& call : calls) {
    const auto kind = native_kind(call);
    for (auto commands : {C::automatic, C::scripts, C::native}) {
      const auto form = chosen_form(kind, caps, commands);
      if (form) {
        FUZZ_CHECK(caps.probed && commands != C::scripts, what);
        FUZZ_CHECK(*form == NativeForm::delifeq      ? caps.delifeq
                   : *form == NativeForm::delex_ifeq ? caps.delex_ifeq
                                                     : caps.set_ifeq,
                   what + ": a form not claimed");
      }
      const auto why = cannot_run(call, kind, caps, commands, "node-x");
      if (why) {
        FUZZ_CHECK(why->starts_with(cannot_run_prefix) && contains(*why, "node-x"), *why);
        FUZZ_CHECK(!form, what + ": a form chosen for a call that cannot run");
      }
      if (!call.script) FUZZ_CHECK(!why, what + ": SET NX refused");
      if (!caps.probed) FUZZ_CHECK(!why && !form, what + ": a node not probed");
    }
  }

  const std::string text = describe(caps);
  FUZZ_CHECK(!text.empty(), what);
  for (char c : text) FUZZ_CHECK(c >= 0x20 && c < 0x7f, what + ": describe() " + fuzz::show(text));
  if (caps.probed) {
    FUZZ_CHECK(contains(text, "scripts") == caps.scripts, text);
    FUZZ_CHECK(contains(text, "SET IFEQ") == caps.set_ifeq, text);
    FUZZ_CHECK(contains(text, "DELIFEQ") == caps.delifeq, text);
    FUZZ_CHECK(contains(text, "DELEX IFEQ") == caps.delex_ifeq, text);
  }
  return 0;
}
