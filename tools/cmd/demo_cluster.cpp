// The Redis Cluster chapter of `redlock-cli demo` (--topology cluster, or a cluster directory that
// `cluster up --topology cluster` made): votes that are whole Redis Clusters, the master of the
// key's slot killed in a majority of them while a lock is held, and what keeps the promoted
// replicas from giving the lock twice: the restart quarantine of a long-lived client that saw the
// promotion, or replicated votes (the only defence of a process that starts after it).

#include <algorithm>

#include "demo.hpp"

namespace redlock::cli::demo {

using namespace std::chrono_literals;

namespace {

// "slot 866 on 127.0.0.1:7002": what `status` says about where a vote keeps the key.
std::string where_text(const std::string& key_slot_where, int port) {
  return key_slot_where.substr(0, key_slot_where.rfind(':') + 1) + std::to_string(port);
}

}  // namespace

void Demo::intro_cluster() {
  const int r = m_.settings().replicas;
  line(p_.paint("redlock demo", bold) + ": " + std::to_string(n_) + " Redis Clusters (" +
       votes_text(1, n_) + ", each " + std::to_string(nodes::cluster_masters) + " masters with " +
       std::to_string(r) + (r == 1 ? " replica" : " replicas") +
       ") on 127.0.0.1:" + std::to_string(m_.port_of(1)) + "-" +
       std::to_string(m_.port_of(procs_)) + (m_.settings().tls ? ", TLS only" : "") +
       " (cluster dir " + m_.settings().dir.string() + ")");
  line(
      "A vote is a whole cluster: the key lives on the master that serves its slot. A lock "
      "needs Q = " +
      std::to_string(q_) + " of " + std::to_string(n_) + " votes.");
  line(
      "Replication is asynchronous: a failover may promote a replica that never got the lock "
      "key.");
  line("Each check says what Redlock must do; the last line is the verdict.");
}

std::vector<ClusterManager::Failover> Demo::fail_over_majority(
    const std::string& resource,
    const std::function<void(const ClusterManager::Failover&)>& on_promoted) {
  checkpoint();
  std::vector<int> votes;
  for (int v = 1; v <= q_; ++v) votes.push_back(v);
  std::set<int> up_before;
  for (const auto& st : m_.status()) {
    if (st.state != ProcState::down) up_before.insert(st.index);
  }
  // What was killed is restarted by step_restore, also when the failover fails half-way.
  auto note_killed = [&] {
    for (const auto& st : m_.status()) {
      if (st.state == ProcState::down && up_before.count(st.index) > 0) down_.insert(st.index);
    }
  };
  try {
    auto failovers = m_.kill_slot_masters(votes, resource, on_promoted);
    note_killed();
    return failovers;
  } catch (...) {
    note_killed();
    throw;
  }
}

bool Demo::wait_new_maps(Client& c, const std::string& resource,
                         const std::vector<ClusterManager::Failover>& failovers) {
  const auto deadline = SteadyClock::now() + 5s;
  for (;;) {
    const auto st = c.status(resource);
    const bool all = std::all_of(failovers.begin(), failovers.end(), [&](const auto& f) {
      const auto v = static_cast<std::size_t>(f.vote) - 1;
      if (v >= st.nodes.size()) return false;
      const std::string& where = st.nodes[v].where;
      return !where.empty() && where == where_text(where, m_.port_of(f.new_master));
    });
    if (all) return true;
    if (SteadyClock::now() >= deadline) return false;
    nap(50ms);
  }
}

void Demo::step_cluster_lock() {
  heading("2. A lock over Redis Cluster votes");
  say("Each vote asks its cluster for the slot map (CLUSTER SLOTS) and sends SET key token NX PX "
      "ttl");
  say("to the master that serves the key's slot. Every client here uses ttl " + fmt_s(cluster_ttl) +
      ".");
  if (m_.settings().replicas < 1) {
    check(false, "every master has a replica the chapter can promote",
          "these clusters have none: `cluster down`, then `cluster up --topology cluster "
          "--replicas 1`");
    throw Abort{};
  }
  client_ = std::make_unique<Client>(options());
  const std::string res = "demo:cluster";
  warm_up(*client_, res);
  auto a = acquire(*client_, "A", res, cluster_ttl);
  check(bool(a.result), "A holds the lock over the clusters", a.result.message);
  const std::string token = a.result ? a.result.lock.token() : std::string();
  auto st = settle(res, [&](const StatusResult& now) { return holders(now, token) == n_; });
  check(holders(st, token) == n_, "every vote stores A's token",
        std::to_string(holders(st, token)) + " of " + std::to_string(n_) + " do");
  // Where each vote says the key is, against who serves the slot (CLUSTER NODES of the cluster).
  std::string wrong;
  for (int v = 1; v <= n_ && v <= static_cast<int>(st.nodes.size()); ++v) {
    const std::string& where = st.nodes[static_cast<std::size_t>(v) - 1].where;
    const auto owner = m_.slot_owner(v, res);
    if (!owner || where.empty() || where != where_text(where, m_.port_of(*owner))) {
      wrong += (wrong.empty() ? "" : "; ") + m_.vote_name(v) + ": '" + where + "'";
    }
  }
  check(wrong.empty(), "each vote's key is on the master that serves its slot (CLUSTER NODES)",
        wrong);
  held_ = a.result.lock;
}

void Demo::step_cluster_failover() {
  heading("3. The master of the key's slot fails in a majority of the clusters while A holds it");
  const std::string res = "demo:cluster";
  say("kill -9 the master that serves " + res + " in " + votes_text(1, q_) +
      ": once it has been silent for");
  say("cluster-node-timeout (" + std::to_string(nodes::cluster_node_timeout_ms) +
      " ms) the other masters vote its replica in. To show what a lost");
  say("replication does, the demo deletes A's key on every promoted replica at once.");
  // Long-lived clients that have the slot maps from before the failover: G with the guard,
  // U without it.
  Client g_client(options());
  Options uo = options();
  uo.restart_quarantine = Millis{0};
  Client u_client(uo);
  warm_up(g_client, res);
  warm_up(u_client, res);

  std::optional<SteadyClock::time_point> first_promotion;
  const auto failovers = fail_over_majority(res, [&](const ClusterManager::Failover& f) {
    if (!first_promotion) first_promotion = SteadyClock::now();
    delete_on(f.new_master, res);
  });
  for (const auto& f : failovers) {
    say(m_.vote_name(f.vote) + ": " + p_.paint("kill -9", red) + " " + node_name(f.old_master) +
        " (127.0.0.1:" + std::to_string(m_.port_of(f.old_master)) + "); its replica " +
        node_name(f.new_master) + " (127.0.0.1:" + std::to_string(m_.port_of(f.new_master)) + ") " +
        p_.paint("promoted", red) + " after " + std::to_string(f.took.count()) + " ms; DEL " + res +
        " there");
  }
  const bool g_knows = wait_new_maps(g_client, res, failovers);
  const bool u_knows = wait_new_maps(u_client, res, failovers);
  check(g_knows && u_knows,
        "the long-lived clients G and U follow the new slot maps (they ask every second)",
        std::string(g_knows ? "U" : "G") + " still names the old masters after 5 s");
  check_promoted_lack_key(res);

  subheading("3a. Without the guard (restart quarantine 0): the hazard");
  show_unguarded_hazard(u_client, res, cluster_ttl);

  subheading("3b. With the guard: a promoted replica's vote waits out the restart quarantine");
  say("G had the slot maps from before the failover, where the new masters were replicas: their");
  say("votes wait out G's quarantine (" + fmt_s(cluster_ttl) + ") from when G saw the new maps.");
  auto g = acquire(g_client, "G", res, cluster_ttl);
  // Its detail: "... was promoted from replica" (the master's INFO) or "... was a replica in the
  // last slot map".
  check_guard_refusal(g, "G", "replica");
  release(g_client, g.result.lock);
  say(
      p_.paint("A process that starts after the failover (every redlock-cli call) is not refused: "
               "neither",
               yellow));
  say(
      p_.paint("CLUSTER SLOTS nor INFO says when a replica was promoted, so it cannot tell. "
               "Replicated votes",
               yellow));
  say(p_.paint("(step 4) are the defence then.", yellow));

  retry_until_a_expired(g_client, "G", res, cluster_ttl, first_promotion);
  client_.reset();
}

void Demo::step_cluster_replicated() {
  heading("4. Replicated votes (--min-replicas 1)");
  say("Each SET is followed by WAIT 1: a vote counts only once a replica of the slot's master has");
  say("the key, so the replica the cluster promotes has it too (with several replicas, the "
      "election");
  say("favours the most up-to-date one: a preference, not a guarantee).");
  say("First the killed masters come back; they rejoin as replicas of the promoted ones:");
  for (int i : std::set<int>(down_)) start_node(i);
  const std::string res = "demo:replicated";
  Options o = options();
  o.min_replicas = 1;
  // WAIT holds the vote until a replica acknowledged: give it room on a busy machine.
  o.node_timeout = 500ms;
  o.replica_timeout = 300ms;
  Client r_client(o);
  warm_up(r_client, res);
  auto r = acquire(r_client, "R --min-replicas 1", res, cluster_ttl);
  check(bool(r.result), "R holds the lock: every vote that counted reached a replica",
        r.result.message);
  say("kill -9 the master that serves " + res + " in " + votes_text(1, q_) + ":");
  const auto failovers = fail_over_majority(res);
  int kept = 0;
  for (const auto& f : failovers) {
    const bool has = r.result && stores(f.new_master, res, r.result.lock.token());
    kept += has;
    say(m_.vote_name(f.vote) + ": " + p_.paint("kill -9", red) + " " + node_name(f.old_master) +
        "; " + node_name(f.new_master) + " " + p_.paint("promoted", red) + " after " +
        std::to_string(f.took.count()) + " ms; it " +
        (has ? "has R's key" : "does not have R's key"));
  }
  check(kept == q_, "every promoted replica has R's key: the failover lost nothing",
        std::to_string(kept) + " of " + std::to_string(q_) + " have it");
  check_unguarded_refused(res, cluster_ttl);
  // R's client follows the new slot maps by itself (every second): a release sent before would
  // go to the killed masters.
  (void)wait_new_maps(r_client, res, failovers);
  release(r_client, r.result.lock);
}

}  // namespace redlock::cli::demo
