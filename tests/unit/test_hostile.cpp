// A server is an input (algorithm.md, hazard 13; issue 40, items 1 and 9): every integer it sends
// is range-checked before it is narrowed, used as an index or in time arithmetic, and its text is
// made safe before a person or a program reads it. The fuzz targets (tests/fuzz) check the same
// invariants on arbitrary input; these are the hostile shapes by name.
#include <doctest/doctest.h>

#include <chrono>
#include <limits>
#include <string>
#include <vector>

#include "core/info.hpp"
#include "core/kinds.hpp"
#include "core/quorum.hpp"
#include "core/reply.hpp"
#include "core/restart_guard.hpp"
#include "core/scripts.hpp"
#include "core/server_text.hpp"
#include "core/slots.hpp"

using namespace redlock;
using namespace redlock::detail;
using namespace std::chrono_literals;

namespace {

Reply error(std::string s) { return Reply{Reply::Type::error, 0, std::move(s), {}}; }
Reply integer(long long v) { return Reply{Reply::Type::integer, v, {}, {}}; }
Reply bulk(std::string s) { return Reply{Reply::Type::string, 0, std::move(s), {}}; }
Reply array(std::vector<Reply> e) { return Reply{Reply::Type::array, 0, {}, std::move(e)}; }

Reply slots(long long first, long long last, std::string host = "127.0.0.1",
            long long port = 7000) {
  return array({array(
      {integer(first), integer(last), array({bulk(std::move(host)), integer(port), bulk("m1")})})});
}

Reply sentinel_answer(const std::vector<std::string>& kv) {
  std::vector<Reply> e;
  for (const auto& s : kv) e.push_back(bulk(s));
  return array(std::move(e));
}

constexpr long long int64_max = std::numeric_limits<long long>::max();

}  // namespace

TEST_CASE("server_text: control characters and bytes that are not UTF-8 are escaped") {
  CHECK(server_text("ERR plain text, kept") == "ERR plain text, kept");
  // A reply cannot clear the screen, set the window title or split a log line.
  CHECK(server_text("ERR \x1b[2J\x1b]0;owned\x07 x") == "ERR \\x1b[2J\\x1b]0;owned\\x07 x");
  CHECK(server_text("a\r\nb\tc\x7f") == "a\\x0d\\x0ab\\x09c\\x7f");
  CHECK(server_text(std::string("nul\0here", 8)) == "nul\\x00here");
  // UTF-8 is kept; broken UTF-8, overlong forms and surrogates are bytes.
  CHECK(server_text("caf\xc3\xa9 \xe2\x82\xac") == "caf\xc3\xa9 \xe2\x82\xac");
  CHECK(server_text("\xff\xc0\x80") == "\\xff\\xc0\\x80");
  CHECK(server_text("\xed\xa0\x80") == "\\xed\\xa0\\x80");
  CHECK(server_text("\xe2\x82") == "\\xe2\\x82");  // cut short
  // C1 controls (U+009B is CSI) and bidirectional overrides change what a terminal shows.
  CHECK(server_text("\xc2\x9b"
                    "2J") == "\\xc2\\x9b2J");
  CHECK(server_text("abc\xe2\x80\xae"
                    "def") == "abc\\xe2\\x80\\xaedef");
}

TEST_CASE("server_text: echoed arguments and token-like runs are left out") {
  CHECK(server_text("ERR unknown command 'EVALSHA', with args beginning with: 'tok' 'pw' ") ==
        "ERR unknown command 'EVALSHA'");
  const std::string token(40, 'a');
  CHECK(server_text("ERR script error on " + token + "-2 here") ==
        "ERR script error on <hex>-2 here");
  CHECK(server_text("NOSCRIPT 0123456789ABCDEF0123456789abcdef0") == "NOSCRIPT <hex>");
  // A shorter run is not a token; a long one is hidden also inside a word (a cut would show it).
  CHECK(server_text("id 0123456789abcdef") == "id 0123456789abcdef");
  CHECK(server_text("word" + token + "xyz") == "wor<hex>xyz");
  CHECK(server_text(std::string(190, 'x') + " " + token + "zz") ==
        std::string(190, 'x') + " <hex>zz");
  // The digits of an escape join no run, so shown text is shown again unchanged.
  const std::string shown = server_text("" + std::string(31, 'a'));
  CHECK(shown == "\\x01" + std::string(31, 'a'));
  CHECK(server_text(shown) == shown);
}

