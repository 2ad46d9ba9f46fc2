// Node addresses and durations: valid and malformed forms.
#include <doctest/doctest.h>

#include "redlock/options.hpp"

using namespace redlock;
using Transport = NodeAddress::Transport;

namespace {
NodeAddress ok(std::string_view s) {
  std::string err;
  auto a = NodeAddress::parse(s, err);
  INFO("address: ", s, " error: ", err);
  REQUIRE(a.has_value());
  return *a;
}
std::string bad(std::string_view s) {
  std::string err;
  auto a = NodeAddress::parse(s, err);
  INFO("address: ", s);
  CHECK_FALSE(a.has_value());
  return err;
}
}  // namespace

TEST_CASE("address: host:port shorthand") {
  auto a = ok("127.0.0.1:7001");
  CHECK(a.transport == Transport::tcp);
  CHECK(a.host == "127.0.0.1");
  CHECK(a.port == 7001);
  CHECK(a.db == 0);
  CHECK(a.password.empty());
  CHECK(ok("localhost").port == 6379);
  CHECK(ok("redis-1.example.com:6380").host == "redis-1.example.com");
}

TEST_CASE("address: redis:// with user, password and db") {
  auto a = ok("redis://alice:s3cret@db.local:7002/3");
  CHECK(a.user == "alice");
  CHECK(a.password == "s3cret");
  CHECK(a.host == "db.local");
  CHECK(a.port == 7002);
  CHECK(a.db == 3);
  auto p = ok("redis://:only-pass@h:1");
  CHECK(p.user.empty());
  CHECK(p.password == "only-pass");
  auto q = ok("redis://pw@h");
  CHECK(q.password == "pw");
  CHECK(q.port == 6379);
  auto esc = ok("redis://u:p%40ss%3Aw@h:2");
  CHECK(esc.password == "p@ss:w");
  CHECK(ok("redis://h:5/").db == 0);
}

TEST_CASE("address: the password never shows in to_string") {
  auto a = ok("redis://alice:s3cret@db.local:7002/3");
  CHECK(a.to_string().find("s3cret") == std::string::npos);
  CHECK(a.to_string() == "redis://db.local:7002/3");
}

TEST_CASE("address: to_string parses back to the same node") {
  for (std::string_view s : {"h:7001", "redis://u:pw@h:7002/3", "redis://[::1]:7001/2", "[::1]:9",
                             "unix:///tmp/r.sock", "unix:///tmp/r.sock?db=4"}) {
    auto a = ok(s);
    auto b = ok(a.to_string());
    CHECK(b.to_string() == a.to_string());
    CHECK(b.db == a.db);
    CHECK(b.port == a.port);
    CHECK(b.host == a.host);
    CHECK(b.path == a.path);
  }
}

TEST_CASE("address: a password never shows in an error message") {
  std::string err = bad("redis://alice:s3cret@h:99999");
  CHECK(err.find("s3cret") == std::string::npos);
  CHECK(err.find("alice:***@h:99999") != std::string::npos);
  err = bad("redis://t0psecret@h:0");
  CHECK(err.find("t0psecret") == std::string::npos);
  std::string list_err;
  CHECK_FALSE(parse_node_list("redis://u:hunter2@h:1,redis://u:hunter2@h:1", list_err));
  CHECK(list_err.find("hunter2") == std::string::npos);
  CHECK(list_err.find("appears twice") != std::string::npos);
}

