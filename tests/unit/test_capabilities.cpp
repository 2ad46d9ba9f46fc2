// What a node can do (core/capabilities.hpp), read from what real servers answered to the probe:
// the .resp files next to this one were recorded from Valkey 9.1.2, Redis 8.0.6, Redis 7.0.15 and
// Valkey 9.1.2 started with `--rename-command EVAL "" --rename-command EVALSHA ""`.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/capabilities.hpp"
#include "core/kinds.hpp"
#include "core/quorum.hpp"
#include "core/reply.hpp"
#include "net/reader.hpp"

using namespace redlock;
using namespace redlock::detail;

namespace {

std::vector<Reply> recorded(const std::string& name) {
  std::ifstream in(
      std::string(REDLOCK_SOURCE_ROOT) + "/tests/unit/replies/capabilities-" + name + ".resp",
      std::ios::binary);
  REQUIRE(in);
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  net::Reader reader;
  REQUIRE(reader.feed(bytes.data(), bytes.size()));
  std::vector<Reply> out;
  while (reader.next() == net::Reader::Next::reply) out.push_back(reader.reply());
  REQUIRE(out.size() == 2);
  return out;
}

Reply nil() { return Reply{}; }
Reply error(std::string s) { return Reply{Reply::Type::error, 0, std::move(s), {}}; }
Reply integer(long long v) { return Reply{Reply::Type::integer, v, {}, {}}; }
Reply bulk(std::string s) { return Reply{Reply::Type::string, 0, std::move(s), {}}; }
Reply array(std::vector<Reply> e) { return Reply{Reply::Type::array, 0, {}, std::move(e)}; }
Reply command(std::string name) { return array({bulk(std::move(name)), integer(3)}); }

// COMMAND DOCS SET with one oneof argument holding `token`.
Reply docs_with(std::string token) {
  return array(
      {bulk("set"),
       array({bulk("summary"), bulk("Sets the string value of a key"), bulk("arguments"),
              array({array({bulk("name"), bulk("key"), bulk("type"), bulk("key")}),
                     array({bulk("name"), bulk("condition"), bulk("type"), bulk("oneof"),
                            bulk("arguments"),
                            array({array({bulk("name"), bulk("nx"), bulk("token"), bulk("NX")}),
                                   array({bulk("name"), bulk("cmp"), bulk("token"),
                                          bulk(std::move(token))})})})})})});
}

}  // namespace

TEST_CASE("capabilities: the probe is COMMAND INFO of four commands, then COMMAND DOCS SET") {
  const auto probe = capability_probe_commands();
  REQUIRE(probe.size() == 2);
  CHECK(probe[0] ==
        std::vector<std::string>{"COMMAND", "INFO", "DELIFEQ", "DELEX", "EVAL", "EVALSHA"});
  CHECK(probe[1] == std::vector<std::string>{"COMMAND", "DOCS", "SET"});
}

TEST_CASE("capabilities: what real servers answered") {
  SUBCASE("Valkey 9.1: scripts, SET IFEQ and DELIFEQ") {
    const auto caps = parse_capabilities(recorded("valkey-9.1"));
    CHECK(caps == Capabilities{true, true, true, true, false});
    CHECK(describe(caps) == "scripts, SET IFEQ, DELIFEQ");
    CHECK(caps.native_release());
    CHECK(caps.native_extend());
  }
  SUBCASE("Valkey 9.1 with EVAL and EVALSHA renamed away: no scripts") {
    const auto caps = parse_capabilities(recorded("valkey-9.1-no-eval"));
    CHECK(caps == Capabilities{true, false, true, true, false});
    CHECK(describe(caps) == "SET IFEQ, DELIFEQ");
  }
  SUBCASE("Redis 8.0 (its SET history mentions no IFEQ) and Redis 7.0: scripts only") {
    for (const char* name : {"redis-8.0", "redis-7.0"}) {
      CAPTURE(name);
      const auto caps = parse_capabilities(recorded(name));
      CHECK(caps == Capabilities{true, true, false, false, false});
      CHECK(describe(caps) == "scripts");
      CHECK_FALSE(caps.native_release());
      CHECK_FALSE(caps.native_extend());
    }
  }
}

