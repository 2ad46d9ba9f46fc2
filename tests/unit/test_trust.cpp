// Trust in discovered servers (core/trust.hpp) and the address parameters that steer it.
#include <doctest/doctest.h>

#include "core/trust.hpp"
#include "redlock/options.hpp"

using namespace redlock;
using redlock::detail::allow_matches;
using redlock::detail::check_allow_entry;
using redlock::detail::same_host;
using redlock::detail::trust_discovered;

namespace {
NodeAddress vote(std::string_view text) {
  std::string err;
  auto a = NodeAddress::parse(text, err);
  INFO("address: ", text, " error: ", err);
  REQUIRE(a.has_value());
  return *a;
}
std::string refused(std::string_view text) {
  std::string err;
  auto a = NodeAddress::parse(text, err);
  INFO("address: ", text);
  CHECK_FALSE(a.has_value());
  return err;
}
}  // namespace

TEST_CASE("trust: allow entries") {
  for (const char* good : {"*", "10.0.0.0/8", "10.1.2.3", "fd00::/8", "::1", "cache.internal",
                           "*.cache.amazonaws.com", "0.0.0.0/0"}) {
    CHECK_MESSAGE(!check_allow_entry(good), good);
  }
  for (const char* bad : {"", "10.0.0.0/33", "10.0.0.0/", "/8", "a b", "*cache", "a.*.b",
                          "fd00::/129", "10.0.0.0/x"}) {
    CHECK_MESSAGE(check_allow_entry(bad), bad);
  }
  CHECK(allow_matches("*", "203.0.113.9"));
  CHECK(allow_matches("10.0.0.0/8", "10.200.3.4"));
  CHECK_FALSE(allow_matches("10.0.0.0/8", "11.0.0.1"));
  CHECK(allow_matches("10.1.2.0/23", "10.1.3.255"));
  CHECK_FALSE(allow_matches("10.1.2.0/23", "10.1.4.0"));
  CHECK_FALSE(allow_matches("10.0.0.0/8", "ten.example"));  // a name never matches a network
  CHECK(allow_matches("fd00::/8", "fd12::5"));
  CHECK_FALSE(allow_matches("fd00::/8", "10.0.0.1"));
  CHECK(allow_matches("*.example.com", "node-1.example.com"));
  CHECK(allow_matches("*.example.com", "A.B.EXAMPLE.COM"));
  CHECK_FALSE(allow_matches("*.example.com", "example.com"));
  CHECK_FALSE(allow_matches("*.example.com", "evilexample.com"));
  CHECK(allow_matches("Cache.Internal", "cache.internal"));
  CHECK_FALSE(allow_matches("cache.internal", "cache.internal.evil.example"));
  CHECK(allow_matches("::1", "0:0::1"));
}

TEST_CASE("trust: same host") {
  CHECK(same_host("127.0.0.1", "127.0.0.1"));
  CHECK(same_host("localhost", "127.0.0.1"));
  CHECK_FALSE(same_host("localhost", "127.0.0.2"));
  CHECK(same_host("::1", "127.0.0.1"));
  CHECK(same_host("Redis.Example", "redis.example"));
  CHECK_FALSE(same_host("127.0.0.1", "10.0.0.1"));
  CHECK_FALSE(same_host("redis.example", "10.0.0.1"));  // no DNS lookup
}

