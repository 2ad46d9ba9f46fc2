// doctest's implementation is linked in (tests/support/doctest_impl.cpp); this is the main().
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <string_view>

#include "common.hpp"

// The Valkey runs (meson test integration-valkey, and the newer servers' runs through
// tests/servers/with-server.sh) set REDLOCK_TEST_REDIS_SERVER to the server to test,
// REDLOCK_TEST_SERVER_NAME to its server_name and REDLOCK_TEST_SERVER_VERSION to a version prefix:
// the servers must be what they name, or the run would quietly test another server.
TEST_CASE("the fixture's servers are the ones REDLOCK_TEST_SERVER_NAME names") {
  itest::RedisServer server;
  const std::string info = server.command({"INFO", "server"}).str;
  auto field = [&](std::string_view key) -> std::optional<std::string> {
    const std::string prefix = "\n" + std::string(key) + ":";
    auto at = ("\n" + info).find(prefix);
    if (at == std::string::npos) return std::nullopt;
    at += prefix.size() - 1;  // in `info`, which lacks the leading newline
    return info.substr(at, info.find_first_of("\r\n", at) - at);
  };
  const std::string name = field("server_name").value_or("redis");  // Redis has no server_name
  // Valkey reports redis_version 7.2.4 for compatibility, and its own as valkey_version.
  const std::string version = field("valkey_version").value_or(field("redis_version").value_or(""));
  const char* want = std::getenv("REDLOCK_TEST_SERVER_NAME");
  const char* want_version = std::getenv("REDLOCK_TEST_SERVER_VERSION");
  if (want != nullptr && *want != '\0') {
    CHECK_MESSAGE(name == want, info);
    if (want_version != nullptr && *want_version != '\0')
      CHECK_MESSAGE(version.starts_with(want_version), info);
  } else {
    MESSAGE("the fixture's servers are " << name << " " << version);
  }
}

int main(int argc, char** argv) {
  // In the TLS run (REDLOCK_TEST_TLS=1) the certificates and the servers' TLS default are set up
  // before any test starts a server.
  if (itest::test_tls() != nullptr)
    std::fprintf(stderr, "integration: over TLS (REDLOCK_TEST_TLS)\n");
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
