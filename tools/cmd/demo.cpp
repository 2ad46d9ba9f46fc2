// redlock-cli demo [--count N] [--base-port P] [--dir DIR]
//
// A narrated, self-checking failover demonstration on the local nodes of `redlock-cli cluster`:
// take a lock, kill masters one at a time, show why a crashed master must not come back empty at
// once (and the two defences: a delayed restart, the restart guard), then restore the nodes and
// stop the ones the demo started. Every step says what Redlock must do and checks that it did;
// the last line is the verdict. Exit 0 only if every check passed; 1 if one failed (or a node
// could not be started), 2 on a usage error, 130 when interrupted (the nodes are restored first),
// 141 when stdout was closed under it (`demo | head`; the nodes are restored first too).
//
// demo.hpp has the Demo class, demo_steps.cpp its steps; this file has what they show and do with
// the nodes, the run as a whole and the subcommand.

#include "demo.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "cli.hpp"
#include "nodes/client.hpp"
#include "nodes/process.hpp"
#include "output.hpp"

namespace redlock::cli {
namespace demo {

using namespace std::chrono_literals;
using nodes::Persistence;

namespace {

// Installs the interrupt handlers for the lifetime of the demo and puts the old ones back.
class SignalScope {
 public:
  SignalScope() {
    struct sigaction sa {};
    sa.sa_handler = [](int) { interrupted.store(true); };
    sigemptyset(&sa.sa_mask);
    for (std::size_t i = 0; i < std::size(signals_); ++i) ::sigaction(signals_[i], &sa, &old_[i]);
    // A closed stdout then shows as a failed write (see Demo::line) rather than killing us.
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    ::sigaction(SIGPIPE, &ign, &old_pipe_);
  }
  ~SignalScope() {
    for (std::size_t i = 0; i < std::size(signals_); ++i)
      ::sigaction(signals_[i], &old_[i], nullptr);
    ::sigaction(SIGPIPE, &old_pipe_, nullptr);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

 private:
  static constexpr int signals_[] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction old_[std::size(signals_)]{};
  struct sigaction old_pipe_ {};
};

bool colour_wanted() {
  const char* no_color = std::getenv("NO_COLOR");  // https://no-color.org: set and not empty
  const char* term = std::getenv("TERM");
  return ::isatty(STDOUT_FILENO) == 1 && (no_color == nullptr || *no_color == '\0') &&
         !(term != nullptr && std::string_view(term) == "dumb");
}

}  // namespace

bool Demo::check(bool ok, const std::string& what, const std::string& why_not) {
  ++checks_;
  if (ok) {
    line("  " + p_.paint("[ ok ]", bold_green) + " " + what);
  } else {
    failures_.push_back(what + (why_not.empty() ? "" : " (" + why_not + ")"));
    line("  " + p_.paint("[FAIL]", bold_red) + " " + what +
         (why_not.empty() ? "" : ": " + why_not));
  }
  return ok;
}

Options Demo::options(Millis min_uptime) const {
  Options o;
  std::string err;
  o.nodes = *parse_node_list(m_.node_list(), err);  // built by ClusterManager: always valid
  o.tls.ca_file = m_.ca_file().string();            // with TLS: the cluster's own CA
  // One retry, quickly: a single slow answer on a busy machine should not fail a step whose
  // point is elsewhere; the attempts are shown.
  o.retry_count = 1;
  o.retry_delay = 50ms;
  o.retry_jitter = 25ms;
  o.min_node_uptime = min_uptime;
  // appendfsync always: a node answers after its fsync, which a busy disk stretches to hundreds
  // of ms; the 50 ms default would turn those answers into timeouts (no quorum) instead of the
  // refusals the steps show.
  if (durable_) o.node_timeout = 500ms;
  if (sentinel_ || cluster_) {
    // A Sentinel vote's first answer waits for the sentinel's and then the master's handshake, a
    // cluster vote's for the slot map and then the master's.
    o.node_timeout = 200ms;
    o.connect_timeout = 500ms;
    o.reconnect_max = 200ms;
    // Every client of the chapter uses this one ttl.
    o.restart_quarantine = sentinel_ ? sentinel_ttl : cluster_ttl;
  }
  return o;
}

std::string Demo::shown_address(const std::string& node) const {
  for (std::string_view cluster : {"redis+cluster://", "rediss+cluster://"}) {
    if (std::string_view(node).starts_with(cluster)) {
      return "Redis Cluster via " + node.substr(cluster.size(), node.find('?') - cluster.size());
    }
  }
  constexpr std::string_view scheme = "redis+sentinel://";
  if (!std::string_view(node).starts_with(scheme)) return node;
  const auto slash = node.find('/', scheme.size());
  const auto q = node.find('?');
  if (slash == std::string::npos) return node;
  return node.substr(slash + 1, q == std::string::npos ? std::string::npos : q - slash - 1) +
         " via Sentinel";
}

void Demo::warm_up(Client& c, const std::string& resource) {
  const auto deadline = SteadyClock::now() + 3s;
  while (SteadyClock::now() < deadline) {
    auto st = c.status(resource);
    if (std::all_of(st.nodes.begin(), st.nodes.end(), [](const NodeKeyState& s) { return s.up; }))
      return;
    nap(50ms);
  }
}

std::string Demo::token_label(const std::string& token) const {
  auto it = labels_.find(token);
  std::string short_tok = token.substr(0, 8) + "...";
  if (it == labels_.end()) return "? " + short_tok;
  return it->second + " " + short_tok;
}

int Demo::count_state(const std::vector<NodeOutcome>& nodes, Vote s) {
  return static_cast<int>(
      std::count_if(nodes.begin(), nodes.end(), [&](const auto& o) { return o.state == s; }));
}

void Demo::print_outcomes(const std::vector<NodeOutcome>& nodes) {
  std::size_t w = 0;
  for (const auto& o : nodes) w = std::max(w, shown_address(o.node).size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto& o = nodes[i];
    std::string lat = o.state == Vote::pending ? "-" : fmt_ms(o.latency);
    std::string text =
        "      " + vote_name(static_cast<int>(i) + 1) + "  " + pad(shown_address(o.node), w) +
        "  " + p_.paint(pad(to_string(o.state), 13), colour_of(o.state)) + " " + lpad(lat, 9);
    if (!o.detail.empty()) text += "  " + p_.paint(o.detail, dim);
    line(text);
  }
}

Demo::Attempt Demo::acquire(Client& c, const std::string& who, const std::string& resource,
                            Millis ttl) {
  checkpoint();
  resources_.insert(resource);
  AcquireOptions ao;
  ao.ttl = ttl;
  const auto t0 = SteadyClock::now();
  Attempt a{c.try_acquire({resource}, ao), {}};
  a.took = std::chrono::duration_cast<Micros>(SteadyClock::now() - t0);
  const int votes = count_state(a.result.nodes, Vote::ok);
  const std::string attempts =
      std::to_string(a.result.attempts) + (a.result.attempts == 1 ? " attempt" : " attempts");
  const std::string head =
      "client " + who + ": acquire " + resource + " (ttl " + fmt_s(ttl) + "): ";
  if (a.result) {
    labels_[a.result.lock.token()] = who.substr(0, who.find(' '));
    say(head + p_.paint("acquired", green) + " in " + fmt_ms(a.took) + ", " + attempts);
    say("  " + std::to_string(votes) + " of " + std::to_string(n_) + " votes (quorum " +
        std::to_string(q_) + "), validity " + fmt_s(a.result.lock.validity()) + ", token " +
        token_label(a.result.lock.token()) + "; redlock-cli exits 0");
  } else {
    say(head + p_.paint("refused", yellow) + " in " + fmt_ms(a.took) + ", " + attempts);
    say("  " + a.result.message + "; redlock-cli exits " +
        std::to_string(exit_code_for(a.result.error)));
  }
  print_outcomes(a.result.nodes);
  return a;
}

StatusResult Demo::show_state(const std::string& resource) {
  checkpoint();
  // A fresh client each time: what the nodes store now, not what some connection remembers.
  Client observer(options());
  StatusResult st = observer.status(resource);
  print_state(resource, st);
  return st;
}

// Like show_state(), but looks again (for up to 1 s) until `done` holds. Commands that another
// client has already queued (a rollback, the SET of a node that was still pending) can still be
// overtaken by this look through a new connection on a busy machine; a key really left behind
// (or really missing) stays that way for its whole ttl, far longer than this.
StatusResult Demo::settle(const std::string& resource,
                          const std::function<bool(const StatusResult&)>& done, bool shown) {
  checkpoint();
  Client observer(options());
  const auto deadline = SteadyClock::now() + 1s;
  StatusResult st = observer.status(resource);
  while (!done(st) && SteadyClock::now() < deadline) {
    nap(20ms);
    st = observer.status(resource);
  }
  if (shown) print_state(resource, st);
  return st;
}

void Demo::print_state(const std::string& resource, const StatusResult& st) {
  say(std::string(sentinel_  ? "what the master of each vote stores for "
                  : cluster_ ? "what each vote stores for "
                             : "what each node stores for ") +
      resource + (cluster_ ? " (on the master of its slot):" : ":"));
  std::size_t w = 0;
  for (const auto& s : st.nodes) w = std::max(w, shown_address(s.node).size());
  for (std::size_t i = 0; i < st.nodes.size(); ++i) {
    const auto& s = st.nodes[i];
    std::string value = !s.up ? "" : s.value ? token_label(*s.value) : "-";
    std::string ttl = s.up && s.pttl ? "ttl " + fmt_s(*s.pttl) : "";
    line("      " + vote_name(static_cast<int>(i) + 1) + "  " + pad(shown_address(s.node), w) +
         "  " + p_.paint(pad(s.up ? "up" : "down", 5), s.up ? green : red) + "  " + pad(value, 14) +
         "  " + pad(ttl, 10) + (s.where.empty() ? "" : "  " + p_.paint(s.where, dim)));
  }
}

bool Demo::keys_only(const StatusResult& st, const std::set<std::string>& allowed) const {
  return std::all_of(st.nodes.begin(), st.nodes.end(), [&](const NodeKeyState& s) {
    return !s.up || !s.value || allowed.count(*s.value) > 0;
  });
}

void Demo::release(Client& c, const Lock& lock) {
  if (lock.empty()) return;
  auto r = c.try_release(lock);
  const auto report = [&](const std::string& when) {
    say("released " + token_label(lock.token()) + when + ": deleted on " +
        std::to_string(r.deleted) + " node" + (r.deleted == 1 ? "" : "s") + ", not held on " +
        std::to_string(r.not_held) + ", unreachable " + std::to_string(r.unreachable));
  };
  report("");
  // A node this client lost (killed and restarted in a step) is reconnected in the background; a
  // release that could not reach it is sent again (it is idempotent) once it can, as an operator
  // would, rather than leaving the key there until its ttl.
  const auto deadline = SteadyClock::now() + 3s;
  if (r.unreachable == 0) return;
  while (r.unreachable > 0 && SteadyClock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
    r = c.try_release(lock);
  }
  report(" again, once the client had reconnected");
}

void Demo::kill_node(int i) {
  checkpoint();
  auto r = m_.kill(i);
  down_.insert(i);
  // kill() returns once the main thread is a zombie, but redis's other threads may still be
  // exiting with the listening socket open: an immediate start() would find the port taken.
  const auto deadline = SteadyClock::now() + 2s;
  while (!nodes::port_busy(r.port).empty() && SteadyClock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  say(p_.paint("kill -9", red) + " " + node_name(i) + " (127.0.0.1:" + std::to_string(r.port) +
      ", pid " + std::to_string(r.pid) + ")");
}

void Demo::start_node(int i) {
  auto r = m_.start(i);
  down_.erase(i);
  if (cluster_) {
    say("restart " + node_name(i) + " (pid " + std::to_string(r.pid) +
        "): back in its cluster as " + r.role +
        (durable_ ? "" : " (it came back empty and copied the master's data)"));
    return;
  }
  say("restart " + node_name(i) + " (pid " + std::to_string(r.pid) + ")" +
      (durable_ ? ", with its AOF" : ", empty (no persistence)"));
}

// Kills a majority (nodes 1..Q) and restarts each at once: the crash that forgets a lock.
void Demo::kill_majority_and_restart_at_once() {
  const auto t0 = SteadyClock::now();
  for (int i = 1; i <= q_; ++i) {
    kill_node(i);
    start_node(i);
  }
  auto took = std::chrono::duration_cast<Millis>(SteadyClock::now() - t0);
  say("nodes 1.." + std::to_string(q_) + " crashed and were back within " +
      std::to_string(took.count()) + " ms");
}

// ---- data on the nodes ------------------------------------------------------------------------

namespace {

// Keys looked at per node: enough for any node one would run the demo on by mistake, and a
// bounded time (one PTTL each) on a node that is really in use.
constexpr int max_keys_per_node = 10000;

nodes::SyncClient connect_local(const ClusterManager& m, int index) {
  return nodes::SyncClient(m.endpoint(index),
                           {.connect_timeout = Millis{1000}, .command_timeout = Millis{1000}});
}

// The databases INFO keyspace lists ("db0:keys=3,expires=1,avg_ttl=0").
std::optional<std::vector<long long>> databases(nodes::SyncClient& c) {
  auto info = c.command({"INFO", "keyspace"});
  if (!info || info->type != nodes::Reply::Type::string) return std::nullopt;
  std::vector<long long> dbs;
  std::string_view text = info->str;
  while (!text.empty()) {
    const auto eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? "" : text.substr(eol + 1);
    if (!line.starts_with("db")) continue;
    const auto colon = line.find(':');
    if (auto n = nodes::parse_int(line.substr(2, colon - 2))) dbs.push_back(*n);
  }
  return dbs;
}

bool select(nodes::SyncClient& c, long long db) {
  auto r = c.command({"SELECT", std::to_string(db)});
  return r && r->is_status("OK");
}

}  // namespace

void Demo::snapshot_keys() {
  keys_read_ = true;
  for (const auto& st : m_.status()) {
    if (st.state != ProcState::up) continue;
    const std::string name = node_name(st.index) + " (127.0.0.1:" + std::to_string(st.port) + ")";
    auto c = connect_local(m_, st.index);
    auto dbs = databases(c);
    bool ok = dbs.has_value();
    int seen = 0;
    for (long long db : dbs.value_or(std::vector<long long>{})) {
      if (!ok || seen >= max_keys_per_node || !(ok = select(c, db))) break;
      std::string cursor = "0";
      do {
        auto r = c.command({"SCAN", cursor, "COUNT", "1000"});
        if (!r || r->type != nodes::Reply::Type::array || r->elements.size() != 2) {
          ok = false;
          break;
        }
        cursor = r->elements[0].str;
        for (const auto& k : r->elements[1].elements) {
          if (std::string_view(k.str).starts_with(own_key_prefix)) continue;
          if (seen >= max_keys_per_node) {
            keys_capped_ = true;
            break;
          }
          auto ttl = c.command({"PTTL", k.str});
          if (!ttl || ttl->type != nodes::Reply::Type::integer) {
            ok = false;
            break;
          }
          if (ttl->integer == -2) continue;  // expired meanwhile
          KeptKey kept{st.index, db, k.str, std::nullopt};
          if (ttl->integer >= 0) kept.expires = SteadyClock::now() + Millis{ttl->integer};
          kept_keys_.push_back(std::move(kept));
          ++seen;
        }
      } while (ok && cursor != "0" && seen < max_keys_per_node);
    }
    if (!ok) unreadable_ += (unreadable_.empty() ? "" : ", ") + name;
  }
}

void Demo::refuse_to_lose_data(const std::vector<NodeStatus>& status) const {
  // Steps 3 and 4 kill nodes 1..Q and restart them; only appendonly yes + appendfsync always
  // brings their keys back.
  std::string why;
  for (const auto& st : status) {
    if (st.index > q_ || st.persistence == "aof") continue;
    const std::string name = node_name(st.index) + " (127.0.0.1:" + std::to_string(st.port) + ")";
    const auto n = std::count_if(kept_keys_.begin(), kept_keys_.end(),
                                 [&](const KeptKey& k) { return k.node == st.index; });
    auto first = std::find_if(kept_keys_.begin(), kept_keys_.end(),
                              [&](const KeptKey& k) { return k.node == st.index; });
    std::string what;
    if (n > 0) {
      what = name + " holds " + std::to_string(n) + (n == 1 ? " key" : " keys") +
             (keys_capped_ ? " or more" : "") + " the demo did not write ('" +
             printable(first->key) + "'" + (n > 1 ? ", ..." : "") + ")";
    } else if (unreadable_.find(name) != std::string::npos) {
      what = "what " + name + " holds cannot be read";
    }
    if (!what.empty()) why += (why.empty() ? "" : "; ") + what;
  }
  if (why.empty()) return;
  throw Refused{why + ". The demo kills nodes 1.." + std::to_string(q_) +
                " and restarts them without their data (persistence is not aof), so they would "
                "lose those keys, held locks included. Point it at other nodes (--base-port, "
                "--dir), or run them with `cluster up --persistence aof`"};
}

void Demo::check_keys_kept() {
  if (!keys_read_ || (kept_keys_.empty() && unreadable_.empty())) return;
  const auto now = SteadyClock::now();
  std::vector<std::string> gone;
  std::size_t looked = 0;
  for (int i = 1; i <= n_; ++i) {
    std::optional<nodes::SyncClient> c;
    long long db = -1;
    for (const auto& k : kept_keys_) {
      if (k.node != i) continue;
      // One that was due to expire (give or take a moment) may have: that is not a loss.
      if (k.expires && *k.expires <= now + Millis{500}) continue;
      ++looked;
      if (!c) c.emplace(connect_local(m_, i));
      std::optional<nodes::Reply> r;
      if (db == k.db || select(*c, k.db)) {
        db = k.db;
        r = c->command({"EXISTS", k.key});
      }
      if (!r || r->type != nodes::Reply::Type::integer || r->integer != 1) {
        gone.push_back(node_name(i) + " '" + printable(k.key) + "'");
      }
    }
  }
  std::string gone_text;
  for (std::size_t j = 0; j < gone.size() && j < 5; ++j)
    gone_text += (j == 0 ? "" : ", ") + gone[j];
  if (gone.size() > 5) gone_text += ", ...";
  check(gone.empty() && unreadable_.empty(),
        "the masters that were running before the demo still hold the " + std::to_string(looked) +
            (looked == 1 ? " key" : " keys") + " they had" +
            (keys_capped_ ? " (the first " + std::to_string(max_keys_per_node) + " of each)" : ""),
        !unreadable_.empty() ? "could not read what " + unreadable_ + " held"
                             : std::to_string(gone.size()) + " gone: " + gone_text);
}

int Demo::run() {
  const auto t0 = SteadyClock::now();
  bool was_interrupted = false;
  std::string refused;
  if (sentinel_)
    intro_sentinel();
  else if (cluster_)
    intro_cluster();
  else
    intro();
  try {
    step_nodes();
    if (sentinel_) {
      step_sentinel_lock();
      step_sentinel_failover();
      step_sentinel_replicated();
    } else if (cluster_) {
      step_cluster_lock();
      step_cluster_failover();
      step_cluster_replicated();
    } else {
      step_lock();
      step_kills();
      step_restart_at_once();
      step_restart_delayed();
      step_restart_guarded();
    }
  } catch (const Interrupted&) {
    was_interrupted = true;
    line();
    say(p_.paint("interrupted: restoring the nodes first", yellow));
  } catch (const Refused& r) {
    refused = r.why;
    say(p_.paint("refused: " + r.why, bold_red));
    // stderr too: a script running the demo must not need to parse stdout to learn why.
    Stderr() << "redlock-cli: demo: refused: " << r.why << "\n";
  } catch (const Abort&) {
    say("cannot go on without the nodes");
  } catch (const ClusterError& e) {
    // redis-server missing or an unusable directory, found before anything was changed.
    if (e.kind() == ClusterError::Kind::usage && !ready_)
      throw UsageError(std::string("demo: ") + e.what());
    // A node that did not stop or start as asked: the demo cannot go on, but still restores.
    check(false, "the nodes did what was asked", e.what());
  } catch (const std::exception& e) {
    check(false, "no unexpected error", e.what());  // and still restore the nodes below
  }
  client_.reset();
  try {
    step_restore(was_interrupted);
  } catch (const std::exception& e) {
    check(false, "restore the nodes", e.what());
  }
  const auto took = std::chrono::duration_cast<Millis>(SteadyClock::now() - t0);
  line();
  if (was_interrupted && output_gone.load()) {
    // Nobody reads stdout any more; stderr may still reach the user.
    Stderr() << "redlock-cli: demo: stdout was closed; stopped after " << fmt_s(took)
             << " and restored the nodes\n";
  }
  if (!refused.empty()) {
    line(p_.paint("verdict: REFUSED", bold_red) +
         ": masters it would kill hold data it would destroy; nothing was killed or restarted (" +
         fmt_s(took) + ")");
    return 1;
  }
  if (was_interrupted) {
    line(p_.paint("verdict: INTERRUPTED", bold_red) + " after " + fmt_s(took) + " (" +
         std::to_string(failures_.size()) + " of " + std::to_string(checks_) +
         " checks failed so far)");
    return output_gone.load() ? 128 + SIGPIPE : 130;  // as if SIGPIPE had ended us, but later
  }
  if (failures_.empty()) {
    line(p_.paint("verdict: PASS", bold_green) + ": all " + std::to_string(checks_) +
         " checks passed, every step behaved as Redlock should (" + fmt_s(took) + ")");
    return exit_ok;
  }
  line(p_.paint("verdict: FAIL", bold_red) + ": " + std::to_string(failures_.size()) + " of " +
       std::to_string(checks_) + " checks failed (" + fmt_s(took) +
       "); first: " + failures_.front());
  return 1;
}

}  // namespace demo

namespace {

using namespace demo;

using nodes::ClusterSettings;

// ---- the `demo` subcommand ---------------------------------------------------------------------

struct DemoFlags {
  std::string count, base_port, dir, topology;
};

int int_flag(const char* flag, const std::string& text) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) {
    throw UsageError(std::string("demo: ") + flag + " " + text + ": not a number");
  }
  return v;
}

int run_demo(const DemoFlags& f, const Globals& g) {
  // The same resolution as `cluster`: what `cluster up` saved in the directory, then the flags.
  ClusterSettings s;
  try {
    std::filesystem::path dir =
        f.dir.empty() ? ClusterManager::default_dir() : std::filesystem::path(f.dir);
    s = ClusterManager::load_saved(dir).value_or(ClusterSettings{});
    s.dir = dir;
  } catch (const ClusterError& e) {
    throw UsageError(std::string("demo: ") + e.what());
  }
  if (!f.count.empty()) s.count = int_flag("--count", f.count);
  if (!f.base_port.empty()) s.base_port = int_flag("--base-port", f.base_port);
  if (f.topology == "standalone") {
    s.topology = nodes::Topology::standalone;
  } else if (f.topology == "sentinel") {
    s.topology = nodes::Topology::sentinel;
  } else if (f.topology == "cluster") {
    s.topology = nodes::Topology::cluster;
  } else if (!f.topology.empty()) {
    throw UsageError("demo: --topology " + f.topology +
                     ": expected standalone, sentinel or cluster");
  }
  // --tls (or REDLOCK_TLS=1) starts the nodes with TLS; a cluster `up --tls` made stays TLS.
  s.tls = s.tls || tls_wanted(g);
  std::unique_ptr<ClusterManager> m;
  try {
    m = std::make_unique<ClusterManager>(s);
  } catch (const ClusterError& e) {
    throw UsageError(std::string("demo: ") + e.what());
  }
  interrupted.store(false);
  output_gone.store(false);
  SignalScope signals;
  return Demo(*m, colour_wanted()).run();
}

}  // namespace

Command demo_command(const Globals& g) {
  auto f = std::make_shared<DemoFlags>();
  return {
      .name = "demo",
      .description = "Narrated, self-checking failover demonstration on local nodes (takes ~10 s)",
      .footer =
          "Starts the masters that are not running (running ones are used as they are), takes a\n"
          "lock, kills masters one at a time, shows why a crashed master must not restart empty "
          "at once,\n"
          "then restarts what it killed and stops what it started. It refuses, changing nothing, "
          "when a\n"
          "master it would kill holds keys it did not write and would lose them (persistence "
          "not aof).\n"
          "Any -n/--nodes is ignored: the demo only ever acts on the local masters of DIR.\n"
          "With --topology sentinel (or on a cluster `cluster up --topology sentinel` made) it "
          "runs the\nSentinel chapter instead (~15 s): a lock through Sentinel-managed masters, a "
          "failover of a\nmajority whose promoted replicas lost the key (refused until the "
          "restart quarantine ends),\nthen replicated votes (--min-replicas 1), with which the "
          "promoted replicas have it.\n"
          "With --topology cluster (or on a cluster `cluster up --topology cluster` made) it runs "
          "the\nRedis Cluster chapter (~35 s): a lock over COUNT Redis Clusters, the master of "
          "the key's slot\nkilled in a majority of them and its replica promoted without the "
          "key: a long-lived client\nwithout the guard (restart quarantine 0) lets a second "
          "holder in, one with it is refused; a\nfresh process cannot see a cluster promotion, "
          "and replicated votes (--min-replicas 1) are\nthe defence then: the promoted replicas "
          "have the key.\n"
          "With --tls (or REDLOCK_TLS=1, or a cluster `cluster up --tls` made) every step runs "
          "over TLS,\nverified against the cluster's own CA.\n"
          "Colour when stdout is a terminal and NO_COLOR is unset. Exit status: 0 every check "
          "passed,\n"
          "1 a check failed, a node could not be started, or refused; 2 usage error; 130 "
          "interrupted\n"
          "(nodes restored); 141 stdout closed by its reader, e.g. `demo | head` (nodes "
          "restored).",
      .options =
          {
              {.names = "--count",
               .target = &f->count,
               .help = "Number of masters (with --topology sentinel or cluster: of votes) "
                       "(default 5, or what `cluster up` saved in DIR)",
               .type_name = "N"},
              {.names = "--base-port",
               .target = &f->base_port,
               .help = "Port of node 1; node I listens on base-port + I - 1 (default 7001, or what "
                       "`cluster up` saved)",
               .type_name = "PORT"},
              {.names = "--dir",
               .target = &f->dir,
               .help = "Cluster directory, as for `redlock-cli cluster` (default "
                       "$XDG_RUNTIME_DIR/redlock-cluster, else /tmp/redlock-cluster-$UID)",
               .type_name = "DIR"},
              {.names = "--topology",
               .target = &f->topology,
               .help = "standalone (the failover demonstration on independent masters), "
                       "sentinel (the Sentinel chapter: COUNT Sentinel-managed masters with a "
                       "replica each, 3 sentinels) or cluster (the Redis Cluster chapter: COUNT "
                       "Redis Clusters of 3 masters with a replica each) (default standalone, or "
                       "what `cluster up` saved)",
               .type_name = "standalone|sentinel|cluster"},
          },
      .run = [f, &g] { return run_demo(*f, g); },
      .storage = f,
  };
}

}  // namespace redlock::cli
