// The Sentinel chapter of `redlock-cli demo` (--topology sentinel, or a cluster directory that
// `cluster up --topology sentinel` made): votes that are Sentinel-managed masters, a failover of
// a majority of them while a lock is held, and what keeps that failover from giving the lock
// twice: the restart quarantine of a promoted replica, or replicated votes.

#include <algorithm>

#include "demo.hpp"
#include "nodes/client.hpp"

namespace redlock::cli::demo {

using namespace std::chrono_literals;

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
  const std::string token = a.result ? a.result.lock.token() : std::string();
  auto st = settle(res, [&](const StatusResult& now) { return holders(now, token) == n_; });
  check(holders(st, token) == n_, "the master of every vote stores A's token",
        std::to_string(holders(st, token)) + " of " + std::to_string(n_) + " do");
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
    delete_on(f.new_master, res);
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
  check_promoted_lack_key(res);

  subheading("3a. Without the guard (restart quarantine 0): the hazard");
  {
    Options o = options();
    o.restart_quarantine = Millis{0};
    Client u_client(o);
    warm_up(u_client, res);
    show_unguarded_hazard(u_client, res, sentinel_ttl);
  }

  subheading("3b. With the guard: a promoted replica's vote waits out the restart quarantine");
  say("A fresh process (B) learns the promotion from Sentinel (role-reported-time, and the new "
      "master's");
  say("INFO replication); a long-lived one (G) saw the switch. Their quarantine: " +
      fmt_s(sentinel_ttl) + " from the promotion.");
  Client b_client(options());
  warm_up(b_client, res);
  auto b = acquire(b_client, "B", res, sentinel_ttl);
  check_guard_refusal(b, "B", "promoted");
  release(b_client, b.result.lock);
  // B's attempts set the key where the promoted masters granted it (their votes were excluded,
  // not their SETs) and B takes it back; G's SET, through connections of its own, can overtake
  // that rollback on a busy machine. A promoted master then answers G "held by someone else"
  // (B's attempt), and with the old master's answer G is refused before the vote that would be
  // excluded has answered: right, but not what this step shows. So G goes once the promoted
  // masters no longer hold B's attempt (at most 1 s; settle()).
  (void)settle(
      res,
      [this](const StatusResult& st) {
        for (int v = 0; v < q_ && v < static_cast<int>(st.nodes.size()); ++v) {
          if (st.nodes[static_cast<std::size_t>(v)].value) return false;
        }
        return true;
      },
      false);
  auto g = acquire(g_client, "G", res, sentinel_ttl);
  check(!g.result && promoted_votes_ok(g.result.nodes) == 0 &&
            count_state(g.result.nodes, Vote::excluded) > 0,
        "G is refused too: it saw the masters change",
        g.result ? "G acquired it" : "no vote was excluded");
  release(g_client, g.result.lock);

  retry_until_a_expired(b_client, "B", res, sentinel_ttl, first_promotion);
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
  int kept = 0;
  for (const auto& f : failovers) {
    const bool has = r.result && stores(f.new_master, res, r.result.lock.token());
    kept += has;
    say(ClusterManager::master_name(f.vote) + ": " + p_.paint("failover", red) + " to " +
        node_name(f.new_master) + " in " + std::to_string(f.took.count()) + " ms; it " +
        (has ? "has R's key" : "does not have R's key"));
  }
  check(kept == q_, "every promoted replica has R's key: the failover lost nothing",
        std::to_string(kept) + " of " + std::to_string(q_) + " have it");
  check_unguarded_refused(res, sentinel_ttl);
  // R's client follows the switch by itself (+switch-master, or its next SENTINEL MASTER): a
  // release sent in between would find no master for the vote.
  warm_up(r_client, res);
  release(r_client, r.result.lock);
}

}  // namespace redlock::cli::demo