TEST_CASE("capabilities: DELEX (Redis >= 8.4, no such server here) is read like DELIFEQ") {
  const auto caps = parse_capabilities(
      {array({nil(), command("delex"), command("eval"), command("evalsha")}), docs_with("IFEQ")});
  CHECK(caps == Capabilities{true, true, true, false, true});
  CHECK(describe(caps) == "scripts, SET IFEQ, DELEX IFEQ");
  CHECK(caps.native_release());
}

TEST_CASE("capabilities: a refused or unreadable probe leaves the node on scripts") {
  const Capabilities scripts_only{};
  CHECK_FALSE(scripts_only.native_release());
  CHECK(describe(scripts_only) == "not probed (scripts)");
  SUBCASE("a user without +command gets NOPERM") {
    const auto caps = parse_capabilities(
        {error("NOPERM User u has no permissions to run the 'command|info' command"),
         error("NOPERM User u has no permissions to run the 'command|docs' command")});
    CHECK(caps == scripts_only);
  }
  SUBCASE("no replies, or fewer elements than commands asked") {
    CHECK(parse_capabilities({}) == scripts_only);
    CHECK(parse_capabilities({array({command("delifeq")}), docs_with("IFEQ")}) == scripts_only);
    CHECK(parse_capabilities({integer(4), docs_with("IFEQ")}) == scripts_only);
  }
  SUBCASE("an element that is neither nil nor the command asked about claims nothing") {
    const auto caps = parse_capabilities(
        {array({command("get"), integer(1), array({}), bulk("evalsha")}), error("ERR docs")});
    CHECK(caps.probed);
    CHECK_FALSE(caps.delifeq);
    CHECK_FALSE(caps.delex_ifeq);
    CHECK_FALSE(caps.set_ifeq);
    CHECK(caps.scripts);  // only a clear nil takes scripts away
  }
  SUBCASE("only a nil takes scripts away; one of the two is enough") {
    const auto caps = parse_capabilities(
        {array({command("DELIFEQ"), nil(), command("EVAL"), nil()}), docs_with("ifeq")});
    CHECK(caps == Capabilities{true, false, true, true, false});
  }
  SUBCASE("IFEQ only as a token counts (not in a summary, not under another command)") {
    auto docs = docs_with("IFNE");
    docs.elements[1].elements[1] = bulk("IFEQ");
    CHECK_FALSE(parse_capabilities({array({nil(), nil(), nil(), nil()}), docs}).set_ifeq);
    auto other = docs_with("IFEQ");
    other.elements[0] = bulk("get");
    CHECK_FALSE(parse_capabilities({array({nil(), nil(), nil(), nil()}), other}).set_ifeq);
    CHECK(describe(parse_capabilities({array({nil(), nil(), nil(), nil()}), other})) == "none");
  }
  SUBCASE("an argument tree nested deeper than any server's is not walked to the end") {
    auto nested = [](int levels) {
      Reply list = array({array({bulk("name"), bulk("x"), bulk("token"), bulk("IFEQ")})});
      for (int i = 0; i < levels; ++i) list = array({array({bulk("arguments"), std::move(list)})});
      return array({bulk("set"), array({bulk("arguments"), std::move(list)})});
    };
    const Reply none = array({nil(), nil(), nil(), nil()});
    CHECK(parse_capabilities({none, nested(3)}).set_ifeq);
    CHECK_FALSE(parse_capabilities({none, nested(20)}).set_ifeq);
  }
}

namespace {

const Capabilities valkey9{true, true, true, true, false};
const Capabilities redis84{true, true, true, false, true};
const Capabilities redis7{true, true, false, false, false};
const Capabilities lua_free_valkey9{true, false, true, true, false};
const Capabilities lua_free_old{true, false, false, false, false};

const LockKind& plain() { return kind_for_lock(LockMode::exclusive, 1); }

}  // namespace

