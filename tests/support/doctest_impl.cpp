// doctest's implementation, compiled once for every doctest binary of the tree (unit-tests,
// integration-tests, fixture_selftest) instead of once in each: a few seconds of compile per
// copy in every build, more under the sanitizers.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