TEST_CASE("address: a password with an unescaped '/', '@' or ':' never shows either") {
  // Issue 15: the '/' used to end the authority, the rest was read as a database, and the whole
  // URL (password included) was quoted in the error.
  std::string err = bad("redis://:Zm9v/YmFy+cXV4@127.0.0.1:7101");
  CHECK_MESSAGE(err.find("Zm9v") == std::string::npos, err);
  CHECK_MESSAGE(err.find("YmFy") == std::string::npos, err);
  CHECK_MESSAGE(err.find("%2F") != std::string::npos, err);  // says how to write it
  CHECK_MESSAGE(err.find("***@127.0.0.1:7101") != std::string::npos, err);
  // Each password below contains the marker "S3KR1T"; no error may show it.
  for (const char* text :
       {"redis://u:S3KR1T/x@h:1/x", "redis://u:p@S3KR1T@h:99999", "redis://u:S3KR1T:x@h:0",
        "redis://us/er:S3KR1T@h", "S3KR1T@h:1", "unix://u:S3KR1T@/tmp/x", "redis://u:S3KR1T@[::1",
        "redis://u:S3KR1T@h:1/-1", "redis://S3KR1T/@h:1", "rediss://u:S3KR1T@h:1",
        "redis+cluster://u:S3KR1T@h:1?seed=x@y"}) {
    std::string e;
    const auto a = NodeAddress::parse(text, e);
    if (a) continue;
    CAPTURE(text);
    CHECK_MESSAGE(e.find("S3KR1T") == std::string::npos, e);
  }
  // Escaped, the same password is fine.
  CHECK(ok("redis://:Zm9v%2FYmFy+cXV4@127.0.0.1:7101").password == "Zm9v/YmFy+cXV4");
  // Credentials in the host:port shorthand: the error says which form takes them (it used to
  // read the text as an IPv6 address without brackets).
  err = bad("alice:S3KR1T@127.0.0.1:7301");
  CHECK_MESSAGE(err.find("S3KR1T") == std::string::npos, err);
  CHECK_MESSAGE(err.find("redis://user:password@host:port") != std::string::npos, err);
}

TEST_CASE("node list: a ',' in a password is written %2C; a raw one shows no part of it") {
  // Issue 40 item 8: the list was split at the ',' and the first half, "redis://user:pa", was
  // quoted in the error ("port must be 1-65535").
  std::string err;
  auto nodes = parse_node_list("redis://user:S3K%2CR1T@127.0.0.1:7001,127.0.0.1:7002", err);
  REQUIRE(nodes);
  REQUIRE(nodes->size() == 2);
  CHECK((*nodes)[0].user == "user");
  CHECK((*nodes)[0].password == "S3K,R1T");
  CHECK((*nodes)[0].port == 7001);
  // Any byte may be escaped, all of them at once too.
  nodes = parse_node_list("redis://:%2C%40%2F%3A%3F%25@h:1", err);
  REQUIRE(nodes);
  CHECK((*nodes)[0].password == ",@/:?%");
  // Raw: refused, naming the fix, without a piece of the password (each contains S3K and R1T on
  // both sides of the ',').
  for (const char* list :
       {"redis://user:S3K,R1T@127.0.0.1:7001", "a:1,redis://user:S3K,R1T@h:2,b:3",
        "redis://S3K,R1T@h:1", "rediss://u:S3K,R1T,x@h:1/2", "redis+sentinel://u:S3K,R1T@s:1/m",
        "redis+cluster://u:S3K,R1T@h:1?seed=h:2", "user:S3K,R1T@h:1",
        "redis://u:S3K,R1T@h:1,redis://u:S3K,R1T@h:2"}) {
    CAPTURE(list);
    err.clear();
    CHECK_FALSE(parse_node_list(list, err));
    CHECK_MESSAGE(err.find("S3K") == std::string::npos, err);
    CHECK_MESSAGE(err.find("R1T") == std::string::npos, err);
    CHECK_MESSAGE(err.find("%2C") != std::string::npos, err);
  }
  CHECK_FALSE(parse_node_list("a:1,redis://user:S3K,R1T@h:2,b:3", err));
  CHECK(err ==
        "bad node address 'redis://***@h:2': a ',' in a user name or password must be "
        "written %2C (a ',' separates nodes)");
  // Lists whose other nodes have '@' or '/' are not taken for it.
  CHECK(parse_node_list("a:1,redis://u:p@h:2,unix:///tmp/x.sock,redis+sentinel://s:1/m", err));
  CHECK(parse_node_list("rediss://h:1?sni=x,redis://u:p@h:2", err));
}

