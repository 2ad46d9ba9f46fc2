// redlock-cli elect NAME --id ID [--ttl DUR] [--again] -- COMMAND [ARGS...]
// redlock-cli leader NAME
// redlock-cli observe NAME
//
// Leader election (redlock/election.hpp). `elect` campaigns and runs COMMAND only while leader,
// with REDLOCK_LEADER_ID, REDLOCK_TERM and REDLOCK_FENCE (the term) in its environment: `run`'s
// supervision (run_supervise.hpp), so no process of the job outlives the leadership, a loss ends
// the job (exit 4) and signals are forwarded to it. With --again it campaigns again after a loss
// or after COMMAND ends, until a signal stops it. `leader` reads who leads from a quorum; `observe`
// prints a line each time that changes, until SIGINT or SIGTERM.

#include <signal.h>

#include <condition_variable>
#include <deque>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <sstream>

#include "cli.hpp"
#include "output.hpp"
#include "redlock/client.hpp"
#include "redlock/election.hpp"
#include "run_supervise.hpp"

namespace redlock::cli {
namespace {

struct ElectArgs {
  std::string name;
  std::optional<std::vector<std::string>> command;  // after "--" (main.cpp's split_rest)
  std::string id;
  std::string ttl = "15s";
  std::string wait;
  std::string grace = "5s";
  std::string renew_deadline;
  bool again = false;
};

// The checks every election command makes before anything is sent, the library's own: the name (a
// resource name, so none of the library's own key forms) and, to campaign, the identity and the
// leader's lock (`campaign`: its ttl and hold; the election extends it automatically).
void check_election(const std::string& name, const std::string* id, const Options& opts,
                    const CampaignOptions* campaign = nullptr, const GivenFlags& given = {}) {
  AcquireOptions o;
  o.mode = LockMode::leader;
  o.identity = id != nullptr ? *id : "reader";
  // Reading who leads takes no lock: any ttl the client accepts (a declared --max-ttl below the
  // default 30 s refused `leader` and `observe` once).
  o.ttl = campaign != nullptr ? campaign->ttl : opts.max_ttl.value_or(o.ttl);
  GivenFlags named = given;
  named["identity"] = {"--id", ""};  // (the library's reason quotes it)
  check_acquisition({name}, o, opts, named);
  if (campaign == nullptr) return;
  HoldOptions hold = campaign->hold;
  hold.auto_extend = true;  // as Election::try_campaign holds it
  check_holding(campaign->ttl, hold, named);
}

std::string seconds(Millis ms) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << static_cast<double>(ms.count()) / 1000.0 << " s";
  return out.str();
}

// One line for a read: "node-a leads 'svc' (term 42, for 12.3 s, valid 9.8 s more)", "nobody
// leads 'svc'", "who leads 'svc': no quorum to tell: 2 of 5 nodes answered (3 timeout)".
std::string leader_line(const std::string& name, const LeaderResult& r) {
  const std::string quoted = "'" + printable(name) + "'";
  // The library's message says why (each silent node's reason in a few words), and a refusal of
  // this client's configuration says "refused:" (exit 5).
  if (r.error) return "who leads " + quoted + ": " + r.message;
  if (!r.leader) return "nobody leads " + quoted;
  return printable(r.leader->id) + " leads " + quoted + " (term " + std::to_string(r.leader->term) +
         ", for " + seconds(r.leader->since) + ", valid " + seconds(r.leader->validity) + " more)";
}

int run_elect(const ElectArgs& a, const Globals& g) {
  if (!a.command || a.command->empty())
    throw UsageError("no command given (elect NAME --id ID -- COMMAND [ARGS...])");
  const auto& command = *a.command;
  CampaignOptions co;
  GivenFlags given{{"ttl", {"--ttl", a.ttl}}};
  co.ttl = duration_arg("--ttl", a.ttl);
  if (!a.wait.empty()) co.wait = duration_arg("--wait", a.wait);
  const Millis grace = duration_arg("--grace", a.grace);
  if (!a.renew_deadline.empty()) {
    given["renew_deadline"] = {"--renew-deadline", a.renew_deadline};
    co.hold.renew_deadline = duration_arg("--renew-deadline", a.renew_deadline);
  }
  Options opts = make_options(g);
  check_election(a.name, &a.id, opts, &co, given);

  run_job::Supervisor supervisor;  // before the client: its thread inherits the signal mask
  supervisor.watch_hold(co.hold);
  Client client(opts);
  Election election(client, a.name);
  const std::string what = "leadership of '" + printable(a.name) + "'";
  while (true) {
    // A signal while campaigning ends the campaign; the command is not started (again).
    StopOnSignal interrupt;
    co.stop = interrupt.token();
    auto [leadership, res] = election.try_campaign(a.id, co);
    interrupt.disarm();
    if (interrupt.signal() != 0) {
      if (res) leadership.resign();
      report_failure(g, make_error_code(Errc::cancelled), "cannot become leader",
                     interrupt.describe() + "; not leader, " + command.front() + " was not started",
                     {});
      return 128 + interrupt.signal();
    }
    if (!res) {
      report_failure(g, res.error, "cannot become leader", res.message, res.nodes);
      return exit_code_for(res.error);
    }
    if (g.verbose) {
      Stderr() << "redlock-cli: leader of '" << printable(a.name) << "' as '" << printable(a.id)
               << "' (term " << leadership.term() << "), running " << command.front() << "\n";
    }
    flush_warnings();
    const std::string term = std::to_string(leadership.term());
    const auto outcome = supervisor.supervise(
        {[&leadership] { return leadership.resign(); },
         [&leadership] { return leadership.lost(); }},
        command,
        run_job::job_environment(
            {"REDLOCK_LEADER_ID=" + a.id, "REDLOCK_TERM=" + term, "REDLOCK_FENCE=" + term}),
        grace, g, what);
    if (!a.again || outcome.stop_signal != 0) return outcome.exit_code;
    if (!g.quiet) {
      Stderr() << "redlock-cli: " << command.front()
               << (outcome.lost ? " was stopped: the leadership was lost"
                                : " ended (exit " + std::to_string(outcome.exit_code) + ")")
               << "; campaigning again\n";
    }
  }
}

int run_leader(const std::string& name, const Globals& g) {
  Options opts = make_options(g);
  check_election(name, nullptr, opts);
  Client client(opts);
  Election election(client, name);
  const auto r = election.leader();
  if (g.json) {
    print_leader_json(name, r);
  } else if (r.error) {
    Stderr() << "redlock-cli: " << leader_line(name, r) << "\n";
  } else if (!r.leader) {
    if (!g.quiet) std::cout << leader_line(name, r) << "\n";
  } else {
    std::cout << leader_line(name, r) << "\n";
  }
  if (r.error) return r.error == Errc::no_quorum ? exit_no_quorum : exit_code_for(r.error);
  return r.leader ? exit_ok : exit_held;
}

int run_observe(const std::string& name, const std::string& poll_text, const Globals& g) {
  Options opts = make_options(g);
  check_election(name, nullptr, opts);
  ObserveOptions oo;
  if (!poll_text.empty()) {
    oo.poll = duration_arg("--poll", poll_text);
    if (oo.poll <= Millis{0}) throw UsageError("--poll: '" + poll_text + "' must be above 0");
  }
  StopOnSignal interrupt;  // SIGINT, SIGTERM, SIGHUP, SIGQUIT: stop observing, exit 0
  Client client(opts);
  Election election(client, name);
  // The changes are printed by this thread, in the order the client's thread saw them.
  std::mutex mu;
  std::condition_variable_any changed;
  std::deque<LeaderResult> pending;
  auto observation = election.observe(
      [&](const LeaderResult& r) {
        {
          std::lock_guard<std::mutex> hold(mu);
          pending.push_back(r);
        }
        changed.notify_one();
      },
      oo);
  const auto token = interrupt.token();
  while (true) {
    std::unique_lock<std::mutex> hold(mu);
    changed.wait(hold, token, [&] { return !pending.empty(); });
    while (!pending.empty()) {
      const auto r = std::move(pending.front());
      pending.pop_front();
      if (g.json) {
        print_leader_json(name, r);
      } else {
        std::cout << leader_line(name, r) << "\n";
      }
    }
    std::cout.flush();
    if (token.stop_requested()) break;
  }
  observation.stop();
  return exit_ok;
}

}  // namespace

