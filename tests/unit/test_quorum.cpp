// Quorum decisions and the validity formula, without servers.
#include <doctest/doctest.h>

#include <tuple>

#include "core/quorum.hpp"

using namespace redlock;
using namespace redlock::detail;
using namespace std::chrono;

TEST_CASE("quorum size is N/2+1") {
  CHECK(quorum_of(1) == 1);
  CHECK(quorum_of(2) == 2);
  CHECK(quorum_of(3) == 2);
  CHECK(quorum_of(4) == 3);
  CHECK(quorum_of(5) == 3);
  CHECK(quorum_of(9) == 5);
}

TEST_CASE("decide: every reachable tally for N = 1..9") {
  for (int n = 1; n <= 9; ++n) {
    const int q = quorum_of(n);
    for (int ok = 0; ok <= n; ++ok) {
      for (int refused = 0; ok + refused <= n; ++refused) {
        for (int failed = 0; ok + refused + failed <= n; ++failed) {
          Tally t{n, ok, refused, failed};
          const int pending = n - ok - refused - failed;
          CAPTURE(n);
          CAPTURE(ok);
          CAPTURE(refused);
          CAPTURE(failed);
          Decision d = decide(t);
          // A failure's reason is settled when refusals alone rule out a quorum, or when the
          // pending answers could not make them do so.
          const bool reason_known = refused > n - q || refused + pending <= n - q;
          if (ok >= q) {
            CHECK(d == Decision::quorum);
          } else if (ok + pending < q && reason_known) {
            CHECK(d == Decision::impossible);
          } else {
            CHECK(d == Decision::undecided);
          }
          // A failure whose reason is still open is out of reach all the same (an attempt that
          // another follows stops waiting for its reason: AcquireOp::watch_attempt).
          CHECK(out_of_reach(t) == (ok + pending < q));
          if (d == Decision::impossible) CHECK(out_of_reach(t));
          // Never undecided once every node answered.
          if (pending == 0) CHECK(d != Decision::undecided);
          // Without failed nodes, a failure is decided as early as a quorum's absence is known.
          if (failed == 0 && ok + pending < q) CHECK(d == Decision::impossible);
          // The reason given at the decision is the one all the answers would have given: the
          // pending answers, whatever they are, cannot change it.
          if (d == Decision::impossible) {
            for (int more_refused = 0; more_refused <= pending; ++more_refused) {
              Tally all{n, ok, refused + more_refused, failed + pending - more_refused};
              CHECK(failure_reason(all, Errc::contended) == failure_reason(t, Errc::contended));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("early decision: success does not wait for stragglers, failure neither") {
  // 5 nodes, 3 OK and 2 pending: decided.
  CHECK(decide(Tally{5, 3, 0, 0}) == Decision::quorum);
  // 5 nodes, 3 failed, 2 pending: impossible already.
  CHECK(decide(Tally{5, 0, 0, 3}) == Decision::impossible);
  // 5 nodes, 2 OK, 2 failed, 1 pending: must wait for the last one.
  CHECK(decide(Tally{5, 2, 0, 2}) == Decision::undecided);
}

TEST_CASE("a failure waits for the answers that decide whether it was held elsewhere") {
  // Held on every live node, two nodes down: after one refusal a quorum is out of reach, but the
  // two pending answers decide between contended and no quorum (they were refusals: contended).
  CHECK(decide(Tally{5, 0, 1, 2}) == Decision::undecided);
  CHECK(decide(Tally{5, 0, 3, 2}) == Decision::impossible);
  CHECK(failure_reason(Tally{5, 0, 3, 2}, Errc::contended) == Errc::contended);
  // One node down, one granted, two refused, one pending: the last answer decides.
  CHECK(decide(Tally{5, 1, 2, 1}) == Decision::undecided);
  CHECK(failure_reason(Tally{5, 1, 3, 1}, Errc::contended) == Errc::contended);
  CHECK(failure_reason(Tally{5, 1, 2, 2}, Errc::contended) == Errc::no_quorum);
  // Failures alone: nothing pending could make refusals rule out a quorum: decided at once.
  CHECK(decide(Tally{5, 0, 0, 3}) == Decision::impossible);
  CHECK(decide(Tally{5, 0, 1, 3}) == Decision::impossible);
  CHECK(failure_reason(Tally{5, 0, 1, 3}, Errc::contended) == Errc::no_quorum);
}

TEST_CASE("failure reason: contended only when refusals alone rule out a quorum") {
  CHECK(failure_reason(Tally{5, 0, 3, 0}, Errc::contended) == Errc::contended);
  CHECK(failure_reason(Tally{5, 2, 3, 0}, Errc::contended) == Errc::contended);
  CHECK(failure_reason(Tally{5, 0, 2, 3}, Errc::contended) == Errc::no_quorum);
  CHECK(failure_reason(Tally{5, 0, 0, 3}, Errc::contended) == Errc::no_quorum);
  CHECK(failure_reason(Tally{1, 0, 1, 0}, Errc::not_held) == Errc::not_held);
}

TEST_CASE("drift is ttl * factor + 2 ms") {
  CHECK(drift(Millis{10000}, 0.01) == microseconds{102000});
  CHECK(drift(Millis{1}, 0.01) == microseconds{2010});
  CHECK(drift(Millis{1000}, 0.0) == microseconds{2000});
}

TEST_CASE("validity = ttl - elapsed - drift, deadline = t1 + ttl - drift") {
  const auto t1 = BootClock::time_point(seconds{1000});
  SUBCASE("typical") {
    auto v = compute_validity(Millis{10000}, 0.01, Millis{0}, t1, t1 + milliseconds{5});
    CHECK(v.validity == microseconds{10000000 - 5000 - 102000});
    CHECK(v.deadline == t1 + milliseconds{10000} - microseconds{102000});
    CHECK(v.ok);
  }
  SUBCASE("validity exactly 0 is a failure") {
    // ttl 100 ms, drift 3 ms, elapsed 97 ms
    auto v = compute_validity(Millis{100}, 0.01, Millis{0}, t1, t1 + milliseconds{97});
    CHECK(v.validity == microseconds{0});
    CHECK_FALSE(v.ok);
  }
  SUBCASE("one microsecond of validity is a success") {
    auto v = compute_validity(Millis{100}, 0.01, Millis{0}, t1, t1 + microseconds{96999});
    CHECK(v.validity == microseconds{1});
    CHECK(v.ok);
  }
  SUBCASE("elapsed is rounded up, never down") {
    auto v = compute_validity(Millis{100}, 0.01, Millis{0}, t1, t1 + nanoseconds{96999001});
    CHECK(v.validity == microseconds{0});
    CHECK_FALSE(v.ok);
  }
  SUBCASE("ttl of 1 ms can never be valid: drift alone exceeds it") {
    auto v = compute_validity(Millis{1}, 0.01, Millis{0}, t1, t1);
    CHECK(v.validity < microseconds{0});
    CHECK_FALSE(v.ok);
  }
  SUBCASE("min_validity is a strict lower bound") {
    auto v = compute_validity(Millis{1000}, 0.0, Millis{500}, t1, t1 + milliseconds{498});
    CHECK(v.validity == microseconds{500000});
    CHECK_FALSE(v.ok);
    v = compute_validity(Millis{1000}, 0.0, Millis{500}, t1, t1 + milliseconds{497});
    CHECK(v.ok);
  }
  SUBCASE("the largest ttl does not overflow") {
    auto v = compute_validity(max_ttl, 0.01, Millis{0}, t1, t1 + milliseconds{3});
    auto expected_drift = duration_cast<microseconds>(max_ttl) / 100 + microseconds{2000};
    CHECK(v.validity == duration_cast<microseconds>(max_ttl) - microseconds{3000} - expected_drift);
    CHECK(v.deadline > t1);
    CHECK(v.deadline < t1 + max_ttl);
    CHECK(v.ok);
  }
  SUBCASE("local deadline never later than the nodes' expiry") {
    for (long long ttl : {1LL, 2LL, 3LL, 50LL, 1000LL, 30000LL}) {
      auto v = compute_validity(Millis{ttl}, 0.01, Millis{0}, t1, t1);
      CHECK(v.deadline < t1 + Millis{ttl});
    }
  }
  SUBCASE("a clock that went backwards counts as zero elapsed, not as extra validity") {
    auto v = compute_validity(Millis{1000}, 0.0, Millis{0}, t1, t1 - milliseconds{50});
    CHECK(v.validity == microseconds{1000000 - 2000});
  }
}

TEST_CASE("validity_used_up_at: the first instant at which a grant is no longer a lock") {
  const auto t1 = BootClock::time_point(seconds{1000});
  for (const auto& [ttl, factor, min] :
       {std::tuple{Millis{100}, 0.01, Millis{0}}, std::tuple{Millis{10000}, 0.01, Millis{0}},
        std::tuple{Millis{1000}, 0.0, Millis{500}}, std::tuple{Millis{300}, 0.05, Millis{20}}}) {
    CAPTURE(ttl.count());
    const auto at = validity_used_up_at(ttl, factor, min, t1);
    CHECK_FALSE(compute_validity(ttl, factor, min, t1, at).ok);
    CHECK_FALSE(compute_validity(ttl, factor, min, t1, at + microseconds{1}).ok);
    CHECK(compute_validity(ttl, factor, min, t1, at - microseconds{1}).ok);
  }
  // ttl 100 ms, drift 3 ms: at 97 ms (the "validity exactly 0" case above).
  CHECK(validity_used_up_at(Millis{100}, 0.01, Millis{0}, t1) == t1 + milliseconds{97});
  // A ttl below the drift is used up before it starts.
  CHECK(validity_used_up_at(Millis{1}, 0.01, Millis{0}, t1) < t1);
  // The largest ttl does not overflow.
  CHECK(validity_used_up_at(max_ttl, 0.01, Millis{0}, t1) > t1);
}

TEST_CASE("counter max: a write-back is needed unless a quorum returned the maximum") {
  CounterMax c;
  CHECK(c.value() == 0);
  CHECK_FALSE(c.on_quorum(5));  // nothing heard
  c.add(7);
  c.add(7);
  CHECK_FALSE(c.on_quorum(5));  // 2 of 5
  c.add(7);
  CHECK(c.value() == 7);
  CHECK(c.on_quorum(5));  // 3 of 5 stand at 7
  c.add(9);               // a node ahead of the others: only it stands at the maximum
  CHECK(c.value() == 9);
  CHECK_FALSE(c.on_quorum(5));
  c.add(8);  // below the maximum: counts for nothing
  c.add(9);
  c.add(9);
  CHECK(c.on_quorum(5));
  CHECK(c.on_quorum(1));
  c.reset();
  CHECK(c.value() == 0);
  CHECK_FALSE(c.on_quorum(1));
  c.add(3);
  CHECK(c.on_quorum(1));
  CHECK_FALSE(c.on_quorum(2));
}

TEST_CASE("a failure's counts say 'at least' where answers were still pending") {
  CHECK(at_least(Tally{5, 0, 3, 0}) == "at least ");  // two answers not in yet
  CHECK(at_least(Tally{5, 0, 5, 0}).empty());
  CHECK(at_least(Tally{5, 1, 2, 2}).empty());
}
