// The wire without a server: RESP encoding, and the reader (whole, in pieces, byte by byte).
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/reply.hpp"
#include "net/reader.hpp"
#include "net/resp.hpp"

using namespace redlock;
using namespace redlock::detail;
using redlock::net::Reader;

namespace {

// Every complete reply in `bytes`, fed in chunks of `chunk` bytes, described recursively.
std::vector<std::string> read_all(const std::string& bytes, std::size_t chunk,
                                  std::string* error = nullptr) {
  Reader r;
  std::vector<std::string> out;
  std::function<std::string(const Reply&)> deep = [&](const Reply& x) {
    std::string s = x.describe() + (x.type == Reply::Type::string ? "=" + x.str : "");
    if (x.type == Reply::Type::array) {
      s += "[";
      for (const auto& e : x.elements) s += deep(e) + ";";
      s += "]";
    }
    return s;
  };
  for (std::size_t i = 0; i < bytes.size(); i += chunk) {
    if (!r.feed(bytes.data() + i, std::min(chunk, bytes.size() - i))) break;
    for (;;) {
      const auto n = r.next();
      if (n == Reader::Next::reply) {
        out.push_back(deep(r.reply()));
        continue;
      }
      if (n == Reader::Next::error && error) *error = r.error();
      break;
    }
    if (!r.error().empty()) break;
  }
  if (error && error->empty()) *error = r.error();
  return out;
}

}  // namespace

TEST_CASE("RESP: a plain command and a script call, binary-safe") {
  std::string out;
  net::resp::append_command(out, Command::plain({"SET", "k", std::string("a\0b", 3), "NX"}));
  CHECK(out == std::string("*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\na\0b\r\n$2\r\nNX\r\n", 37));
  out.clear();
  const auto c = Command::call(ScriptId::release, {"k"}).arg("tok");
  net::resp::append_command(out, c);
  CHECK(out == "*5\r\n$7\r\nEVALSHA\r\n$40\r\n" + net::resp::script_sha(ScriptId::release) +
                   "\r\n$1\r\n1\r\n$1\r\nk\r\n$3\r\ntok\r\n");
  out.clear();
  net::resp::append_command(out, c, net::resp::ScriptForm::eval);
  CHECK(out.starts_with("*5\r\n$4\r\nEVAL\r\n$" +
                        std::to_string(script_body(ScriptId::release).size()) + "\r\n"));
}

// A command built on a temporary (`return Command::plain({...}).arg(ttl);`, as every lock kind
// does) is moved into its result: arg() on an rvalue gives an rvalue. Were it an lvalue, each
// acquire and release would copy its arguments (three allocations each).
static_assert(std::is_same_v<decltype(Command{}.arg(1LL)), Command&&>);
static_assert(std::is_same_v<decltype(Command{}.arg("x")), Command&&>);
static_assert(std::is_same_v<decltype(std::declval<Command&>().arg("x")), Command&>);

TEST_CASE("a command's args survive arg() chains on a temporary and on a named command") {
  const Command moved = Command::plain({"SET", "a-key-longer-than-sso", "NX"}).arg(7).arg("PX");
  CHECK(moved.args == std::vector<std::string>{"SET", "a-key-longer-than-sso", "NX", "7", "PX"});
  Command named = Command::call(ScriptId::release, {"k"});
  named.arg("tok").arg(5);
  CHECK(named.args == std::vector<std::string>{"k", "tok", "5"});
  CHECK(named.numkeys == 1);
}

TEST_CASE("RESP round trip: what the encoder writes, the reader reads back as the same argv") {
  const auto c = Command::call(ScriptId::acquire_multi, {"a", "b c", ""}).arg("tok").arg(30000LL);
  std::string out;
  net::resp::append_command(out, c);
  for (std::size_t chunk : {out.size(), std::size_t{1}, std::size_t{3}}) {
    auto got = read_all(out, chunk);
    REQUIRE(got.size() == 1);
    CHECK(got[0].find("(string of 3 bytes)=b c;") != std::string::npos);
    CHECK(got[0].find("(string of 0 bytes)=;") != std::string::npos);
    CHECK(got[0].starts_with("(array of 8)"));
  }
}

