// redlock-cli extend RESOURCE [RESOURCE...] TOKEN [--ttl DUR]
#include <iostream>

#include "cli.hpp"
#include "output.hpp"
#include "redlock/client.hpp"

namespace redlock::cli {
namespace {

struct ExtendArgs {
  std::vector<std::string> args;
  std::string ttl = "30s";
  bool read = false;
};

int run_extend(ExtendArgs a, const Globals& g) {
  if (a.args.size() < 2) throw UsageError("extend needs RESOURCE and TOKEN");
  std::string token = a.args.back();
  a.args.pop_back();
  const Millis ttl = duration_arg("--ttl", a.ttl);
  Options options = make_options(g);
  check_held_lock(a.args, token, ttl, options, {{"ttl", {"--ttl", a.ttl}}}, "cannot extend");
  Client client(std::move(options));
  auto res = client.try_extend(
      Lock::from_token(a.args, token, a.read ? LockMode::read : LockMode::exclusive), ttl);
  if (g.json) print_extend_json(a.args, token, ttl, res, client.options().nodes.size());
  if (!res) {
    report_failure(g, res.error, "cannot extend", res.message, res.nodes);
    return exit_code_for(res.error);
  }
  if (g.verbose) Stderr() << nodes_table(res.nodes);
  if (!g.json && !g.quiet) std::cout << res.lock.validity().count() << "\n";
  return exit_ok;
}

}  // namespace

Command extend_command(const Globals& g) {
  auto a = std::make_shared<ExtendArgs>();
  return {
      .name = "extend",
      .description = "Reset a held lock's ttl; prints the new validity (ms)",
      .footer =
          "Exit status: 0 extended (the new validity in ms on stdout), 1 lost (not held on a\n"
          "quorum), 2 usage, 3 no quorum (or expired), 5 refused by the nodes' configuration\n"
          "(auth, ACL, TLS).",
      .options =
          {
              {.names = "resource_and_token",
               .target = &a->args,
               .help = "RESOURCE [RESOURCE...] TOKEN",
               .required = true},
              {"--ttl", &a->ttl, "New ttl (default 30s)"},
              {"--read", &a->read, "The token is a read lock's (acquire --read)"},
          },
      .run = [a, &g] { return run_extend(*a, g); },
      .storage = a,
  };
}

}  // namespace redlock::cli
