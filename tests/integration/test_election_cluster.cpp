// Leader election (redlock/election.hpp) over Redis Cluster votes (redis+cluster://, real clusters
// from ClusterFixture): a leader elected, a follower's leader() agreeing with the leader's own
// view, and a resign handing over to a waiting candidate with a higher term. The leader's record
// lives beside the lock key, in its slot, on the master that owns it in each cluster.
#include <future>
#include <string>
#include <thread>

#include "cluster_fixture.hpp"
#include "common.hpp"
#include "redlock/keys.hpp"

using namespace itest;
using namespace redlock;
using redlock::test::ClusterConfig;
using redlock::test::ClusterFixture;

namespace {

Options cluster_election_options(const std::string& csv) {
  Options o = options_for(csv);
  o.node_timeout = 500ms;  // a vote's first answer waits for the slot map and a handshake
  o.connect_timeout = 500ms;
  o.retry_delay = 100ms;
  o.retry_jitter = 50ms;
  return o;
}

ClusterConfig three_masters() {
  ClusterConfig cc;
  cc.masters = 3;
  return cc;
}

CampaignOptions campaign_for(Millis ttl, Millis wait) {
  CampaignOptions o;
  o.ttl = ttl;
  o.wait = wait;
  return o;
}

// The string value of `key` on the master of `c` that owns its slot ("" when absent).
std::string on_owner(const ClusterFixture& c, const std::vector<std::string>& cmd,
                     const std::string& key) {
  const auto r = c.node(c.owner_of_key(key)).command(cmd);
  return r.type == redlock::test::Reply::Type::string ? r.str : std::string();
}

}  // namespace

TEST_CASE("election over cluster votes: a leader, a follower that agrees, a resign hands over") {
  ClusterFixture c0(three_masters()), c1(three_masters()), c2(three_masters());
  const std::vector<const ClusterFixture*> all = {&c0, &c1, &c2};
  const std::string csv = "redis+cluster://" + c0.seed_address() + ",redis+cluster://" +
                          c1.seed_address() + ",redis+cluster://" + c2.seed_address();
  Client leader_client(cluster_election_options(csv)),
      follower_client(cluster_election_options(csv));
  Election mine(leader_client, "cv-leader"), theirs(follower_client, "cv-leader");

  auto leadership = mine.campaign("host-a:8080", campaign_for(10s, 20s));
  REQUIRE(leadership.is_leader());
  // The lock key and the record, on the owner of the key's slot in every cluster.
  const std::string record = derived_key("cv-leader", KeyRole::leader);
  // (Decided at two of three clusters: the third's may still be on their way.)
  for (const auto* c : all) {
    CHECK(c->key_slot(record) == c->key_slot("cv-leader"));
    CHECK(eventually([&] {
      return on_owner(*c, {"GET", "cv-leader"}, "cv-leader") == leadership.lock().token() &&
             on_owner(*c, {"HGET", record, "id"}, record) == "host-a:8080";
    }));
  }

  auto seen = theirs.leader();
  REQUIRE_MESSAGE(!seen.error, seen.message);
  REQUIRE(seen.leader);
  CHECK(seen.leader->id == "host-a:8080");
  CHECK(seen.leader->term == leadership.term());
  CHECK(seen.answered == 3);

  // A follower campaigns meanwhile; it is elected only after the resign, with a higher term.
  auto waiting = std::async(std::launch::async, [&] {
    return theirs.try_campaign("host-b:8080", campaign_for(10s, 30s));
  });
  std::this_thread::sleep_for(500ms);
  CHECK(waiting.wait_for(0s) == std::future_status::timeout);  // a leads: b waits
  const auto old_term = leadership.term();
  CHECK(leadership.resign().deleted == 3);
  CHECK_FALSE(leadership.is_leader());
  auto [next, r] = waiting.get();
  REQUIRE_MESSAGE(r, r.message);
  CHECK(next.id() == "host-b:8080");
  CHECK(next.term() > old_term);

  // The former leader now reads the new one, as the new one sees itself.
  auto now = mine.leader();
  REQUIRE(now.leader);
  CHECK(now.leader->id == "host-b:8080");
  CHECK(now.leader->term == next.term());

  next.resign();
  auto nobody = mine.leader();
  CHECK_FALSE(nobody.error);
  CHECK_FALSE(nobody.leader);
  for (const auto* c : all) {
    for (auto m : c->masters()) {
      CHECK(c->node(m).command({"EXISTS", "cv-leader", record}).integer == 0);
    }
  }
}
