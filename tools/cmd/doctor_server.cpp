// doctor: the checks of one server (doctor.hpp): reachable, what it is, its role, persistence,
// eviction, clock and TLS certificate; then the ACL checks (doctor_acl.cpp).

#include <charconv>
#include <ctime>

#include "cli.hpp"
#include "core/info.hpp"
#include "core/server_text.hpp"
#include "doctor.hpp"
#include "server_access.hpp"

namespace redlock::cli::doctor {
namespace {

using Reply = nodes::Reply;

// A connection that failed: why, in one line, as the library says it (a plaintext connection
// the server hangs up on is most likely a TLS port).
void unreachable(const nodes::SyncClient& c, VoteReport& report, const std::string& prefix) {
  if (c.failure() == nodes::Failure::config) throw UsageError(c.error());  // our own TLS files
  std::string why = detail::server_text(c.error());
  const bool hung_up = c.failure() == nodes::Failure::eof || why.find("reset") != std::string::npos;
  if (!c.endpoint().tls && hung_up) {
    why += " (the server hung up before answering: does it expect TLS? use rediss:// or --tls)";
  }
  // AUTH refused, TLS verification failed: configuration, which no retry changes (exit 5).
  report.refused = report.refused || c.failure() == nodes::Failure::handshake;
  report.add("reachable", Level::fail, prefix + "down: " + why, "down");
}

// INFO server and INFO replication: what the server is and its role.
void check_identity(nodes::SyncClient& c, VoteReport& report, const std::string& prefix) {
  auto info = c.command({"INFO", "server"});
  if (!info || info->type != Reply::Type::string) {
    const std::string why = info ? shown(*info) : detail::server_text(c.error());
    report.add("server", Level::skip, prefix + "cannot read INFO server: " + why, "server ?");
    return;
  }
  const auto name = detail::info_field(info->str, "server_name");
  const auto valkey = detail::info_field(info->str, "valkey_version");
  report.server = name.empty() ? "redis" : detail::server_text(name, 40);
  report.version = detail::server_text(
      valkey.empty() ? detail::info_field(info->str, "redis_version") : valkey, 40);
  const std::string what = report.server + " " + report.version;
  report.add("server", Level::ok, prefix + what, what);

  auto repl = c.command({"INFO", "replication"});
  if (!repl || repl->type != Reply::Type::string) return;  // the same refusal as above
  report.role = detail::server_text(detail::info_field(repl->str, "role"), 40);
  if (report.role == "master") {
    report.add("role", Level::ok, prefix + "master", "master");
  } else {
    const auto host = detail::info_field(repl->str, "master_host");
    const auto port = detail::info_field(repl->str, "master_port");
    report.add("role", Level::fail,
               prefix + "a replica" +
                   (host.empty() ? std::string()
                                 : " of " + detail::server_text(host, 80) + ":" +
                                       detail::server_text(port, 10)) +
                   ": it refuses the lock's writes (READONLY); name the master instead",
               "replica");
  }
}

void check_persistence(const Context& ctx, nodes::SyncClient& c, VoteReport& report,
                       const std::string& prefix) {
  std::string why;
  const auto aof = config_get(c, "appendonly", why);
  const auto fsync = aof ? config_get(c, "appendfsync", why) : std::nullopt;
  if (!aof || !fsync) {
    report.add("persistence", Level::skip,
               prefix + "cannot read appendonly/appendfsync (CONFIG GET refused: " + why +
                   "); ask the provider whether a restart keeps the keys",
               "persistence ?");
    return;
  }
  if (*aof != "yes") {
    const auto guard = ctx.options.min_node_uptime;
    if (guard.count() > 0) {
      report.add("persistence", Level::ok,
                 prefix + "no AOF: a restart forgets the locks; the restart guard (--min-uptime " +
                     std::to_string(guard.count() / 1000) +
                     " s) costs this node its vote for that long after each restart",
                 "no aof, guarded");
    } else {
      report.add("persistence", Level::warn,
                 prefix +
                     "no AOF and the restart guard off: a restart forgets the locks it held, and "
                     "a client that did not see the restart may take a lock another holds; use "
                     "--min-uptime (at least the longest ttl) or appendonly yes",
                 "no aof");
    }
    return;
  }
  if (*fsync == "always") {
    report.add("persistence", Level::ok,
               prefix +
                   "AOF, appendfsync always: locks and fencing counters survive a crash "
                   "and a power loss",
               "aof always");
  } else {
    report.add("persistence", Level::ok,
               prefix + "AOF, appendfsync " + *fsync +
                   ": a crash of the server keeps the locks; a power loss may lose the last "
                   "writes (fencing counters too: appendfsync always keeps them)",
               "aof " + *fsync);
  }
}

void check_eviction(nodes::SyncClient& c, VoteReport& report, const std::string& prefix) {
  std::string why;
  const auto policy = config_get(c, "maxmemory-policy", why);
  if (!policy) {
    report.add("maxmemory-policy", Level::skip,
               prefix + "cannot read (CONFIG GET refused: " + why + "); lock nodes need noeviction",
               "eviction ?");
  } else if (*policy == "noeviction") {
    report.add("maxmemory-policy", Level::ok, prefix + "noeviction", "noeviction");
  } else {
    report.add("maxmemory-policy", Level::warn,
               prefix + "maxmemory-policy " + *policy +
                   " can evict a held lock under memory pressure; fix: CONFIG SET "
                   "maxmemory-policy noeviction (and in the server's configuration file)",
               *policy);
  }
}

// What the node can do beyond plain commands, asked with the library's own probe
// (core/capabilities.hpp): the same answer the library acts on at each connect.
detail::Capabilities check_capabilities(nodes::SyncClient& c, VoteReport& report,
                                        const std::string& prefix) {
  std::vector<detail::Reply> replies;
  for (const auto& cmd : detail::capability_probe_commands()) {
    auto r = c.command(cmd);
    if (!r) break;
    replies.push_back(std::move(*r));
  }
  const auto caps = detail::parse_capabilities(replies);
  const bool native = caps.native_release() && caps.native_extend();
  if (!caps.probed) {
    report.add("capabilities", Level::skip,
               prefix + "not probed (" +
                   (replies.empty() || replies[0].type != detail::Reply::Type::error
                        ? std::string("no answer to COMMAND INFO")
                        : detail::server_text(replies[0].str)) +
                   "): release and extend by script",
               "scripts");
  } else {
    const char* brief = native ? (caps.scripts ? "native" : "native, no scripts")
                               : (caps.scripts ? "scripts" : "no scripts");
    report.add("capabilities", Level::ok,
               prefix + detail::describe(caps) +
                   (native ? ": plain locks are released and extended without a script"
                           : ": release and extend by script") +
                   (caps.scripts ? "" : "; EVAL and EVALSHA are missing"),
               brief);
  }
  return caps;
}

// TIME, halfway through its round trip against our wall clock. The verdict on it waits for the
// other nodes' (doctor.cpp).
void sample_clock(nodes::SyncClient& c, VoteReport& report, const std::string& prefix) {
  using namespace std::chrono;
  const auto before = system_clock::now();
  auto r = c.command({"TIME"});
  const auto after = system_clock::now();
  if (!r || r->type != Reply::Type::array || r->elements.size() != 2) {
    report.add("clock", Level::skip,
               prefix + "cannot read TIME: " + (r ? shown(*r) : detail::server_text(c.error())),
               "clock ?");
    return;
  }
  // Server text: from_chars refuses what is not a number in range (sscanf's overflow is undefined).
  long long s = 0, us = 0;
  const auto number = [](const std::string& text, long long& out) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc() && end == text.data() + text.size();
  };
  if (!number(r->elements[0].str, s) || !number(r->elements[1].str, us)) {
    report.add("clock", Level::skip, prefix + "TIME answered " + shown(*r), "clock ?");
    return;
  }
  const double node_us = static_cast<double>(s) * 1e6 + static_cast<double>(us);
  const auto mid = before + (after - before) / 2;
  const double ours_us =
      static_cast<double>(duration_cast<microseconds>(mid.time_since_epoch()).count());
  report.clocks.emplace_back(prefix,
                             ClockSample{(node_us - ours_us) / 1000.0,
                                         duration<double, std::milli>(after - before).count()});
}

void check_tls(const nodes::SyncClient& c, VoteReport& report, const std::string& prefix) {
  const auto session = c.tls_session();
  if (!session) return;
  if (!session->not_after) {
    report.add("tls", Level::ok, prefix + session->protocol + " (no certificate date read)",
               session->protocol);
    return;
  }
  using namespace std::chrono;
  const auto left = *session->not_after - system_clock::now();
  const auto days = duration_cast<hours>(left).count() / 24;
  const std::time_t end = system_clock::to_time_t(*session->not_after);
  char date[32];
  std::tm tm{};
  std::strftime(date, sizeof date, "%Y-%m-%d", gmtime_r(&end, &tm));
  if (left.count() < 0) {
    report.add("tls", Level::fail,
               prefix + session->protocol + ", the server's certificate expired on " + date +
                   " (accepted only because verification is off)",
               "cert expired");
  } else if (days < 30) {
    report.add("tls", Level::warn,
               prefix + session->protocol + ", the server's certificate expires in " +
                   std::to_string(days) + (days == 1 ? " day (" : " days (") + date +
                   "): renew it before clients refuse the node",
               "cert " + std::to_string(days) + "d");
  } else {
    report.add("tls", Level::ok,
               prefix + session->protocol + ", certificate valid until " + date + " (" +
                   std::to_string(days) + " days)",
               session->protocol);
  }
}

}  // namespace

