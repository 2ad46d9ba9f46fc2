// The C++ API as an installed package: version, node-list parsing, and (given a resource) a real
// acquisition plus a redlock::Error thrown inside libredlock.so and caught here, which only works
// when the library exports that type's typeinfo.
#include <cstdio>
#include <redlock/redlock.hpp>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: consumer NODES [RESOURCE]\n");
    return 2;
  }
  std::printf("version=%s\n", redlock::version());
  std::string err;
  auto nodes = redlock::parse_node_list(argv[1], err);
  if (!nodes) {
    std::printf("parse-error=%s\n", err.c_str());
    return 1;
  }
  std::printf("nodes=%zu\n", nodes->size());
  if (argc < 3) return 0;

  redlock::Options opts;
  opts.nodes = *nodes;
  opts.retry_count = 0;
  opts.node_timeout = redlock::Millis{250};
  redlock::Client client(opts);
  redlock::AcquireOptions ao;
  ao.ttl = redlock::Millis{30000};
  redlock::Lock lock = client.acquire({argv[2]}, ao);  // throws on failure: exit via terminate
  std::printf("token=%s\n", lock.token().c_str());
  try {
    (void)client.acquire({argv[2]}, ao);
    std::printf("second-acquire=succeeded\n");
  } catch (const redlock::Error& e) {
    std::printf("second-acquire=%s nodes=%zu\n",
                e.code() == redlock::Errc::contended ? "contended" : e.code().message().c_str(),
                e.nodes().size());
  }
  return 0;  // the lock is left held: the test reads it on the servers
}
