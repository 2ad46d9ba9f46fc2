// Native commands and Lua-free plain locks (issue 43, items 2-4): each node is probed at connect
// (core/capabilities.hpp), and a plain lock's release and extend go out as DELIFEQ / DELEX IFEQ /
// SET IFEQ where the node has them, as the scripts elsewhere, node by node. Against whatever
// server the suite runs (Redis 7.0, Valkey 8.0, Valkey 9.1, Redis 8.0): what each node can do is
// read from the server itself, and the tests check that the library did what that allows, by
// the servers' own command counters (INFO commandstats).
#include <cctype>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"

using namespace itest;
using redlock::Client;
using redlock::Lock;
using redlock::NodeState;
using redlock::Options;
using redlock::test::FakeNode;
using redlock::test::ServerConfig;

namespace {

// What the server itself says (not through the library under test).
bool has_command(const RedisServer& n, const std::string& name) {
  const auto r = n.command({"COMMAND", "INFO", name});
  return r.type == redlock::test::Reply::Type::array && !r.elements.empty() &&
         r.elements[0].type == redlock::test::Reply::Type::array;
}
bool has_set_ifeq(const RedisServer& n) {
  // On a missing key SET IFEQ answers nil (and creates nothing); without IFEQ: a syntax error.
  const auto r = n.command({"SET", "probe-set-ifeq", "x", "IFEQ", "y"});
  return r.type != redlock::test::Reply::Type::error;
}

// Servers that refuse scripts, as a proxy or a managed offering may.
ServerConfig lua_free() {
  ServerConfig cfg;
  cfg.extra_args = {"--rename-command", "EVAL", "", "--rename-command", "EVALSHA", ""};
  return cfg;
}

// What one node was sent to release locks: natively (DELIFEQ) or as the script (EVALSHA).
struct ReleaseCalls {
  long long native = 0;
  long long scripted = 0;
};
ReleaseCalls release_calls(const RedisServer& n) {
  return {calls_of(n, "delifeq"), calls_of(n, "evalsha")};
}

// A lock whose release does not wake waiters (it was not contended, not extended, and is released
// within detail::short_hold of its attempt): the only release of a node with scripts that goes
// out natively with commands=auto. Tries a few times on a loaded machine; nothing when no cycle
// was quick. With `counted`, how that node was sent the quick cycle's own release: each cycle
// sends it one, counted once it has arrived (try_release may return at a quorum before), so a
// slower cycle before the quick one, which may have released either way, is not counted with it.
std::optional<ReleaseCalls> quick_cycle(Client& client, const std::string& resource,
                                        const RedisServer* counted = nullptr) {
  for (int i = 0; i < 20; ++i) {
    const auto before = counted ? release_calls(*counted) : ReleaseCalls{};
    const auto start = Clock::now();
    auto r = client.try_acquire({resource}, ttl_opts(10s));
    REQUIRE_MESSAGE(r, r.message);
    auto rel = client.try_release(r.lock);
    REQUIRE_MESSAGE(rel, rel.message);
    const bool quick = ms_since(start) < 8;
    ReleaseCalls sent;
    if (counted) {
      REQUIRE(eventually([&] {
        const auto now = release_calls(*counted);
        sent = {now.native - before.native, now.scripted - before.scripted};
        return sent.native + sent.scripted >= 1;
      }));
    }
    if (quick) return sent;
  }
  return std::nullopt;
}

// Until every node of `client` has answered its probe (a loaded machine may need a second one).
void wait_probed(Client& client) {
  CHECK(eventually([&] {
    for (const auto& n : client.status("probe-wait").nodes) {
      if (n.capabilities.empty() || n.capabilities.starts_with("not probed")) return false;
    }
    return true;
  }));
}

std::string capabilities_of(const RedisServer& n) {
  std::string out = "scripts";
  if (has_set_ifeq(n)) out += ", SET IFEQ";
  if (has_command(n, "DELIFEQ")) out += ", DELIFEQ";
  if (has_command(n, "DELEX")) out += ", DELEX IFEQ";
  return out;
}

}  // namespace