TEST_CASE("native commands: which calls have a native form") {
  const std::vector<std::string> one{"k"};
  CHECK(native_kind(plain().release(one, "tok", false)) == NativeKind::release);
  CHECK(native_kind(plain().release(one, "tok", true)) == NativeKind::release_waking);
  // A fair lock handed over: the release also clears the waiter's registration.
  CHECK(native_kind(plain().release(one, "tok", true, "waiter")) == NativeKind::none);
  CHECK(native_kind(plain().extend(one, "tok", Millis{1000})) == NativeKind::extend);
  // Several resources, read locks, fencing, fair queues and the rest keep their scripts.
  const std::vector<std::string> two{"a", "b"};
  CHECK(native_kind(plain().release(two, "tok", false)) == NativeKind::none);
  CHECK(native_kind(plain().extend(two, "tok", Millis{1000})) == NativeKind::none);
  CHECK(native_kind(kind_for_lock(LockMode::read, 1).release(one, "tok", false)) ==
        NativeKind::none);
  CHECK(native_kind(kind_for_lock(LockMode::read, 1).extend(one, "tok", Millis{1})) ==
        NativeKind::none);
  AcquireOptions fenced;
  fenced.fence = true;
  const AttemptArgs a{one, "tok", Millis{1000}};
  CHECK(native_kind(kind_for_acquire(fenced, 1).acquire(a)) == NativeKind::none);
  CHECK(native_kind(mark_waiting("k", Millis{1000})) == NativeKind::none);
  // A writer giving up its waiting mark runs the release script on other keys: not a release.
  AcquireOptions write;
  write.mode = LockMode::write;
  const auto leave = kind_for_acquire(write, 1).finish_waiting(one, "w", false);
  REQUIRE(leave);
  CHECK(native_kind(*leave) == NativeKind::none);
  CHECK(native_kind(Command::plain({"SET", "k", "v"})) == NativeKind::none);
}

TEST_CASE("native commands: the wire forms (the keys and values of every Redlock client)") {
  const std::vector<std::string> one{"lock key"};
  const auto release = plain().release(one, "tok", false);
  CHECK(native_command(release, NativeForm::delifeq).args ==
        std::vector<std::string>{"DELIFEQ", "lock key", "tok"});
  CHECK(native_command(release, NativeForm::delex_ifeq).args ==
        std::vector<std::string>{"DELEX", "lock key", "IFEQ", "tok"});
  // The token of a waking release comes after its five keys.
  const auto waking = plain().release(one, "tok", true);
  CHECK(native_command(waking, NativeForm::delifeq).args ==
        std::vector<std::string>{"DELIFEQ", "lock key", "tok"});
  const auto extend = plain().extend(one, "tok", Millis{30000});
  CHECK(native_command(extend, NativeForm::set_ifeq).args ==
        std::vector<std::string>{"SET", "lock key", "tok", "IFEQ", "tok", "PX", "30000"});
  for (const auto& c : {native_command(release, NativeForm::delifeq),
                        native_command(extend, NativeForm::set_ifeq)}) {
    CHECK_FALSE(c.script);
  }
}

TEST_CASE("native commands: replies classified as the script's") {
  auto classify_as = [](NativeForm form, Reply r, bool release) {
    to_script_reply(form, r);
    return release ? LockKind::classify_release(r) : LockKind::classify_extend(r);
  };
  const Reply ok{Reply::Type::status, 0, "OK", {}};
  CHECK(classify_as(NativeForm::set_ifeq, ok, false).state == NodeState::ok);
  // nil: the key is gone or holds another token (SET IFEQ never creates it).
  CHECK(classify_as(NativeForm::set_ifeq, nil(), false).state == NodeState::not_held);
  CHECK(classify_as(NativeForm::set_ifeq, error("WRONGTYPE x"), false).state == NodeState::error);
  CHECK(classify_as(NativeForm::set_ifeq, integer(1), false).state == NodeState::ok);
  CHECK(classify_as(NativeForm::set_ifeq, bulk("OK"), false).state == NodeState::error);
  for (auto form : {NativeForm::delifeq, NativeForm::delex_ifeq}) {
    CHECK(classify_as(form, integer(1), true).state == NodeState::ok);
    CHECK(classify_as(form, integer(0), true).state == NodeState::not_held);
    CHECK(classify_as(form, ok, true).state == NodeState::error);
    CHECK(classify_as(form, nil(), true).state == NodeState::error);
  }
}

TEST_CASE("native commands: a refusal is an unknown command, a syntax error or NOPERM") {
  CHECK(refuses_native(error("ERR unknown command 'DELIFEQ', with args beginning with: ")));
  CHECK(refuses_native(error("ERR syntax error")));
  CHECK(refuses_native(error("NOPERM User u has no permissions to run the 'delifeq' command")));
  CHECK_FALSE(refuses_native(error("WRONGTYPE Operation against a key")));
  CHECK_FALSE(refuses_native(error("READONLY You can't write against a read only replica.")));
  CHECK_FALSE(refuses_native(error("NOSCRIPT No matching script")));
  CHECK_FALSE(refuses_native(integer(0)));
}

