// What the Sentinel chapter (demo_sentinel.cpp) and the Redis Cluster chapter (demo_cluster.cpp)
// of `redlock-cli demo` share: both fail a majority of the votes over while client A holds a lock,
// with the key lost on the promoted masters, and show the same hazard, refusals and waits.

#include <algorithm>

#include "demo.hpp"
#include "nodes/client.hpp"

namespace redlock::cli::demo {

using namespace std::chrono_literals;

namespace {

bool detail_says(const std::vector<NodeOutcome>& nodes, std::string_view what) {
  return std::any_of(nodes.begin(), nodes.end(), [&](const NodeOutcome& o) {
    return o.detail.find(what) != std::string::npos;
  });
}

nodes::SyncClient connect_to(const ClusterManager& m, int index) {
  return nodes::SyncClient(m.endpoint(index),
                           {.connect_timeout = Millis{1000}, .command_timeout = Millis{1000}});
}

}  // namespace

int Demo::promoted_votes_ok(const std::vector<NodeOutcome>& nodes) const {
  int ok = 0;
  for (int v = 0; v < q_ && v < static_cast<int>(nodes.size()); ++v) {
    ok += nodes[static_cast<std::size_t>(v)].state == Vote::ok;
  }
  return ok;
}

std::string Demo::votes_text(int from, int to) const {
  return from == to ? m_.vote_name(from) : m_.vote_name(from) + ".." + m_.vote_name(to);
}

int Demo::holders(const StatusResult& st, const std::string& token) {
  return static_cast<int>(std::count_if(st.nodes.begin(), st.nodes.end(), [&](const auto& s) {
    return !token.empty() && s.value && *s.value == token;
  }));
}

bool Demo::stores(int index, const std::string& key, const std::string& value) const {
  auto c = connect_to(m_, index);
  auto v = c.command({"GET", key});
  return !value.empty() && v && v->type == nodes::Reply::Type::string && v->str == value;
}

void Demo::delete_on(int index, const std::string& key) const {
  auto c = connect_to(m_, index);
  (void)c.command({"DEL", key});
}

void Demo::check_promoted_lack_key(const std::string& resource) {
  auto st = show_state(resource);
  int without = 0;
  for (int v = 0; v < q_ && v < static_cast<int>(st.nodes.size()); ++v) {
    without +=
        st.nodes[static_cast<std::size_t>(v)].up && !st.nodes[static_cast<std::size_t>(v)].value;
  }
  check(without == q_,
        "the promoted masters of " + votes_text(1, q_) + " do not have A's key: A holds it on " +
            std::to_string(n_ - q_) + " of " + std::to_string(n_) + " votes only",
        std::to_string(without) + " of " + std::to_string(q_) + " lack it");
}

void Demo::show_unguarded_hazard(Client& u_client, const std::string& resource, Millis ttl) {
  auto u = acquire(u_client, "U (no quarantine)", resource, ttl);
  const Millis a_left = held_.remaining();
  const bool both = u.result && a_left > Millis{0};
  if (both) {
    say(p_.paint("!! two clients hold " + resource + " at once: A (" +
                     std::to_string(a_left.count()) + " ms of validity left) and U",
                 bold_red));
  }
  check(both,
        "the hazard is real: U got the lock through the promoted replicas while A's was still "
        "valid",
        u.result ? "A's lock had already expired (a slow failover)" : u.result.message);
  release(u_client, u.result.lock);
}

void Demo::check_guard_refusal(const Attempt& a, const std::string& who, std::string_view reason) {
  const Millis a_left = held_.remaining();
  const auto& nodes = a.result.nodes;
  // The outcome is known once too few votes can still say yes, so some votes stay pending; what
  // matters is that no promoted master gave its vote and at least one says why.
  check(!a.result && promoted_votes_ok(nodes) == 0 && count_state(nodes, Vote::excluded) > 0 &&
            detail_says(nodes, reason) && a_left > Millis{0},
        who + " is refused while A's lock is valid: the promoted masters' votes are excluded",
        a.result                                  ? who + " acquired it"
        : a_left == Millis{0}                     ? std::string("A's lock had expired first")
        : promoted_votes_ok(nodes) > 0            ? std::string("a promoted master gave its vote")
        : count_state(nodes, Vote::excluded) == 0 ? std::string("no vote was excluded")
                                                  : "no vote says " + std::string(reason));
}

void Demo::retry_until_a_expired(Client& c, const std::string& who, const std::string& resource,
                                 Millis ttl,
                                 std::optional<SteadyClock::time_point> first_promotion) {
  say("");
  say(who + " tries again every 250 ms until it gets the lock:");
  const auto t0 = SteadyClock::now();
  const auto deadline = t0 + ttl + 10s;
  int refused = 0;
  AcquireResult got;
  Millis a_left_then{0};
  while (SteadyClock::now() < deadline) {
    checkpoint();
    AcquireOptions ao;
    ao.ttl = ttl;
    ao.retry_count = 0;
    got = c.try_acquire({resource}, ao);
    a_left_then = held_.remaining();
    if (got) break;
    ++refused;
    nap(250ms);
  }
  if (got) {
    labels_[got.lock.token()] = who;
    const auto since =
        std::chrono::duration_cast<Millis>(SteadyClock::now() - first_promotion.value_or(t0));
    say("refused " + std::to_string(refused) + " more times, then " + p_.paint("acquired", green) +
        " " + fmt_s(since) + " after the first promotion:");
    print_outcomes(got.nodes);
  }
  check(got && a_left_then == Millis{0},
        who +
            " gets the lock only once the quarantine is over and A's lock has expired: never two "
            "holders",
        !got ? who + " did not get it within " + fmt_s(ttl + 10s) + ": " + got.message
             : "A still had " + std::to_string(a_left_then.count()) + " ms");
  release(c, got.lock);
  release(*client_, held_);
  held_ = Lock{};
}

void Demo::check_unguarded_refused(const std::string& resource, Millis ttl) {
  Options uo = options();
  uo.restart_quarantine = Millis{0};
  Client u_client(uo);
  warm_up(u_client, resource);
  auto u = acquire(u_client, "U (no quarantine)", resource, ttl);
  check(u.result.error == Errc::contended,
        "even U, without the guard, is refused: held by someone else (redlock-cli exits 1)",
        u.result ? "U acquired it" : u.result.message);
  release(u_client, u.result.lock);
}

}  // namespace redlock::cli::demo
