// Leader election (redlock/election.hpp) over Sentinel votes (redis+sentinel://, real sentinels
// from SentinelFixture): a leader elected, a follower's leader() agreeing, and a failover of the
// master under the leader in a majority of the votes, with its keys lost on the promoted replicas:
// the leader keeps or loses its leadership, but never leads beside another candidate (the
// promoted votes wait out the restart quarantine), and the next leader's term is higher.
#include <algorithm>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"
#include "redlock/keys.hpp"
#include "sentinel_fixture.hpp"

using namespace itest;
using namespace redlock;
using redlock::test::SentinelConfig;
using redlock::test::SentinelFixture;

namespace {

// "redis+sentinel://first/name?sentinel=second&sentinel=third", one per master name.
std::string sentinel_votes(const SentinelFixture& f, const std::vector<std::string>& names) {
  const auto all = f.sentinel_addresses();
  std::string csv;
  for (const auto& name : names) {
    csv += (csv.empty() ? "" : ",") + ("redis+sentinel://" + all.at(0) + "/" + name);
    for (std::size_t i = 1; i < all.size(); ++i)
      csv += (i == 1 ? "?sentinel=" : "&sentinel=") + all[i];
  }
  return csv;
}

CampaignOptions campaign_for(Millis ttl, Millis wait) {
  CampaignOptions o;
  o.ttl = ttl;
  o.wait = wait;
  return o;
}

}  // namespace

TEST_CASE(
    "election over Sentinel votes: a failover under the leader (keys lost on the promoted "
    "replica) never gives a second leader, and the next term is higher") {
  const std::vector<std::string> names = {"m1", "m2", "m3"};
  SentinelConfig sc;
  sc.master_names = names;
  sc.replicas = 1;
  sc.sentinels = 3;
  SentinelFixture f(sc);
  auto opts = options_for(sentinel_votes(f, names));
  opts.node_timeout = 200ms;  // a sentinel vote's first answer waits for the master's handshake
  opts.connect_timeout = 500ms;
  opts.reconnect_max = 100ms;
  opts.retry_delay = 100ms;
  opts.retry_jitter = 50ms;
  opts.restart_quarantine = 4s;  // above the ttl: a lost key of the leader's has expired by then
  Client leader_client(opts), follower_client(opts);
  Election mine(leader_client, "sv-leader"), theirs(follower_client, "sv-leader");

  auto leadership = mine.campaign("host-a", campaign_for(3s, 20s));
  REQUIRE(leadership.is_leader());
  LeaderResult seen;
  REQUIRE(eventually([&] {  // the follower's three votes connect through the sentinels first
    seen = theirs.leader();
    return !seen.error && seen.leader.has_value();
  }));
  CHECK(seen.leader->id == "host-a");
  CHECK(seen.leader->term == leadership.term());

  // The follower campaigns; it may be elected only once nobody else leads.
  auto waiting = std::async(std::launch::async,
                            [&] { return theirs.try_campaign("host-b", campaign_for(3s, 40s)); });
  std::this_thread::sleep_for(300ms);

  // m1 and m2, a majority, fail over under the leader, and their promoted replicas lost the
  // leader's keys (the lock key and the record). Without the restart quarantine the follower
  // would be elected by them at once, while the leader's validity lasts.
  const std::string record = derived_key("sv-leader", KeyRole::leader);
  for (const char* name : {"m1", "m2"}) {
    f.failover(name);
    f.delete_on_master(name, "sv-leader");
    f.delete_on_master(name, record);
  }

  // For 2.5 ttl after that (the leader keeps extending on m3 only, and loses its quorum): whenever
  // the follower has been elected, the old leader must not think it still leads (is_leader() read
  // after the follower's campaign returned).
  bool follower_elected = false, both_led = false, kept = true;
  const auto watch_until = Clock::now() + 7500ms;
  while (Clock::now() < watch_until) {
    const bool b_done = waiting.wait_for(0s) == std::future_status::ready;
    const bool a_leads = leadership.is_leader();
    if (!a_leads) kept = false;
    if (b_done && a_leads) both_led = true;
    follower_elected = b_done;
    std::this_thread::sleep_for(10ms);
  }
  CHECK_FALSE(both_led);
  MESSAGE("the old leader's leadership was "
          << std::string(kept ? "kept across the failovers" : "lost") << "; the follower was "
          << std::string(follower_elected ? "elected meanwhile" : "still waiting"));

  const auto old_term = leadership.term();
  leadership.resign();
  auto [next, r] = waiting.get();
  REQUIRE_MESSAGE(r, r.message);
  CHECK(next.id() == "host-b");
  CHECK(next.term() > old_term);
  auto now = mine.leader();
  REQUIRE_MESSAGE(!now.error, now.message);
  REQUIRE(now.leader);
  CHECK(now.leader->id == "host-b");
  CHECK(now.leader->term == next.term());
  next.resign();
}
