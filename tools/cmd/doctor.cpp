// redlock-cli doctor: are the configured nodes fit to hold locks? One line per node and a verdict
// (docs/cli.md: exit 0 fit, 1 warnings, 3 fewer than a quorum fit, 5 a quorum refused by
// configuration). The checks are in doctor_server.cpp, doctor_acl.cpp and doctor_votes.cpp.

#include "doctor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <future>
#include <iomanip>
#include <iostream>

#include "cli.hpp"
#include "json.hpp"

namespace redlock::cli::doctor {

const char* to_string(Level level) {
  switch (level) {
    case Level::ok:
      return "ok";
    case Level::skip:
      return "skip";
    case Level::warn:
      return "warn";
    case Level::fail:
      return "fail";
  }
  return "fail";
}

Level VoteReport::worst() const {
  Level w = Level::ok;
  for (const auto& c : checks) {
    if (c.level != Level::skip && c.level > w) w = c.level;
  }
  return w;
}

namespace {

VoteReport check_vote(const Context& ctx, const NodeAddress& vote) {
  VoteReport report;
  report.node = vote.to_string();
  switch (vote.kind) {
    case NodeAddress::Kind::server:
      check_server(ctx, vote, report);
      break;
    case NodeAddress::Kind::sentinel:
      check_sentinel_vote(ctx, vote, report);
      break;
    case NodeAddress::Kind::cluster:
      check_cluster_vote(ctx, vote, report);
      break;
  }
  return report;
}

std::string ms(double v) {
  if (std::fabs(v) < 0.05) v = 0;  // no "-0.0"
  char buf[32];
  std::snprintf(buf, sizeof buf, std::fabs(v) >= 1000 ? "%+.1f s" : "%+.1f ms",
                std::fabs(v) >= 1000 ? v / 1000 : v);
  return buf;
}

// Each node's clock against ours and against every other node's, less what the round trips
// leave open. A skew is harmless to the lock by itself (validity runs on our monotonic clock,
// expiry on the node's), but one near the drift allowance says the clocks are not synchronised,
// and the correction that comes one day moves every key's expiry on that node at once.
void judge_clocks(const Context& ctx, std::vector<VoteReport>& reports) {
  struct Sample {
    VoteReport* report;
    std::string prefix;
    ClockSample clock;
  };
  std::vector<Sample> all;
  for (auto& r : reports) {
    for (const auto& [prefix, clock] : r.clocks) all.push_back({&r, prefix, clock});
  }
  const double limit = static_cast<double>(ctx.drift_allowance.count()) / 2;
  for (const auto& s : all) {
    const double ours = std::max(0.0, std::fabs(s.clock.offset_ms) - s.clock.rtt_ms / 2);
    double others = 0;
    for (const auto& o : all) {
      if (&o == &s) continue;
      others = std::max(others, std::fabs(s.clock.offset_ms - o.clock.offset_ms) -
                                    (s.clock.rtt_ms + o.clock.rtt_ms) / 2);
    }
    char rtt[32];
    std::snprintf(rtt, sizeof rtt, "%.1f ms", s.clock.rtt_ms);
    std::string message =
        s.prefix + ms(s.clock.offset_ms) + " against ours (round trip " + rtt + ")";
    if (all.size() > 1) message += ", at most " + ms(others).substr(1) + " from the others'";
    const bool skewed = ours >= limit || others >= limit;
    if (skewed) {
      message += ": near the drift allowance (" + std::to_string(ctx.drift_allowance.count()) +
                 " ms at the longest ttl); synchronise the clocks (NTP), or a correction moves "
                 "the expiry of every key on the node";
    }
    s.report->add("clock", skewed ? Level::warn : Level::ok, message,
                  "clock " + ms(s.clock.offset_ms));
  }
}

struct Verdict {
  int fit = 0, warned = 0, unfit = 0, refused = 0, quorum = 0;
  const char* name = "fit";
  int exit_code = exit_ok;
};

Verdict judge(const std::vector<VoteReport>& reports) {
  Verdict v;
  v.quorum = static_cast<int>(reports.size()) / 2 + 1;
  for (const auto& r : reports) {
    const Level w = r.worst();
    if (w == Level::fail) {
      ++v.unfit;
      if (r.refused) ++v.refused;
    } else {
      ++(w == Level::warn ? v.warned : v.fit);
    }
  }
  if (v.fit + v.warned < v.quorum) {
    v.name = v.refused >= v.quorum ? "refused" : "unfit";
    v.exit_code = v.refused >= v.quorum ? exit_refused : exit_no_quorum;
  } else if (v.warned + v.unfit > 0) {
    v.name = "warnings";
    v.exit_code = exit_held;  // 1: usable, with warnings
  }
  return v;
}

const char* node_verdict(const VoteReport& r) {
  switch (r.worst()) {
    case Level::fail:
      return "unfit";
    case Level::warn:
      return "warning";
    default:
      return "fit";
  }
}

std::string verdict_line(const Verdict& v, std::size_t nodes) {
  const std::string usable = std::to_string(v.fit + v.warned) + " of " + std::to_string(nodes) +
                             " nodes can hold locks (a quorum is " + std::to_string(v.quorum) + ")";
  std::string detail;
  if (v.warned > 0) detail += ", " + std::to_string(v.warned) + " with warnings";
  if (v.unfit > 0) detail += ", " + std::to_string(v.unfit) + " unfit";
  if (v.refused > 0) detail += " (" + std::to_string(v.refused) + " refused by configuration)";
  return std::string(v.name) + ": " + usable + detail;
}

void print_human(const Globals& g, const std::vector<VoteReport>& reports, const Verdict& v) {
  std::size_t width = 4;
  for (const auto& r : reports) width = std::max(width, r.node.size());
  for (const auto& r : reports) {
    std::vector<std::string> briefs;
    for (const auto& c : r.checks) {
      if (!c.brief.empty() && std::find(briefs.begin(), briefs.end(), c.brief) == briefs.end())
        briefs.push_back(c.brief);
    }
    std::string line;
    for (const auto& b : briefs) line += (line.empty() ? "" : ", ") + b;
    std::cout << std::left << std::setw(static_cast<int>(width)) << r.node << "  " << std::setw(7)
              << node_verdict(r) << "  " << line << "\n";
    for (const auto& c : r.checks) {
      if (c.level == Level::ok && !g.verbose) continue;
      std::cout << "    " << to_string(c.level) << " " << c.name << ": " << c.message << "\n";
    }
  }
  std::cout << verdict_line(v, reports.size());
  // As the lock commands say (issue 41 item 7): nodes nobody named are easy to mistake for one's
  // own.
  if (default_nodes_used(g)) {
    std::cout << " (the default nodes " << default_nodes_summary << ": set -n or REDLOCK_NODES)";
  }
  std::cout << "\n";
}

void print_json_report(const std::vector<VoteReport>& reports, const Verdict& v) {
  Json nodes = Json::array();
  for (const auto& r : reports) {
    Json checks = Json::array();
    for (const auto& c : r.checks) {
      checks.push_back({{"name", c.name}, {"status", to_string(c.level)}, {"message", c.message}});
    }
    Json n = {{"node", r.node}, {"verdict", node_verdict(r)}};
    n["server"] = r.server.empty() ? Json() : Json(r.server);
    n["version"] = r.version.empty() ? Json() : Json(r.version);
    n["role"] = r.role.empty() ? Json() : Json(r.role);
    n["checks"] = std::move(checks);
    nodes.push_back(std::move(n));
  }
  print_json({{"verdict", v.name},
              {"quorum", v.quorum},
              {"fit", v.fit},
              {"warnings", v.warned},
              {"unfit", v.unfit},
              {"refused", v.refused},
              {"nodes", std::move(nodes)}});
}

int run_doctor(const Globals& g) {
  const Options options = make_options(g);
  using std::chrono::milliseconds;
  const auto ttl = options.max_ttl.value_or(AcquireOptions{}.ttl);
  const Context ctx{
      .options = options,
      .deadlines = {std::max(options.connect_timeout, milliseconds(1000)),
                    std::max(options.node_timeout, milliseconds(1000))},
      .drift_allowance = milliseconds(static_cast<long long>(
                             std::ceil(static_cast<double>(ttl.count()) * options.drift_factor))) +
                         milliseconds(2),
  };
  // Every vote at once: a paused node costs its deadlines once, not once per node before it.
  std::vector<std::future<VoteReport>> pending;
  for (const auto& vote : options.nodes) {
    pending.push_back(std::async(std::launch::async, check_vote, std::cref(ctx), std::cref(vote)));
  }
  std::vector<VoteReport> reports;
  for (auto& p : pending) reports.push_back(p.get());  // a UsageError (our TLS files) rethrows
  judge_clocks(ctx, reports);
  const Verdict v = judge(reports);
  if (g.json) {
    print_json_report(reports, v);
  } else if (!g.quiet || v.exit_code != exit_ok) {
    print_human(g, reports, v);
  }
  return v.exit_code;
}

}  // namespace
}  // namespace redlock::cli::doctor

namespace redlock::cli {

Command doctor_command(const Globals& g) {
  return {
      .name = "doctor",
      .description =
          "Check that the nodes are fit to hold locks: reachable, master, persistence, "
          "eviction policy, clock, TLS certificate, ACL, Sentinel and Cluster state",
      .footer =
          "One line per node (fit, warning or unfit; with -v every check), then the "
          "verdict.\nExit status: 0 every node fit, 1 warnings (a quorum can still hold "
          "locks), 2 usage,\n3 fewer than a quorum fit, 5 a quorum refused by "
          "configuration (AUTH, TLS, ACL).",
      .run = [&g] { return doctor::run_doctor(g); },
  };
}

}  // namespace redlock::cli
