// redlock-cli status RESOURCE
#include <iomanip>
#include <iostream>

#include "cli.hpp"
#include "output.hpp"
#include "redlock/client.hpp"

namespace redlock::cli {
namespace {

int run_status(const std::string& resource, const Globals& g) {
  if (resource.empty()) throw UsageError("empty resource name");
  Client client(make_options(g));
  auto res = client.status(resource);
  if (g.json) {
    print_status_json(resource, res, client.options().nodes.size());
    return exit_ok;
  }
  std::size_t w = 4;
  for (const auto& n : res.nodes) w = std::max(w, n.node.size());
  std::cout << std::left << std::setw(static_cast<int>(w)) << "NODE"
            << "  " << std::setw(5) << "STATE"
            << "  " << std::setw(40) << "VALUE"
            << "  "
            << "TTL\n";
  for (const auto& n : res.nodes) {
    std::string value = n.value ? printable(*n.value)
                                : (n.type.empty() || n.type == "none" ? "-" : "(" + n.type + ")");
    // A key without an expiry is a lock nobody's crash will ever free: say so, rather than show
    // the "-" of a node that has no key at all.
    const bool key_present = n.up && !n.type.empty() && n.type != "none";
    std::string ttl = n.pttl        ? std::to_string(n.pttl->count()) + "ms"
                      : key_present ? "no expiry"
                                    : "-";
    std::cout << std::left << std::setw(static_cast<int>(w)) << n.node << "  " << std::setw(5)
              << (n.up ? "up" : "down") << "  " << std::setw(40) << value << "  " << ttl;
    if (!n.detail.empty()) std::cout << "  (" << n.detail << ")";
    std::cout << "\n";
  }
  return exit_ok;
}

}  // namespace

Command status_command(const Globals& g) {
  auto resource = std::make_shared<std::string>();
  return {
      .name = "status",
      .description = "Show what every node stores for a resource",
      .footer = "Exit status: 0 (also when nodes are down: the table says which), 2 usage.",
      .options = {{.names = "resource",
                   .target = resource.get(),
                   .help = "Resource name",
                   .required = true}},
      .run = [resource, &g] { return run_status(*resource, g); },
      .storage = resource,
  };
}

}  // namespace redlock::cli
