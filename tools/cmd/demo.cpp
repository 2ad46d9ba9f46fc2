// redlock-cli demo [--count N] [--base-port P] [--dir DIR]
//
// A narrated, self-checking failover demonstration on the local nodes of `redlock-cli cluster`:
// take a lock, kill masters one at a time, show why a crashed master must not come back empty at
// once (and the two defences: a delayed restart, the restart guard), then restore the nodes and
// stop the ones the demo started. Every step says what Redlock must do and checks that it did;
// the last line is the verdict. Exit 0 only if every check passed; 1 if one failed (or a node
// could not be started), 2 on a usage error, 130 when interrupted (the nodes are restored first),
// 141 when stdout was closed under it (`demo | head`; the nodes are restored first too).

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli.hpp"
#include "nodes/manager.hpp"
#include "nodes/process.hpp"
#include "output.hpp"
#include "redlock/client.hpp"

namespace redlock::cli {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;
using Micros = std::chrono::microseconds;
using namespace redlock::nodes;
// A node's answer in an operation, and a local process's state.
using Vote = redlock::NodeState;
using ProcState = nodes::ProcessState;

// Locks of steps 2-3: long enough that nothing expires while we look at it.
constexpr Millis lock_ttl{10000};
// Locks of the restart scenarios: far above the node timeouts, short enough that waiting one
// ttl out (the delayed restart) keeps the whole demo well under a minute.
constexpr Millis restart_ttl{3000};
// --min-uptime of the guarded client: above the age of a node restarted a moment ago.
constexpr Millis guard_min_uptime{10000};

// Set from SIGINT/SIGTERM/SIGHUP; the demo checks it between operations so that it can still
// restore the nodes before exiting (an abandoned half-killed cluster is worse than a late exit).
std::atomic<bool> interrupted{false};
// Set when stdout has gone (`demo | head`): the reader is not coming back, so the demo stops as if
// interrupted and still restores the nodes, instead of being killed by SIGPIPE half-way with
// masters down or left running.
std::atomic<bool> output_gone{false};
struct Interrupted {};
struct Abort {};  // a failed check that makes the rest of the demo meaningless

void checkpoint() {
  if (interrupted.load()) throw Interrupted{};
}

// Sleeps in small slices so an interrupt is noticed promptly.
void nap(Millis d) {
  const auto until = SteadyClock::now() + d;
  while (SteadyClock::now() < until) {
    checkpoint();
    std::this_thread::sleep_for(std::min<SteadyClock::duration>(20ms, until - SteadyClock::now()));
  }
  checkpoint();
}

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

// ---- text --------------------------------------------------------------------------------------

// Wraps text in an SGR colour sequence, or returns it unchanged when colour is off (a pipe, a
// dumb terminal, NO_COLOR), so the same code prints both.
struct Palette {
  explicit Palette(bool on) : on_(on) {}
  [[nodiscard]] std::string paint(std::string_view text, std::string_view sgr) const {
    if (!on_ || sgr.empty()) return std::string(text);
    return "\x1b[" + std::string(sgr) + "m" + std::string(text) + "\x1b[0m";
  }
  bool on_;
};

constexpr std::string_view bold = "1", dim = "2", red = "31", green = "32", yellow = "33",
                           magenta = "35", cyan = "36", bold_red = "1;31", bold_green = "1;32";

bool colour_wanted() {
  const char* no_color = std::getenv("NO_COLOR");  // https://no-color.org: set and not empty
  const char* term = std::getenv("TERM");
  return ::isatty(STDOUT_FILENO) == 1 && (no_color == nullptr || *no_color == '\0') &&
         !(term != nullptr && std::string_view(term) == "dumb");
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string lpad(std::string s, std::size_t width) {
  if (s.size() < width) s.insert(0, width - s.size(), ' ');
  return s;
}

std::string fmt_ms(Micros us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f ms", static_cast<double>(us.count()) / 1000.0);
  return buf;
}

std::string fmt_s(Millis ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

std::string_view colour_of(Vote s) {
  switch (s) {
    case Vote::ok:
      return green;
    case Vote::held_by_other:
      return yellow;
    case Vote::excluded:
      return magenta;
    case Vote::pending:
      return dim;
    default:
      return red;
  }
}

// ---- the demonstration -------------------------------------------------------------------------

class Demo {
 public:
  Demo(ClusterManager& m, bool colour)
      : m_(m),
        p_(colour),
        n_(m.settings().count),
        q_(n_ / 2 + 1),
        started_(static_cast<std::size_t>(n_) + 1, false) {}

  int run();

 private:
  struct Attempt {
    AcquireResult result;
    Micros took{0};
  };

  // Output.
  // Flushed, so a pipe sees progress; no trailing blanks from padded columns.
  void line(std::string s = {}) {
    while (!s.empty() && s.back() == ' ') s.pop_back();
    std::cout << s << std::endl;
    if (!std::cout && !output_gone.exchange(true)) interrupted.store(true);
  }
  void heading(const std::string& s) { line(), line(p_.paint("== " + s + " ==", bold)); }
  void subheading(const std::string& s) { line(), line("  " + p_.paint(s, cyan)); }
  void say(const std::string& s) { line("  " + s); }
  bool check(bool ok, const std::string& what, const std::string& why_not = {});

  // Steps.
  void intro();
  void step_nodes();
  void step_lock();
  void step_kills();
  void step_restart_at_once();
  void step_restart_delayed();
  void step_restart_guarded();
  void step_restore(bool interrupted);

  // Helpers.
  [[nodiscard]] Options options(Millis min_uptime = Millis{0}) const;
  std::string node_name(int i) const {
    return "node " + lpad(std::to_string(i), std::to_string(n_).size());
  }
  std::string token_label(const std::string& token) const;
  Attempt acquire(Client& c, const std::string& who, const std::string& resource, Millis ttl);
  void print_outcomes(const std::vector<NodeOutcome>& nodes);
  StatusResult show_state(const std::string& resource);
  void print_state(const std::string& resource, const StatusResult& st);
  StatusResult settle(const std::string& resource,
                      const std::function<bool(const StatusResult&)>& done);
  void release(Client& c, const Lock& lock);
  void kill_node(int i);
  void start_node(int i);
  void kill_majority_and_restart_at_once();
  [[nodiscard]] static int count_state(const std::vector<NodeOutcome>& nodes, Vote s);
  [[nodiscard]] bool keys_only(const StatusResult& st, const std::set<std::string>& allowed) const;

  ClusterManager& m_;
  Palette p_;
  const int n_;
  const int q_;
  bool durable_ = false;           // killed nodes come back with their keys (AOF, fsync always)
  bool ready_ = false;             // step 1 brought every node up
  std::vector<ProcState> before_;  // by index - 1: each node's state before the demo
  std::vector<bool> started_;      // by index: the demo started it, so the demo stops it
  std::set<int> resumed_;          // paused before the demo: resumed, paused again at the end
  std::set<int> down_;             // killed by the demo and not restarted yet
  std::map<std::string, std::string> labels_;  // token -> "A", "B", ...
  std::set<std::string> resources_;            // every resource used, checked empty at the end
  std::unique_ptr<Client> client_;             // client A of steps 2-3 (a long-lived service)
  int checks_ = 0;
  std::vector<std::string> failures_;
};

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
  // One retry, quickly: a single slow answer on a busy machine should not fail a step whose
  // point is elsewhere; the attempts are shown.
  o.retry_count = 1;
  o.retry_delay = 50ms;
  o.retry_jitter = 25ms;
  o.min_node_uptime = min_uptime;
  return o;
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
  for (const auto& o : nodes) w = std::max(w, o.node.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto& o = nodes[i];
    std::string lat = o.state == Vote::pending ? "-" : fmt_ms(o.latency);
    std::string text = "      " + node_name(static_cast<int>(i) + 1) + "  " + pad(o.node, w) +
                       "  " + p_.paint(pad(to_string(o.state), 13), colour_of(o.state)) + " " +
                       lpad(lat, 9);
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
                          const std::function<bool(const StatusResult&)>& done) {
  checkpoint();
  Client observer(options());
  const auto deadline = SteadyClock::now() + 1s;
  StatusResult st = observer.status(resource);
  while (!done(st) && SteadyClock::now() < deadline) {
    nap(20ms);
    st = observer.status(resource);
  }
  print_state(resource, st);
  return st;
}

void Demo::print_state(const std::string& resource, const StatusResult& st) {
  say("what each node stores for " + resource + ":");
  std::size_t w = 0;
  for (const auto& s : st.nodes) w = std::max(w, s.node.size());
  for (std::size_t i = 0; i < st.nodes.size(); ++i) {
    const auto& s = st.nodes[i];
    std::string value = !s.up ? "" : s.value ? token_label(*s.value) : "-";
    std::string ttl = s.up && s.pttl ? "ttl " + fmt_s(*s.pttl) : "";
    line("      " + node_name(static_cast<int>(i) + 1) + "  " + pad(s.node, w) + "  " +
         p_.paint(pad(s.up ? "up" : "down", 5), s.up ? green : red) + "  " + pad(value, 14) + "  " +
         ttl);
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
  say("released " + token_label(lock.token()) + ": deleted on " + std::to_string(r.deleted) +
      " node" + (r.deleted == 1 ? "" : "s") + ", not held on " + std::to_string(r.not_held) +
      ", unreachable " + std::to_string(r.unreachable));
}

void Demo::kill_node(int i) {
  checkpoint();
  auto r = m_.kill(i);
  down_.insert(i);
  // kill() returns once the main thread is a zombie, but redis's other threads may still be
  // exiting with the listening socket open: an immediate start() would find the port taken.
  const auto deadline = SteadyClock::now() + 2s;
  while (!port_busy(r.port).empty() && SteadyClock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  say(p_.paint("kill -9", red) + " " + node_name(i) + " (127.0.0.1:" + std::to_string(r.port) +
      ", pid " + std::to_string(r.pid) + ")");
}

void Demo::start_node(int i) {
  auto r = m_.start(i);
  down_.erase(i);
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

// ---- steps -------------------------------------------------------------------------------------

void Demo::intro() {
  line(p_.paint("redlock demo", bold) + ": " + std::to_string(n_) +
       " independent Redis masters on 127.0.0.1:" + std::to_string(m_.port_of(1)) + "-" +
       std::to_string(m_.port_of(n_)) + " (cluster dir " + m_.settings().dir.string() + ")");
  line("A lock needs a quorum Q = N/2+1 = " + std::to_string(q_) + " of " + std::to_string(n_) +
       " votes, so up to N-Q = " + std::to_string(n_ - q_) + " masters may fail.");
  line("Each check says what Redlock must do; the last line is the verdict.");
}

void Demo::step_nodes() {
  heading("1. The nodes");
  // What was down before, so that a failed up() (which reports nothing) can still be undone,
  // and so that the end can check that everything is as it was.
  for (const auto& st : m_.status()) before_.push_back(st.state);
  try {
    for (const auto& r : m_.up()) {
      started_[static_cast<std::size_t>(r.index)] = r.outcome == NodeReport::Outcome::started;
      if (r.outcome == NodeReport::Outcome::paused_left) {
        m_.cont(r.index);
        resumed_.insert(r.index);
      }
    }
  } catch (const ClusterError& e) {
    if (e.kind() == ClusterError::Kind::usage) throw;  // redis-server missing: nothing started
    for (const auto& st : m_.status()) {
      auto i = static_cast<std::size_t>(st.index);
      started_[i] = before_[i - 1] == ProcState::down && st.state != ProcState::down;
    }
    std::string hint = e.kind() == ClusterError::Kind::refused
                           ? " (--base-port and --dir choose other nodes)"
                           : "";
    check(false, "all " + std::to_string(n_) + " masters are up", e.what() + hint);
    throw Abort{};
  }
  checkpoint();
  durable_ = m_.settings().persistence == Persistence::aof;
  auto status = m_.status();
  line("      " + pad("", node_name(1).size()) + "  " + pad("ADDRESS", 15) + "  " + pad("PID", 8) +
       "  " + pad("STATE", 6) + "  " + pad("UPTIME", 7) + "  " + pad("PERSISTENCE", 11) + "  ");
  for (const auto& s : status) {
    std::string how = started_[static_cast<std::size_t>(s.index)] ? "started by the demo"
                      : resumed_.count(s.index)                   ? "was paused: resumed"
                                                                  : "already running";
    line("      " + node_name(s.index) + "  " + pad("127.0.0.1:" + std::to_string(s.port), 15) +
         "  " + pad(s.pid ? std::to_string(*s.pid) : "-", 8) + "  " +
         p_.paint(pad(to_string(s.state), 6), s.state == ProcState::up ? green : red) + "  " +
         pad(s.uptime_s ? std::to_string(*s.uptime_s) + " s" : "-", 7) + "  " +
         pad(s.persistence, 11) + "  " + p_.paint(how, dim));
  }
  ready_ = check(std::all_of(status.begin(), status.end(),
                             [](const NodeStatus& s) { return s.state == ProcState::up; }),
                 "all " + std::to_string(n_) + " masters are up");
  if (!ready_) throw Abort{};
  if (durable_) {
    say("These nodes run appendonly yes + appendfsync always: a killed node comes back with its "
        "keys,");
    say("so in step 4 even an immediate restart cannot forget a lock.");
  }
}

void Demo::step_lock() {
  heading("2. Take a lock");
  say("Client A sends SET key token NX PX ttl to all masters at once and decides as soon as");
  say(std::to_string(q_) + " have said OK; validity = ttl - elapsed - clock drift.");
  client_ = std::make_unique<Client>(options());
  const std::string res = "demo:lock";
  auto a = acquire(*client_, "A", res, lock_ttl);
  say(p_.paint(
      "(pending: had not answered when the outcome was decided; its SET still lands there)", dim));
  check(bool(a.result),
        "A holds the lock: at least " + std::to_string(q_) + " votes and positive validity",
        a.result.message);
  auto holders = [&](const StatusResult& st) {
    return std::count_if(st.nodes.begin(), st.nodes.end(), [&](const NodeKeyState& s) {
      return a.result && s.value && *s.value == a.result.lock.token();
    });
  };
  auto st = settle(res, [&](const StatusResult& now) { return holders(now) == n_; });
  check(holders(st) == n_, "every master stores A's token with the ttl",
        std::to_string(holders(st)) + " of " + std::to_string(n_) + " do");

  say("");
  say("A second client asks for the same resource while A holds it:");
  {
    Client b_client(options());
    auto b = acquire(b_client, "B", res, lock_ttl);
    check(b.result.error == Errc::contended,
          "B is refused: held by someone else (redlock-cli exits 1)",
          b.result ? "B acquired it" : b.result.message);
    release(b_client, b.result.lock);
  }

  say("");
  auto rel = client_->try_release(a.result.lock);
  say("A releases (compare-and-delete on every master): deleted on " + std::to_string(rel.deleted) +
      " of " + std::to_string(n_));
  check(bool(rel) && rel.deleted == n_, "the release deleted the key on every master", rel.message);
}

void Demo::step_kills() {
  heading("3. Kill masters one at a time");
  say("After each SIGKILL client A tries again. Up to N-Q = " + std::to_string(n_ - q_) +
      " masters down: it must still get the lock;");
  say("one more and it must give up (no quorum) and leave no key behind on the survivors.");
  const std::string res = "demo:failover";
  for (int k = 1; k <= n_ - q_ + 1; ++k) {
    say("");
    kill_node(k);
    const int up = n_ - k;
    auto a = acquire(*client_, "A", res, lock_ttl);
    if (up >= q_) {
      check(bool(a.result),
            std::to_string(up) + " of " + std::to_string(n_) + " up >= quorum " +
                std::to_string(q_) +
                ": acquired without waiting for the dead (redlock-cli exits 0)",
            a.result.message);
      if (a.result) {
        auto r = client_->try_release(a.result.lock);
        check(bool(r) && r.deleted >= q_, "released on the " + std::to_string(up) + " live masters",
              r.message);
      }
    } else {
      check(a.result.error == Errc::no_quorum,
            std::to_string(up) + " of " + std::to_string(n_) + " up < quorum " +
                std::to_string(q_) + ": no quorum (redlock-cli exits 3)",
            a.result ? "it acquired the lock" : a.result.message);
      if (a.result) (void)client_->try_release(a.result.lock);
      auto st = settle(res, [&](const StatusResult& now) { return keys_only(now, {}); });
      check(keys_only(st, {}), "the failed attempt was rolled back: no survivor keeps a key");
    }
  }
  client_.reset();  // it has seen the crashes; the restart scenarios use fresh clients
  say("");
  say("No lock is held now, so restarting the killed masters at once is safe:");
  for (int i = 1; i <= n_ - q_ + 1; ++i) start_node(i);
}

void Demo::step_restart_at_once() {
  heading("4. Why a crashed master must not come back at once");
  say("Without persistence a restarted master has forgotten every key. If a majority does so "
      "while");
  say("a lock is held, the lock exists on too few masters to stop another client.");
  subheading("4a. A majority restarts empty at once (no restart guard)");
  const std::string res = "demo:restart-now";
  Client a_client(options());
  auto a = acquire(a_client, "A", res, restart_ttl);
  check(bool(a.result), "A holds the lock", a.result.message);
  kill_majority_and_restart_at_once();
  Client b_client(options());  // another process, started now, without --min-uptime
  auto b = acquire(b_client, "B", res, restart_ttl);
  const Millis a_left = a.result.lock.remaining();
  show_state(res);
  if (!durable_) {
    const bool both = a.result && b.result && a_left > Millis{0};
    if (both) {
      say(p_.paint("!! two clients hold " + res + " at once: A (" + std::to_string(a_left.count()) +
                       " ms of validity left) and B",
                   bold_red));
    }
    check(both,
          "the hazard is real: B got the lock while A's was still valid (4b and 4c prevent it)",
          b.result ? "A's lock had already expired" : b.result.message);
  } else {
    check(!b.result, "the restarted masters kept A's key (AOF): B is refused", "B acquired it");
  }
  release(b_client, b.result.lock);
  release(a_client, a.result.lock);
}

void Demo::step_restart_delayed() {
  subheading("4b. The same crash, but the masters restart only after one ttl (a delayed restart)");
  const std::string res = "demo:restart-delayed";
  Client a_client(options());
  auto a = acquire(a_client, "A", res, restart_ttl);
  check(bool(a.result), "A holds the lock", a.result.message);
  for (int i = 1; i <= q_; ++i) kill_node(i);
  {
    Client b_client(options());
    auto b = acquire(b_client, "B", res, restart_ttl);
    check(!b.result, "while they are down the survivors still hold A's key: B is refused",
          "B acquired it");
    release(b_client, b.result.lock);
  }
  say("waiting " + fmt_s(restart_ttl) + " (the longest ttl in use) before restarting them...");
  nap(restart_ttl);
  for (int i = 1; i <= q_; ++i) start_node(i);
  const Millis a_left = a.result.lock.remaining();
  Client b_client(options());
  auto b = acquire(b_client, "B", res, restart_ttl);
  check(b.result && a_left == Millis{0},
        "B gets the lock only after A's has expired everywhere: never two holders",
        !b.result ? b.result.message : "A still had " + std::to_string(a_left.count()) + " ms");
  release(b_client, b.result.lock);
}

void Demo::step_restart_guarded() {
  subheading("4c. Restart at once, but the clients apply the restart guard");
  say("A short-lived process passes --min-uptime " + fmt_s(guard_min_uptime) +
      ": a master up for less than that gives no vote.");
  say("A long-lived client (G) remembers each master's run_id and ignores a restarted one for one "
      "max ttl.");
  const std::string res = "demo:restart-guard";
  Client a_client(options());
  auto a = acquire(a_client, "A", res, restart_ttl);
  check(bool(a.result), "A holds the lock", a.result.message);
  Client g_client(options());
  (void)g_client.status(res);  // connects: the handshake records every master's run_id
  kill_majority_and_restart_at_once();

  Client b_client(options(guard_min_uptime));
  auto b = acquire(b_client, "B --min-uptime", res, restart_ttl);
  const Millis a_left = a.result.lock.remaining();
  check(!b.result && (durable_ || count_state(b.result.nodes, Vote::excluded) > 0) &&
            a_left > Millis{0},
        "B is refused while A's lock is valid: the restarted masters' votes are excluded",
        b.result              ? "B acquired it"
        : a_left == Millis{0} ? "A's lock had expired first"
                              : "no vote was excluded");
  release(b_client, b.result.lock);

  // G reconnects by itself after the crash (with backoff); give it a moment so that its answer
  // shows the guard rather than a connection still being re-established.
  const auto deadline = SteadyClock::now() + 3s;
  while (SteadyClock::now() < deadline) {
    auto st = g_client.status(res);
    if (std::all_of(st.nodes.begin(), st.nodes.end(), [](const NodeKeyState& s) { return s.up; }))
      break;
    nap(50ms);
  }
  auto g = acquire(g_client, "G", res, restart_ttl);
  check(!g.result && (durable_ || count_state(g.result.nodes, Vote::excluded) > 0),
        "G is refused too: it noticed the restarts (run_id changed) without any flag",
        g.result ? "G acquired it" : "no vote was excluded");
  release(g_client, g.result.lock);
  const std::set<std::string> only_a{a.result.lock.token()};
  auto st = settle(res, [&](const StatusResult& now) { return keys_only(now, only_a); });
  check(a.result && keys_only(st, {a.result.lock.token()}),
        "the refused attempts were rolled back: the masters store A's token or nothing");
  release(a_client, a.result.lock);
}

void Demo::step_restore(bool interrupted) {
  heading("5. Restore");
  for (int i : std::set<int>(down_)) start_node(i);
  if (interrupted) {
    say("the locks of the interrupted step are not released: they expire within their ttl");
  } else if (ready_) {
    Client observer(options());
    const auto deadline = SteadyClock::now() + 1s;  // as in settle(): let the last releases land
    bool clean = false;
    while (!clean) {
      clean = true;
      for (const auto& r : resources_) clean = keys_only(observer.status(r), {}) && clean;
      if (clean || SteadyClock::now() >= deadline) break;
      std::this_thread::sleep_for(20ms);
    }
    check(clean, "no lock key of the demo is left on any master");
  }
  auto status = m_.status();
  if (ready_) {
    check(std::all_of(status.begin(), status.end(),
                      [](const NodeStatus& s) { return s.state == ProcState::up; }),
          "all " + std::to_string(n_) + " masters are up again");
  }

  const bool all_ours = std::all_of(started_.begin() + 1, started_.end(), [](bool b) { return b; });
  const bool none_ours =
      std::none_of(started_.begin() + 1, started_.end(), [](bool b) { return b; });
  if (!ready_ && none_ours && resumed_.empty()) {
    say("nothing was started or changed");
  } else if (all_ours) {
    m_.down();
    say("stopped the " + std::to_string(n_) + " masters the demo started");
  } else {
    for (int i = 1; i <= n_; ++i) {
      if (started_[static_cast<std::size_t>(i)]) {
        m_.kill(i);
        say("stopped " + node_name(i) + ": it was not running before the demo");
      }
    }
    for (int i : resumed_) {
      m_.stop(i);
      say("paused " + node_name(i) + " again, as it was before the demo");
    }
    if (ready_) say("left the other masters running, as they were before the demo");
  }
  status = m_.status();
  bool as_before = status.size() == before_.size();
  for (std::size_t i = 0; as_before && i < status.size(); ++i)
    as_before = status[i].state == before_[i];
  check(as_before, "the nodes are as they were before the demo (up, paused or down)");
}

int Demo::run() {
  const auto t0 = SteadyClock::now();
  bool was_interrupted = false;
  intro();
  try {
    step_nodes();
    step_lock();
    step_kills();
    step_restart_at_once();
    step_restart_delayed();
    step_restart_guarded();
  } catch (const Interrupted&) {
    was_interrupted = true;
    line();
    say(p_.paint("interrupted: restoring the nodes first", yellow));
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
    std::cerr << "redlock-cli: demo: stdout was closed; stopped after " << fmt_s(took)
              << " and restored the nodes\n";
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

// ---- the `demo` subcommand ---------------------------------------------------------------------

struct DemoFlags {
  std::string count, base_port, dir;
};

int int_flag(const char* flag, const std::string& text) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) {
    throw UsageError(std::string("demo: ") + flag + " " + text + ": not a number");
  }
  return v;
}

int run_demo(const DemoFlags& f) {
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

Command demo_command(const Globals&) {
  auto f = std::make_shared<DemoFlags>();
  return {
      .name = "demo",
      .description = "Narrated, self-checking failover demonstration on local nodes (takes ~10 s)",
      .footer =
          "Starts the masters that are not running (running ones are used as they are), takes a "
          "lock, kills\n"
          "masters one at a time, shows why a crashed master must not restart empty at once, then "
          "restarts\n"
          "what it killed and stops what it started. Any -n/--nodes is ignored: the demo only ever "
          "acts on\n"
          "the local masters of DIR.\n"
          "Colour when stdout is a terminal and NO_COLOR is unset. Exit status: 0 every check "
          "passed, 1 a\n"
          "check failed or a node could not be started, 2 usage error, 130 interrupted (nodes "
          "restored),\n"
          "141 stdout closed by its reader, e.g. `demo | head` (nodes restored).",
      .options =
          {
              {.names = "--count",
               .target = &f->count,
               .help = "Number of masters (default 5, or what `cluster up` saved in DIR)",
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
          },
      .run = [f] { return run_demo(*f); },
      .storage = f,
  };
}

}  // namespace redlock::cli