TEST_CASE("address: a user without a password is left to the caller to complete") {
  // `redis://alice:@host`: redlock-cli fills in the password of --password-file; an Options
  // that still has none is refused before anything is sent.
  const NodeAddress a = ok("redis://alice:@127.0.0.1:7001");
  CHECK(a.user == "alice");
  CHECK(a.password.empty());
  Options o;
  o.nodes = {a};
  auto why = check_options(o);
  REQUIRE(why);
  CHECK_MESSAGE(why->find("user 'alice' but no password") != std::string::npos, *why);
  o.nodes[0].password = "pw";
  CHECK_FALSE(check_options(o));
}

TEST_CASE("address: rediss:// is TLS, with per-node settings as query parameters") {
  auto a = ok(
      "rediss://u:p%3Fw@db.example:6380/2?sni=lock.example&cacert=/etc/ca%20dir/ca.pem&insecure");
  CHECK(a.tls);
  CHECK(a.host == "db.example");
  CHECK(a.port == 6380);
  CHECK(a.db == 2);
  CHECK(a.password == "p?w");
  CHECK(a.tls_override.server_name == "lock.example");
  CHECK(a.tls_override.ca_file == "/etc/ca dir/ca.pem");
  CHECK(a.tls_override.insecure);
  CHECK(a.to_string() == "rediss://db.example:6380/2");
  CHECK(ok(a.to_string()).tls);
  CHECK(ok("rediss://h").port == 6379);
  CHECK(ok("rediss://u:pw?x@h:1").password ==
        "pw?x");  // a '?' before the last '@' is the password's
  CHECK_FALSE(ok("redis://h:1").tls);
  for (const char* bad_one :
       {"rediss://h:1?sni", "rediss://h:1?bogus=1", "redis://h:1?sni=x", "rediss://h:1?sni=a&sni=b",
        "rediss://h:1?insecure=maybe", "rediss://h:1?cacert=%zz", "rediss://"}) {
    CAPTURE(bad_one);
    bad(bad_one);
  }
}

TEST_CASE("address: a %-escape is exactly two hex digits") {
  bad("redis://u:%-1@h:1");
  bad("redis://u:%+1@h:1");
  bad("redis://u:% 1@h:1");
  bad("redis://u:%4@h:1");
  CHECK(ok("redis://u:%4a%4A@h:1").password == "JJ");
}

TEST_CASE("address: IPv6 in brackets") {
  auto a = ok("redis://[::1]:7001");
  CHECK(a.host == "::1");
  CHECK(a.port == 7001);
  CHECK(a.to_string() == "[::1]:7001");
  CHECK(ok("[fe80::1:2]:9").host == "fe80::1:2");
  CHECK(bad("::1:7001").find("brackets") != std::string::npos);
}

TEST_CASE("address: unix sockets") {
  auto a = ok("unix:///tmp/redis.sock");
  CHECK(a.transport == Transport::unix_socket);
  CHECK(a.path == "/tmp/redis.sock");
  CHECK(ok("unix:///run/r.sock?db=2").db == 2);
  bad("unix://relative.sock");
  bad("unix:///x?foo=1");
  bad("unix:///" + std::string(200, 'x'));
}

TEST_CASE("address: malformed ones are refused with the bad value named") {
  for (std::string_view s : {"", ":", "host:", "host:0", "host:65536", "host:-1", "host:abc",
                             "redis://", "redis://h:1/x", "redis://h:1/-2", "http://h:1",
                             "redis://[::1", "redis://[::1]x", "redis://[zz]:1", "ho st:1",
                             "host\t:1", "redis://u:p%zz@h", "h:1:2", "redis://user@h:99999"}) {
    std::string err = bad(s);
    CHECK(err.find("bad node address '") == 0);
  }
  std::string err = bad("host:99999");
  CHECK(err.find("'host:99999'") != std::string::npos);
  // Control bytes are shown escaped, not raw.
  err = bad(std::string("a\x01:1"));
  CHECK(err.find("\\x01") != std::string::npos);
}

