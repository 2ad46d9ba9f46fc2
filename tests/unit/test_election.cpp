// Leader election without a server: the leader kind's commands, the identity checks, and what a
// quorum of leader reads says (core/election.hpp).
#include <doctest/doctest.h>

#include "core/election.hpp"
#include "core/keys.hpp"
#include "core/kinds.hpp"
#include "core/scripts.hpp"
#include "redlock/fencing.hpp"

using namespace redlock;
using namespace redlock::detail;
using namespace std::chrono_literals;

namespace {

Reply integer(long long v) { return Reply{Reply::Type::integer, v, {}, {}}; }
Reply bulk(std::string s) { return Reply{Reply::Type::string, 0, std::move(s), {}}; }
Reply nil() { return Reply{}; }
Reply array(std::vector<Reply> e) { return Reply{Reply::Type::array, 0, {}, std::move(e)}; }

AcquireOptions leader_opts(std::string id = "node-a") {
  AcquireOptions o;
  o.mode = LockMode::leader;
  o.identity = std::move(id);
  return o;
}

// A node's row: lock key `value`, record (token, term, id), pttl and since.
LeaderRow row(std::string value, std::string token, std::uint64_t term, std::string id = "a",
              long long pttl = 9000, long long since = 100) {
  LeaderRow r;
  r.answered = true;
  r.lock_value = std::move(value);
  r.token = std::move(token);
  r.term = term;
  r.id = std::move(id);
  r.pttl = Millis{pttl};
  r.since = Millis{since};
  return r;
}

LeaderRow silent() { return LeaderRow{}; }

LeaderRow empty_node() {
  LeaderRow r;
  r.answered = true;
  return r;
}

}  // namespace

TEST_CASE("the leader kind: plain lock key, record beside it, fenced, and always settled") {
  const auto& k = kind_for_acquire(leader_opts(), 1);
  CHECK(k.name() == "leader");
  CHECK(k.fenced());
  CHECK(k.always_writes_back());
  CHECK(k.named_wake());
  CHECK(&kind_for_lock(LockMode::leader, 1) == &k);  // a held leader extends and releases so
  std::vector<std::string> keys{"svc"};
  AttemptArgs a{keys, "tok", 15000ms};
  a.identity = "host-1";
  const auto acq = k.acquire(a);
  CHECK(acq.script == ScriptId::acquire_leader);
  CHECK(acq.args ==
        std::vector<std::string>{"svc", keys::fence("svc"), keys::leader("svc"), "tok", "15000",
                                 std::to_string(fence_counter_idle_expiry.count()), "host-1"});
  // The record lives and dies with the lock: extended by the same script, deleted by the release
  // (and by an attempt's rollback, which wakes nobody).
  const auto ext = k.extend(keys, "tok", 9000ms);
  CHECK(ext.script == ScriptId::extend_leader);
  CHECK(ext.args == std::vector<std::string>{"svc", keys::leader("svc"), "tok", "9000"});
  const auto rollback = k.rollback(a);
  CHECK(rollback.script == ScriptId::release_leader);
  CHECK(rollback.args == std::vector<std::string>{"svc", keys::leader("svc"), "tok"});
  const auto rel = k.release(keys, "tok", true);
  CHECK(rel.script == ScriptId::release_leader);
  CHECK(rel.args == std::vector<std::string>{"svc", keys::leader("svc"), keys::waiting("svc"),
                                             "tok", keys::wake(keys::leader("svc")),
                                             keys::wake("svc")});
  // The write-back settles the agreed term where the lock key still carries the token.
  const auto settle = k.fence_writeback("svc", 42, "tok");
  CHECK(settle.script == ScriptId::settle_leader);
  CHECK(settle.args[0] == keys::fence("svc"));
  CHECK(settle.args[3] == "42");
  CHECK(settle.args[5] == "tok");
  CHECK(k.classify_fence_writeback(integer(1)).vote == Vote::yes);
  CHECK(k.classify_fence_writeback(integer(0)).vote == Vote::no);
  CHECK(k.classify_fence_writeback(integer(0)).state == NodeState::not_held);
  CHECK(k.classify_fence_writeback(bulk("1")).vote == Vote::failed);
  // A plain fenced lock's write-back is the counter raise alone, and skipped when it can be.
  AcquireOptions fence_opts;
  fence_opts.fence = true;
  const auto& fenced = kind_for_acquire(fence_opts, 1);
  CHECK_FALSE(fenced.always_writes_back());
  CHECK(fenced.fence_writeback("svc", 42, "tok").script == ScriptId::fence_raise);
  // The record key is derived (no resource can be it) and shares the lock key's slot.
  CHECK(keys::leader("svc") == "{svc}:redlock:leader:svc");
  CHECK(is_derived_key(keys::leader("svc")));
  CHECK(hash_slot(keys::leader("a}b")) == hash_slot("a}b"));
  CHECK(safe_to_run_late(ScriptId::settle_leader));
  CHECK_FALSE(safe_to_run_late(ScriptId::acquire_leader));
}

