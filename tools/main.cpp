// redlock-cli: acquire and release Redlock locks from a shell, run commands under a lock, and
// manage local demonstration nodes. The contract (commands, exit codes, output) is docs/cli.md.

#include <cstdio>
#include <iostream>

#include "cli.hpp"
#include "redlock/redlock.hpp"

int main(int argc, char** argv) {
  using namespace redlock::cli;
  CLI::App app{"redlock-cli: distributed locks over independent Redis masters (Redlock)"};
  app.name("redlock-cli");
  app.set_version_flag("--version", std::string("redlock-cli ") + redlock::version());
  app.require_subcommand(0, 1);  // an unknown word is then reported by name
  app.fallthrough();  // global flags may also follow the subcommand

  Context ctx;
  auto& g = ctx.globals;
  app.add_option("-n,--nodes", g.nodes,
                 "Comma-separated node addresses (redis://[user:pass@]host:port[/db], "
                 "unix:///path[?db=N], host:port). Default: $REDLOCK_NODES, else "
                 "127.0.0.1:7001..7005");
  app.add_flag("--json", g.json, "Print one JSON object on stdout");
  app.add_flag("-v,--verbose", g.verbose, "Per-node outcomes and connection events on stderr");
  app.add_flag("-q,--quiet", g.quiet,
               "Print nothing on success, nor for exit status 1 (held elsewhere / not held); "
               "other failures are still reported on stderr");
  app.add_option("--node-timeout", g.node_timeout, "Deadline of one command on one node (default 50ms)");
  app.add_option("--connect-timeout", g.connect_timeout, "Deadline of a connect (default 250ms)");
  app.add_option("--drift-factor", g.drift_factor, "Clock drift factor (default 0.01)");
  app.add_option("--retry-count", g.retry_count, "Extra attempts after the first (default 3)");
  app.add_option("--retry-delay", g.retry_delay, "Sleep between attempts (default 200ms, +-100ms jitter)");
  app.add_option("--min-uptime", g.min_uptime,
                 "Restart guard: a node whose Redis uptime is below this gives no vote "
                 "(default $REDLOCK_MIN_UPTIME, else 0)");

  setup_acquire(app, ctx);
  setup_release(app, ctx);
  setup_extend(app, ctx);
  setup_status(app, ctx);
  setup_run(app, ctx);
  setup_cluster(app, ctx);
  setup_bench(app, ctx);
  setup_demo(app, ctx);

  try {
    app.parse(argc, argv);
    // `-n "$UNSET"` must not silently fall back to REDLOCK_NODES or the local demo nodes.
    g.nodes_given = app.get_option("--nodes")->count() > 0;
    if (!ctx.action) {
      std::cerr << "redlock-cli: a command is required\n"
                << "Run 'redlock-cli --help' for usage.\n";
      return exit_usage;
    }
    ctx.exit_code = ctx.action();
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "redlock-cli: " << e.what() << "\n";
    std::cerr << "Run 'redlock-cli --help' (or 'redlock-cli COMMAND --help') for usage.\n";
    return exit_usage;
  } catch (const UsageError& e) {
    std::cerr << "redlock-cli: " << e.what() << "\n";
    return exit_usage;
  } catch (const std::exception& e) {
    std::cerr << "redlock-cli: " << e.what() << "\n";
    return exit_usage;
  }
  std::cout.flush();
  return ctx.exit_code;
}