TEST_CASE("address: a Sentinel-managed master") {
  auto a = ok("redis+sentinel://s1.local/mymaster");
  CHECK(a.kind == NodeAddress::Kind::sentinel);
  CHECK(a.host == "s1.local");
  CHECK(a.port == 26379);  // Sentinel's port by default
  CHECK(a.master_name == "mymaster");
  CHECK(a.more_sentinels.empty());
  CHECK_FALSE(a.tls);
  auto b =
      ok("redis+sentinel://alice:pw@10.0.0.1:5000/orders-1?sentinel=10.0.0.2:5001&"
         "sentinel=10.0.0.3&db=2");
  CHECK(b.user == "alice");
  CHECK(b.password == "pw");
  CHECK(b.port == 5000);
  CHECK(b.master_name == "orders-1");
  REQUIRE(b.more_sentinels.size() == 2);
  CHECK(b.more_sentinels[0] == NodeAddress::Host{"10.0.0.2", 5001});
  CHECK(b.more_sentinels[1] == NodeAddress::Host{"10.0.0.3", 26379});
  CHECK(b.db == 2);
  CHECK(b.to_string() ==
        "redis+sentinel://10.0.0.1:5000/orders-1?sentinel=10.0.0.2:5001&sentinel=10.0.0.3:26379&"
        "db=2");  // no password
  CHECK(ok(b.to_string()).more_sentinels == b.more_sentinels);
  CHECK(ok("redis-sentinel://h/m").kind == NodeAddress::Kind::sentinel);  // Lettuce's form
  auto t = ok("rediss+sentinel://h:7/m?sni=redis.local");
  CHECK(t.tls);
  CHECK(t.tls_override.server_name == "redis.local");
  CHECK(t.to_string().starts_with("rediss+sentinel://h:7/m"));
  CHECK(bad("redis+sentinel://h:1").find("master's name") != std::string::npos);
  CHECK(bad("redis+sentinel://h:1/").find("master's name") != std::string::npos);
  CHECK(bad("redis+sentinel://h:1/a b").find("control") != std::string::npos);
  CHECK(bad("redis+sentinel://h:1/a*b").find("bad master name") != std::string::npos);
  CHECK(bad("redis+sentinel://h:1/m?sentinel=h:0").find("'h:0'") != std::string::npos);
  CHECK(bad("redis+sentinel://h:1/m?sni=x").find("TLS setting") != std::string::npos);
  CHECK(bad("redis+sentinel://h:1/m?color=red").find("'color'") != std::string::npos);
  CHECK(bad("redis://h:1/m?sentinel=h:2").find("'sentinel'") != std::string::npos);
  const std::string err = bad("redis+sentinel://u:s3cret@h:1/a*b");
  CHECK(err.find("s3cret") == std::string::npos);
}

TEST_CASE("address: a Redis Cluster as one vote") {
  auto a = ok("redis+cluster://10.0.0.1:7000");
  CHECK(a.kind == NodeAddress::Kind::cluster);
  CHECK(a.host == "10.0.0.1");
  CHECK(a.port == 7000);
  CHECK(a.more_seeds.empty());
  CHECK_FALSE(a.tls);
  CHECK(ok("redis+cluster://h").port == 6379);
  auto b = ok("redis+cluster://alice:pw@10.0.0.1:7000?seed=10.0.0.2:7001&seed=[::1]:7002");
  CHECK(b.user == "alice");
  CHECK(b.password == "pw");
  REQUIRE(b.more_seeds.size() == 2);
  CHECK(b.more_seeds[0] == NodeAddress::Host{"10.0.0.2", 7001});
  CHECK(b.more_seeds[1] == NodeAddress::Host{"::1", 7002});
  CHECK(b.to_string() == "redis+cluster://10.0.0.1:7000?seed=10.0.0.2:7001&seed=[::1]:7002");
  CHECK(ok(b.to_string()).more_seeds == b.more_seeds);
  auto t = ok("rediss+cluster://h:7?sni=redis.local&insecure");
  CHECK(t.tls);
  CHECK(t.kind == NodeAddress::Kind::cluster);
  CHECK(t.tls_override.server_name == "redis.local");
  CHECK(t.to_string() == "rediss+cluster://h:7");
  CHECK(bad("redis+cluster://h:1/2").find("database 0 only") != std::string::npos);
  CHECK(bad("redis+cluster://h:1?seed=h:0").find("'h:0'") != std::string::npos);
  CHECK(bad("redis+cluster://h:1?db=2").find("'db'") != std::string::npos);
  CHECK(bad("redis+cluster://h:1?sni=x").find("TLS setting") != std::string::npos);
  CHECK(bad("redis://h:1?seed=h:2").find("'seed'") != std::string::npos);
  CHECK(bad("redis+clusters://h:1").find("redis+cluster://") != std::string::npos);
  const std::string err = bad("redis+cluster://u:s3cret@h:1/9");
  CHECK(err.find("s3cret") == std::string::npos);
}