TEST_CASE("trust: plaintext discovery trusts the named hosts and the allow-list only") {
  const TlsOptions plain;
  auto local = vote("redis+sentinel://127.0.0.1:26379/m");
  CHECK(trust_discovered(local, plain, "127.0.0.1", 6379).trusted);
  CHECK(trust_discovered(local, plain, "::1", 6379).trusted);  // this machine
  CHECK_FALSE(trust_discovered(local, plain, "127.0.0.5", 6379).trusted);
  auto far = trust_discovered(local, plain, "10.9.8.7", 6380);
  CHECK_FALSE(far.trusted);
  CHECK(far.why_not.find("10.9.8.7:6380") != std::string::npos);
  CHECK(far.why_not.find("allow") != std::string::npos);
  CHECK(far.verify_name.empty());

  auto named = vote("redis+sentinel://s1.example:26379/m?sentinel=s2.example:26379");
  CHECK(trust_discovered(named, plain, "s2.example", 6379).trusted);
  CHECK_FALSE(trust_discovered(named, plain, "s3.example", 6379).trusted);

  auto allowed = vote("redis+cluster://10.0.0.1:7000?allow=10.0.1.0/24&allow=*.svc.local");
  CHECK(trust_discovered(allowed, plain, "10.0.0.1", 7001).trusted);  // the seed's host
  CHECK(trust_discovered(allowed, plain, "10.0.1.77", 7001).trusted);
  CHECK(trust_discovered(allowed, plain, "redis-2.svc.local", 7001).trusted);
  CHECK_FALSE(trust_discovered(allowed, plain, "10.0.2.1", 7001).trusted);
  CHECK(
      trust_discovered(vote("redis+cluster://10.0.0.1?allow=*"), plain, "203.0.113.1", 1).trusted);

  // A host made of control bytes is shown harmlessly.
  auto odd = trust_discovered(local, plain, "evil\r\n\x1b[2J", 1);
  CHECK_FALSE(odd.trusted);
  CHECK(odd.why_not.find('\x1b') == std::string::npos);
  CHECK(odd.why_not.find('\n') == std::string::npos);
}

TEST_CASE("trust: verified TLS trusts any address, against a name the user gave") {
  TlsOptions tls;
  // A managed cluster: the seed is a name, the slot map says addresses.
  auto managed = vote("rediss+cluster://clustercfg.cache.example:6379");
  auto t = trust_discovered(managed, tls, "10.1.2.3", 6379);
  CHECK(t.trusted);
  CHECK(t.verify_name == "clustercfg.cache.example");  // never the discovered address
  auto fixed = vote("rediss+cluster://clustercfg.cache.example?verify_name=node.cache.example");
  CHECK(trust_discovered(fixed, tls, "10.1.2.3", 6379).verify_name == "node.cache.example");
  CHECK(trust_discovered(fixed, tls, "clustercfg.cache.example", 6379).verify_name ==
        "node.cache.example");
  auto sni = vote("rediss+cluster://10.0.0.1?sni=svc.example");
  CHECK(trust_discovered(sni, tls, "10.0.0.9", 6379).verify_name == "svc.example");
  tls.server_name = "global.example";
  CHECK(trust_discovered(managed, tls, "10.1.2.3", 6379).verify_name == "global.example");
  tls.server_name.clear();
  // An allowed (or named) host is checked against its own name, as before.
  auto own = vote("rediss+sentinel://127.0.0.1/m?allow=10.0.0.0/8");
  CHECK(trust_discovered(own, tls, "10.3.3.3", 6379).verify_name == "10.3.3.3");
  CHECK(trust_discovered(own, tls, "127.0.0.1", 6380).verify_name == "127.0.0.1");
  // Without verification TLS proves nothing: as plaintext.
  auto insecure = vote("rediss+cluster://10.0.0.1?insecure");
  auto i = trust_discovered(insecure, tls, "10.0.0.9", 6379);
  CHECK_FALSE(i.trusted);
  CHECK(i.why_not.find("not verified") != std::string::npos);
  tls.insecure_skip_verify = true;
  CHECK_FALSE(trust_discovered(managed, tls, "10.1.2.3", 6379).trusted);
  // --tls asks TLS for cluster addresses too.
  TlsOptions all;
  all.enabled = true;
  CHECK(trust_discovered(vote("redis+cluster://seed.example"), all, "10.1.2.3", 1).trusted);
}

TEST_CASE("address: sentinel credentials, allow and verify_name") {
  auto a = vote(
      "redis+sentinel://u:pw@127.0.0.1:26379/m?sentinel_user=sen&sentinel_password=p%26w%40x"
      "&allow=10.0.0.0/8&allow=db.example");
  CHECK(a.password == "pw");
  CHECK(a.sentinel_user == "sen");
  CHECK(a.sentinel_password == "p&w@x");
  CHECK(a.allow == std::vector<std::string>{"10.0.0.0/8", "db.example"});
  CHECK(a.to_string().find("p&w") == std::string::npos);
  CHECK(a.to_string().find("sentinel_password") == std::string::npos);
  CHECK(vote("redis+sentinel://h/m?sentinel_password=only").sentinel_user.empty());
  CHECK(vote("rediss+cluster://h?verify_name=node.example").verify_name == "node.example");
  CHECK(vote("rediss+sentinel://h/m?verify_name=10.0.0.1").verify_name == "10.0.0.1");

  CHECK(refused("redis+sentinel://h/m?sentinel_user=sen").find("needs sentinel_password") !=
        std::string::npos);
  CHECK(refused("redis+sentinel://h/m?sentinel_password=").find("needs a value") !=
        std::string::npos);
  CHECK(refused("redis+cluster://h?sentinel_password=x").find("unknown parameter") !=
        std::string::npos);
  CHECK(refused("rediss://h?allow=x").find("unknown parameter") != std::string::npos);
  CHECK(refused("redis+cluster://h?verify_name=x.example").find("TLS setting") !=
        std::string::npos);
  CHECK(refused("rediss+cluster://h?verify_name=a%20b").find("verify_name") != std::string::npos);
  const auto bad_allow = refused("redis+cluster://h?allow=10.0.0.0/40");
  CHECK(bad_allow.find("10.0.0.0/40") != std::string::npos);
  CHECK(
      refused("redis+sentinel://h/m?sentinel_password=a&sentinel_password=b").find("given twice") !=
      std::string::npos);
}

