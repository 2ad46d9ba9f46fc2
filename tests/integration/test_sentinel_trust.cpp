// Trust in what sentinels say (core/trust.hpp, net/sentinel.cpp): sentinels with a password get
// the address's sentinel credentials, a master counts only when a majority of the sentinels that
// answered name it, a master outside the user's hosts and allow-list is never contacted, and over
// TLS the master's certificate must carry a name the user gave. Real sentinels (SentinelFixture)
// where they can show it; fake nodes for the liars.
#include <algorithm>
#include <string>
#include <vector>

#include "common.hpp"
#include "fake_node.hpp"
#include "sentinel_fixture.hpp"
#include "tls_fixture.hpp"

using namespace itest;
using namespace redlock;
using redlock::test::FakeNode;
using redlock::test::SentinelConfig;
using redlock::test::SentinelFixture;

namespace {

SentinelConfig one_master(int sentinels = 3) {
  SentinelConfig sc;
  sc.master_names = {"m1"};
  sc.replicas = 0;
  sc.sentinels = sentinels;
  return sc;
}

Options sentinel_options(const std::string& csv) {
  Options o = options_for(csv);
  o.node_timeout = 500ms;  // a sentinel vote's first answer waits for the sentinels and a handshake
  o.connect_timeout = 500ms;
  return o;
}

std::string bulk(const std::string& s) {
  return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
}

// A sentinel's answer to SENTINEL MASTER naming host:port.
std::string sentinel_master_reply(const std::string& ip, std::uint16_t port) {
  const std::vector<std::string> fields = {"name",   "m1",           "ip",
                                           ip,       "port",         std::to_string(port),
                                           "flags",  "master",       "role-reported-time",
                                           "100000", "config-epoch", "1"};
  std::string out = "*" + std::to_string(fields.size()) + "\r\n";
  for (const auto& f : fields) out += bulk(f);
  return out;
}

// A sentinel that names host:port as the master of every name (and says nothing else).
FakeNode::Responder lying_sentinel(const std::string& ip, std::uint16_t port) {
  return [ip, port](const std::vector<std::string>& argv) -> std::optional<std::string> {
    if (!argv.empty() && argv[0] == "SENTINEL") return sentinel_master_reply(ip, port);
    if (!argv.empty() && argv[0] == "SUBSCRIBE")
      return "*3\r\n" + bulk("subscribe") + bulk(argv.size() > 1 ? argv[1] : "") + ":1\r\n";
    return std::string("+OK\r\n");
  };
}

// A master that says so (redis_like() answers INFO without a role).
FakeNode::Responder fake_master() {
  auto base = FakeNode::redis_like();
  return [base](const std::vector<std::string>& argv) -> std::optional<std::string> {
    if (!argv.empty() && argv[0] == "INFO") {
      return bulk("# Server\r\nredis_version:7.0.15\r\nrun_id:" + std::string(40, 'c') +
                  "\r\nuptime_in_seconds:1000\r\n# Replication\r\nrole:master\r\nmaster_replid2:" +
                  std::string(40, '0') + "\r\n");
    }
    return base(argv);
  };
}

bool saw_auth(const FakeNode& n) {
  const auto cmds = n.commands();
  return std::any_of(cmds.begin(), cmds.end(),
                     [](const auto& argv) { return !argv.empty() && argv[0] == "AUTH"; });
}

}  // namespace

