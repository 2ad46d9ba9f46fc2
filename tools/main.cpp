// redlock-cli: acquire and release Redlock locks from a shell, run commands under a lock, and
// manage local demonstration nodes. The contract (commands, exit codes, output) is docs/cli.md.
//
// The only file that includes CLI11: it owns the parser and builds it from the descriptions the
// subcommands return (cli.hpp, "the declaration layer").

#include <CLI/CLI.hpp>
#include <iostream>
#include <map>

#include "cli.hpp"
#include "output.hpp"
#include "redlock/redlock.hpp"

namespace redlock::cli {
namespace {

// Adds one described option to `app`; the target's type picks the CLI11 overload, so the type
// name in --help and the conversion errors are CLI11's own for that type.
CLI::Option* add(CLI::App& app, const Option& o) {
  return std::visit(
      [&](auto* target) -> CLI::Option* {
        using T = std::remove_pointer_t<decltype(target)>;
        if constexpr (std::is_same_v<T, bool>) {
          return app.add_flag(o.names, *target, o.help);
        } else {
          return app.add_option(o.names, *target, o.help);
        }
      },
      o.target);
}

void add_options(CLI::App& app, const std::vector<Option>& options) {
  std::vector<CLI::Option*> added;
  for (const auto& o : options) {
    CLI::Option* opt = add(app, o);
    if (!o.type_name.empty()) opt->type_name(o.type_name);
    if (o.required) opt->required();
    added.push_back(opt);
  }
  // After all of them: a rule may name an option declared later.
  for (std::size_t i = 0; i < options.size(); ++i) {
    if (!options[i].needs.empty()) added[i]->needs(options[i].needs);
    if (!options[i].excludes.empty()) added[i]->excludes(options[i].excludes);
  }
}

// Builds `cmd` as a subcommand of `parent` and records which description each CLI11 app came
// from. The order of the calls matters: a subcommand inherits its parent's footer, fallthrough
// and subcommand limit when it is created.
void add_command(CLI::App& parent, const Command& cmd,
                 std::map<const CLI::App*, const Command*>& made) {
  CLI::App* app = parent.add_subcommand(cmd.name, cmd.description);
  made[app] = &cmd;
  if (!cmd.subcommands.empty()) {
    // At most one; none is reported by the command's own `run`. With a minimum of 1 CLI11 would
    // answer `cluster bogus` with "A subcommand is required" instead of naming the word it did
    // not understand.
    app->require_subcommand(0, 1);
  }
  app->fallthrough();  // global flags may also follow the subcommand
  add_options(*app, cmd.options);
  if (!cmd.footer.empty()) app->footer(cmd.footer);
  for (const auto& sub : cmd.subcommands) add_command(*app, sub, made);
}

// A command that takes the rest of the line (`run RESOURCE... -- COMMAND [ARGS...]`) gets the
// words after its "--" here, and CLI11 parses only the words before it. CLI11 2.1 hands the
// words after "--" to a positional only if that positional got nothing before it, so
// `run a b -- cmd` cannot be told apart from `run a -- b cmd` by CLI11 alone.
// The command is the first word that is neither a global option nor the value of one (as for
// CLI11: the top level has no positionals). Returns how many words of argv CLI11 is to parse.
int split_rest(int argc, char** argv, const std::vector<Option>& globals,
               const std::vector<Command>& commands) {
  auto takes_value = [&](std::string_view word) {
    for (const auto& o : globals) {
      if (std::holds_alternative<bool*>(o.target)) continue;
      std::string_view names = o.names;
      while (!names.empty()) {
        const auto comma = names.find(',');
        if (names.substr(0, comma) == word) return true;
        names = comma == std::string_view::npos ? "" : names.substr(comma + 1);
      }
    }
    return false;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view word = argv[i];
    if (word == "--") return argc;  // before any command: CLI11's to judge
    if (word.starts_with("-")) {
      if (word.find('=') == std::string_view::npos && takes_value(word)) ++i;
      continue;
    }
    for (const auto& c : commands) {
      if (c.name != word || c.rest == nullptr) continue;
      for (int j = i + 1; j < argc; ++j) {
        if (std::string_view(argv[j]) == "--") {
          c.rest->emplace(argv + j + 1, argv + argc);
          return j;
        }
      }
    }
    return argc;
  }
  return argc;
}

// CLI11 says "--nodes: At Most 1 required but received 2" of an option given twice; this says
// what to do instead. Any other mismatch is passed on as CLI11 words it.
std::string given_more_than_once(const std::string& what) {
  static constexpr std::string_view marker = ": At Most 1 required but received ";
  const auto at = what.find(marker);
  if (at == std::string::npos) return what;
  const std::string name = what.substr(0, at);
  const std::string times = what.substr(at + marker.size());
  std::string out = name + " was given " + times + " times; give it once";
  if (name == "--nodes" || name == "-n") {
    out += ", with every node in one comma-separated list (-n host1:port,host2:port,host3:port)";
  }
  return out;
}

// The global flags, accepted before or after the command; their values go to `g`.
std::vector<Option> global_options(Globals& g) {
  return {
      {"-n,--nodes", &g.nodes,
       "Comma-separated node addresses (redis://[user:pass@]host:port[/db], "
       "unix:///path[?db=N], host:port, a Sentinel-managed master as "
       "redis+sentinel://[user:pass@]host:port/master-name[?sentinel=host:port...], a Redis "
       "Cluster as redis+cluster://[user:pass@]host:port[?seed=host:port...]; rediss://, "
       "rediss+sentinel:// and rediss+cluster:// for TLS). Default: $REDLOCK_NODES, else "
       "127.0.0.1:7001..7005. A password in an address is %-encoded (',' as %2C); better, "
       "give it with --password-file"},
      {.names = "--password-file",
       .target = &g.password_file,
       .help = "Read the password of every node whose address has none (redis://user:@host "
               "names its user) from the first line of FILE, so it is not on the command line "
               "(default $REDLOCK_PASSWORD_FILE, else the password $REDLOCK_PASSWORD)",
       .type_name = "FILE"},
      {"--json", &g.json, "Print one JSON object on stdout"},
      {"-v,--verbose", &g.verbose, "Per-node outcomes and connection events on stderr"},
      {"-q,--quiet", &g.quiet,
       "Print nothing on success, nor for exit status 1 (held elsewhere / not held); "
       "other failures are still reported on stderr"},
      {"--node-timeout", &g.node_timeout, "Deadline of one command on one node (default 50ms)"},
      {"--connect-timeout", &g.connect_timeout, "Deadline of a connect (default 250ms)"},
      {"--drift-factor", &g.drift_factor, "Clock drift factor (default 0.01)"},
      {"--retry-count", &g.retry_count,
       "acquire, run without --wait: attempts after the first when there is no quorum "
       "(default 3); a lock held elsewhere is not retried"},
      {"--retry-delay", &g.retry_delay, "Sleep between attempts (default 200ms, +-100ms jitter)"},
      {"--min-uptime", &g.min_uptime,
       "Restart guard: a node whose Redis uptime is below this gives no vote "
       "(default $REDLOCK_MIN_UPTIME, else 0)"},
      {"--max-ttl", &g.max_ttl,
       "The longest ttl any client of these nodes uses (a deployment setting: give every client "
       "the same): a restarted node gives no vote for this long plus drift, and a longer --ttl "
       "is refused (default $REDLOCK_MAX_TTL, else unset: the quarantine is the longest ttl "
       "used, at least 30s)"},
      {"--min-replicas", &g.min_replicas,
       "Replicated votes: a vote counts only when this many replicas of its node acknowledged "
       "the write (WAIT after each acquire and extend), so a failover promotes a replica that "
       "has the key (default 0: off)"},
      {"--replica-timeout", &g.replica_timeout,
       "How long WAIT waits for the replicas; below --node-timeout (default half of it)"},
      {"--key-prefix", &g.key_prefix,
       "Prepended to every resource to form its keys, as a service's Options::key_prefix "
       "(default none)"},
      {"--tls", &g.tls,
       "TLS to every node, host:port addresses included (rediss:// always is); with `cluster "
       "up`: start the nodes with TLS only (default $REDLOCK_TLS=1)"},
      {.names = "--cacert",
       .target = &g.cacert,
       .help = "CA certificates (PEM) to verify the nodes with, instead of the system's "
               "(default $REDLOCK_CACERT)",
       .type_name = "FILE"},
      {.names = "--cacertdir",
       .target = &g.cacertdir,
       .help = "Directory of CA certificates (hashed names, as c_rehash makes) "
               "(default $REDLOCK_CACERTDIR)",
       .type_name = "DIR"},
      {.names = "--cert",
       .target = &g.cert,
       .help = "Client certificate (PEM) for nodes that ask for one; needs --key "
               "(default $REDLOCK_CERT)",
       .type_name = "FILE"},
      {.names = "--key",
       .target = &g.key,
       .help = "Private key (PEM) of --cert (default $REDLOCK_KEY)",
       .type_name = "FILE"},
      {.names = "--sni",
       .target = &g.sni,
       .help = "Server name to send (SNI) and to check in the certificates, instead of each "
               "node's host (default $REDLOCK_SNI)",
       .type_name = "NAME"},
      {"--insecure", &g.insecure,
       "Do not verify the nodes' certificates (encrypted, not authenticated: for tests only; "
       "warns on stderr) (default $REDLOCK_INSECURE=1)"},
      {.names = "--commands",
       .target = &g.commands,
       .help = "How a plain lock's release and extend reach each node: auto (DELIFEQ or DELEX "
               "IFEQ and SET IFEQ where the node has them, the Lua scripts elsewhere), scripts, "
               "or native (a node without them gives no vote) (default $REDLOCK_COMMANDS, else "
               "auto)",
       .type_name = "FORM"},
      {"--no-wake-ups", &g.no_wake_ups,
       "Waiters poll only: no pub/sub connection listening for releases (default: a waiter "
       "tries again as soon as a quorum of nodes saw the lock released)"},
  };
}

}  // namespace
}  // namespace redlock::cli