TEST_CASE("native commands: status shows each node's capabilities, as the server says") {
  RedisCluster c(3);
  Client client(options_for(c));
  auto st = client.status("native-status");
  REQUIRE(st.nodes.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    // (The first command may go out before the probe is answered: ask again.)
    CHECK(eventually([&] {
      return client.status("native-status").nodes[i].capabilities == capabilities_of(c[i]);
    }));
  }
}

TEST_CASE("native commands: a plain lock's extend and release run natively where the node can") {
  RedisCluster c(3);
  const bool delifeq = has_command(c[0], "DELIFEQ");
  const bool set_ifeq = has_set_ifeq(c[0]);
  Client client(options_for(c));
  wait_probed(client);

  SUBCASE("commands=auto") {
    // (Counted for the quick cycle alone: on a loaded machine a slower one may come first, whose
    // release may wake waiters and so go as the script, or not.)
    const auto quick = quick_cycle(client, "native-auto", &c[0]);
    REQUIRE(quick);
    CHECK(quick->native == (delifeq ? 1 : 0));
    CHECK(quick->scripted == (delifeq ? 0 : 1));

    auto r = client.try_acquire({"native-extend"}, ttl_opts(10s));
    REQUIRE_MESSAGE(r, r.message);
    // Decided at two of three: node 0's SET may land later, and would count as the extend's.
    REQUIRE(eventually([&] { return c.count_with_key("native-extend") == 3; }));
    const auto sets = calls_of(c[0], "set");
    auto e = client.try_extend(r.lock, 20s);
    REQUIRE_MESSAGE(e, e.message);
    CHECK(eventually([&] { return c[0].pttl("native-extend") > 19000; }));  // (node 0 too)
    CHECK(calls_of(c[0], "set") == sets + (set_ifeq ? 1 : 0));
    // A token that is not there: not held, and the key is not created.
    auto lost = client.try_extend(Lock::from_token({"native-gone"}, std::string(40, 'a')), 20s);
    CHECK(lost.error == redlock::Errc::not_held);
    CHECK(count_state(lost.nodes, NodeState::not_held) >= 2);
    CHECK(count_state(lost.nodes, NodeState::ok) == 0);
    CHECK(c.count_with_key("native-gone") == 0);
    // Held by another token: not held, the other's key and ttl untouched.
    REQUIRE(c[0].command({"SET", "native-other", "theirs", "PX", "5000"}).str == "OK");
    auto other = client.try_extend(Lock::from_token({"native-other"}, std::string(40, 'b')), 20s);
    CHECK(other.error == redlock::Errc::not_held);
    CHECK(count_state(other.nodes, NodeState::ok) == 0);
    CHECK(c[0].get("native-other") == "theirs");
    CHECK(c[0].pttl("native-other") <= 5000);
  }
  SUBCASE("commands=scripts: no native command") {
    Options o = options_for(c);
    o.commands = Options::Commands::scripts;
    Client scripted(o);
    wait_probed(scripted);
    REQUIRE(quick_cycle(scripted, "native-scripts"));
    auto r = scripted.try_acquire({"native-scripts"}, ttl_opts(10s));
    REQUIRE(r);
    REQUIRE(scripted.try_extend(r.lock, 20s));
    CHECK(calls_of(c[0], "delifeq") == 0);
  }
  SUBCASE("commands=native: a waking release too (rebuilt from a token), or a clear refusal") {
    Options o = options_for(c);
    o.commands = Options::Commands::native;
    Client native(o);
    wait_probed(native);
    auto r = native.try_acquire({"native-forced"}, ttl_opts(10s));
    REQUIRE_MESSAGE(r, r.message);
    auto e = native.try_extend(r.lock, 20s);
    auto rel = native.try_release(Lock::from_token({"native-forced"}, r.lock.token()));
    if (delifeq && set_ifeq) {
      CHECK_MESSAGE(e, e.message);
      CHECK_MESSAGE(rel, rel.message);
      CHECK(calls_of(c[0], "delifeq") == 1);
      CHECK(c.count_with_key("native-forced") == 0);
    } else {
      // Refused by configuration on every node, naming it: retrying cannot help.
      CHECK(e.error == redlock::Errc::refused);
      CHECK_MESSAGE(rel.error == redlock::Errc::refused, rel.message);
      for (const auto& n : rel.nodes) {
        CAPTURE(n.detail);
        CHECK(n.state == NodeState::error);
        CHECK(n.detail.find(n.node + " has no DELIFEQ or DELEX IFEQ") != std::string::npos);
      }
      CHECK(e.message.find("has no SET IFEQ") != std::string::npos);
      // Nothing ran: the lock is still there (on all three once the third SET has landed).
      CHECK(eventually([&] { return c.count_with_key("native-forced") == 3; }));
    }
  }
}