TEST_CASE("sentinel trust: sentinels with a password are asked with the sentinel credentials") {
  SentinelFixture f(one_master());
  // Every sentinel now refuses clients that do not log in (the fixture is done asking them).
  for (std::size_t i = 0; i < f.sentinel_count(); ++i) {
    REQUIRE(f.sentinel(i).command({"ACL", "SETUSER", "watcher", "on", ">w%pass", "+@all"}).str ==
            "OK");
    REQUIRE(
        f.sentinel(i).command({"ACL", "SETUSER", "default", "resetpass", ">sentinel-pass"}).str ==
        "OK");
  }
  RedisCluster plain(2);
  const auto sentinels = f.sentinel_addresses();
  const std::string base = "redis+sentinel://" + sentinels[0] + "/m1?sentinel=" + sentinels[1] +
                           "&sentinel=" + sentinels[2];

  {  // No sentinel credentials: the sentinels refuse, no vote, and it says so.
    Client c(sentinel_options(base + "," + client_csv(plain)));
    auto st = c.status("st-res");
    REQUIRE(st.nodes.size() == 3);
    CHECK_FALSE(st.nodes[0].up);
    CHECK_MESSAGE(st.nodes[0].detail.find("NOAUTH") != std::string::npos, st.nodes[0].detail);
  }
  {  // A wrong password: refused, named as an AUTH failure; the password is never shown.
    Client c(sentinel_options(base + "&sentinel_password=wrong-one," + client_csv(plain)));
    auto st = c.status("st-res");
    CHECK_FALSE(st.nodes[0].up);
    CHECK_MESSAGE(st.nodes[0].detail.find("AUTH to sentinel failed") != std::string::npos,
                  st.nodes[0].detail);
    CHECK(st.nodes[0].detail.find("wrong-one") == std::string::npos);
    CHECK(st.nodes[0].node.find("wrong-one") == std::string::npos);
  }
  for (const std::string& creds :
       {std::string("&sentinel_password=sentinel-pass"),
        std::string("&sentinel_user=watcher&sentinel_password=w%25pass")}) {
    CAPTURE(creds);
    Client c(sentinel_options(base + creds + "," + client_csv(plain)));
    auto r = c.try_acquire({"st-res"}, ttl_opts(10s));
    REQUIRE_MESSAGE(r, r.message);
    CHECK_MESSAGE((r.nodes[0].state == NodeState::ok || r.nodes[0].state == NodeState::pending),
                  r.nodes[0].detail);
    CHECK(eventually([&] {
      return f.node("m1", 0).command({"GET", "st-res"}).str == r.lock.token();
    }));
    CHECK(r.nodes[0].node.find("pass") == std::string::npos);
    CHECK(c.try_release(r.lock));
  }
}

TEST_CASE("sentinel trust: a master counts only when a majority of the sentinels name it") {
  SentinelFixture f(one_master());
  RedisServer decoy;  // a real server the liar names: it would grant, were the liar believed
  FakeNode liar(lying_sentinel("127.0.0.1", decoy.port()));
  const auto sentinels = f.sentinel_addresses();

  {  // Two honest sentinels and the liar: the master two of three name.
    Client c(sentinel_options("redis+sentinel://" + sentinels[0] +
                              "/m1?sentinel=" + liar.address() + "&sentinel=" + sentinels[1]));
    auto r = c.try_acquire({"maj-res"}, ttl_opts(10s));
    REQUIRE_MESSAGE(r, r.message);
    CHECK(f.node("m1", 0).command({"GET", "maj-res"}).str == r.lock.token());
    CHECK(decoy.command({"EXISTS", "maj-res"}).integer == 0);
    // It was asked (the two honest answers may have decided before its thread read the question).
    CHECK(eventually([&] { return liar.commands_seen() > 0; }));
    CHECK(c.try_release(r.lock));
  }
  {  // One honest sentinel and the liar disagree: no vote, and the reason says who said what.
    Client c(
        sentinel_options("redis+sentinel://" + sentinels[0] + "/m1?sentinel=" + liar.address()));
    auto r = c.try_acquire({"maj-res"}, ttl_opts(10s));
    CHECK_FALSE(r);
    REQUIRE(r.nodes.size() == 1);
    CHECK(r.nodes[0].state != NodeState::ok);
    const auto& why = r.nodes[0].detail;
    CHECK_MESSAGE(why.find("disagree") != std::string::npos, why);
    CHECK_MESSAGE(why.find(liar.address() + " names " + decoy.address()) != std::string::npos, why);
    CHECK_MESSAGE(
        why.find(sentinels[0] + " names " + f.node("m1", 0).address()) != std::string::npos, why);
    CHECK(decoy.command({"EXISTS", "maj-res"}).integer == 0);
    CHECK(f.node("m1", 0).command({"EXISTS", "maj-res"}).integer == 0);
  }
}