TEST_CASE("server_text: at most 200 bytes, never cut inside a character or an escape") {
  const std::string shown = server_text(std::string(300, 'x'));
  CHECK(shown.size() == 200);
  CHECK(shown.ends_with("..."));
  std::string euros;
  for (int i = 0; i < 100; ++i) euros += "\xe2\x82\xac";
  const std::string e = server_text(euros);
  CHECK(e.size() <= 200);
  CHECK(e == euros.substr(0, 195) + "...");  // 65 whole characters
  std::string escapes(100, '\x1b');
  const std::string s = server_text(escapes);
  CHECK(s == [] {
    std::string out;
    for (int i = 0; i < 49; ++i) out += "\\x1b";
    return out + "...";
  }());
  CHECK(server_text(std::string(100, 'y'), 10) == "yyyyyyy...");
  // Shown text is shown again unchanged.
  for (const std::string& t : {shown, e, s, server_text("a\x1b" + std::string(40, 'b'))}) {
    CHECK(server_text(t) == t);
  }
}

TEST_CASE("describe(), unexpected() and the reason of a failed AUTH show server text safely") {
  CHECK(error("ERR \x1b[31mred").describe() == "(error) ERR \\x1b[31mred");
  Reply status{Reply::Type::status, 0, "OK\x1b", {}};
  CHECK(status.describe() == "OK\\x1b");
  const auto v = unexpected(error("ERR unknown command 'X', with args beginning with: 'tok' "));
  CHECK(v.detail == "ERR unknown command 'X'");
  CHECK(unexpected(error("ERR \x1b[2J")).detail == "ERR \\x1b[2J");
  // An error that is all argument echo still says there was an error, in a vote and a status row.
  CHECK(unexpected(error("with args 'tok'")).detail == "an error reply without text");
  NodeKeyState row;
  classify_status(error("with args 'tok'"), row);
  CHECK(row.detail == "an error reply without text");
  CHECK(auth_error_text("ERR proxy: bad password s3cr3t\x1b[2J", "s3cr3t") ==
        "ERR proxy: bad password ***\\x1b[2J");
  // The reason a failure names without -v (summarize) is cut as safely.
  NodeOutcome o{"n1", NodeState::error, server_text(std::string(150, 'z') + "\x1b"), {}};
  const auto b = redlock::summarize({o});
  CHECK(b.find('\x1b') == std::string::npos);
  CHECK(b.size() < 150);
}

TEST_CASE(
    "valid_server_host: an address or a DNS name, nothing a resolver or terminal would "
    "misread") {
  for (const char* ok : {"127.0.0.1", "::1", "fe80::1%eth0", "redis-1.example.com", "node_2"})
    CHECK_MESSAGE(valid_server_host(ok), ok);
  for (const std::string& bad :
       {std::string(), std::string("127.0.0.1\0.evil", 15), std::string("a b"),
        std::string("h\x1b[2J"), std::string("user@h"), std::string("h/x"), std::string(256, 'a')})
    CHECK_FALSE_MESSAGE(valid_server_host(bad), bad);
}

TEST_CASE("CLUSTER SLOTS: slot numbers are checked in 64 bits, before they are narrowed") {
  std::string err;
  // Issue 40, item 1: [4294967295, 0] passed as [-1, 0], and the map wrote before its table.
  CHECK_FALSE(parse_cluster_slots(slots(4294967295LL, 0), err));
  CHECK(err == "CLUSTER SLOTS: bad slot range 4294967295-0");
  CHECK_FALSE(parse_cluster_slots(slots(0, 4294967296LL), err));
  CHECK_FALSE(parse_cluster_slots(slots(2147483648LL, 2147483648LL), err));
  CHECK_FALSE(parse_cluster_slots(slots(int64_max, int64_max), err));
  CHECK_FALSE(parse_cluster_slots(slots(-1, 10), err));
  CHECK_FALSE(parse_cluster_slots(slots(16384, 16384), err));
  CHECK(parse_cluster_slots(slots(16383, 16383), err));
  // Ports: 1-65535, also checked before they are narrowed.
  for (long long port : {0LL, -1LL, 65536LL, 4294967297LL}) {
    CAPTURE(port);
    CHECK_FALSE(parse_cluster_slots(slots(0, 16383, "127.0.0.1", port), err));
    CHECK(err.ends_with("port " + std::to_string(port)));
  }
  // Hosts: nothing a resolver would cut at a NUL, nothing that moves a cursor when printed.
  CHECK_FALSE(parse_cluster_slots(slots(0, 16383, std::string("10.0.0.1\0x", 10)), err));
  CHECK(err.find("10.0.0.1\\x00x") != std::string::npos);
  CHECK_FALSE(parse_cluster_slots(slots(0, 16383, "h\x1b[2J"), err));
  CHECK(err.find('\x1b') == std::string::npos);
  CHECK(parse_cluster_slots(slots(0, 16383, "?"), err));
  // A replica's id counts whatever its address says (a promotion must not hide behind a port).
  Reply r = slots(0, 16383);
  r.elements[0].elements.push_back(array({bulk("x"), integer(0), bulk("r1")}));
  auto map = parse_cluster_slots(r, err);
  REQUIRE(map);
  CHECK((*map)[0].replica_ids == std::vector<std::string>{"r1"});
}