TEST_CASE("address: a sentinel password never appears in an error") {
  for (const char* text : {
           "redis+sentinel://h/m?sentinel_password=s3cr3t&bogus=1",
           "redis+sentinel://h/m?sentinel_password=s3cr3t&more&db=x",  // '&' not escaped
           "redis+sentinel://h/m?sentinel_password=s3c@r3t&db=x",      // '@' not escaped
           "redis+sentinel://h/m?sentinel_password=s3cr3t%zz",
           "redis+sentinel://h/m?db=1&sentinel_password=s3cr3t&sentinel_password=s3cr3t",
           "redis+sentinel://h:99999/m?sentinel_password=s3cr3t",
       }) {
    const auto err = refused(text);
    CHECK_MESSAGE(err.find("s3c") == std::string::npos, err);
    CHECK_MESSAGE(err.find("r3t") == std::string::npos, err);
    CHECK_MESSAGE(err.find("more") == std::string::npos, err);
  }
}

TEST_CASE("trust: a master counts when a majority of the sentinels that answered name it") {
  using redlock::detail::agree_on_master;
  using redlock::detail::SentinelAnswer;
  using redlock::detail::SentinelMaster;
  auto names = [](const char* sentinel, const char* ip, int port, long long epoch = 1,
                  long long role_ms = 1000) {
    SentinelMaster m;
    m.ip = ip;
    m.port = port;
    m.config_epoch = epoch;
    m.role_reported_ms = role_ms;
    return SentinelAnswer{sentinel, m, {}};
  };
  auto error = [](const char* sentinel, const char* text) {
    return SentinelAnswer{sentinel, std::nullopt, text};
  };
  auto one = agree_on_master({names("s1", "10.0.0.1", 6379)});
  REQUIRE(one.master);
  CHECK(one.master->ip == "10.0.0.1");

  auto two_of_three =
      agree_on_master({names("s1", "10.0.0.2", 6379, 4, 900), names("s2", "10.0.0.1", 6379, 3),
                       names("s3", "10.0.0.2", 6379, 5, 200)});
  REQUIRE(two_of_three.master);
  CHECK(two_of_three.master->ip == "10.0.0.2");
  CHECK(two_of_three.master->config_epoch == 5);
  CHECK(two_of_three.master->role_reported_ms == 200);

  auto split = agree_on_master({names("s1:1", "10.0.0.1", 6379), names("s2:2", "10.0.0.9", 6380)});
  CHECK_FALSE(split.master);
  CHECK(split.why.find("disagree") != std::string::npos);
  CHECK(split.why.find("s1:1 names 10.0.0.1:6379") != std::string::npos);
  CHECK(split.why.find("s2:2 names 10.0.0.9:6380") != std::string::npos);

  // Same ip, another port: another server.
  CHECK_FALSE(agree_on_master({names("a", "10.0.0.1", 1), names("b", "10.0.0.1", 2)}).master);
  // An error is an answer that names nobody.
  auto errs = agree_on_master({names("a", "10.0.0.1", 1), error("b", "ERR No such master")});
  CHECK_FALSE(errs.master);
  CHECK(errs.why.find("b: ERR No such master") != std::string::npos);
  CHECK(agree_on_master({error("a", "ERR No such master with that name")}).why ==
        "ERR No such master with that name");
  CHECK_FALSE(agree_on_master({}).master);
}