TEST_CASE("sentinel trust: a master outside the allow-list gets no credentials and no vote") {
  FakeNode master(fake_master(), {}, 0, "127.0.0.2");  // not a host the address names
  FakeNode sentinel(lying_sentinel("127.0.0.2", master.port()));
  RedisCluster plain(2);
  const std::string vote = "redis+sentinel://locker:s3cret@" + sentinel.address() + "/m1";

  Client c(sentinel_options(vote + "," + client_csv(plain)));
  auto r = c.try_acquire({"allow-res"}, ttl_opts(10s));
  REQUIRE_MESSAGE(r, r.message);  // the two plain nodes
  auto st = c.status("allow-res");
  REQUIRE(st.nodes.size() == 3);
  CHECK_FALSE(st.nodes[0].up);
  const auto& why = st.nodes[0].detail;
  CHECK_MESSAGE(why.find(master.address()) != std::string::npos, why);
  CHECK_MESSAGE(why.find("allow") != std::string::npos, why);
  CHECK(why.find("s3cret") == std::string::npos);
  CHECK(c.try_release(r.lock));
  CHECK(master.connections_accepted() == 0);
  CHECK_FALSE(saw_auth(master));

  // Allowed by the user: the same master is contacted, logged into and votes. One plain node
  // beside it, so the quorum (2 of 2) needs the master's vote: with both plain nodes the acquire
  // may finish on their votes before the master's SET is even sent.
  Client allowed(sentinel_options(vote + "?allow=127.0.0.2," + client_csv(plain, {0})));
  auto a = allowed.try_acquire({"allow-res-2"}, ttl_opts(10s));
  REQUIRE_MESSAGE(a, a.message);
  CHECK(eventually([&] { return saw_auth(master); }));
  const auto cmds = master.commands();
  CHECK(std::any_of(cmds.begin(), cmds.end(), [](const auto& argv) {
    return argv.size() == 3 && argv[0] == "AUTH" && argv[1] == "locker" && argv[2] == "s3cret";
  }));
  CHECK(std::any_of(cmds.begin(), cmds.end(), [](const auto& argv) {
    return argv.size() > 1 && argv[0] == "SET" && argv[1] == "allow-res-2";
  }));
}

TEST_CASE("sentinel trust: over TLS the master's certificate must carry the name the user gave") {
  redlock::test::TlsFixture certs;  // the server certificate names 127.0.0.1 and localhost
  auto sc = one_master(1);
  auto tls = certs.server_options("no");
  tls.tls_only = true;
  tls.replication = true;
  sc.server.tls = tls;
  SentinelFixture f(sc);
  const std::string sentinel = f.sentinel_addresses().at(0);

  // The sentinel names 127.0.0.1; checked against localhost (the fixed name), not the address.
  auto good = sentinel_options("rediss+sentinel://" + sentinel + "/m1?verify_name=localhost");
  good.tls.ca_file = certs.ca_cert();
  Client c(good);
  auto r = c.try_acquire({"tls-name"}, ttl_opts(10s));
  REQUIRE_MESSAGE(r, r.message);
  CHECK(c.try_release(r.lock));

  // A fixed name the master's certificate does not carry: verification fails, no vote.
  auto wrong = sentinel_options("rediss+sentinel://" + sentinel + "/m1?verify_name=other.example");
  wrong.tls.ca_file = certs.ca_cert();
  Client w(wrong);
  auto st = w.status("tls-name");
  REQUIRE(st.nodes.size() == 1);
  CHECK_FALSE(st.nodes[0].up);
  CHECK_MESSAGE(st.nodes[0].detail.find("certificate verify failed") != std::string::npos,
                st.nodes[0].detail);
}
