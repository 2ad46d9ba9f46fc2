// The Sentinel chapter of `redlock-cli demo` (--topology sentinel, or a cluster directory that
// `cluster up --topology sentinel` made): votes that are Sentinel-managed masters, a failover of
// a majority of them while a lock is held, and what keeps that failover from giving the lock
// twice: the restart quarantine of a promoted replica, or replicated votes.

#include <algorithm>

#include "demo.hpp"
#include "nodes/client.hpp"

namespace redlock::cli::demo {

using namespace std::chrono_literals;

namespace {

std::string votes_text(int from, int to) {
  return from == to ? "m" + std::to_string(from)
                    : "m" + std::to_string(from) + ".." + "m" + std::to_string(to);
}

bool detail_says(const std::vector<NodeOutcome>& nodes, std::string_view what) {
  return std::any_of(nodes.begin(), nodes.end(), [&](const NodeOutcome& o) {
    return o.detail.find(what) != std::string::npos;
  });
}

}  // namespace

int Demo::promoted_votes_ok(const std::vector<NodeOutcome>& nodes) const {
  int ok = 0;
  for (int v = 0; v < q_ && v < static_cast<int>(nodes.size()); ++v) {
    ok += nodes[static_cast<std::size_t>(v)].state == Vote::ok;
  }
  return ok;
}

void Demo::intro_sentinel() {
  const int last = m_.process_count();
  line(p_.paint("redlock demo", bold) + ": " + std::to_string(n_) + " Sentinel-managed masters (" +
       votes_text(1, n_) + ", one replica each) and " + std::to_string(nodes::sentinel_count) +
       " sentinels on 127.0.0.1:" + std::to_string(m_.port_of(1)) + "-" +
       std::to_string(m_.port_of(last)) + (m_.settings().tls ? ", TLS only" : "") +
       " (cluster dir " + m_.settings().dir.string() + ")");
  line("A vote is whichever node Sentinel names as the master now. A lock needs Q = " +
       std::to_string(q_) + " of " + std::to_string(n_) + " votes.");
  line(
      "Replication is asynchronous: a failover may promote a replica that never got the lock "
      "key.");
  line("Each check says what Redlock must do; the last line is the verdict.");
}

void Demo::step_sentinel_lock() {
  heading("2. A lock through Sentinel");
  say("Each vote asks a sentinel which node is the master of its name (SENTINEL MASTER mI),");
  say("then sends SET key token NX PX ttl to that master. Every client here uses ttl " +
      fmt_s(sentinel_ttl) + ".");
  client_ = std::make_unique<Client>(options());
  const std::string res = "demo:sentinel";
  warm_up(*client_, res);
  auto a = acquire(*client_, "A", res, sentinel_ttl);
  check(bool(a.result), "A holds the lock through the sentinels", a.result.message);
  auto holders = [&](const StatusResult& st) {
    return std::count_if(st.nodes.begin(), st.nodes.end(), [&](const NodeKeyState& s) {
      return a.result && s.value && *s.value == a.result.lock.token();
    });
  };
  auto st = settle(res, [&](const StatusResult& now) { return holders(now) == n_; });
  check(holders(st) == n_, "the master of every vote stores A's token",
        std::to_string(holders(st)) + " of " + std::to_string(n_) + " do");
  held_ = a.result.lock;
}

void Demo::step_sentinel_failover() {
  heading("3. A majority of the votes fails over while A holds the lock");
  const std::string res = "demo:sentinel";
  say("SENTINEL FAILOVER " + votes_text(1, q_) +
      ": each promotes its replica. To show what a lost");
  say("replication does, the demo deletes A's key on every promoted replica at once.");
  // G: a long-lived client that knew the old masters before the failover.
  Client g_client(options());
  warm_up(g_client, res);

  std::vector<int> votes;
  for (int v = 1; v <= q_; ++v) votes.push_back(v);
  std::optional<SteadyClock::time_point> first_promotion;
  const auto failovers = m_.failover(votes, [&](const ClusterManager::Failover& f) {
    if (!first_promotion) first_promotion = SteadyClock::now();
    nodes::SyncClient c(m_.endpoint(f.new_master),
                        {.connect_timeout = Millis{1000}, .command_timeout = Millis{1000}});
    (void)c.command({"DEL", res});
  });
  for (const auto& f : failovers) {
    say(ClusterManager::master_name(f.vote) + ": " + p_.paint("failover", red) + " to " +
        node_name(f.new_master) + " (127.0.0.1:" + std::to_string(m_.port_of(f.new_master)) +
        ") in " + std::to_string(f.took.count()) + " ms; DEL " + res + " there; the old master, " +
        node_name(f.old_master) + ", made its replica");
  }
  say(
      p_.paint("(Sentinel itself demotes a reachable old master only 10-20 s later; the demo does "
               "it at once)",
               dim));
  auto st = show_state(res);
  int without = 0;
  for (int v = 0; v < q_ && v < static_cast<int>(st.nodes.size()); ++v) {
    without +=
        st.nodes[static_cast<std::size_t>(v)].up && !st.nodes[static_cast<std::size_t>(v)].value;
  }
  check(without == q_,
        "the promoted masters of " + votes_text(1, q_) + " do not have A's key: A holds it on " +
            std::to_string(n_ - q_) + " of " + std::to_string(n_) + " votes only",
        std::to_string(without) + " of " + std::to_string(q_) + " lack it");

  subheading("3a. Without the guard (restart quarantine 0): the hazard");
  {
    Options o = options();
    o.restart_quarantine = Millis{0};
    Client u_client(o);
    warm_up(u_client, res);
    auto u = acquire(u_client, "U (no quarantine)", res, sentinel_ttl);
    const Millis a_left = held_.remaining();
    const bool both = u.result && a_left > Millis{0};
    if (both) {
      say(p_.paint("!! two clients hold " + res + " at once: A (" + std::to_string(a_left.count()) +
                       " ms of validity left) and U",
                   bold_red));
    }
    check(both,
          "the hazard is real: U got the lock through the promoted replicas while A's was "
          "still valid",
          u.result ? "A's lock had already expired (a slow failover)" : u.result.message);
    release(u_client, u.result.lock);
  }

  subheading("3b. With the guard: a promoted replica's vote waits out the restart quarantine");
  say("A fresh process (B) learns the promotion from Sentinel (role-reported-time, and the new "
      "master's");
  say("INFO replication); a long-lived one (G) saw the switch. Their quarantine: " +
      fmt_s(sentinel_ttl) + " from the promotion.");
  Client b_client(options());
  warm_up(b_client, res);
  auto b = acquire(b_client, "B", res, sentinel_ttl);
  Millis a_left = held_.remaining();
  // The outcome is known once too few votes can still say yes, so some votes stay pending; what
  // matters is that no promoted master gave its vote and at least one says why.
  check(!b.result && promoted_votes_ok(b.result.nodes) == 0 &&
            count_state(b.result.nodes, Vote::excluded) > 0 &&
            detail_says(b.result.nodes, "promoted") && a_left > Millis{0},
        "B is refused while A's lock is valid: the promoted masters' votes are excluded",
        b.result                                           ? "B acquired it"
        : a_left == Millis{0}                              ? "A's lock had expired first"
        : promoted_votes_ok(b.result.nodes) > 0            ? "a promoted master gave its vote"
        : count_state(b.result.nodes, Vote::excluded) == 0 ? "no vote was excluded"
                                                           : "no vote says it was promoted");
  release(b_client, b.result.lock);
  auto g = acquire(g_client, "G", res, sentinel_ttl);
  check(!g.result && promoted_votes_ok(g.result.nodes) == 0 &&
            count_state(g.result.nodes, Vote::excluded) > 0,
        "G is refused too: it saw the masters change",
        g.result ? "G acquired it" : "no vote was excluded");
  release(g_client, g.result.lock);

  say("");
  say("B tries again every 250 ms until it gets the lock:");
  const auto t0 = SteadyClock::now();
  const auto deadline = t0 + sentinel_ttl + 5s;
  int refused = 0;
  AcquireResult got;
  Millis a_left_then{0};
  while (SteadyClock::now() < deadline) {
    checkpoint();
    AcquireOptions ao;
    ao.ttl = sentinel_ttl;
    ao.retry_count = 0;
    got = b_client.try_acquire({res}, ao);
    a_left_then = held_.remaining();
    if (got) break;
    ++refused;
    nap(250ms);
  }
  if (got) {
    labels_[got.lock.token()] = "B";
    const auto since =
        std::chrono::duration_cast<Millis>(SteadyClock::now() - first_promotion.value_or(t0));
    say("refused " + std::to_string(refused) + " more times, then " + p_.paint("acquired", green) +
        " " + fmt_s(since) + " after the first promotion:");
    print_outcomes(got.nodes);
  }
  check(got && a_left_then == Millis{0},
        "B gets the lock only once the quarantine is over and A's lock has expired: never two "
        "holders",
        !got ? "B did not get it within " + fmt_s(sentinel_ttl + 5s) + ": " + got.message
             : "A still had " + std::to_string(a_left_then.count()) + " ms");
  release(b_client, got.lock);
  release(*client_, held_);
  held_ = Lock{};
  client_.reset();
}

void Demo::step_sentinel_replicated() {
  heading("4. Replicated votes (--min-replicas 1)");
  say("Each SET is followed by WAIT 1: the vote counts only once a replica has the key, so the");
  say("replica Sentinel promotes has it too (Sentinel prefers the replica that is most up to "
      "date).");
  // The old masters of step 3 are replicas now: wait until they are synced and the sentinels
  // list them, or the next failover would find no replica to promote.
  m_.wait_sentinels_agree(20s);
  const std::string res = "demo:replicated";
  Options o = options();
  o.min_replicas = 1;
  Client r_client(o);
  warm_up(r_client, res);
  auto r = acquire(r_client, "R --min-replicas 1", res, sentinel_ttl);
  check(bool(r.result), "R holds the lock: every vote that counted reached a replica",
        r.result.message);
  std::vector<int> votes;
  for (int v = 1; v <= q_; ++v) votes.push_back(v);
  const auto failovers = m_.failover(votes);
  std::string have;
  int kept = 0;
  for (const auto& f : failovers) {
    nodes::SyncClient c(m_.endpoint(f.new_master),
                        {.connect_timeout = Millis{1000}, .command_timeout = Millis{1000}});
    auto v = c.command({"GET", res});
    const bool has =
        r.result && v && v->type == nodes::Reply::Type::string && v->str == r.result.lock.token();
    kept += has;
    say(ClusterManager::master_name(f.vote) + ": " + p_.paint("failover", red) + " to " +
        node_name(f.new_master) + " in " + std::to_string(f.took.count()) + " ms; it " +
        (has ? "has R's key" : "does not have R's key"));
  }
  check(kept == q_, "every promoted replica has R's key: the failover lost nothing",
        std::to_string(kept) + " of " + std::to_string(q_) + " have it");
  {
    Options uo = options();
    uo.restart_quarantine = Millis{0};
    Client u_client(uo);
    warm_up(u_client, res);
    auto u = acquire(u_client, "U (no quarantine)", res, sentinel_ttl);
    check(u.result.error == Errc::contended,
          "even U, without the guard, is refused: held by someone else (redlock-cli exits 1)",
          u.result ? "U acquired it" : u.result.message);
    release(u_client, u.result.lock);
  }
  // R's client follows the switch by itself (+switch-master, or its next SENTINEL MASTER): a
  // release sent in between would find no master for the vote.
  warm_up(r_client, res);
  release(r_client, r.result.lock);
}

}  // namespace redlock::cli::demo