TEST_CASE("slot_owners: the table apply() builds, every slot index checked") {
  auto range = [](int first, int last) {
    SlotRange r;
    r.first = first;
    r.last = last;
    return r;
  };
  std::string err;
  auto t = slot_owners({range(0, 100), range(101, 16383)}, err);
  REQUIRE(t);
  CHECK(t->size() == 16384);
  CHECK((*t)[0] == 0);
  CHECK((*t)[100] == 0);
  CHECK((*t)[101] == 1);
  CHECK((*t)[16383] == 1);
  auto gap = slot_owners({range(5, 5)}, err);
  REQUIRE(gap);
  CHECK((*gap)[4] == no_owner);
  CHECK((*gap)[5] == 0);
  // Whoever built the map: out of bounds or reversed is refused, not written.
  CHECK_FALSE(slot_owners({range(-1, 0)}, err));
  CHECK(err.find("-1-0") != std::string::npos);
  CHECK_FALSE(slot_owners({range(0, 16384)}, err));
  CHECK_FALSE(slot_owners({range(std::numeric_limits<int>::min(), 3)}, err));
  CHECK_FALSE(slot_owners({range(3, 2)}, err));
  // A slot in two ranges: no cluster answers so, and which master has the key would be a guess.
  CHECK_FALSE(slot_owners({range(0, 10), range(10, 20)}, err));
  CHECK(err == "CLUSTER SLOTS: slot 10 is in two ranges");
}

TEST_CASE("INFO: an uptime the guard's arithmetic cannot hold is not believed") {
  auto up = [](const std::string& v) {
    return parse_server_info("run_id:x\r\nuptime_in_seconds:" + v + "\r\n")->uptime_seconds;
  };
  CHECK(up("3600") == 3600);
  CHECK(up(std::to_string(max_reported_seconds)) == max_reported_seconds);
  // Too large, negative, wrapped or not a number: taken for a server that just started.
  CHECK(up(std::to_string(max_reported_seconds + 1)) == 0);
  CHECK(up("9223372036854775807") == 0);
  CHECK(up("18446744073709551615") == 0);
  CHECK(up("-1") == 0);
  CHECK(up("+5") == 0);
  CHECK(up("5s") == 0);
  // So a server lying about its uptime is excluded while the minimum uptime says so.
  RestartGuard g;
  const auto t0 = BootClock::now();
  (void)g.observe(*parse_server_info("run_id:x\nuptime_in_seconds:9223372036854775807\n"), t0,
                  RestartGuard::Policy{0ms, 60s, false});
  CHECK(g.exclusion(t0, false, 0ms));
}

TEST_CASE("RestartGuard::observe bounds an uptime nobody checked (no overflow: UBSan)") {
  const auto t0 = BootClock::time_point{} + 10s;
  for (long long uptime : {int64_max, std::numeric_limits<long long>::min(), -1LL}) {
    CAPTURE(uptime);
    RestartGuard g;
    (void)g.observe({"x", uptime}, t0, RestartGuard::Policy{30s, 60s, false});
    (void)g.observe({"y", uptime}, t0 + 1s, RestartGuard::Policy{30s, 60s, false});
    const auto why = g.exclusion(t0 + 1s, false, 30s);
    // A negative uptime is 0 (just started): excluded; a huge one is the bound: not.
    CHECK(why.has_value() == (uptime < 0));
  }
}