TEST_CASE("Reader: many replies in one read, and the same replies byte by byte") {
  const std::string bytes =
      "+OK\r\n$-1\r\n:42\r\n-ERR no\r\n$3\r\nabc\r\n*2\r\n:1\r\n*1\r\n+x\r\n*-1\r\n*0\r\n";
  const auto whole = read_all(bytes, bytes.size());
  CHECK(whole == std::vector<std::string>{
                     "OK", "(nil)", "(integer) 42", "(error) ERR no", "(string of 3 bytes)=abc",
                     "(array of 2)[(integer) 1;(array of 1)[x;];]", "(nil)", "(array of 0)[]"});
  for (std::size_t chunk = 1; chunk < 8; ++chunk) CHECK(read_all(bytes, chunk) == whole);
}

TEST_CASE("Reader: the one reused reply value holds each reply until the next one") {
  Reader r;
  const std::string a = "$40\r\n0123456789012345678901234567890123456789\r\n+OK\r\n";
  REQUIRE(r.feed(a.data(), a.size()));
  REQUIRE(r.next() == Reader::Next::reply);
  CHECK(r.reply().str.size() == 40);
  REQUIRE(r.next() == Reader::Next::reply);
  CHECK(r.reply().is_status("OK"));
  CHECK(r.next() == Reader::Next::more);
}

TEST_CASE(
    "Reader guards: a huge element count, too many nested elements, garbage, a huge pending bulk") {
  std::string err;
  CHECK(read_all("*268435456\r\n", 64, &err).empty());
  CHECK(err.find("268435456 elements") != std::string::npos);
  // Eight small headers that together claim more than the limit.
  std::string nested;
  for (int i = 0; i < 8; ++i) nested += "*65536\r\n";
  err.clear();
  CHECK(read_all(nested, nested.size(), &err).empty());
  CHECK(err.find("nested arrays") != std::string::npos);
  err.clear();
  CHECK(read_all("%2\r\n", 4, &err).empty());  // RESP3 map: not what a RESP2 server sends
  CHECK_FALSE(err.empty());
  Reader r;
  const std::string head = "$1073741824\r\n";
  REQUIRE(r.feed(head.data(), head.size()));
  CHECK(r.next() == Reader::Next::more);
  std::string chunk(1 << 20, 'x');
  bool refused = false;
  for (int i = 0; i < 70 && !refused; ++i) refused = !r.feed(chunk.data(), chunk.size());
  CHECK(refused);
  CHECK(r.error().find("unfinished reply") != std::string::npos);
  r.reset();
  const std::string ok = "+OK\r\n";
  REQUIRE(r.feed(ok.data(), ok.size()));
  CHECK(r.next() == Reader::Next::reply);
}

TEST_CASE("a refused AUTH's error text never carries the password") {
  // Redis without AUTH (renamed away) echoes the arguments.
  CHECK(auth_error_text("ERR unknown command 'AUTH', with args beginning with: 'alice' 's3cr3t' ",
                        "s3cr3t") == "ERR unknown command 'AUTH'");
  // Cut off even where the password is unknown here (nothing to replace) or truncated.
  CHECK(auth_error_text("ERR unknown command 'AUTH', with args beginning with: 's3c' ", "") ==
        "ERR unknown command 'AUTH'");
  // Anywhere else it appears, it is replaced.
  CHECK(auth_error_text("ERR proxy: bad password s3cr3t for s3cr3t", "s3cr3t") ==
        "ERR proxy: bad password *** for ***");
  // The usual refusals pass unchanged.
  CHECK(auth_error_text("WRONGPASS invalid username-password pair or user is disabled.", "pw") ==
        "WRONGPASS invalid username-password pair or user is disabled.");
  CHECK(auth_error_text("", "pw").empty());
  // A password that is in the text it replaces with does not loop.
  CHECK(auth_error_text("a*b", "*") == "a***b");
}

TEST_CASE("a node's AUTH command: AUTH [user] password, none without a password") {
  // (That its bytes are overwritten when the last holder lets it go cannot be observed without
  // reading freed memory: net/resp.cpp, auth_request.)
  NodeAddress a;
  CHECK(net::auth_request(a) == nullptr);
  a.password = "p,w";
  CHECK(net::auth_request(a)->wire == "*2\r\n$4\r\nAUTH\r\n$3\r\np,w\r\n");
  a.user = "alice";
  const auto auth = net::auth_request(a);
  CHECK(auth->wire == "*3\r\n$4\r\nAUTH\r\n$5\r\nalice\r\n$3\r\np,w\r\n");
  CHECK(auth->command.args == std::vector<std::string>{"AUTH", "alice", "p,w"});
}
