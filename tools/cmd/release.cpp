// redlock-cli release RESOURCE [RESOURCE...] TOKEN
#include <iostream>

#include "cli.hpp"
#include "output.hpp"
#include "redlock/client.hpp"

namespace redlock::cli {
namespace {

int run_release(std::vector<std::string> args, bool read, const Globals& g) {
  if (args.size() < 2) throw UsageError("release needs RESOURCE and TOKEN");
  std::string token = args.back();
  args.pop_back();
  Options options = make_options(g);
  check_held_lock(args, token, std::nullopt, options, {}, "cannot release");
  Client client(std::move(options));
  auto res = client.try_release(
      Lock::from_token(args, token, read ? LockMode::read : LockMode::exclusive));
  if (g.json) print_release_json(args, token, res, client.options().nodes.size());
  if (!res) {
    report_failure(g, res.error, "cannot release", res.message, res.nodes);
    return exit_code_for(res.error);
  }
  if (g.verbose) {
    Stderr() << "released on " << res.deleted << " node(s), not held on " << res.not_held
             << ", unreachable " << res.unreachable << "\n";
    Stderr() << nodes_table(res.nodes);
  }
  return exit_ok;
}

}  // namespace

Command release_command(const Globals& g) {
  struct Args {
    std::vector<std::string> args;
    bool read = false;
  };
  auto a = std::make_shared<Args>();
  return {
      .name = "release",
      .description = "Release a lock: compare-and-delete on every node",
      .footer =
          "Exit status: 0 deleted on at least one node, 1 no reachable node held this token,\n"
          "2 usage, 3 no node confirmed the delete (down, timed out or an error: see the "
          "message), 5 refused by the nodes' configuration (auth, ACL, TLS).",
      .options =
          {
              {.names = "resource_and_token",
               .target = &a->args,
               .help = "RESOURCE [RESOURCE...] TOKEN",
               .required = true},
              {"--read", &a->read, "The token is a read lock's (acquire --read)"},
          },
      .run = [a, &g] { return run_release(a->args, a->read, g); },
      .storage = a,
  };
}

}  // namespace redlock::cli