TEST_CASE("native commands: a vote of nodes that run scripts beside nodes that refuse them") {
  // Two nodes as the suite's server is, one that refuses scripts: node by node, each gets the
  // form it runs.
  RedisCluster scripted(2);
  RedisServer refusing(lua_free());
  const bool native = has_command(refusing, "DELIFEQ") && has_set_ifeq(refusing);
  Client client(
      options_for(client_csv(scripted) + "," +
                  (test_tls() ? "rediss://127.0.0.1:" + std::to_string(refusing.tls_port())
                              : refusing.address())));
  wait_probed(client);
  auto r = client.try_acquire({"mixed"}, ttl_opts(10s));
  REQUIRE_MESSAGE(r, r.message);
  CHECK(eventually([&] { return refusing.get("mixed") == r.lock.token(); }));
  auto e = client.try_extend(r.lock, 20s);
  REQUIRE_MESSAGE(e, e.message);
  // (The extend decides once two nodes agree: the third may still be pending then.)
  if (native) {
    CHECK(eventually([&] { return refusing.pttl("mixed") > 19000; }));
  } else {
    CHECK(e.nodes[2].state == NodeState::error);
  }
  auto rel = client.try_release(e.lock);
  REQUIRE_MESSAGE(rel, rel.message);
  CHECK(rel.nodes[2].state == (native ? NodeState::ok : NodeState::error));
  if (!native) CHECK(rel.nodes[2].detail.find("refuses scripts") != std::string::npos);
  CHECK(eventually([&] { return scripted.count_with_key("mixed") == 0; }));
  if (native) CHECK(!refusing.exists("mixed"));
}

