// The main() of DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN, for binaries linked with doctest_impl.cpp.
#include <doctest/doctest.h>

int main(int argc, char** argv) { return doctest::Context(argc, argv).run(); }