TEST_CASE("node list: cluster votes mix with others; one seed named twice is refused") {
  std::string err;
  auto l = parse_node_list("redis+cluster://a:7000,redis+cluster://b:7000,c:6379", err);
  REQUIRE_MESSAGE(l, err);
  CHECK(l->size() == 3);
  CHECK_FALSE(parse_node_list("redis+cluster://a:7000,rediss+cluster://a:7000", err));
  CHECK(err.find("twice") != std::string::npos);
}

TEST_CASE("address: ?min_replicas=N sets replicated votes for one vote") {
  CHECK_FALSE(ok("redis://h:1").min_replicas);
  CHECK(ok("redis://h:1?min_replicas=2").min_replicas == 2);
  CHECK(ok("redis://h:1/3?min_replicas=0").min_replicas == 0);
  CHECK(ok("rediss://h:1?sni=x&min_replicas=1").min_replicas == 1);
  CHECK(ok("redis+cluster://h:1?seed=h:2&min_replicas=1").min_replicas == 1);
  CHECK(ok("redis+sentinel://h:1/m?min_replicas=1&db=2").min_replicas == 1);
  const auto u = ok("unix:///run/r.sock?db=2&min_replicas=1");
  CHECK(u.db == 2);
  CHECK(u.min_replicas == 1);
  CHECK(ok("unix:///run/r.sock?min_replicas=3").min_replicas == 3);
  // Not part of the display form (the node's name in records and logs): it names the server.
  CHECK(ok("redis://h:1?min_replicas=2").to_string() == "h:1");
  CHECK(bad("redis://h:1?min_replicas=101").find("min_replicas must be 0-100, got '101'") !=
        std::string::npos);
  CHECK(bad("redis://h:1?min_replicas=-1").find("'-1'") != std::string::npos);
  CHECK(bad("redis://h:1?min_replicas=").find("min_replicas") != std::string::npos);
  CHECK(bad("redis://h:1?min_replicas=1&min_replicas=2").find("twice") != std::string::npos);
  CHECK(bad("unix:///r.sock?min_replicas=1&min_replicas=1").find("each once") != std::string::npos);
  CHECK(bad("unix:///r.sock?db=1&color=2").find("min_replicas") != std::string::npos);
  // A vote of its own beside votes that follow Options::min_replicas.
  std::string err;
  auto l = parse_node_list("redis+cluster://a:7000?min_replicas=1,b:6379,c:6379", err);
  REQUIRE_MESSAGE(l, err);
  CHECK((*l)[0].min_replicas == 1);
  CHECK_FALSE((*l)[1].min_replicas);
  Options o;
  o.nodes = *l;
  CHECK_FALSE(check_options(o));
  o.nodes[1].min_replicas = 101;
  const auto why = check_options(o);
  REQUIRE(why);
  CHECK(why->find("min_replicas of node b:6379 must be 0-100, got 101") != std::string::npos);
}

