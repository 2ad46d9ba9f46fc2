// The steps of `redlock-cli demo`, in the order they run (demo.hpp has the Demo class).

#include <algorithm>

#include "demo.hpp"
#include "output.hpp"

namespace redlock::cli::demo {

using namespace std::chrono_literals;
using nodes::Persistence;

// ---- steps -------------------------------------------------------------------------------------

void Demo::intro() {
  line(p_.paint("redlock demo", bold) + ": " + std::to_string(n_) +
       " independent Redis masters on 127.0.0.1:" + std::to_string(m_.port_of(1)) + "-" +
       std::to_string(m_.port_of(n_)) + (m_.settings().tls ? ", TLS only" : "") + " (cluster dir " +
       m_.settings().dir.string() + ")");
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
    check(false, all_up_text(), e.what() + hint);
    throw Abort{};
  }
  checkpoint();
  durable_ = m_.settings().persistence == Persistence::aof;
  auto status = m_.status();
  line("      " + pad("", node_name(1).size()) + "  " + pad("ADDRESS", 15) + "  " + pad("PID", 8) +
       "  " + pad("STATE", 6) + "  " + pad("UPTIME", 7) + "  " + pad("PERSISTENCE", 11) + "  " +
       (sentinel_ || cluster_ ? pad("ROLE", 10) + "  " : ""));
  for (const auto& s : status) {
    std::string how = started_[static_cast<std::size_t>(s.index)] ? "started by the demo"
                      : resumed_.count(s.index)                   ? "was paused: resumed"
                                                                  : "already running";
    std::string role;
    if (sentinel_ || cluster_) {
      role = (s.role.empty() ? std::string("-") : s.role) +
             (s.master_name.empty() ? "" : " " + s.master_name) +
             (s.cluster.empty() ? "" : " " + s.cluster);
      role = pad(role, 10) + "  ";
    }
    line("      " + node_name(s.index) + "  " + pad("127.0.0.1:" + std::to_string(s.port), 15) +
         "  " + pad(s.pid ? std::to_string(*s.pid) : "-", 8) + "  " +
         p_.paint(pad(to_string(s.state), 6), s.state == ProcState::up ? green : red) + "  " +
         pad(s.uptime_s ? std::to_string(*s.uptime_s) + " s" : "-", 7) + "  " +
         pad(s.persistence, 11) + "  " + role + p_.paint(how, dim));
  }
  ready_ = check(std::all_of(status.begin(), status.end(),
                             [](const NodeStatus& s) { return s.state == ProcState::up; }),
                 all_up_text());
  if (!ready_) throw Abort{};
  if (sentinel_) {
    // up() returned once every sentinel listed every replica; failovers keep the data (the demo
    // deletes only its own demo:* keys), so nothing of others is at stake.
    say("every sentinel lists every replica and knows the other sentinels (cluster up waits for "
        "that)");
    return;
  }
  if (cluster_) {
    // The same: a killed master's replica takes over its slots with the data, and the killed
    // master comes back as a replica that copies it.
    say("every cluster is whole: cluster_state:ok on every node, all agree on the slot map and "
        "the roles");
    say("(cluster up waits for that)");
    return;
  }
  // Before anything is killed: the data of masters that were running already is someone's.
  snapshot_keys();
  try {
    refuse_to_lose_data(status);
  } catch (const Refused&) {
    ready_ = false;  // nothing of steps 2-5 happened: step_restore only undoes step 1
    throw;
  }
  if (!kept_keys_.empty()) {
    say(std::to_string(kept_keys_.size()) + (kept_keys_.size() == 1 ? " key" : " keys") +
        " of others on these masters (appendonly yes + appendfsync always where the demo kills)"
        ": checked again at the end.");
  }
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
          all_up_text() + " again");
  }

  const bool all_ours = std::all_of(started_.begin() + 1, started_.end(), [](bool b) { return b; });
  const bool none_ours =
      std::none_of(started_.begin() + 1, started_.end(), [](bool b) { return b; });
  if (!ready_ && none_ours && resumed_.empty()) {
    say("nothing was started or changed");
  } else if (all_ours) {
    m_.down();
    say("stopped the " + std::to_string(procs_) +
        (sentinel_ || cluster_ ? " processes the demo started" : " masters the demo started"));
  } else {
    for (int i = 1; i <= procs_; ++i) {
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
    if (ready_ && sentinel_) {
      say("(the failovers changed which node of each vote is the master: Sentinel keeps it so)");
    }
    if (ready_ && cluster_) {
      say("(the failovers changed which nodes are masters: the clusters keep it so)");
    }
  }
  check_keys_kept();
  status = m_.status();
  bool as_before = status.size() == before_.size();
  for (std::size_t i = 0; as_before && i < status.size(); ++i)
    as_before = status[i].state == before_[i];
  check(as_before, "the nodes are as they were before the demo (up, paused or down)");
}

}  // namespace redlock::cli::demo
