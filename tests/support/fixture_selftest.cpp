// Self-test of the test fixture: real redis-server lifecycle and faults, and the fake node.
#include <doctest/doctest.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "cluster_fixture.hpp"
#include "fake_node.hpp"
#include "redis_fixture.hpp"
#include "sentinel_fixture.hpp"
#include "support_util.hpp"
#include "tls_fixture.hpp"

using namespace redlock::test;
namespace nodes = redlock::nodes;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

#define REQUIRE_REDIS()                                \
  do {                                                 \
    if (!redis_server_available()) {                   \
      MESSAGE("redis-server not found: test skipped"); \
      return;                                          \
    }                                                  \
  } while (0)

namespace {

struct CtxFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Ctx = std::unique_ptr<redisContext, CtxFree>;
struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using RawReply = std::unique_ptr<redisReply, ReplyFree>;

timeval tv_of(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

Ctx connect(std::uint16_t port, std::chrono::milliseconds timeout) {
  Ctx c(redisConnectWithTimeout("127.0.0.1", port, tv_of(timeout)));
  REQUIRE(c);
  REQUIRE_MESSAGE(c->err == 0, c->errstr);
  REQUIRE(redisSetTimeout(c.get(), tv_of(timeout)) == REDIS_OK);
  return c;
}

RawReply cmd(redisContext* c, const std::vector<std::string>& argv) {
  std::vector<const char*> a;
  std::vector<size_t> l;
  for (const auto& s : argv) a.push_back(s.data()), l.push_back(s.size());
  return RawReply(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(a.size()), a.data(), l.data())));
}

long long ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

bool reaped(pid_t pid) {  // true if pid is no longer our (zombie or live) child
  int st = 0;
  return ::waitpid(pid, &st, WNOHANG) == -1 && errno == ECHILD;
}

template <class Pred>
bool eventually(Pred p, std::chrono::milliseconds limit = 2000ms) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (p()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return p();
}

}  // namespace

// ------------------------------------------------------------------------------------------------

TEST_CASE("free_port never hands out the same port twice") {
  std::set<std::uint16_t> seen;
  for (int i = 0; i < 200; ++i) {
    const auto p = free_port();
    CHECK(p != 0);
    CHECK(seen.insert(p).second);
  }
}

TEST_CASE("a server starts, answers binary-safe commands, and cleans up after itself") {
  REQUIRE_REDIS();
  pid_t pid = -1;
  std::string dir;
  {
    RedisServer s;
    REQUIRE(s.running());
    pid = s.pid();
    dir = s.dir();
    CHECK(pid > 0);
    CHECK(std::filesystem::is_directory(dir));
    CHECK(s.address() == "127.0.0.1:" + std::to_string(s.port()));
    CHECK(s.unix_path().empty());
    CHECK(s.command({"PING"}).str == "PONG");

    const std::string value("a\0b\r\n$3\r\nc", 11);
    s.set("k", value);
    CHECK(s.get("k") == value);
    CHECK(s.exists("k"));
    CHECK(s.pttl("k") == -1);
    CHECK(s.pttl("missing") == -2);
    CHECK_FALSE(s.get("missing").has_value());
    CHECK(s.command({"SET", "t", "v", "NX", "PX", "10000"}).is_status("OK"));
    const auto ttl = s.pttl("t");
    CHECK(ttl > 9000);
    CHECK(ttl <= 10000);
    CHECK(s.command({"SET", "t", "v", "NX", "PX", "10000"}).is_nil());
    CHECK(s.command({"INCR", "n"}).integer == 1);
    const Reply arr = s.command({"MGET", "t", "missing"});
    REQUIRE(arr.type == Reply::Type::array);
    CHECK(nodes::reply_text(arr) == "[\"v\", (nil)]");
    CHECK(s.run_id().size() == 40);
    CHECK(s.log_tail().find("Ready to accept connections") != std::string::npos);
  }
  CHECK_FALSE(std::filesystem::exists(dir));
  CHECK(reaped(pid));
}

TEST_CASE("kill then start without AOF loses the data; run_id changes") {
  REQUIRE_REDIS();
  RedisServer s;
  const auto port = s.port();
  const auto old_id = s.run_id();
  s.set("lock", "token");
  const pid_t old_pid = s.pid();
  s.kill();
  CHECK_FALSE(s.running());
  CHECK(s.pid() == -1);
  CHECK(reaped(old_pid));
  try {
    (void)s.command({"PING"}, 500ms);
    FAIL("command to a killed server should throw");
  } catch (const RedisIoError& e) {
    CHECK_FALSE(e.timed_out());  // connection refused, not a timeout
  }
  s.start();
  CHECK(s.running());
  CHECK(s.port() == port);
  CHECK_FALSE(s.get("lock").has_value());
  CHECK(s.run_id() != old_id);
  CHECK_THROWS_AS(s.start(), std::logic_error);
}

TEST_CASE("with aof_always an acknowledged write survives kill -9") {
  REQUIRE_REDIS();
  ServerConfig cfg;
  cfg.aof_always = true;
  RedisServer s(cfg);
  CHECK(s.command({"SET", "lock", "token", "PX", "60000"}).is_status("OK"));
  s.kill();
  s.start();
  CHECK(s.get("lock") == "token");
  CHECK(s.pttl("lock") > 50000);  // TTL is absolute: it kept running while the server was down
  const auto t0 = Clock::now();
  s.restart(100ms);
  CHECK(ms_since(t0) >= 100);
  CHECK(s.get("lock") == "token");
}