TEST_CASE("Lua-free: a plain lock acquires, extends and releases on nodes that refuse scripts") {
  RedisCluster c(3, lua_free());
  const bool native = has_command(c[0], "DELIFEQ") && has_set_ifeq(c[0]);
  REQUIRE(c[0].command({"EVAL", "return 1", "0"}).type == redlock::test::Reply::Type::error);
  std::vector<std::string> log;
  std::mutex log_mutex;
  Options o = options_for(c);
  o.logger = [&](redlock::LogLevel, std::string_view m) {
    std::lock_guard lock(log_mutex);
    log.emplace_back(m);
  };
  o.retry_count = 3;  // a refusal by configuration is not retried: "at once"
  Client client(o);
  auto r = client.try_acquire({"luafree"}, ttl_opts(10s));
  wait_probed(client);
  REQUIRE_MESSAGE(r, r.message);
  CHECK(eventually([&] { return c.count_with_key("luafree") == 3; }));
  auto e = client.try_extend(r.lock, 20s);
  if (native) CHECK(eventually([&] { return c[1].pttl("luafree") > 19000; }));
  // A lock rebuilt from its token (the CLI's release): its release would wake waiters, but none
  // can wait on these nodes (marking oneself waiting is a script).
  auto rel = client.try_release(Lock::from_token({"luafree"}, r.lock.token()));
  if (native) {
    REQUIRE_MESSAGE(e, e.message);
    REQUIRE_MESSAGE(rel, rel.message);
    CHECK(rel.deleted == 3);
    CHECK(c.count_with_key("luafree") == 0);
  } else {
    CHECK(e.error == redlock::Errc::refused);
    CHECK(rel.error == redlock::Errc::refused);
  }

  SUBCASE("a kind that needs a script fails at once, names the node, leaves no key") {
    for (int kind = 0; kind < 4; ++kind) {
      CAPTURE(kind);
      auto a = ttl_opts(10s);
      std::vector<std::string> resources{"needs-script"};
      if (kind == 0) a.fence = true;
      if (kind == 1) a.mode = redlock::LockMode::read;
      if (kind == 2) a.fair = true;
      if (kind == 3) resources.push_back("needs-script-2");
      std::vector<long long> keys_before;
      for (std::size_t i = 0; i < c.size(); ++i)
        keys_before.push_back(c[i].command({"DBSIZE"}).integer);
      const auto start = Clock::now();
      auto f = client.try_acquire(resources, a);
      CHECK_FALSE(f);
      CHECK(f.error == redlock::Errc::refused);
      CHECK_MESSAGE(f.message.find("refuses scripts") != std::string::npos, f.message);
      CHECK(f.attempts <= 1);  // a fair lock fails in its ticket round, before any attempt
      for (const auto& n : f.nodes) {
        CHECK(n.detail.find(n.node + " refuses scripts (EVAL/EVALSHA), and a ") !=
              std::string::npos);
        CHECK(n.detail.find("needs one") != std::string::npos);
      }
      CHECK(ms_since(start) < 5000);  // no retries, no waiting (a generous bound)
      for (std::size_t i = 0; i < c.size(); ++i)
        CHECK(c[i].command({"DBSIZE"}).integer == keys_before[i]);
    }
  }
  std::lock_guard lock(log_mutex);
  for (const auto& line : log) {
    CHECK_MESSAGE(line.find("SCRIPT LOAD") == std::string::npos, line);
    CHECK_MESSAGE(line.find("NOSCRIPT") == std::string::npos, line);
  }
}

// A node that claims DELIFEQ and SET IFEQ in its probe and then refuses both (an old proxy in front
// of a new server): a fake node (tests/support), since no real server lies about its own commands.
TEST_CASE("native commands: a node that claims a command and refuses it gets the script instead") {
  struct Seen {
    std::mutex mu;
    int delifeq = 0, set_ifeq = 0, scripts = 0;
  };
  auto seen = std::make_shared<Seen>();
  auto base = FakeNode::redis_like();
  const std::string claim =
      "*4\r\n*2\r\n$7\r\ndelifeq\r\n:3\r\n$-1\r\n*2\r\n$4\r\neval\r\n:-3\r\n"
      "*2\r\n$7\r\nevalsha\r\n:-3\r\n";
  const std::string docs =
      "*2\r\n$3\r\nset\r\n*2\r\n$9\r\narguments\r\n*1\r\n*4\r\n$4\r\nname\r\n$3\r\ncmp\r\n"
      "$5\r\ntoken\r\n$4\r\nIFEQ\r\n";
  FakeNode liar([=](const std::vector<std::string>& argv) -> std::optional<std::string> {
    std::vector<std::string> up;
    for (const auto& a : argv) {
      std::string u = a;
      for (auto& ch : u) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      up.push_back(u);
    }
    std::lock_guard lock(seen->mu);
    if (up.size() > 1 && up[0] == "COMMAND" && up[1] == "INFO") return claim;
    if (up.size() > 1 && up[0] == "COMMAND" && up[1] == "DOCS") return docs;
    if (!up.empty() && up[0] == "DELIFEQ") {
      ++seen->delifeq;
      return std::string("-ERR unknown command 'DELIFEQ', with args beginning with: \r\n");
    }
    if (up.size() > 3 && up[0] == "SET" && up[3] == "IFEQ") {
      ++seen->set_ifeq;
      return std::string("-ERR syntax error\r\n");
    }
    if (!up.empty() && (up[0] == "EVALSHA" || up[0] == "EVAL")) ++seen->scripts;
    return base(argv);
  });
  std::vector<std::string> log;
  std::mutex log_mutex;
  Options o = options_for("127.0.0.1:" + std::to_string(liar.port()));
  o.logger = [&](redlock::LogLevel, std::string_view m) {
    std::lock_guard lock(log_mutex);
    log.emplace_back(m);
  };
  Client client(o);
  wait_probed(client);
  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    auto r = client.try_acquire({"liar"}, ttl_opts(10s));
    REQUIRE_MESSAGE(r, r.message);
    auto e = client.try_extend(r.lock, 20s);
    CHECK_MESSAGE(e, e.message);  // the lock is not lost: the script extended it
    auto rel = client.try_release(Lock::from_token({"liar"}, r.lock.token()));
    CHECK_MESSAGE(rel, rel.message);
    CHECK(rel.deleted == 1);
  }
  // The release rebuilt from a token wakes waiters: with scripts there, it is a script anyway. A
  // quick release (no wake-up) would have gone natively: it goes as the script from now on too.
  REQUIRE(quick_cycle(client, "liar-quick"));
  {
    std::lock_guard lock(seen->mu);
    CHECK(seen->set_ifeq == 1);  // asked once per connection, then the script
    CHECK(seen->delifeq <= 1);
    CHECK(seen->scripts >= 3);
  }
  std::lock_guard lock(log_mutex);
  int said = 0;
  for (const auto& line : log)
    said += line.find("claims SET IFEQ but refused it") != std::string::npos;
  CHECK(said == 1);
}