Command elect_command(const Globals& g) {
  auto a = std::make_shared<ElectArgs>();
  return {
      .name = "elect",
      .description =
          "Campaign to lead NAME and run a command only while leader:\n"
          "  elect NAME --id ID [OPTIONS] -- COMMAND [ARGS...]",
      .footer =
          "COMMAND runs as with run: in a process group of its own that no process outlives the\n"
          "leadership; on a loss it gets SIGTERM (SIGKILL after --grace) and elect exits 4, or\n"
          "campaigns again with --again. It sees REDLOCK_LEADER_ID, REDLOCK_TERM and "
          "REDLOCK_FENCE\n"
          "(the term: fence what it writes with it) in its environment, and no password.\n"
          "Exit status: COMMAND's own (128+N if killed by signal N), 2 usage, 3 no quorum (with\n"
          "--wait), 4 the leadership was lost while COMMAND ran, 5 refused by the nodes' "
          "configuration.",
      .options =
          {
              {.names = "name", .target = &a->name, .help = "Election name", .required = true},
              {.names = "--id",
               .target = &a->id,
               .help = "This candidate's identity (1-256 bytes, no control characters; readable "
                       "by every client of the nodes: never a secret)",
               .type_name = "ID",
               .required = true},
              {"--ttl", &a->ttl,
               "Leadership ttl; extended every ttl/3 while COMMAND runs (default 15s)"},
              {"--wait", &a->wait, "Give up campaigning after this long (default: never)"},
              {"--again", &a->again,
               "Campaign again after a loss or after COMMAND ends (until a signal stops elect)"},
              {"--renew-deadline", &a->renew_deadline,
               "Give up when no extension has succeeded for this long (default 2/3 of the ttl)"},
              {"--grace", &a->grace,
               "After a loss: SIGTERM to COMMAND's group, then SIGKILL after this long (default "
               "5s)"},
          },
      .rest = &a->command,
      .run = [a, &g] { return run_elect(*a, g); },
      .storage = a,
  };
}

