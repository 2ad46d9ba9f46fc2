// doctor: does the connecting user have the permissions each feature needs (docs/guide.md, "ACL
// for lock users"; issue 41)? With `ACL DRYRUN` when the user may run it (nothing is executed);
// else each command is run once as a harmless probe on keys of doctor's own, which the key
// patterns of a lock user cover: a random lock key under the key prefix (set with a 10 s expiry,
// deleted at the end) and its derived keys, which stay absent (every probe on them is a no-op:
// ZADD XX, ZREM, PEXPIREAT on a missing key ...). A NOPERM answer is a missing permission; any
// other answer (NOSCRIPT, WRONGTYPE, MOVED) means the command was allowed.

#include <algorithm>
#include <random>

#include "core/server_text.hpp"
#include "doctor.hpp"
#include "redlock/keys.hpp"

namespace redlock::cli::doctor {
namespace {

using Reply = nodes::Reply;

// What a feature needs of EVAL and EVALSHA besides its own permissions.
enum class Scripts { none, always, unless_native };

struct Feature {
  const char* name;  // the check is "acl-<name>"
  const char* what;  // for messages
  Scripts scripts;
  std::vector<const char*> perms;
  Level missing;
  const char* without;  // what happens without them
};

// The lines of docs/guide.md per feature (tests/cli/test_acl.py proves each permission needed).
const std::vector<Feature>& features() {
  static const std::vector<Feature> all = {
      // Release and extend by script, or natively where the node can (core/capabilities.hpp).
      {"plain",
       "plain locks",
       Scripts::unless_native,
       {"+set", "+get", "+del", "+exists", "+pexpire", "+pttl", "+type", "+time", "+zadd", "+zrem",
        "+zscore", "+zrange", "+zpopmin", "+zcard", "+zcount", "+zrangebyscore"},
       Level::fail,
       "the lock commands are refused on this node"},
      {"restart-guard",
       "the restart guard",
       Scripts::none,
       {"+info"},
       Level::fail,
       "the library reads INFO server at every connect (the restart quarantine, --min-uptime) "
       "and gives this node no vote without it"},
      {"fencing", "fencing", Scripts::always, {"+incr"}, Level::warn, "acquire --fence is refused"},
      {"fair",
       "fair locks",
       Scripts::always,
       {"+incr", "+hset", "+hget", "+hdel", "+zrank"},
       Level::warn,
       "acquire --fair is refused"},
      {"read-write",
       "read-write locks",
       Scripts::always,
       {"+zremrangebyscore", "+pexpireat"},
       Level::warn,
       "acquire --read/--write is refused"},
      {"wake-ups",
       "wake-ups",
       Scripts::none,
       {"+publish", "+pubsub|numsub", "+subscribe", "+unsubscribe"},
       Level::warn,
       "waiters wake only at their next retry (or run with --no-wake-ups)"},
      {"script-cache",
       "the script cache",
       Scripts::none,
       {"+script|load"},
       Level::warn,
       "each script is sent whole on its first use on a connection (one round trip more)"},
  };
  return all;
}

// The keys and channels of the probes.
struct ProbeKeys {
  std::string key, zset, hash, channel, keyspace;
};

ProbeKeys probe_keys(const Options& o, int db) {
  std::random_device rd;
  const auto hex = [&] {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s;
    for (int i = 0; i < 16; ++i) s += digits[rd() % 16];
    return s;
  };
  ProbeKeys k;
  k.key = o.key_prefix + "redlock-doctor:" + hex();
  k.zset = derived_key(k.key, KeyRole::waiting);
  k.hash = derived_key(k.key, KeyRole::handoff);
  k.channel = derived_key(k.key, KeyRole::wake);
  k.keyspace = "__keyspace@" + std::to_string(db) + "__:" + k.key;
  return k;
}

// The command that shows whether the user has `perm`, harmless to run (see above). The
// subscription probes come last (probe order), each undone at once.
std::vector<std::vector<std::string>> probes_of(const std::string& perm, const ProbeKeys& k) {
  const std::string& K = k.key;
  const std::string& Z = k.zset;
  if (perm == "+info") return {{"INFO", "server"}};
  if (perm == "+time") return {{"TIME"}};
  if (perm == "+del") return {{"DEL", Z}};
  if (perm == "+pexpire") return {{"PEXPIRE", Z, "10000"}};
  if (perm == "+set") return {{"SET", K, "doctor", "NX", "PX", "10000"}};
  if (perm == "+get") return {{"GET", K}};
  if (perm == "+exists") return {{"EXISTS", K}};
  if (perm == "+pttl") return {{"PTTL", K}};
  if (perm == "+type") return {{"TYPE", K}};
  // K holds "doctor" (a string that is not a number): both fail after the permission check.
  if (perm == "+incr") return {{"INCR", K}};
  if (perm == "+hset") return {{"HSET", K, "f", "v"}};
  if (perm == "+hget") return {{"HGET", k.hash, "f"}};
  if (perm == "+hdel") return {{"HDEL", k.hash, "f"}};
  if (perm == "+zadd") return {{"ZADD", Z, "XX", "0", "m"}};
  if (perm == "+zrem") return {{"ZREM", Z, "m"}};
  if (perm == "+zscore") return {{"ZSCORE", Z, "m"}};
  if (perm == "+zrange") return {{"ZRANGE", Z, "0", "-1"}};
  if (perm == "+zpopmin") return {{"ZPOPMIN", Z}};
  if (perm == "+zcard") return {{"ZCARD", Z}};
  if (perm == "+zcount") return {{"ZCOUNT", Z, "-inf", "+inf"}};
  if (perm == "+zrangebyscore") return {{"ZRANGEBYSCORE", Z, "-inf", "+inf"}};
  if (perm == "+zrank") return {{"ZRANK", Z, "m"}};
  if (perm == "+zremrangebyscore") return {{"ZREMRANGEBYSCORE", Z, "-inf", "-inf"}};
  if (perm == "+pexpireat") return {{"PEXPIREAT", Z, "1"}};
  if (perm == "+eval") return {{"EVAL", "return 1", "0"}};
  // The SHA-1 of "return 1": NOSCRIPT when it is not cached, which is an answer too.
  if (perm == "+evalsha") return {{"EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"}};
  if (perm == "+script|load") return {{"SCRIPT", "LOAD", "return 1"}};
  if (perm == "+publish") return {{"PUBLISH", k.channel, ""}};
  if (perm == "+pubsub|numsub") return {{"PUBSUB", "NUMSUB", k.channel}};
  if (perm == "+unsubscribe") return {{"UNSUBSCRIBE", k.channel}};
  if (perm == "+subscribe") {
    return {{"SUBSCRIBE", k.channel},
            {"UNSUBSCRIBE", k.channel},
            {"SUBSCRIBE", k.keyspace},
            {"UNSUBSCRIBE", k.keyspace}};
  }
  return {};
}

// Runs the probes of every permission once; the answer per permission: empty when allowed, else
// why not (shown server text).
class Prober {
 public:
  Prober(nodes::SyncClient& c, const NodeAddress& a, ProbeKeys keys)
      : c_(c), keys_(std::move(keys)), user_(a.user.empty() ? "default" : a.user) {
    auto r = c_.command({"ACL", "DRYRUN", user_, "PING"});
    dryrun_ = r && (r->type == Reply::Type::status || r->type == Reply::Type::string);
  }
  ~Prober() {
    if (!dryrun_ && c_.ok()) (void)c_.command({"DEL", keys_.key});  // PX 10000 otherwise
  }
  Prober(const Prober&) = delete;
  Prober& operator=(const Prober&) = delete;