TEST_CASE("node list: Sentinel votes mix with others; one master named twice is refused") {
  std::string err;
  auto l = parse_node_list("redis+sentinel://s:1/m1,redis+sentinel://s:1/m2,h:7001", err);
  REQUIRE_MESSAGE(l, err);
  CHECK(l->size() == 3);
  CHECK_FALSE(parse_node_list("redis+sentinel://s:1/m1,redis+sentinel://s:1/m1?db=3", err));
  CHECK(err.find("twice") != std::string::npos);
  // The sentinel's own host:port is not a data node: a standalone vote there is another vote.
  CHECK(parse_node_list("redis+sentinel://s:1/m1,s:1", err));
}

TEST_CASE("node list: commas, empties and duplicates") {
  std::string err;
  auto l = parse_node_list("a:1,b:2,redis://c:3", err);
  REQUIRE(l);
  CHECK(l->size() == 3);
  CHECK_FALSE(parse_node_list("", err));
  CHECK_FALSE(parse_node_list("a:1,,b:2", err));
  CHECK_FALSE(parse_node_list("a:1,", err));
  CHECK_FALSE(parse_node_list("a:1,a:1", err));
  CHECK(err.find("twice") != std::string::npos);
  CHECK_FALSE(parse_node_list("a:1,redis://a:1/2", err));  // same server, other db
  CHECK(parse_node_list("a:1,a:2", err));
}

TEST_CASE("durations") {
  std::string err;
  CHECK(parse_duration("250ms", err) == Millis{250});
  CHECK(parse_duration("10s", err) == Millis{10000});
  CHECK(parse_duration("2m", err) == Millis{120000});
  CHECK(parse_duration("1h", err) == Millis{3600000});
  CHECK(parse_duration("1500", err) == Millis{1500});
  CHECK(parse_duration("0", err) == Millis{0});
  // Fractions and days (issue 15).
  CHECK(parse_duration("1.5s", err) == Millis{1500});
  CHECK(parse_duration("0.25s", err) == Millis{250});
  CHECK(parse_duration("2.5m", err) == Millis{150000});
  CHECK(parse_duration("1d", err) == Millis{86400000});
  CHECK(parse_duration("365d", err) == Millis{31536000000});
  CHECK(parse_duration("1.5d", err) == Millis{129600000});
  CHECK(parse_duration("1.000s", err) == Millis{1000});
  CHECK(parse_duration("7.0", err) == Millis{7});
  CHECK(parse_duration("0.001s", err) == Millis{1});
  for (std::string_view s :
       {"", "-1", "-5s", "1.5ms", "0.0001s", "1.s", ".5s", "1..5s", "10x", "s", "ms", " 1s", "1 s",
        "1S", "1.5 s", "99999999999999999999", "9223372036854775807h", "1e3", "106751991167.4d"}) {
    INFO("duration: ", s);
    err.clear();
    CHECK_FALSE(parse_duration(s, err));
    CHECK(err.find("bad duration") == 0);
  }
}

TEST_CASE("durations: a bare number refused where a unit is required") {
  // redlock-cli's rule (issue 41 item 6): `--ttl 30` took a 30 ms lock.
  std::string err;
  CHECK_FALSE(parse_duration("30", err, BareNumbers::refused));
  CHECK(err == "bad duration '30': a duration needs a unit, e.g. 30s or 30ms");
  CHECK_FALSE(parse_duration("1.5", err, BareNumbers::refused));
  CHECK(err == "bad duration '1.5': a duration needs a unit, e.g. 1.5s");  // 1.5ms is none
  // Zero is zero in any unit; with a unit everything parses as before.
  CHECK(parse_duration("0", err, BareNumbers::refused) == Millis{0});
  CHECK(parse_duration("30s", err, BareNumbers::refused) == Millis{30000});
  CHECK(parse_duration("0ms", err, BareNumbers::refused) == Millis{0});
  CHECK(parse_duration("1.5s", err, BareNumbers::refused) == Millis{1500});
  CHECK_FALSE(parse_duration("00", err, BareNumbers::refused));
  CHECK_FALSE(parse_duration("-5s", err, BareNumbers::refused));
  // The library's default keeps its documented meaning (API compatibility).
  CHECK(parse_duration("30", err, BareNumbers::milliseconds) == Millis{30});
  CHECK(parse_duration("30", err) == Millis{30});
}
