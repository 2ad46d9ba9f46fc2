#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <string>

#include "core/scripts.hpp"
#include "core/token.hpp"
#include "net/resp.hpp"

using namespace redlock::detail;

TEST_CASE("token: 40 lowercase hex characters") {
  for (int i = 0; i < 100; ++i) {
    auto t = make_token();
    CHECK(t.size() == 40);
    CHECK(looks_like_token(t));
  }
  CHECK_FALSE(looks_like_token("ABCDEF0123456789ABCDEF0123456789ABCDEF01"));
  CHECK_FALSE(looks_like_token("abc"));
}

TEST_CASE("token: unique over 100000 draws and not constant per byte position") {
  std::set<std::string> seen;
  std::set<char> first_chars;
  for (int i = 0; i < 100000; ++i) {
    auto t = make_token();
    first_chars.insert(t[0]);
    CHECK_MESSAGE(seen.insert(t).second, "duplicate token ", t);
  }
  CHECK(first_chars.size() == 16);
}

using redlock::net::resp::script_sha;
using redlock::net::resp::sha1_hex;

TEST_CASE("sha1 (OpenSSL) matches the FIPS 180 test vectors") {
  CHECK(sha1_hex("") == "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  CHECK(sha1_hex("abc") == "a9993e364706816aba3e25717850c26c9cd0d89d");
  CHECK(sha1_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  CHECK(sha1_hex(std::string(1000000, 'a')) == "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
  // 55/56/64-byte boundaries of the padding
  CHECK(sha1_hex(std::string(55, 'a')) == "c1c8bbdc22796e28c0e15163d20899b65621d65a");
  CHECK(sha1_hex(std::string(56, 'a')) == "c2db330f6083854c99d4b5bfb6e8f29f201be699");
  CHECK(sha1_hex(std::string(64, 'a')) == "0098ba824b5c16427bd7a1122a5a442a25ec644d");
}

TEST_CASE("the single-key scripts are the documented ones (the release with a publish after it)") {
  // The release: the documented compare-and-delete first, returning what it returns; then only a
  // publish (integration tests run it against other clients' locks and theirs against ours).
  const auto release = script_body(ScriptId::release);
  CHECK(release.starts_with(
      R"(if redis.call("get",KEYS[1]) ~= ARGV[1] then return 0 end
local n = redis.call("del",KEYS[1])
)"));
  CHECK(release.ends_with("\nreturn n"));
  // pcall: an ACL user without channel rights still releases (the publish fails, quietly)
  CHECK(release.find("redis.pcall(\"publish\"") != std::string_view::npos);
  CHECK(
      script_body(ScriptId::extend) ==
      R"(if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("pexpire",KEYS[1],ARGV[2]) else return 0 end)");
  for (std::size_t i = 0; i < script_count(); ++i) {
    const auto id = static_cast<ScriptId>(i);
    CHECK(script_sha(id) == sha1_hex(script_body(id)));
    CHECK(script_sha(id).size() == 40);
  }
}

#include <fstream>
#include <sstream>

#include "redlock/fencing.hpp"

TEST_CASE("the shipped fenced-set.lua is the script the library exposes") {
  std::ifstream in(REDLOCK_SOURCE_ROOT "/scripts/lua/fenced-set.lua");
  REQUIRE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  CHECK(ss.str() == redlock::fenced_write_script());
}

TEST_CASE("a multi-resource token names its resources; other tokens name none") {
  const auto t = make_token();
  CHECK(token_for(t, 1) == t);
  CHECK(token_for(t, 3) == t + "-3");
  CHECK(token_resources(token_for(t, 3)) == std::optional<std::size_t>(3));
  CHECK(token_resources(token_for(t, 12)) == std::optional<std::size_t>(12));
  CHECK_FALSE(token_resources(t));
  CHECK_FALSE(token_resources(t + "-"));
  CHECK_FALSE(token_resources(t + "-1"));
  CHECK_FALSE(token_resources(t + "-x"));
  CHECK_FALSE(token_resources("not-a-token-3"));
  CHECK_FALSE(token_resources(t.substr(1) + "-33"));  // 39 hex digits
}

TEST_CASE("tokens: a forked child never makes its parent's next tokens") {
  // The parent's pool holds bytes for ~200 more tokens; a child that reused them would hand out
  // the very tokens the parent is about to use.
  (void)redlock::detail::make_token();
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::string all;
    for (int i = 0; i < 8; ++i) all += redlock::detail::make_token();
    const auto n = write(fds[1], all.data(), all.size());
    _exit(n == static_cast<ssize_t>(all.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string from_child(8 * 40, '\0');
  std::size_t got = 0;
  while (got < from_child.size()) {
    const auto n = read(fds[0], from_child.data() + got, from_child.size() - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(got == from_child.size());
  std::set<std::string> mine;
  for (int i = 0; i < 8; ++i) mine.insert(redlock::detail::make_token());
  for (std::size_t i = 0; i < 8; ++i) CHECK(mine.count(from_child.substr(40 * i, 40)) == 0);
}