TEST_CASE("a stopped server accepts TCP but answers nothing until cont()") {
  REQUIRE_REDIS();
  pid_t pid = -1;
  {
    RedisServer s;
    pid = s.pid();
    s.set("k", "v");
    s.stop();
    CHECK(s.stopped());
    CHECK(s.running());
    s.stop();  // idempotent

    // The kernel still completes the TCP handshake ...
    Ctx c = connect(s.port(), 200ms);
    // ... but nothing is served.
    const auto t0 = Clock::now();
    try {
      (void)s.command({"GET", "k"}, 200ms);
      FAIL("command to a stopped server should time out");
    } catch (const RedisIoError& e) {
      CHECK(e.timed_out());
      CHECK(e.failure() == redlock::nodes::Failure::timeout);
    }
    CHECK(ms_since(t0) >= 190);

    s.cont();
    CHECK_FALSE(s.stopped());
    CHECK(s.get("k") == "v");

    s.stop();  // the destructor must kill and reap a stopped server
  }
  CHECK(reaped(pid));
}

TEST_CASE("replica_of makes writes answer READONLY; make_master undoes it") {
  REQUIRE_REDIS();
  RedisServer master;
  RedisServer replica;
  replica.replica_of(master);
  const Reply r = replica.command({"SET", "lock", "x", "NX", "PX", "1000"});
  CHECK_MESSAGE(r.is_error("READONLY"), nodes::reply_text(r));
  replica.make_master();
  CHECK(replica.command({"SET", "lock", "x", "NX", "PX", "1000"}).is_status("OK"));
}

TEST_CASE("wait_replicated: true once the replica has the writes, false while it is paused") {
  REQUIRE_REDIS();
  RedisServer master;
  RedisServer replica;
  CHECK_FALSE(master.wait_replicated(1, 50ms));  // no replica at all
  replica.replica_of(master);
  master.set("k", "v1");
  REQUIRE(master.wait_replicated(1, 10s));
  CHECK(replica.get("k") == "v1");
  replica.stop();  // it acknowledges nothing while paused
  master.set("k", "v2");
  CHECK_FALSE(master.wait_replicated(1, 1500ms));
  replica.cont();
  CHECK(master.wait_replicated(1, 10s));
  CHECK(replica.get("k") == "v2");
}

TEST_CASE("make_oom makes writes answer OOM; clear_oom undoes it") {
  REQUIRE_REDIS();
  RedisServer s;
  s.make_oom();
  const Reply r = s.command({"SET", "lock", "x", "NX", "PX", "1000"});
  CHECK_MESSAGE(r.is_error("OOM"), nodes::reply_text(r));
  CHECK(s.command({"PING"}).str == "PONG");
  s.clear_oom();
  CHECK(s.command({"SET", "lock", "x", "NX", "PX", "1000"}).is_status("OK"));
}

TEST_CASE("set_wrong_type and script_flush") {
  REQUIRE_REDIS();
  RedisServer s;
  s.set_wrong_type("lock");
  CHECK(s.command({"GET", "lock"}).is_error("WRONGTYPE"));
  CHECK_THROWS_AS((void)s.get("lock"), std::runtime_error);

  const Reply sha = s.command({"SCRIPT", "LOAD", "return 1"});
  REQUIRE(sha.type == Reply::Type::string);
  CHECK(s.command({"EVALSHA", sha.str, "0"}).integer == 1);
  s.script_flush();
  CHECK(s.command({"EVALSHA", sha.str, "0"}).is_error("NOSCRIPT"));
}

TEST_CASE("unix socket") {
  REQUIRE_REDIS();
  ServerConfig cfg;
  cfg.unix_socket = true;
  RedisServer s(cfg);
  REQUIRE_FALSE(s.unix_path().empty());
  CHECK(std::filesystem::is_socket(s.unix_path()));
  Ctx c(redisConnectUnixWithTimeout(s.unix_path().c_str(), tv_of(1000ms)));
  REQUIRE(c);
  REQUIRE_MESSAGE(c->err == 0, c->errstr);
  RawReply r = cmd(c.get(), {"PING"});
  REQUIRE(r);
  CHECK(std::string(r->str, r->len) == "PONG");
  // It comes back on restart too.
  c.reset();
  s.restart();
  Ctx c2(redisConnectUnixWithTimeout(s.unix_path().c_str(), tv_of(1000ms)));
  REQUIRE(c2);
  CHECK(c2->err == 0);
}

TEST_CASE("a server that cannot start reports why") {
  REQUIRE_REDIS();
  ServerConfig cfg;
  cfg.extra_args = {"--no-such-directive", "x"};
  try {
    RedisServer s(cfg);
    FAIL("should not start");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    CHECK_MESSAGE(what.find("Bad directive") != std::string::npos, what);
  }
}

TEST_CASE("a fixed port that is taken fails with the reason after startup_timeout") {
  REQUIRE_REDIS();
  FakeNode squatter(FakeNode::silent());
  ServerConfig cfg;
  cfg.port = squatter.port();
  cfg.startup_timeout = 300ms;
  try {
    RedisServer s(cfg);
    FAIL("should not start on a taken port");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    CHECK_MESSAGE(what.find("Address already in use") != std::string::npos, what);
  }
}