// A native release queued behind its own acquire on a node that lost the acquire's script (SCRIPT
// FLUSH here; a restart whose handshake could not load the scripts while the node was still
// loading its AOF is the other way): the node runs the acquire (NOSCRIPT), then the release,
// which finds nothing. The acquire's EVAL retry must then not be made, or it sets a key that
// nobody releases before its ttl. A native form carries no key list, so the check that keeps that
// order has to take the keys of the script it stands for. Needs DELIFEQ (Valkey 9).
TEST_CASE("native commands: a native release never runs before its acquire's NOSCRIPT retry") {
  RedisCluster c(3);
  if (!has_command(c[0], "DELIFEQ")) {
    MESSAGE("no DELIFEQ on this server: nothing to check");
    return;
  }
  Options o = options_for(c);
  o.commands = Options::Commands::native;  // every release of a plain lock goes out as DELIFEQ
  Client client(o);
  wait_probed(client);
  redlock::AcquireOptions fenced = ttl_opts(30s);
  fenced.fence = true;  // a script call for the acquire, where a plain SET NX has no NOSCRIPT
  {
    auto warm = client.try_acquire({"order-warm"}, fenced);
    REQUIRE_MESSAGE(warm, warm.message);
    REQUIRE(client.try_release(warm.lock));
  }
  c[0].script_flush();
  (void)c[0].command({"CONFIG", "RESETSTAT"});
  c[0].stop();
  auto r = client.try_acquire({"order-native"}, fenced);  // decided by nodes 1 and 2
  REQUIRE_MESSAGE(r, r.message);
  auto rel = client.try_release(r.lock);  // node 0's DELIFEQ goes out behind its acquire
  CHECK_MESSAGE(rel, rel.message);
  c[0].cont();
  // (The fence's write-back may follow and answer NOSCRIPT too: its retry is harmless, it only
  // raises a counter, and it is made.)
  REQUIRE(eventually([&] {
    return c[0].command({"INFO", "errorstats"}).str.find("errorstat_NOSCRIPT:count=") !=
               std::string::npos &&
           calls_of(c[0], "delifeq") == 1;
  }));
  std::this_thread::sleep_for(500ms);  // time for a retry, were one made
  CHECK_FALSE(c[0].exists("order-native"));
  CHECK(c.count_with_key("order-native") == 0);
}