TEST_CASE("SENTINEL MASTER: ports, role-reported-time and ip checked before use") {
  std::string err;
  auto with = [](std::string field, std::string value) {
    std::vector<std::string> kv{"ip", "10.0.0.5", "port", "6380", "role-reported-time", "100"};
    for (std::size_t i = 0; i < kv.size(); i += 2) {
      if (kv[i] == field) kv[i + 1] = value;
    }
    return sentinel_answer(kv);
  };
  auto m = parse_sentinel_master(with("port", "6380"), err);
  REQUIRE(m);
  CHECK(m->port == 6380);
  for (const char* port : {"0", "65536", "4294967297", "-1", "6380x"}) {
    CAPTURE(port);
    CHECK_FALSE(parse_sentinel_master(with("port", port), err));
    CHECK(err == std::string("SENTINEL MASTER: bad port \"") + port + "\"");
  }
  for (const std::string& t :
       {std::string("9223372036854775807"), std::string("-1"),
        std::to_string(max_reported_seconds * 1000 + 1), std::string("1e3")}) {
    CAPTURE(t);
    CHECK_FALSE(parse_sentinel_master(with("role-reported-time", t), err));
    CHECK(err.starts_with("SENTINEL MASTER: bad role-reported-time"));
  }
  CHECK(parse_sentinel_master(
      with("role-reported-time", std::to_string(max_reported_seconds * 1000)), err));
  CHECK_FALSE(parse_sentinel_master(with("ip", std::string("10.0.0.5\0.evil", 14)), err));
  CHECK(err == "SENTINEL MASTER: bad ip \"10.0.0.5\\x00.evil\"");
  CHECK_FALSE(parse_sentinel_master(with("ip", "\x1b]0;t\x07"), err));
  CHECK(err.find('\x1b') == std::string::npos);
}

TEST_CASE("SENTINEL MASTER: the quorum, for doctor, only when it is a sane count") {
  std::string err;
  auto with_quorum = [](const std::string& q) {
    return sentinel_answer(
        {"ip", "10.0.0.5", "port", "6380", "role-reported-time", "100", "quorum", q});
  };
  auto m = parse_sentinel_master(with_quorum("2"), err);
  REQUIRE(m);
  CHECK(m->quorum == 2);
  // A lie about the quorum costs the report its figure, never the master.
  for (const char* q : {"0", "-1", "10001", "4294967298", "2x", ""}) {
    CAPTURE(q);
    m = parse_sentinel_master(with_quorum(q), err);
    REQUIRE(m);
    CHECK(m->quorum == 0);
  }
}

TEST_CASE("promoted_at_latest: Sentinel's role-reported-time in time arithmetic, bounded") {
  const auto at = BootClock::time_point{} + 100s;
  CHECK(promoted_at_latest(at, 1500, 2000ms) == at + 500ms);
  // Bounded whatever the caller passes (parse_sentinel_master() refuses these already).
  const auto far = promoted_at_latest(at, int64_max, 2000ms);
  CHECK(far == at - std::chrono::seconds(max_reported_seconds) + 2000ms);
  CHECK(promoted_at_latest(at, -5, 0ms) == at);
  RestartGuard g;
  g.promoted(far, "a failover long ago");
  CHECK_FALSE(g.exclusion(at, false, max_ttl));
}

TEST_CASE("wake_listeners: a release's \"#<n>\" is bounded; other names are not counts") {
  CHECK(wake_listeners("#3") == 3);
  CHECK(wake_listeners("#") == 0);
  CHECK(wake_listeners("#12x") == 12);
  CHECK(wake_listeners("#2147483648") == max_wake_listeners);
  CHECK(wake_listeners("#99999999999999999999999999") == max_wake_listeners);
  CHECK_FALSE(wake_listeners("w1@c"));
  CHECK_FALSE(wake_listeners(""));
}

TEST_CASE("classify_status: counters and times from a server stay within 0..2^63-1") {
  const Reply nil{};
  Reply r = array({bulk("string\x1b[2J"), bulk("tok"), integer(int64_max), integer(-1),
                   array({bulk("r1"), bulk("99999999999999999999"), bulk("r2"),
                          bulk("9223372036854775808"), bulk("r3"), bulk("7")}),
                   nil, integer(0), array({bulk("w1"), bulk("18446744073709551615")}),
                   bulk("9223372036854775807"), bulk("9223372036854775808"), integer(-3)});
  NodeKeyState row;
  classify_status(r, row);
  CHECK(row.detail.empty());
  CHECK(row.type == "string\\x1b[2J");
  REQUIRE(row.pttl);
  CHECK(row.pttl->count() == int64_max);
  REQUIRE(row.readers.size() == 3);
  CHECK(row.readers[0].remaining == 0ms);  // past 64 bits: unknown
  CHECK(row.readers[1].remaining == 0ms);  // past 2^63-1: unknown, not negative
  CHECK(row.readers[2].remaining == 7ms);
  REQUIRE(row.queue.size() == 1);
  CHECK(row.queue[0].ticket == 0);
  CHECK(row.fence == static_cast<std::uint64_t>(int64_max));
  CHECK_FALSE(row.ticket);
  CHECK(row.listening_clients == 0);
  NodeKeyState e;
  classify_status(error("ERR \x1b[2J"), e);
  CHECK(e.detail == "ERR \\x1b[2J");
}