int main(int argc, char** argv) {
  using namespace redlock::cli;
  CLI::App app{"redlock-cli: distributed locks over independent Redis masters (Redlock)"};
  app.name("redlock-cli");
  app.set_version_flag("--version", std::string("redlock-cli ") + redlock::version());
  app.require_subcommand(0, 1);  // an unknown word is then reported by name
  app.fallthrough();             // global flags may also follow the subcommand

  Globals g;
  const std::vector<Option> globals = global_options(g);
  add_options(app, globals);

  const std::vector<Command> commands = {
      acquire_command(g), release_command(g), extend_command(g), status_command(g),
      run_command(g),     elect_command(g),   leader_command(g), observe_command(g),
      cluster_command(g), bench_command(g),   demo_command(g),   doctor_command(g),
  };
  std::map<const CLI::App*, const Command*> made;
  for (const auto& c : commands) add_command(app, c, made);

  // The nodes' configuration warnings the library gave during the command, once per kind, on
  // every way out.
  struct FlushWarnings {
    ~FlushWarnings() { flush_warnings(); }
  } flush_at_exit;

  try {
    const int parsed = split_rest(argc, argv, globals, commands);
    app.parse(parsed, argv);
    // `-n "$UNSET"` must not silently fall back to REDLOCK_NODES or the local demo nodes.
    g.nodes_given = app.get_option("--nodes")->count() > 0;
    // The command chosen is the last one named: `cluster kill 2` runs `kill`.
    const Command* chosen = nullptr;
    for (const CLI::App* at = &app; !at->get_subcommands().empty();) {
      at = at->get_subcommands().front();
      chosen = made.at(at);
    }
    if (chosen == nullptr) {
      Stderr() << "redlock-cli: a command is required\n"
               << "Run 'redlock-cli --help' for usage.\n";
      return exit_usage;
    }
    const int code = chosen->run();
    std::cout.flush();
    return code;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ArgumentMismatch& e) {
    Stderr() << "redlock-cli: " << given_more_than_once(e.what()) << "\n";
    Stderr() << "Run 'redlock-cli --help' (or 'redlock-cli COMMAND --help') for usage.\n";
    return exit_usage;
  } catch (const CLI::ParseError& e) {
    Stderr() << "redlock-cli: " << e.what() << "\n";
    Stderr() << "Run 'redlock-cli --help' (or 'redlock-cli COMMAND --help') for usage.\n";
    return exit_usage;
  } catch (const UsageError& e) {
    Stderr() << "redlock-cli: " << e.what() << "\n";
    return exit_usage;
  } catch (const std::exception& e) {
    Stderr() << "redlock-cli: " << e.what() << "\n";
    return exit_usage;
  }
}
