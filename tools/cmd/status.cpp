// redlock-cli status RESOURCE
#include <iomanip>
#include <iostream>

#include "cli.hpp"
#include "output.hpp"
#include "redlock/client.hpp"

namespace redlock::cli {
namespace {

// Under a node's row: what read-write and fair locks keep beside the lock key (readers, the
// waiting writer, the queue) and the counters, one indented line each, only when present.
void print_lock_details(const NodeKeyState& n) {
  const std::string indent = "    ";
  if (!n.where.empty()) std::cout << indent << "key on: " << n.where << "\n";
  if (n.reader_count > 0) {
    std::cout << indent << "readers (" << n.reader_count << "):";
    for (const auto& r : n.readers) {
      std::cout << " " << printable(r.token) << " (" << r.remaining.count() << "ms)";
    }
    if (n.readers.size() < n.reader_count) std::cout << " ...";
    std::cout << "\n";
  }
  if (n.writer_waiting) {
    std::cout << indent << "writer waiting: " << printable(*n.writer_waiting) << "\n";
  }
  if (n.queue_length > 0) {
    std::cout << indent << "queue (" << n.queue_length << "):";
    for (const auto& w : n.queue) std::cout << " #" << w.ticket << " " << printable(w.id);
    if (n.queue.size() < n.queue_length) std::cout << " ...";
    std::cout << "\n";
  }
  if (n.listening_clients > 0) {
    std::cout << indent << "clients waiting (wake-ups): " << n.listening_clients << "\n";
  }
  if (n.fence || n.ticket) {
    std::cout << indent;
    if (n.fence) std::cout << "fence counter: " << *n.fence << (n.ticket ? "  " : "");
    if (n.ticket) std::cout << "ticket counter: " << *n.ticket;
    std::cout << "\n";
  }
}

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
    print_lock_details(n);
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
