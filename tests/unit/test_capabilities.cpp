// What a node can do (core/capabilities.hpp), read from what real servers answered to the probe:
// the .resp files next to this one were recorded from Valkey 9.1.2, Redis 8.0.6, Redis 7.0.15 and
// Valkey 9.1.2 started with `--rename-command EVAL "" --rename-command EVALSHA ""`.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/capabilities.hpp"
#include "core/reply.hpp"
#include "net/reader.hpp"

using namespace redlock;
using namespace redlock::detail;

namespace {

std::vector<Reply> recorded(const std::string& name) {
  std::ifstream in(std::string(REDLOCK_SOURCE_ROOT) + "/tests/unit/replies/capabilities-" + name +
                       ".resp",
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
  CHECK(probe[0] == std::vector<std::string>{"COMMAND", "INFO", "DELIFEQ", "DELEX", "EVAL",
                                             "EVALSHA"});
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
  const auto caps =
      parse_capabilities({array({nil(), command("delex"), command("eval"), command("evalsha")}),
                          docs_with("IFEQ")});
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