std::string shown(const Reply& r) {
  return detail::server_text(
      r.type == Reply::Type::error || r.type == Reply::Type::status ? r.str : nodes::reply_text(r));
}

std::optional<std::string> config_get(nodes::SyncClient& c, const std::string& name,
                                      std::string& why_not) {
  auto r = c.command({"CONFIG", "GET", name});
  if (!r) {
    why_not = detail::server_text(c.error());
    return std::nullopt;
  }
  // [name, value]; an unknown name gives an empty array.
  if (r->type != Reply::Type::array || r->elements.size() != 2) {
    why_not = shown(*r);
    return std::nullopt;
  }
  return detail::server_text(r->elements[1].str, 40);
}

void check_server(const Context& ctx, const NodeAddress& a, VoteReport& report,
                  const std::string& prefix, const std::string& tls_name) {
  nodes::Endpoint e = endpoint_of(a, ctx.options.tls);
  if (e.tls && !tls_name.empty()) e.tls->server_name = tls_name;
  nodes::SyncClient c(e, {.connect_timeout = ctx.deadlines.connect,
                          .command_timeout = ctx.deadlines.command,
                          .user = a.user,
                          .password = a.password,
                          .db = a.db});
  if (!c.ok()) {
    unreachable(c, report, prefix);
    return;
  }
  check_identity(c, report, prefix);
  const auto caps = check_capabilities(c, report, prefix);
  check_tls(c, report, prefix);
  check_persistence(ctx, c, report, prefix);
  check_eviction(c, report, prefix);
  sample_clock(c, report, prefix);
  check_acl(ctx, c, a, caps, report, prefix);
  if (!c.ok()) unreachable(c, report, prefix);  // it went away meanwhile
}

}  // namespace redlock::cli::doctor
