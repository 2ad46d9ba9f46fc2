// doctor: Sentinel and Cluster votes (doctor.hpp). What the discovery sources say is read with
// the library's own parsers and trusted by its own rules (core/info, core/slots, core/trust), so
// doctor checks the servers the library would lock on, and no other.

#include <algorithm>
#include <set>

#include "core/info.hpp"
#include "core/server_text.hpp"
#include "core/slots.hpp"
#include "core/trust.hpp"
#include "doctor.hpp"
#include "server_access.hpp"

namespace redlock::cli::doctor {
namespace {

std::string host_port(const std::string& host, std::uint16_t port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

struct Deadline {
  nodes::ClientOptions operator()(const Context& ctx, const std::string& user,
                                  const std::string& password) const {
    return {.connect_timeout = ctx.deadlines.connect,
            .command_timeout = ctx.deadlines.command,
            .user = user,
            .password = password};
  }
};

// What the sentinels of `vote` answered, each asked with the sentinels' own credentials.
struct SentinelPoll {
  std::vector<detail::SentinelAnswer> answers;
  std::vector<std::string> silent;  // "host:port: why", the sentinels that gave no answer
  int refused = 0;                  // of those, AUTH or TLS refused
  int quorum = 0;
};

SentinelPoll poll_sentinels(const Context& ctx, const NodeAddress& vote) {
  std::vector<NodeAddress::Host> sentinels{{vote.host, vote.port}};
  sentinels.insert(sentinels.end(), vote.more_sentinels.begin(), vote.more_sentinels.end());
  SentinelPoll poll;
  for (const auto& s : sentinels) {
    NodeAddress at = vote;
    at.kind = NodeAddress::Kind::server;
    at.host = s.host;
    at.port = s.port;
    at.db = 0;
    const std::string name = host_port(s.host, s.port);
    nodes::SyncClient c(endpoint_of(at, ctx.options.tls),
                        Deadline{}(ctx, vote.sentinel_user, vote.sentinel_password));
    auto r = c.ok() ? c.command({"SENTINEL", "MASTER", vote.master_name}) : std::nullopt;
    if (!r) {
      poll.silent.push_back(name + ": " + detail::server_text(c.error()));
      if (c.failure() == nodes::Failure::handshake) ++poll.refused;
      continue;
    }
    detail::SentinelAnswer answer{name, std::nullopt, {}};
    if (r->is_error()) {
      answer.error = shown(*r);
    } else {
      answer.master = detail::parse_sentinel_master(*r, answer.error);
      if (answer.master) poll.quorum = std::max(poll.quorum, answer.master->quorum);
    }
    poll.answers.push_back(std::move(answer));
  }
  return poll;
}

}  // namespace

void check_sentinel_vote(const Context& ctx, const NodeAddress& vote, VoteReport& report) {
  const SentinelPoll poll = poll_sentinels(ctx, vote);
  const std::size_t asked = poll.answers.size() + poll.silent.size();
  const auto verdict = detail::agree_on_master(poll.answers);
  std::string silent;
  for (const auto& s : poll.silent) silent += "; no answer from " + s;
  if (!verdict.master) {
    report.refused = poll.answers.empty() && poll.refused > 0;
    report.add("sentinel", Level::fail,
               "no master named by a majority of the sentinels: " +
                   (verdict.why.empty() ? std::string("none answered") : verdict.why) + silent,
               "no master");
    return;
  }
  const auto& m = *verdict.master;
  const auto agree = std::count_if(poll.answers.begin(), poll.answers.end(), [&](const auto& a) {
    return a.master && a.master->ip == m.ip && a.master->port == m.port;
  });
  const std::string where = host_port(m.ip, m.port);
  std::string message =
      "master " + detail::server_text(vote.master_name, 80) + " at " + where + ", named by " +
      std::to_string(agree) + " of " + std::to_string(asked) + " sentinels" +
      (poll.quorum > 0 ? " (their quorum: " + std::to_string(poll.quorum) + ")" : "");
  Level level = Level::ok;
  if (static_cast<std::size_t>(agree) < asked) level = Level::warn;
  if (poll.quorum > 0 && agree < poll.quorum) {
    level = Level::warn;
    message += "; fewer agree than the quorum a failover needs";
  }
  if (m.flags != "master") {
    level = Level::warn;
    message += "; flags " + detail::server_text(m.flags, 80);
  }
  report.add("sentinel", level, message + silent,
             std::to_string(agree) + "/" + std::to_string(asked) + " sentinels");
  const auto trust = detail::trust_discovered(vote, ctx.options.tls, m.ip, m.port);
  if (!trust.trusted) {
    report.add("reachable", Level::fail, trust.why_not, "untrusted");
    return;
  }
  NodeAddress master = vote;
  master.kind = NodeAddress::Kind::server;
  master.host = m.ip;
  master.port = m.port;
  check_server(ctx, master, report, "", trust.verify_name);
}

namespace {

// The first seed's CLUSTER INFO and CLUSTER SLOTS; `why` says what each seed that failed said.
struct ClusterView {
  std::string seed_host;
  std::string info;
  std::vector<detail::SlotRange> ranges;
};

std::optional<ClusterView> cluster_view(const Context& ctx, const NodeAddress& vote,
                                        std::string& why, bool& refused) {
  std::vector<NodeAddress::Host> seeds{{vote.host, vote.port}};
  seeds.insert(seeds.end(), vote.more_seeds.begin(), vote.more_seeds.end());
  for (const auto& seed : seeds) {
    const std::string name = host_port(seed.host, seed.port);
    nodes::SyncClient c(endpoint_of(cluster_member(vote, seed.host, seed.port), ctx.options.tls),
                        Deadline{}(ctx, vote.user, vote.password));
    auto info = c.ok() ? c.command({"CLUSTER", "INFO"}) : std::nullopt;
    auto slots = info ? c.command({"CLUSTER", "SLOTS"}) : std::nullopt;
    if (!c.ok()) {
      refused = refused || c.failure() == nodes::Failure::handshake;
      why += (why.empty() ? "" : "; ") + name + ": " + detail::server_text(c.error());
      continue;
    }
    std::string error;
    std::optional<std::vector<detail::SlotRange>> ranges;
    if (info->type != nodes::Reply::Type::string) {
      error = "CLUSTER INFO: " + shown(*info);
    } else {
      ranges = detail::parse_cluster_slots(*slots, error);
    }
    if (!ranges) {
      why += (why.empty() ? "" : "; ") + name + ": " + error;
      continue;
    }
    return ClusterView{seed.host, info->str, std::move(*ranges)};
  }
  return std::nullopt;
}

}  // namespace

void check_cluster_vote(const Context& ctx, const NodeAddress& vote, VoteReport& report) {
  std::string why;
  bool refused = false;
  const auto view = cluster_view(ctx, vote, why, refused);
  if (!view) {
    report.refused = refused;
    report.add("cluster", Level::fail, "no seed answered CLUSTER INFO and SLOTS: " + why, "down");
    return;
  }
  const std::string state =
      detail::server_text(detail::info_field(view->info, "cluster_state"), 40);
  long long served = 0;
  std::vector<detail::ClusterEndpoint> masters;
  for (const auto& r : view->ranges) {
    served += r.last - r.first + 1;
    detail::ClusterEndpoint m = r.master;
    if (m.host.empty() || m.host == "?") m.host = view->seed_host;
    if (std::find(masters.begin(), masters.end(), m) == masters.end()) masters.push_back(m);
  }
  const bool whole = served == detail::cluster_slots && state == "ok";
  report.add("cluster", whole ? Level::ok : Level::fail,
             "cluster_state " + state + ", " + std::to_string(served) + " of " +
                 std::to_string(detail::cluster_slots) + " slots served, " +
                 std::to_string(masters.size()) + " masters" +
                 (whole ? "" : ": a lock whose key hashes to a slot not served gets no vote"),
             "cluster " + state + ", " + std::to_string(masters.size()) + " masters");
  for (const auto& m : masters) {
    const std::string prefix = host_port(m.host, m.port) + ": ";
    const auto trust = detail::trust_discovered(vote, ctx.options.tls, m.host, m.port);
    if (!trust.trusted) {
      report.add("reachable", Level::fail, prefix + trust.why_not, "untrusted");
      continue;
    }
    check_server(ctx, cluster_member(vote, m.host, m.port), report, prefix, trust.verify_name);
  }
}

}  // namespace redlock::cli::doctor
