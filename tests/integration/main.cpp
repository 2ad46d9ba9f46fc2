// doctest's implementation is linked in (tests/support/doctest_impl.cpp); this is the main().
#include <doctest/doctest.h>

#include <string>

#include "common.hpp"

// The Valkey run (meson test integration-valkey) sets REDLOCK_TEST_REDIS_SERVER to valkey-server
// and REDLOCK_TEST_SERVER_NAME=valkey: the servers must be what it names, or the run would quietly
// test Redis again.
TEST_CASE("the fixture's servers are the ones REDLOCK_TEST_SERVER_NAME names") {
  itest::RedisServer server;
  const std::string info = server.command({"INFO", "server"}).str;
  std::string name = "redis";  // Redis 7.0 has no server_name field
  if (auto at = info.find("server_name:"); at != std::string::npos) {
    at += std::string_view("server_name:").size();
    name = info.substr(at, info.find_first_of("\r\n", at) - at);
  }
  const char* want = std::getenv("REDLOCK_TEST_SERVER_NAME");
  if (want != nullptr && *want != '\0') {
    CHECK_MESSAGE(name == want, info);
  } else {
    MESSAGE("the fixture's servers are " << name);
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
