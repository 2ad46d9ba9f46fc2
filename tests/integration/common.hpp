#pragma once
// Helpers shared by the integration tests: engine options pointed at fixture servers.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "fake_node.hpp"
#include "redis_fixture.hpp"
#include "redlock/redlock.hpp"
#include "tls_fixture.hpp"

namespace itest {

using namespace std::chrono_literals;
using redlock::test::RedisCluster;
using redlock::test::RedisServer;
using Clock = std::chrono::steady_clock;

// The library's derived keys (redlock/keys.hpp), for tests that look at them on the servers.
using redlock::derived_key;
using redlock::KeyRole;
inline std::string fence_key(const std::string& lock_key) {
  return derived_key(lock_key, KeyRole::fence);
}

// How many times a node has run COMMAND (INFO commandstats; calls made by scripts count too).
inline long long calls_of(const RedisServer& n, const std::string& command) {
  const std::string info = n.command({"INFO", "commandstats"}).str;
  const std::string field = "cmdstat_" + command + ":calls=";
  const auto at = info.find(field);
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + field.size()));
}

// REDLOCK_TEST_TLS=1: the whole suite over TLS. Every fixture server also listens with TLS (a
// throwaway CA, no client certificate asked), options_for(cluster) names their TLS ports as
// rediss:// addresses, and every client trusts the CA. Addresses of fake nodes stay plaintext.
inline const redlock::test::TlsFixture* test_tls() {
  static const std::unique_ptr<redlock::test::TlsFixture> certs = [] {
    std::unique_ptr<redlock::test::TlsFixture> c;
    const char* on = std::getenv("REDLOCK_TEST_TLS");
    if (on != nullptr && *on != '\0' && std::string_view(on) != "0") {
      c = std::make_unique<redlock::test::TlsFixture>();
      redlock::test::set_default_server_tls(c->server_options("no"));
    }
    return c;
  }();
  return certs.get();
}

// Sanitizer builds run 5-20x slower (testing.md, "Flakes are bugs").
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool sanitized_build = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool sanitized_build = true;
#else
inline constexpr bool sanitized_build = false;
#endif
#else
inline constexpr bool sanitized_build = false;
#endif

inline redlock::Options options_for(const std::string& csv) {
  std::string err;
  auto nodes = redlock::parse_node_list(csv, err);
  REQUIRE_MESSAGE(nodes, err);
  redlock::Options o;
  o.nodes = std::move(*nodes);
  if (const auto* tls = test_tls()) o.tls.ca_file = tls->ca_cert();
  o.retry_count = 0;
  // The library's 50 ms default is a production deadline for an idle network; these tests
  // assert outcomes, and a test that needs success must not depend on five servers answering
  // within 50 ms on a loaded machine (seen under `scripts/test.sh --stress`: an extend right
  // after a status, "3 timeout, 2 pending"). Tests about deadlines set their own.
  o.node_timeout = redlock::Millis{250};
  // The same for the connect and handshake a fresh client's first command waits for: under
  // ThreadSanitizer, beside the AddressSanitizer run, the first test's client once missed the
  // 250 ms default on all five nodes ("5 down"). Tests about connect deadlines set their own.
  if (sanitized_build) o.connect_timeout = redlock::Millis{1000};
  if (std::getenv("REDLOCK_TEST_LOG")) {  // debugging aid: engine events on stderr
    o.logger = [](redlock::LogLevel, std::string_view m) {
      fprintf(stderr, "[redlock] %.*s\n", int(m.size()), m.data());
    };
  }
  return o;
}

// The cluster's nodes (or those listed in `only`): over TLS (rediss://, their TLS ports) in the
// suite's TLS run.
inline std::string client_csv(const RedisCluster& c, std::vector<std::size_t> only = {}) {
  if (only.empty()) {
    if (test_tls() == nullptr) return c.nodes_csv();
    for (std::size_t i = 0; i < c.size(); ++i) only.push_back(i);
  }
  std::string csv;
  for (std::size_t i : only) {
    csv += csv.empty() ? "" : ",";
    csv += test_tls() ? "rediss://127.0.0.1:" + std::to_string(c[i].tls_port()) : c[i].address();
  }
  return csv;
}

inline redlock::Options options_for(const RedisCluster& c) { return options_for(client_csv(c)); }

inline redlock::AcquireOptions ttl_opts(redlock::Millis ttl,
                                        std::optional<redlock::Millis> wait = {},
                                        std::optional<int> retry_count = {}) {
  redlock::AcquireOptions o;
  o.ttl = ttl;
  o.wait = wait;
  o.retry_count = retry_count;
  return o;
}

inline int count_state(const std::vector<redlock::NodeOutcome>& nodes, redlock::NodeState s) {
  int n = 0;
  for (const auto& o : nodes) n += o.state == s;
  return n;
}

inline long long ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// Polls until `pred` holds or `limit` passes; returns whether it held. The default is long: it
// waits for a state a test needs or asserts, never for a speed, and under `scripts/test.sh
// --stress` a disk stall has held two suites at once for over 2 s (the old default).
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 10'000ms) {
  auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

// Polls `client` with status reads until all `nodes` of its nodes answered: its connections are
// made (TLS handshakes done). A test whose first operation must not lose a node to a handshake
// that outlasts the operation's deadline on a loaded machine (a ttl of 100 ms, a key needed on
// every node) starts from here; status reads send no SET, so tests that count SETs are unchanged.
inline void connect_everywhere(redlock::Client& client, std::size_t nodes) {
  REQUIRE(eventually([&] {
    const auto s = client.status("connect-everywhere");
    return s.nodes.size() == nodes &&
           std::all_of(s.nodes.begin(), s.nodes.end(), [](const auto& n) { return n.up; });
  }));
}

}  // namespace itest
