// redlock-cli acquire RESOURCE [RESOURCE...] [--ttl DUR] [--wait DUR]
#include <iostream>

#include "cli.hpp"
#include "output.hpp"
#include "redlock/client.hpp"

namespace redlock::cli {
namespace {

struct AcquireArgs {
  std::vector<std::string> resources;
  std::string ttl = "30s";
  std::string wait;
  bool fence = false;
  bool read = false;
  bool write = false;
  bool fair = false;
};

int run_acquire(const AcquireArgs& a, const Globals& g) {
  AcquireOptions opts;
  opts.ttl = duration_arg("--ttl", a.ttl);
  if (!a.wait.empty()) {
    auto w = duration_arg("--wait", a.wait);
    if (w.count() > 0) opts.wait = w;
  }
  opts.fence = a.fence;
  opts.mode = lock_mode(a.read, a.write);
  opts.fair = a.fair;
  Options options = make_options(g);
  check_acquisition(a.resources, opts, options, {{"ttl", {"--ttl", a.ttl}}});
  StopOnSignal interrupt;  // before the client's I/O thread exists
  opts.stop = interrupt.token();
  AcquireRetry retry(options, opts, interrupt.token(), g.verbose);
  Client client(std::move(options));
  AcquireResult res;
  do {
    res = client.try_acquire(a.resources, opts);
  } while (retry.again(res));
  interrupt.disarm();
  if (interrupt.signal() != 0) {
    // Stopped by the user: whatever was taken is given back, also when the signal came too late
    // to cancel an acquisition that had just succeeded.
    if (res) (void)client.try_release(res.lock);
    res.error = make_error_code(Errc::cancelled);
    res.message = interrupt.describe() + "; nothing is held";
  }
  if (g.json) print_acquire_json(a.resources, res, client.options().nodes.size(), client.quorum());
  if (!res) {
    report_failure(g, res.error, "cannot acquire", res.message, res.nodes);
    if (g.verbose) {
      Stderr() << "  " << res.attempts << (res.attempts == 1 ? " attempt" : " attempts") << "\n";
    }
    return interrupt.signal() != 0 ? 128 + interrupt.signal() : exit_code_for(res.error);
  }
  if (g.verbose) {
    Stderr() << "acquired with " << res.lock.votes() << "/" << client.options().nodes.size()
             << " votes, validity " << res.lock.validity().count() << " ms, " << res.attempts
             << " attempt(s)\n";
    Stderr() << nodes_table(res.nodes);
  }
  if (!g.json && !g.quiet) std::cout << res.lock.token() << "\n";
  return exit_ok;
}

}  // namespace

Command acquire_command(const Globals& g) {
  auto a = std::make_shared<AcquireArgs>();
  return {
      .name = "acquire",
      .description = "Take a lock; prints its token on stdout",
      .footer =
          "Exit status: 0 acquired (the token alone on stdout), 1 held elsewhere, 2 usage,\n"
          "3 no quorum (or the validity used up: expired), 5 refused by the nodes' configuration\n"
          "(auth, ACL, TLS: not retried), 128+N interrupted by signal N while acquiring (nothing\n"
          "is held).",
      .options =
          {
              {.names = "resource",
               .target = &a->resources,
               .help = "Resource name(s); several = one lock over all of them",
               .required = true},
              {"--ttl", &a->ttl, "How long the nodes keep the lock (default 30s)"},
              {"--wait", &a->wait,
               "Keep retrying until this much time has passed (default 0: a lock held elsewhere "
               "fails at once, as with flock -n; no quorum is retried --retry-count times)"},
              {"--fair", &a->fair, "Wait in a FIFO queue shared by all clients (use with --wait)"},
              {"--read", &a->read, "A shared read lock (many readers, no writer)"},
              {"--write", &a->write,
               "A write lock (no readers; a waiting writer holds off new readers)"},
              {"--fence", &a->fence,
               "Also take a fencing token (grows with every acquisition; in --json as 'fence')"},
          },
      .run = [a, &g] { return run_acquire(*a, g); },
      .storage = a,
  };
}

}  // namespace redlock::cli