Command leader_command(const Globals& g) {
  auto name = std::make_shared<std::string>();
  return {
      .name = "leader",
      .description = "Who leads NAME, read from a quorum of the nodes:\n  leader NAME",
      .footer =
          "Exit status: 0 a leader, 1 nobody leads, 2 usage, 3 no quorum to tell, 5 refused "
          "(the nodes refused our password, ACL permissions or TLS).",
      .options =
          {{.names = "name", .target = name.get(), .help = "Election name", .required = true}},
      .run = [name, &g] { return run_leader(*name, g); },
      .storage = name,
  };
}

Command observe_command(const Globals& g) {
  struct ObserveArgs {
    std::string name;
    std::string poll;
  };
  auto a = std::make_shared<ObserveArgs>();
  return {
      .name = "observe",
      .description =
          "Print a line each time the leader of NAME changes, until interrupted:\n"
          "  observe NAME",
      .footer =
          "The first line says who leads now. Exit status: 0 once stopped by SIGINT or "
          "SIGTERM, 2 usage.",
      .options = {{.names = "name", .target = &a->name, .help = "Election name", .required = true},
                  {"--poll", &a->poll,
                   "Read at least this often (default 1s; a release or a new term is heard "
                   "sooner)"}},
      .run = [a, &g] { return run_observe(a->name, a->poll, g); },
      .storage = a,
  };
}

}  // namespace redlock::cli