TEST_CASE("native commands: the form each node runs, node by node") {
  using C = Options::Commands;
  CHECK(chosen_form(NativeKind::release, valkey9, C::automatic) == NativeForm::delifeq);
  CHECK(chosen_form(NativeKind::release, redis84, C::automatic) == NativeForm::delex_ifeq);
  CHECK(chosen_form(NativeKind::extend, valkey9, C::automatic) == NativeForm::set_ifeq);
  CHECK(chosen_form(NativeKind::extend, redis84, C::automatic) == NativeForm::set_ifeq);
  CHECK_FALSE(chosen_form(NativeKind::release, redis7, C::automatic));
  CHECK_FALSE(chosen_form(NativeKind::extend, redis7, C::native));
  CHECK_FALSE(chosen_form(NativeKind::release, valkey9, C::scripts));
  CHECK_FALSE(chosen_form(NativeKind::release, Capabilities{}, C::native));  // not probed
  CHECK_FALSE(chosen_form(NativeKind::none, valkey9, C::native));
  // A waking release names a waiter in the script: natively only where no script can run (no
  // waiter can have marked itself there), or when native is forced (waiters poll).
  CHECK_FALSE(chosen_form(NativeKind::release_waking, valkey9, C::automatic));
  CHECK(chosen_form(NativeKind::release_waking, lua_free_valkey9, C::automatic) ==
        NativeForm::delifeq);
  CHECK(chosen_form(NativeKind::release_waking, valkey9, C::native) == NativeForm::delifeq);
}

TEST_CASE("native commands: what cannot run on a node says so and names it") {
  using C = Options::Commands;
  const std::vector<std::string> one{"k"};
  const auto release = plain().release(one, "tok", false);
  const auto extend = plain().extend(one, "tok", Millis{1000});
  auto why = [](const Command& c, const Capabilities& caps, C commands) {
    return cannot_run(c, native_kind(c), caps, commands, "10.0.0.5:6379");
  };
  CHECK_FALSE(why(release, valkey9, C::automatic));
  CHECK_FALSE(why(release, redis7, C::automatic));
  CHECK_FALSE(why(release, lua_free_valkey9, C::automatic));
  CHECK_FALSE(why(release, Capabilities{}, C::native));  // not probed: sent as before
  SUBCASE("native forced on a node without it") {
    const auto w = why(extend, redis7, C::native);
    REQUIRE(w);
    CHECK(w->starts_with(cannot_run_prefix));
    CHECK(w->find("10.0.0.5:6379") != std::string::npos);
    CHECK(w->find("has no SET IFEQ") != std::string::npos);
    CHECK(w->find("commands=native") != std::string::npos);
  }
  SUBCASE("a node without scripts or the native command") {
    const auto w = why(release, lua_free_old, C::automatic);
    REQUIRE(w);
    CHECK(w->find("refuses scripts") != std::string::npos);
    CHECK(w->find("DELIFEQ or DELEX IFEQ") != std::string::npos);
    CHECK(why(release, lua_free_valkey9, C::scripts));
  }
  SUBCASE("a kind that needs a script, on a node that refuses them") {
    AcquireOptions fenced;
    fenced.fence = true;
    const AttemptArgs a{one, "tok", Millis{1000}};
    const auto w = why(kind_for_acquire(fenced, 1).acquire(a), lua_free_valkey9, C::automatic);
    REQUIRE(w);
    CHECK(*w == std::string(cannot_run_prefix) +
                    "10.0.0.5:6379 refuses scripts (EVAL/EVALSHA), and a fenced lock needs one");
    CHECK_FALSE(why(kind_for_acquire(fenced, 1).acquire(a), valkey9, C::native));
    // The plain acquire is SET NX: it runs anywhere.
    CHECK_FALSE(why(plain().acquire(a), lua_free_old, C::native));
  }
  SUBCASE("the quorum counts such a node as refused by configuration") {
    const NodeOutcome o{"10.0.0.5:6379", NodeState::error, *why(extend, redis7, C::native), {}};
    CHECK(refused_by_configuration(o));
  }
}