TEST_CASE("identity: 1 to 256 bytes, no control characters; errors name the value") {
  CHECK_FALSE(check_identity("node-a"));
  CHECK_FALSE(check_identity("10.0.0.5:8080"));
  CHECK_FALSE(check_identity("pod-é"));
  CHECK_FALSE(check_identity(std::string(256, 'x')));
  CHECK(check_identity("").value() == "identity is empty");
  const auto big = check_identity(std::string(257, 'y')).value();
  CHECK(big.find("257 bytes") != std::string::npos);
  CHECK(big.find("yyyy") != std::string::npos);
  const auto ctl = check_identity("a\nb").value();
  CHECK(ctl == "identity 'a\\x0ab' has a control character");
  CHECK(check_identity(std::string("a\0b", 3)));
  CHECK(check_identity("tab\there"));
  // check_acquire: only the leader mode takes an identity; an election takes one name.
  CHECK_FALSE(check_acquire({"svc"}, leader_opts()));
  CHECK(check_acquire({"svc"}, leader_opts("")).value() == "identity is empty");
  CHECK(check_acquire({"a", "b"}, leader_opts()).value() == "an election takes one name");
  auto fenced = leader_opts();
  fenced.fence = true;
  CHECK(check_acquire({"svc"}, fenced));
  AcquireOptions plain;
  plain.identity = "x";
  CHECK(check_acquire({"svc"}, plain).value().find("LockMode::leader") != std::string::npos);
  // A name that collides with a derived key is refused as any resource is.
  CHECK(check_acquire({keys::leader("svc")}, leader_opts()));
}

TEST_CASE("a leader read: one node's reply") {
  const auto r = classify_leader(
      array({bulk("tok"), integer(4000), bulk("tok"), bulk("7"), integer(1234), bulk("host-1")}));
  CHECK(r.answered);
  CHECK(r.lock_value == "tok");
  CHECK(r.pttl == Millis{4000});
  CHECK(r.token == "tok");
  CHECK(r.term == 7);
  CHECK(r.since == Millis{1234});
  CHECK(r.id == "host-1");
  const auto none = classify_leader(array({nil(), integer(-2), nil(), nil(), nil(), nil()}));
  CHECK(none.answered);
  CHECK_FALSE(none.lock_value);
  CHECK_FALSE(none.pttl);
  CHECK(none.term == 0);
  // Hostile or foreign shapes: not an answer; numbers out of range are unknown.
  CHECK_FALSE(classify_leader(integer(1)).answered);
  CHECK_FALSE(classify_leader(array({nil()})).answered);
  const auto odd = classify_leader(
      array({bulk("t"), integer(-5), bulk("t"), bulk("-3"), integer(-1), integer(5)}));
  CHECK(odd.term == 0);
  CHECK_FALSE(odd.pttl);
  CHECK_FALSE(odd.since);
  CHECK(odd.id.empty());
  CHECK(classify_leader(array({bulk("t"), integer(1), bulk("t"), bulk("99999999999999999999"),
                               integer(1), bulk("x")}))
            .term == 0);
}

TEST_CASE("who leads: the same token, settled term and id on a quorum") {
  SUBCASE("a quorum of records that carry the lock's token") {
    const auto res =
        decide_leader({row("t1", "t1", 5, "a", 9000, 300), row("t1", "t1", 5, "a", 8000, 200),
                       row("t1", "t1", 5, "a", 7000, 100), silent(), empty_node()});
    REQUIRE_FALSE(res.error);
    REQUIRE(res.leader);
    CHECK(res.leader->id == "a");
    CHECK(res.leader->term == 5);
    CHECK(res.leader->validity == Millis{7000});  // the quorum-th longest
    CHECK(res.leader->since == Millis{100});
    CHECK(res.answered == 4);
  }
  SUBCASE("a record whose lock key is gone or another's does not count") {
    const auto res = decide_leader({row("t1", "t1", 5), row("t1", "t1", 5), row("t2", "t1", 5),
                                    row("", "t1", 5), empty_node()});
    CHECK_FALSE(res.error);
    CHECK_FALSE(res.leader);
  }
  SUBCASE("an unsettled record (term 0) is nobody's leadership yet") {
    const auto res = decide_leader({row("t1", "t1", 0), row("t1", "t1", 0), row("t1", "t1", 0)});
    CHECK_FALSE(res.error);
    CHECK_FALSE(res.leader);
  }
  SUBCASE("records that disagree on the term are no quorum of one leadership") {
    const auto res = decide_leader({row("t1", "t1", 5), row("t1", "t1", 6), row("t1", "t1", 5),
                                    row("t1", "t1", 6), empty_node()});
    CHECK_FALSE(res.leader);
  }
  SUBCASE("too few answers to tell") {
    const auto res =
        decide_leader({row("t1", "t1", 5), row("t1", "t1", 5), silent(), silent(), empty_node()});
    CHECK(res.error == Errc::no_quorum);
    CHECK_FALSE(res.leader);
    CHECK(res.message.find("2 of 5") == std::string::npos);  // 3 answered
    CHECK(res.message.find("3 of 5") != std::string::npos);
  }
  SUBCASE("nobody, when the silent nodes could not make a quorum for anyone") {
    const auto res = decide_leader({empty_node(), empty_node(), empty_node(), silent(), silent()});
    CHECK_FALSE(res.error);
    CHECK_FALSE(res.leader);
  }
}

TEST_CASE("same_leadership: what observe reports a change of") {
  LeaderResult none, unknown, a5, a6, a5_later;
  unknown.error = make_error_code(Errc::no_quorum);
  a5.leader = Leader{"a", 5, Millis{1}, Millis{9000}};
  a5_later.leader = Leader{"a", 5, Millis{500}, Millis{4000}};
  a6.leader = Leader{"a", 6, Millis{1}, Millis{9000}};
  CHECK(same_leadership(none, none));
  CHECK(same_leadership(unknown, unknown));
  CHECK(same_leadership(a5, a5_later));  // extended, read later: the same leadership
  CHECK_FALSE(same_leadership(a5, a6));  // the same id elected again is a new term
  CHECK_FALSE(same_leadership(none, a5));
  CHECK_FALSE(same_leadership(unknown, none));
}