TEST_CASE("RedisServer is movable; DEBUG is enabled; the child environment is scrubbed") {
  REQUIRE_REDIS();
  // No other threads run here, so setenv is safe. With LD_PRELOAD inherited, ld.so would print
  // "ERROR: ld.so: object ... from LD_PRELOAD cannot be preloaded" to the server's stderr.
  // (/proc/<pid>/environ cannot be checked: redis overwrites that memory for its process title.)
  ::setenv("FAKETIME", "+1d", 1);
  ::setenv("LD_PRELOAD", "/nonexistent/redlock-test-preload.so", 1);
  RedisServer a;
  ::unsetenv("FAKETIME");
  ::unsetenv("LD_PRELOAD");
  {
    std::ifstream out(a.dir() + "/redis.out", std::ios::binary);
    REQUIRE(out.is_open());
    const std::string text((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
    CHECK_MESSAGE(text.find("LD_PRELOAD") == std::string::npos, text);
  }
  CHECK(a.command({"DEBUG", "SLEEP", "0"}).is_status("OK"));

  const pid_t pid = a.pid();
  const std::string dir = a.dir();
  RedisServer b(std::move(a));
  CHECK(b.pid() == pid);
  CHECK(b.dir() == dir);
  CHECK_FALSE(a.running());  // NOLINT(bugprone-use-after-move): moved-from state is specified
  RedisServer c;
  const pid_t c_pid = c.pid();
  c = std::move(b);  // kills and reaps c's old server
  CHECK(reaped(c_pid));
  CHECK(c.pid() == pid);
  CHECK(c.command({"PING"}).str == "PONG");
}

TEST_CASE("RedisCluster: addresses, count_with_key, faults, heal") {
  REQUIRE_REDIS();
  RedisCluster c(3);
  REQUIRE(c.size() == 3);
  std::set<std::uint16_t> ports;
  for (std::size_t i = 0; i < c.size(); ++i) {
    ports.insert(c[i].port());
    CHECK(c[i].running());
  }
  CHECK(ports.size() == 3);
  CHECK(c.nodes_csv() == c[0].address() + "," + c[1].address() + "," + c[2].address());
  CHECK(c.addresses() == std::vector<std::string>{c[0].address(), c[1].address(), c[2].address()});

  for (std::size_t i = 0; i < c.size(); ++i) c[i].set("lock", "t");
  CHECK(c.count_with_key("lock") == 3);
  CHECK(c.count_with_key("other") == 0);
  c[1].stop();
  CHECK(c.count_with_key("lock") == 2);  // stopped: skipped, and no 2 s timeout
  c[2].kill();
  CHECK(c.count_with_key("lock") == 1);
  c.heal();
  CHECK(c[1].running());
  CHECK_FALSE(c[1].stopped());
  CHECK(c[2].running());
  CHECK(c.count_with_key("lock") == 2);  // node 2 restarted without AOF: lost it
}

TEST_CASE("servers die with the process that started them (PR_SET_PDEATHSIG)") {
  REQUIRE_REDIS();
  // Become a subreaper so the orphaned server is re-parented to us and we can watch it die.
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(fds[0]);
    try {
      auto* s = new RedisServer();  // never destroyed: this process gets SIGKILLed
      const std::string msg = std::to_string(s->pid()) + " " + s->dir() + "\n";
      ssize_t ignored = ::write(fds[1], msg.data(), msg.size());
      (void)ignored;
    } catch (...) {
    }
    ::close(fds[1]);
    for (;;) ::pause();
  }
  ::close(fds[1]);
  std::string msg;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  ::kill(child, SIGKILL);
  int st = 0;
  ::waitpid(child, &st, 0);

  std::istringstream in(msg);
  pid_t server = -1;
  std::string dir;
  in >> server >> dir;
  REQUIRE_MESSAGE(server > 0, "child could not start a server: '" << msg << "'");

  int sst = 0;
  const bool gone = eventually([&] { return ::waitpid(server, &sst, WNOHANG) == server; }, 3000ms);
  if (!gone) {
    ::kill(server, SIGKILL);  // we are its parent now (subreaper): it is ours to clean up
    ::waitpid(server, &sst, 0);
  }
  CHECK(gone);
  CHECK(WIFSIGNALED(sst));
  CHECK(WTERMSIG(sst) == SIGKILL);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
}

// ------------------------------------------------------------------------------------------------
// FakeNode

TEST_CASE("FakeNode silent: connect succeeds, commands time out") {
  FakeNode node(FakeNode::silent());
  CHECK(node.address() == "127.0.0.1:" + std::to_string(node.port()));
  Ctx c = connect(node.port(), 200ms);
  const auto t0 = Clock::now();
  RawReply r = cmd(c.get(), {"SET", "lock", "v", "NX", "PX", "1000"});
  CHECK_FALSE(r);
  CHECK(c->err == REDIS_ERR_IO);
  CHECK(ms_since(t0) >= 190);
  CHECK(node.commands_seen() == 1);
  CHECK(node.connections_accepted() == 1);
  CHECK(node.commands().at(0) == std::vector<std::string>{"SET", "lock", "v", "NX", "PX", "1000"});
}

TEST_CASE("FakeNode garbage: hiredis reports a protocol error") {
  FakeNode node(FakeNode::garbage());
  Ctx c = connect(node.port(), 1000ms);
  RawReply r = cmd(c.get(), {"PING"});
  CHECK_FALSE(r);
  CHECK(c->err == REDIS_ERR_PROTOCOL);
}

TEST_CASE("FakeNode redis_like answers like a Redis") {
  FakeNode node(FakeNode::redis_like());
  Ctx c = connect(node.port(), 1000ms);
  RawReply r = cmd(c.get(), {"SET", "lock", std::string("v\0\r\n", 4), "NX", "PX", "1000"});
  REQUIRE(r);
  CHECK(r->type == REDIS_REPLY_STATUS);
  CHECK(std::string(r->str, r->len) == "OK");
  r = cmd(c.get(), {"PING"});
  REQUIRE(r);
  CHECK(std::string(r->str, r->len) == "PONG");
  r = cmd(c.get(), {"EVALSHA", std::string(40, 'a'), "1", "lock", "v"});
  REQUIRE(r);
  CHECK(r->type == REDIS_REPLY_INTEGER);
  CHECK(r->integer == 1);
  r = cmd(c.get(), {"INFO", "server"});
  REQUIRE(r);
  REQUIRE(r->type == REDIS_REPLY_STRING);
  const std::string info(r->str, r->len);
  CHECK(info.find("\r\nrun_id:") != std::string::npos);
  CHECK(info.find("uptime_in_seconds:1000\r\n") != std::string::npos);
  r = cmd(c.get(), {"CONFIG", "GET", "maxmemory-policy"});
  REQUIRE(r);
  CHECK(r->type == REDIS_REPLY_ARRAY);
  CHECK(r->elements == 0);

  const std::string script = "return redis.call('GET', KEYS[1])";
  r = cmd(c.get(), {"SCRIPT", "LOAD", script});
  REQUIRE(r);
  REQUIRE(r->type == REDIS_REPLY_STRING);
  const std::string fake_sha(r->str, r->len);
  CHECK(fake_sha.size() == 40);
  if (redis_server_available()) {  // the fake's SHA1 is the real one
    RedisServer s;
    CHECK(s.command({"SCRIPT", "LOAD", script}).str == fake_sha);
  }
  const auto cmds = node.commands();
  REQUIRE(cmds.size() == 6);
  CHECK(cmds[0][2] == std::string("v\0\r\n", 4));  // binary-safe parsing
}

TEST_CASE("FakeNode delay is respected and replies stay in order") {
  FakeNode node(FakeNode::redis_like(), 150ms);
  Ctx c = connect(node.port(), 2000ms);
  auto t0 = Clock::now();
  RawReply r = cmd(c.get(), {"PING"});
  REQUIRE(r);
  CHECK(ms_since(t0) >= 150);

  // Pipelined: each reply comes `delay` after its own request, in order.
  t0 = Clock::now();
  REQUIRE(redisAppendCommand(c.get(), "PING") == REDIS_OK);
  REQUIRE(redisAppendCommand(c.get(), "SET a b") == REDIS_OK);
  REQUIRE(redisAppendCommand(c.get(), "PING hello") == REDIS_OK);
  void* raw = nullptr;
  REQUIRE(redisGetReply(c.get(), &raw) == REDIS_OK);
  r.reset(static_cast<redisReply*>(raw));
  CHECK(ms_since(t0) >= 150);
  CHECK(std::string(r->str, r->len) == "PONG");
  REQUIRE(redisGetReply(c.get(), &raw) == REDIS_OK);
  r.reset(static_cast<redisReply*>(raw));
  CHECK(std::string(r->str, r->len) == "OK");
  REQUIRE(redisGetReply(c.get(), &raw) == REDIS_OK);
  r.reset(static_cast<redisReply*>(raw));
  CHECK(std::string(r->str, r->len) == "hello");
  CHECK(ms_since(t0) < 1000);  // not 3 x delay in series (generous bound: shared machine)

  node.set_delay(0ms);
  t0 = Clock::now();
  r = cmd(c.get(), {"PING"});
  REQUIRE(r);
}

TEST_CASE("FakeNode reset_mid_reply: half a reply, then the connection closes") {
  FakeNode node(FakeNode::reset_mid_reply());
  Ctx c = connect(node.port(), 1000ms);
  RawReply r = cmd(c.get(), {"PING"});
  REQUIRE(r);
  CHECK(std::string(r->str, r->len) == "PONG");
  r = cmd(c.get(), {"SET", "lock", "v", "NX", "PX", "1000"});
  CHECK_FALSE(r);
  CHECK((c->err == REDIS_ERR_EOF || c->err == REDIS_ERR_IO));

  // reset_after() sends an RST instead of a FIN.
  node.set_responder([](const std::vector<std::string>&) -> std::optional<std::string> {
    return FakeNode::reset_after("$10\r\nhalf");
  });
  Ctx c2 = connect(node.port(), 1000ms);
  r = cmd(c2.get(), {"GET", "lock"});
  CHECK_FALSE(r);
  CHECK((c2->err == REDIS_ERR_EOF || c2->err == REDIS_ERR_IO));
}

TEST_CASE("FakeNode close_connections drops clients but keeps listening") {
  FakeNode node(FakeNode::redis_like());
  Ctx c = connect(node.port(), 1000ms);
  RawReply r = cmd(c.get(), {"PING"});
  REQUIRE(r);
  node.close_connections();
  r = cmd(c.get(), {"PING"});
  CHECK_FALSE(r);
  Ctx c2 = connect(node.port(), 1000ms);
  r = cmd(c2.get(), {"PING"});
  REQUIRE(r);
  CHECK(node.connections_accepted() == 2);
}

TEST_CASE("FakeNode can take over a killed server's port") {
  REQUIRE_REDIS();
  RedisServer s;
  s.kill();
  {
    FakeNode fake(FakeNode::silent(), 0ms, s.port());
    CHECK(fake.port() == s.port());
    try {
      (void)s.command({"PING"}, 200ms);
      FAIL("silent fake should time out");
    } catch (const RedisIoError& e) {
      CHECK(e.timed_out());
    }
  }
  s.start();
  CHECK(s.command({"PING"}).str == "PONG");
}

// ------------------------------------------------------------------------------------------------
// TLS: TlsFixture (certificates), RedisServer with ServerConfig::tls, SyncClient over TLS

#define REQUIRE_TLS_TOOLS() REQUIRE_REDIS()

namespace {

// A TLS connection to 127.0.0.1:port with `o`.
nodes::SyncClient tls_connect(std::uint16_t port, const nodes::Tls& o) {
  nodes::Endpoint e = nodes::Endpoint::local(port);
  e.tls = o;
  return nodes::SyncClient(e, {.connect_timeout = 2000ms, .command_timeout = 2000ms});
}

// Why a connection attempt that must fail failed, prefixed with the kind of failure: "tls: ..."
// (handshake, alert), "config: ..." (our own files), "io: ..."; "" when it did not fail.
std::string tls_failure(std::uint16_t port, const nodes::Tls& o) {
  nodes::SyncClient c = tls_connect(port, o);
  (void)c.command({"PING"});  // TLS 1.3: a rejected client certificate shows up here
  if (c.ok()) return "";
  const char* kind = c.failure() == nodes::Failure::handshake ? "tls: "
                     : c.failure() == nodes::Failure::config  ? "config: "
                                                              : "io: ";
  return kind + c.error();
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("TLS server: plaintext port for control, TLS port accepts only the CA's clients") {
  REQUIRE_TLS_TOOLS();
  TlsFixture tls;
  MESSAGE("TlsFixture: certificates made in " << tls.generation_time().count() << " ms");
  for (const auto& f :
       {tls.ca_cert(), tls.server_cert(), tls.server_key(), tls.client_cert(), tls.other_ca_cert(),
        tls.other_server_cert(), tls.other_client_cert(), tls.expired_server_cert(),
        tls.wrong_host_server_cert(), tls.malformed_cert(), tls.empty_file()}) {
    CHECK_MESSAGE(std::filesystem::is_regular_file(f), f);
  }
  std::string dir = tls.dir();

  ServerConfig cfg;
  cfg.tls = tls.server_options("yes");
  {
    RedisServer s(cfg);
    REQUIRE(s.tls_port() != 0);
    CHECK(s.tls_port() != s.port());
    CHECK(s.tls_address() == "127.0.0.1:" + std::to_string(s.tls_port()));
    CHECK_FALSE(s.tls_only());
    CHECK(s.command({"PING"}).str == "PONG");  // the plaintext port still serves the fixture

    // A plaintext client on the TLS port: the server never answers in RESP, it drops us.
    {
      Ctx c = connect(s.tls_port(), 1000ms);
      RawReply r = cmd(c.get(), {"PING"});
      CHECK_FALSE(r);
    }
    // The CA + a client certificate it signed: accepted.
    {
      nodes::SyncClient c = tls_connect(s.tls_port(), tls.client_options());
      REQUIRE_MESSAGE(c.ok(), c.error());
      CHECK(c.command({"PING"})->str == "PONG");
      CHECK(c.command({"SET", "k", "v"})->is_status("OK"));
      CHECK(s.get("k") == "v");  // same data on both listeners
    }
    // DNS:localhost is in the certificate too.
    nodes::Tls by_name = tls.client_options();
    by_name.server_name = "localhost";
    CHECK(command_at(s.tls_port(), {"PING"}, 2000ms, by_name).str == "PONG");

    // --tls-auth-clients yes: no client certificate, or one from another CA: rejected.
    nodes::Tls no_cert = tls.client_options();
    no_cert.cert_file.clear();
    no_cert.key_file.clear();
    std::string why = tls_failure(s.tls_port(), no_cert);
    CHECK_MESSAGE(!why.empty(), "a client without a certificate was accepted");
    nodes::Tls foreign = tls.client_options();
    foreign.cert_file = tls.other_client_cert();
    foreign.key_file = tls.other_client_key();
    why = tls_failure(s.tls_port(), foreign);
    CHECK_MESSAGE(!why.empty(), "a client certificate of another CA was accepted");

    // Trusting the wrong CA: our side refuses the server.
    nodes::Tls wrong_ca = tls.client_options();
    wrong_ca.ca_file = tls.other_ca_cert();
    why = tls_failure(s.tls_port(), wrong_ca);
    // (Redis sends its CA along when it builds the chain from --tls-ca-cert-file.)
    CHECK_MESSAGE((has(why,
                       "tls: TLS handshake failed: certificate verify failed: unable to get "
                       "local issuer certificate") ||
                   has(why,
                       "certificate verify failed: self-signed certificate in certificate "
                       "chain")),
                  why);

    // Bad local files: the client cannot even start the handshake.
    for (const auto& bad :
         {tls.malformed_cert(), tls.empty_file(), tls.missing_file(), tls.directory_path()}) {
      nodes::Tls o = tls.client_options();
      o.ca_file = bad;
      why = tls_failure(s.tls_port(), o);
      CHECK_MESSAGE(has(why, "config: CA file '" + bad + "'"), bad << ": " << why);
    }
    nodes::Tls bad_key = tls.client_options();
    bad_key.key_file = tls.malformed_key();
    why = tls_failure(s.tls_port(), bad_key);
    CHECK_MESSAGE(has(why, "config: client key '" + tls.malformed_key() + "'"), why);
    if (tls.unreadable_file_is_unreadable()) {  // not as root
      nodes::Tls o = tls.client_options();
      o.ca_file = tls.unreadable_file();
      why = tls_failure(s.tls_port(), o);
      CHECK_MESSAGE(has(why, "config: CA file '"), why);
    }

    // redis-cli agrees (when it is installed; Debian's is built with TLS).
    if (!find_executable("redis-cli").empty()) {
      const ProcessResult r = run_process(
          {"redis-cli", "--tls", "--cacert", tls.ca_cert(), "--cert", tls.client_cert(), "--key",
           tls.client_key(), "-h", "127.0.0.1", "-p", std::to_string(s.tls_port()), "PING"},
          5s);
      CHECK_MESSAGE(r.output.find("PONG") != std::string::npos, r.describe() << ": " << r.output);
    }
    // It survives a restart on the same ports.
    const auto tls_port = s.tls_port();
    s.restart();
    CHECK(s.tls_port() == tls_port);
    CHECK(command_at(s.tls_port(), {"PING"}, 2000ms, tls.client_options()).str == "PONG");
  }
}

TEST_CASE("TLS-only servers (--port 0) with bad certificates: the fixture copes, clients refuse") {
  REQUIRE_TLS_TOOLS();
  TlsFixture tls;
  struct Case {
    std::string cert, key, host;
    std::string expected;
  };
  const Case cases[] = {
      {tls.expired_server_cert(), tls.expired_server_key(), "127.0.0.1", "certificate has expired"},
      {tls.wrong_host_server_cert(), tls.wrong_host_server_key(), "127.0.0.1",
       "IP address mismatch"},
      {tls.wrong_host_server_cert(), tls.wrong_host_server_key(), "localhost", "hostname mismatch"},
      {tls.other_server_cert(), tls.other_server_key(), "127.0.0.1",
       "unable to get local issuer certificate"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.cert);
    ServerConfig cfg;
    cfg.tls = tls.server_options("no", /*tls_only=*/true);
    cfg.tls->cert_file = c.cert;
    cfg.tls->key_file = c.key;
    RedisServer s(cfg);  // readiness checked over TLS, without verifying the server
    CHECK(s.tls_only());
    CHECK(s.tls_port() == s.port());
    // No plaintext listener at all.
    redisContext* raw = redisConnectWithTimeout("127.0.0.1", s.port(), tv_of(1000ms));
    Ctx plain(raw);
    if (plain && plain->err == 0) {
      REQUIRE(redisSetTimeout(plain.get(), tv_of(1000ms)) == REDIS_OK);
      CHECK_FALSE(cmd(plain.get(), {"PING"}));
    }
    // The fixture's own commands go over TLS.
    s.set("k", "v");
    CHECK(s.get("k") == "v");
    // A verifying client refuses the certificate ...
    nodes::Tls o = tls.client_options();
    o.server_name = c.host;
    const std::string why = tls_failure(s.port(), o);
    CHECK_MESSAGE(has(why, "tls: TLS handshake failed: certificate verify failed: " + c.expected),
                  why);
    // ... one that does not verify gets in (--tls-auth-clients no: no certificate needed).
    nodes::Tls blind;
    blind.verify = false;
    CHECK(command_at(s.port(), {"GET", "k"}, 2000ms, blind).str == "v");
  }

  // TLS-only with --tls-auth-clients yes: the fixture presents the server certificate as client.
  ServerConfig cfg;
  cfg.tls = tls.server_options("yes", /*tls_only=*/true);
  RedisServer s(cfg);
  CHECK(s.command({"PING"}).str == "PONG");
  s.restart();
  CHECK(command_at(s.port(), {"PING"}, 2000ms, tls.client_options()).str == "PONG");

  // A server given a malformed certificate does not start, and says why.
  ServerConfig bad;
  bad.tls = tls.server_options("yes");
  bad.tls->cert_file = tls.malformed_cert();
  bad.startup_timeout = 3000ms;
  CHECK_THROWS_AS(RedisServer{bad}, std::runtime_error);
}

TEST_CASE("TlsFixture removes its directory") {
  std::string dir;
  {
    TlsFixture tls;
    dir = tls.dir();
    CHECK(std::filesystem::is_directory(dir));
  }
  CHECK_FALSE(std::filesystem::exists(dir));
}

// ------------------------------------------------------------------------------------------------
// Redis Cluster: ClusterFixture

TEST_CASE("ClusterFixture: MOVED, ASK on a half-migrated slot, failovers, restart") {
  REQUIRE_REDIS();
  auto t0 = Clock::now();
  ClusterConfig cc;
  cc.replicas_per_master = 1;
  ClusterFixture c(cc);
  MESSAGE("ClusterFixture 3 masters + 3 replicas up in " << ms_since(t0) << " ms");
  REQUIRE(c.size() == 6);
  CHECK(c.masters() == std::vector<std::size_t>{0, 1, 2});
  CHECK(c.seed_addresses().size() == 6);
  CHECK(c.seed_address() == c.address(0));
  for (std::size_t m = 0; m < 3; ++m) {
    CHECK(c.replicas_of(m) == std::vector<std::size_t>{3 + m});
    CHECK(c.master_of(3 + m) == m);
    CHECK(c.node(m).command({"CLUSTER", "INFO"}).str.find("cluster_state:ok") != std::string::npos);
  }
  CHECK(c.owner_of_slot(0) == 0);
  CHECK(c.owner_of_slot(ClusterFixture::kSlots - 1) == 2);

  // A key sent to a master that does not own its slot: MOVED to the owner.
  const std::string key = "lock:{a}";
  const std::size_t owner = c.owner_of_key(key);
  REQUIRE(c.node(owner).command({"SET", key, "v"}).is_status("OK"));
  CHECK(c.node(owner).wait_replicated(1, 5000ms));  // the replica has it
  const std::size_t wrong = c.other_master(owner);
  Reply r = c.node(wrong).command({"GET", key});
  CHECK_MESSAGE(r.is_error("MOVED"), nodes::reply_text(r));
  CHECK(r.str == "MOVED " + std::to_string(c.key_slot(key)) + " " + c.address(owner));

  // Half-migrated slot: the key already moved answers ASK at the source; the other is still
  // served there; the target serves the moved key only after ASKING.
  const int slot = c.key_slot("{t}");
  const std::size_t src = c.owner_of_slot(slot);
  const std::size_t dst = c.other_master(src);
  REQUIRE(c.node(src).command({"SET", "k1{t}", "v1"}).is_status("OK"));
  REQUIRE(c.node(src).command({"SET", "k2{t}", "v2"}).is_status("OK"));
  c.begin_slot_migration(slot, dst, {"k1{t}"});
  r = c.node(src).command({"GET", "k1{t}"});
  CHECK_MESSAGE(r.is_error("ASK"), nodes::reply_text(r));
  CHECK(r.str == "ASK " + std::to_string(slot) + " " + c.address(dst));
  CHECK(c.node(src).command({"GET", "k2{t}"}).str == "v2");
  CHECK(c.node(dst).command({"GET", "k1{t}"}).is_error("MOVED"));
  {
    Ctx conn = connect(c.node(dst).port(), 2000ms);
    RawReply asking = cmd(conn.get(), {"ASKING"});
    REQUIRE(asking);
    RawReply got = cmd(conn.get(), {"GET", "k1{t}"});
    REQUIRE(got);
    CHECK(std::string(got->str, got->len) == "v1");
  }
  c.finish_slot_migration(slot);
  CHECK(c.owner_of_slot(slot) == dst);
  CHECK(c.node(dst).command({"GET", "k2{t}"}).str == "v2");
  CHECK(c.node(src).command({"GET", "k2{t}"}).is_error("MOVED"));
  t0 = Clock::now();
  c.migrate_slot(slot, src);  // and back, in one go
  MESSAGE("migrate_slot (2 keys) in " << ms_since(t0) << " ms");
  CHECK(c.owner_of_slot(slot) == src);
  CHECK(c.node(src).command({"GET", "k1{t}"}).str == "v1");

  // Kill the key's master: its replica takes over, with the data.
  const std::size_t replica = c.replicas_of(owner).at(0);
  {  // The replica has the key before its master dies (READONLY: it serves reads of its slots).
    Ctx conn = connect(c.node(replica).port(), 2000ms);
    REQUIRE(cmd(conn.get(), {"READONLY"}));
    RawReply got = cmd(conn.get(), {"GET", key});
    REQUIRE(got);
    CHECK_MESSAGE(
        std::string(got->str ? got->str : "", got->len) == "v",
        "the replica before the kill: " << c.node(replica).command({"INFO", "replication"}).str);
  }
  t0 = Clock::now();
  const std::size_t promoted = c.kill_master_and_wait_failover(owner);
  MESSAGE("kill_master_and_wait_failover in " << ms_since(t0) << " ms");
  CHECK(promoted == replica);
  CHECK_FALSE(c.node(owner).running());
  CHECK(c.owner_of_key(key) == promoted);
  const std::optional<std::string> after = c.node(promoted).get(key);
  CHECK_MESSAGE(after == "v", "the promoted replica has "
                                  << after.value_or("(nil)") << "; "
                                  << c.node(promoted).command({"INFO", "replication"}).str
                                  << c.node(promoted).command({"INFO", "keyspace"}).str);
  CHECK(c.node(wrong).command({"GET", key}).str ==
        "MOVED " + std::to_string(c.key_slot(key)) + " " + c.address(promoted));

  // The old master comes back as a replica of the promoted one.
  t0 = Clock::now();
  c.restart_node(owner);
  MESSAGE("restart_node in " << ms_since(t0) << " ms");
  CHECK(c.master_of(owner) == promoted);
  CHECK(c.node(owner).command({"SET", key, "x"}).is_error("MOVED"));

  // Manual failovers: graceful back to the old master, then TAKEOVER.
  t0 = Clock::now();
  c.manual_failover(owner);
  MESSAGE("manual_failover (graceful) in " << ms_since(t0) << " ms");
  CHECK(c.is_master(owner));
  CHECK(c.master_of(promoted) == owner);
  CHECK(c.owner_of_key(key) == owner);
  t0 = Clock::now();
  c.manual_failover(promoted, FailoverMode::takeover);
  MESSAGE("manual_failover (takeover) in " << ms_since(t0) << " ms");
  CHECK(c.is_master(promoted));
  CHECK(c.owner_of_key(key) == promoted);

  // FORCE, in a shard that had no election yet (masters vote for the replicas of one master once
  // per 2 x node timeout): the master is unreachable (paused), its replica is promoted by the
  // other masters' votes; the old master, resumed, follows it.
  std::size_t third = 0;
  while (third == owner || third == promoted) ++third;
  REQUIRE(c.is_master(third));
  const std::size_t third_replica = c.replicas_of(third).at(0);
  c.node(third).stop();
  t0 = Clock::now();
  c.manual_failover(third_replica, FailoverMode::force);
  MESSAGE("manual_failover (force, master paused) in " << ms_since(t0) << " ms");
  CHECK(c.is_master(third_replica));
  c.node(third).cont();
  c.wait_until_stable();
  CHECK(c.master_of(third) == third_replica);
}

// ------------------------------------------------------------------------------------------------
// Sentinel: SentinelFixture

TEST_CASE("SentinelFixture: sentinels follow SENTINEL FAILOVER and a killed master") {
  REQUIRE_REDIS();
  const std::string name = "mymaster";
  auto t0 = Clock::now();
  SentinelConfig sc;
  sc.master_names = {name, "other"};
  SentinelFixture f(sc);
  MESSAGE("SentinelFixture 2 x (master + replica) + 3 sentinels up in " << ms_since(t0) << " ms");
  REQUIRE(f.sentinel_count() == 3);
  REQUIRE(f.node_count(name) == 2);
  REQUIRE(f.node_count("other") == 2);
  CHECK(f.current_master_index("other") == 0);
  CHECK(f.sentinel_addresses().size() == 3);
  for (std::size_t s = 0; s < 3; ++s) {
    CHECK(f.master_address_seen_by(s, name) == f.node(name, 0).address());
    // Each sentinel has its own config file, which it rewrote (myid, known replicas/sentinels).
    std::ifstream in(f.sentinel_config_file(s));
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(text.find("sentinel myid") != std::string::npos);
  }
  CHECK_FALSE(f.master_address_seen_by(0, "no-such-name").has_value());
  CHECK(f.current_master_index(name) == 0);
  CHECK(f.why_unstable().empty());

  f.node(name, 0).set("k", "v");
  CHECK(f.node(name, 0).wait_replicated(1, 5000ms));

  // A forced failover: all sentinels switch, the replica is master, the old master follows it.
  t0 = Clock::now();
  const std::size_t promoted = f.failover(name);
  MESSAGE("SENTINEL FAILOVER seen by all (old master rejoined) in " << ms_since(t0) << " ms");
  CHECK(promoted == 1);
  for (const auto& a : f.master_addresses(name)) CHECK(a == f.node(name, 1).address());
  CHECK(f.node(name, 1).command({"INFO", "replication"}).str.find("role:master") !=
        std::string::npos);
  CHECK(f.node(name, 0).command({"SET", "k", "x"}).is_error("READONLY"));
  CHECK(f.node(name, 1).get("k") == "v");

  // Kill the master: automatic failover back to node 0.
  t0 = Clock::now();
  const std::size_t again = f.kill_master_and_wait_failover(name);
  MESSAGE("kill master -> automatic failover seen by all in " << ms_since(t0) << " ms");
  CHECK(again == 0);
  CHECK_FALSE(f.node(name, 1).running());
  for (const auto& a : f.master_addresses(name)) CHECK(a == f.node(name, 0).address());
  CHECK(f.current_master(name).get("k") == "v");

  // A write the promoted replica "never got".
  f.delete_on_master(name, "k");
  CHECK_FALSE(f.node(name, 0).exists("k"));

  // The killed node comes back and is made a replica of the current master.
  t0 = Clock::now();
  f.restart_node(name, 1);
  MESSAGE("restart_node (rejoin as replica) in " << ms_since(t0) << " ms");
  CHECK(f.node(name, 1).command({"INFO", "replication"}).str.find("role:slave") !=
        std::string::npos);
  CHECK(f.current_master_index(name) == 0);
  // The other monitored master was left alone.
  CHECK(f.current_master_index("other") == 0);
  for (const auto& a : f.master_addresses("other")) CHECK(a == f.node("other", 0).address());
}

// ------------------------------------------------------------------------------------------------
// Valkey (Debian 12: bookworm-backports): the same fixtures with ServerConfig::executable

TEST_CASE("Valkey: RedisServer, TLS, ClusterFixture and SentinelFixture run valkey-server") {
  const std::string valkey = valkey_server_path();
  if (valkey.empty()) {
    MESSAGE("valkey-server not installed (scripts/setup.sh installs it): test skipped");
    return;
  }
  ServerConfig base;
  base.executable = valkey;
  {
    RedisServer s(base);
    const std::string info = s.command({"INFO", "server"}).str;
    CHECK_MESSAGE(info.find("server_name:valkey") != std::string::npos, info);
    CHECK(redlock::nodes::info_field(info, "valkey_version").has_value());
    s.set("k", "v");
    s.restart();
    CHECK_FALSE(s.exists("k"));
  }
  {
    TlsFixture tls;
    ServerConfig cfg = base;
    cfg.tls = tls.server_options("yes", /*tls_only=*/true);
    RedisServer s(cfg);
    CHECK(command_at(s.port(), {"INFO", "server"}, 2000ms, tls.client_options())
              .str.find("server_name:valkey") != std::string::npos);
  }
  {
    ClusterConfig cc;
    cc.server = base;
    ClusterFixture c(cc);
    CHECK(c.node(0).command({"INFO", "server"}).str.find("server_name:valkey") !=
          std::string::npos);
    const std::string key = "valkey-key";
    const std::size_t owner = c.owner_of_key(key);
    CHECK(c.node(c.other_master(owner)).command({"SET", key, "v"}).is_error("MOVED"));
  }
  {
    SentinelConfig sc;
    sc.server = base;
    SentinelFixture f(sc);
    CHECK(f.sentinel(0).command({"INFO", "server"}).str.find("server_name:valkey") !=
          std::string::npos);
    CHECK(f.failover("mymaster") == 1);
    for (const auto& a : f.master_addresses("mymaster"))
      CHECK(a == f.node("mymaster", 1).address());
  }
}

TEST_CASE("ClusterFixture over TLS (--tls-cluster, --tls-replication): MOVED names TLS ports") {
  REQUIRE_TLS_TOOLS();
  TlsFixture tls;
  ClusterConfig cc;
  cc.replicas_per_master = 1;
  cc.server.tls = tls.server_options("yes");
  cc.server.tls->cluster = true;
  const auto t0 = Clock::now();
  ClusterFixture c(cc);
  MESSAGE("ClusterFixture over TLS, 3 masters + 3 replicas up in " << ms_since(t0) << " ms");
  for (std::size_t i = 0; i < c.size(); ++i) {
    CHECK(c.announced_port(i) == c.node(i).tls_port());
    CHECK(c.address(i) == c.node(i).tls_address());
  }
  const std::string key = "tls-key";
  const std::size_t owner = c.owner_of_key(key);
  const std::size_t wrong = c.other_master(owner);
  const Reply r =
      command_at(c.node(wrong).tls_port(), {"SET", key, "v"}, 2000ms, tls.client_options());
  CHECK(r.str == "MOVED " + std::to_string(c.key_slot(key)) + " " + c.address(owner));
  CHECK(command_at(c.node(owner).tls_port(), {"SET", key, "v"}, 2000ms, tls.client_options())
            .is_status("OK"));
  // Replication runs over TLS too.
  CHECK(c.node(owner).wait_replicated(1, 5000ms));
  const int slot = c.key_slot(key);
  c.migrate_slot(slot, wrong);  // MIGRATE over TLS
  CHECK(c.node(wrong).get(key) == "v");
}
