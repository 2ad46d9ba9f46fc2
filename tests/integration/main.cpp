#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "common.hpp"

int main(int argc, char** argv) {
  // In the TLS run (REDLOCK_TEST_TLS=1) the certificates and the servers' TLS default are set up
  // before any test starts a server.
  if (itest::test_tls() != nullptr)
    std::fprintf(stderr, "integration: over TLS (REDLOCK_TEST_TLS)\n");
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