  // nullopt: allowed; else why not.
  std::optional<std::string> missing(const std::string& perm) {
    for (const auto& argv : probes_of(perm, keys_)) {
      if (auto why = run(argv)) return why;
    }
    return std::nullopt;
  }
  [[nodiscard]] bool dryrun() const { return dryrun_; }
  [[nodiscard]] bool read_only() const { return read_only_; }

 private:
  std::optional<std::string> run(const std::vector<std::string>& argv) {
    std::vector<std::string> cmd = argv;
    if (dryrun_) cmd.insert(cmd.begin(), {"ACL", "DRYRUN", user_});
    auto r = c_.command(cmd);
    if (!r) return "no answer: " + detail::server_text(c_.error());
    if (dryrun_) {
      if (r->type == Reply::Type::status) return std::nullopt;  // OK
      // "This user has no permissions to run the 'info' command", a bulk string
      return r->type == Reply::Type::string ? detail::server_text(r->str) : shown(*r);
    }
    if (r->is_error("READONLY")) read_only_ = true;
    // A renamed or missing command ("ERR unknown command") is as missing as a refused one.
    if (r->is_error("NOPERM") || r->is_error("ERR unknown command")) return shown(*r);
    return std::nullopt;
  }

  nodes::SyncClient& c_;
  ProbeKeys keys_;
  std::string user_;
  bool dryrun_ = false;
  bool read_only_ = false;
};

const std::vector<std::string> script_perms = {"+eval", "+evalsha"};

// What feature `f` needs on a node with capabilities `caps`.
std::vector<std::string> needed(const Feature& f, const detail::Capabilities& caps) {
  std::vector<std::string> perms(f.perms.begin(), f.perms.end());
  const bool native = caps.native_release() && caps.native_extend();
  if (f.scripts == Scripts::always || (f.scripts == Scripts::unless_native && !native)) {
    perms.insert(perms.end(), script_perms.begin(), script_perms.end());
  }
  return perms;
}

// The permissions in probe order (that of the features, +set before +incr and +hset), the
// subscription probes last.
std::vector<std::string> permissions_in_order() {
  std::vector<std::string> perms = script_perms;
  for (const auto& f : features()) {
    for (const char* p : f.perms) {
      if (std::find(perms.begin(), perms.end(), p) == perms.end()) perms.emplace_back(p);
    }
  }
  std::stable_partition(perms.begin(), perms.end(),
                        [](const std::string& p) { return p != "+subscribe"; });
  return perms;
}

}  // namespace

void check_acl(const Context& ctx, nodes::SyncClient& c, const NodeAddress& a,
               const detail::Capabilities& caps, VoteReport& report, const std::string& prefix) {
  Prober prober(c, a, probe_keys(ctx.options, a.db));
  std::vector<std::pair<std::string, std::string>> refused;  // permission, why
  for (const auto& perm : permissions_in_order()) {
    if (!c.ok()) return;
    // Run for real, these probes are harmless only after the one they need: INCR and HSET on the
    // probe key while it holds a string (else INCR would create it, without expiry), SUBSCRIBE
    // when UNSUBSCRIBE can undo it.
    const std::string needs = perm == "+incr" || perm == "+hset" ? "+set"
                              : perm == "+subscribe"             ? "+unsubscribe"
                                                                 : "";
    const bool cannot = std::any_of(refused.begin(), refused.end(),
                                    [&](const auto& r) { return r.first == needs; });
    if (!prober.dryrun() && cannot) {
      refused.emplace_back(perm, "not probed without " + needs);
      continue;
    }
    if (auto why = prober.missing(perm)) refused.emplace_back(perm, *why);
  }
  if (prober.read_only() && report.role.empty()) {  // INFO replication said nothing
    report.add("role", Level::fail, prefix + "answers writes with READONLY: a replica", "replica");
  }
  // How the answer was had, for whoever wonders whether doctor wrote to the node.
  const std::string how = prober.dryrun() ? " (asked ACL DRYRUN)" : " (probed)";
  std::vector<std::string> lacking;  // features, for the node's line
  for (const auto& f : features()) {
    std::string missing, first_why;
    for (const auto& p : needed(f, caps)) {
      for (const auto& [perm, why] : refused) {
        if (perm != p) continue;
        missing += (missing.empty() ? "" : " ") + perm;
        // A refusal says no more than the list of permissions; anything else (a renamed
        // command's "unknown command") is worth its words.
        const bool refusal = why.starts_with("NOPERM") || why.starts_with("This user has no");
        if (first_why.empty() && !refusal) first_why = why;
      }
    }
    const std::string name = std::string("acl-") + f.name;
    if (missing.empty()) {
      report.add(name, Level::ok, prefix + f.what + ": allowed" + how);
      continue;
    }
    lacking.emplace_back(f.name);
    if (f.missing == Level::fail) report.refused = true;
    report.add(name, f.missing,
               prefix + f.what +
                   // Not every refusal is the ACL's: a renamed command is missing for anyone.
                   (first_why.empty() ? ": the user lacks " + missing
                                      : ": cannot run " + missing + " (" + first_why + ")") +
                   ": " + f.without + how);
  }
  std::string brief = "acl ok";
  if (!lacking.empty()) {
    brief = "acl: no";
    for (const auto& f : lacking) brief += " " + f;
  }
  report.checks.back().brief = brief;
}

}  // namespace redlock::cli::doctor
