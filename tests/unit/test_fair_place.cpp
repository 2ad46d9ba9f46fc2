// A fair waiter's place in the queue (engine/fair_place.hpp), without servers: which ticket is
// agreed, which grants of a ticket round count, what a node that answered late is owed, and the
// heartbeat and polling rules. The behaviour against real servers (FIFO order, handoffs, lagging
// counters) is in tests/integration/test_fair*.cpp and test_wake.cpp; the protocol's model in
// spec/fair.pml.
#include <doctest/doctest.h>

#include <vector>

#include "engine/fair_place.hpp"

using redlock::BootClock;
using redlock::FairPlace;
using redlock::Millis;
using redlock::detail::Verdict;
using Owed = FairPlace::Owed;

namespace {

constexpr std::size_t nodes = 5;
constexpr int quorum = 3;

Verdict counted(std::uint64_t n, bool behind = false, bool granted = false) {
  Verdict v;
  v.value = n;
  v.behind = behind;
  v.granted = granted;
  return v;
}

const std::vector<bool> all_answered(nodes, true);

// A ticket round (tag `tag`) decided on nodes 0-2, all counting `ticket`; nodes 3 and 4 have not
// answered.
FairPlace decided_on_three(std::uint32_t tag, std::uint64_t ticket) {
  FairPlace p;
  p.ticket_round_begins(nodes);
  p.ticket_round_sent(tag);
  for (std::size_t i = 0; i < 3; ++i) p.ticket_reply(i, counted(ticket));
  REQUIRE(p.ticket_decided({true, true, true, false, false}).on_quorum);
  return p;
}

}  // namespace

TEST_CASE("fair place: the ticket is the round's maximum; a quorum at it needs no write-back") {
  FairPlace p;
  p.ticket_round_begins(nodes);
  p.ticket_round_sent(7);
  CHECK(p.ticket() == 0);
  p.ticket_reply(0, counted(4));
  p.ticket_reply(1, counted(4));
  p.ticket_reply(2, counted(3));  // this node missed a taker
  p.ticket_reply(3, counted(4));
  std::vector<bool> answered = {true, true, true, true, false};
  const auto a = p.ticket_decided(answered);
  CHECK(p.ticket() == 4);
  REQUIRE(a.on_quorum);
  // Node 2 counted another ticket: told now. Node 4 has not answered: no word yet.
  CHECK(a.agreed == std::vector<bool>{true, true, false, true, true});
  // Node 4 answers late with another count: it is owed the ticket, once.
  CHECK(p.is_ticket_round(7));
  p.late_ticket_reply(4, 5);
  CHECK(p.owed(4, 7, false) == Owed::settle);
  CHECK(p.owed(4, 7, false) == Owed::nothing);
  // A node that had answered before the decision is owed nothing more.
  CHECK(p.owed(2, 7, false) == Owed::nothing);
}

TEST_CASE("fair place: a late node that counted the agreed ticket is owed nothing") {
  FairPlace p = decided_on_three(3, 9);
  p.late_ticket_reply(3, 9);
  CHECK(p.owed(3, 3, false) == Owed::nothing);
  // An answer of another round never settles.
  CHECK(p.owed(4, 2, false) == Owed::nothing);
  // A failure (no count recorded) is owed the ticket: the command may still have run.
  CHECK(p.owed(4, 3, false) == Owed::settle);
}

TEST_CASE("fair place: without a quorum at the maximum the round is written back") {
  FairPlace p;
  p.ticket_round_begins(nodes);
  p.ticket_reply(0, counted(5));
  p.ticket_reply(1, counted(4));
  p.ticket_reply(2, counted(4));
  const auto a = p.ticket_decided(all_answered);
  CHECK(p.ticket() == 5);
  CHECK_FALSE(a.on_quorum);
}

TEST_CASE("fair place: only grants at the agreed ticket count, and only a quorum of them") {
  FairPlace p;
  p.ticket_round_begins(nodes);
  p.ticket_reply(0, counted(6, false, true));
  p.ticket_reply(1, counted(6, false, true));
  p.ticket_reply(2, counted(5, false, true));  // granted at another count: never counted
  p.ticket_reply(3, counted(6));
  (void)p.ticket_decided(all_answered);
  REQUIRE(p.ticket() == 6);
  CHECK_FALSE(p.grants_at_ticket(quorum));  // two count, three needed
  p.ticket_round_begins(nodes);
  for (std::size_t i = 0; i < 3; ++i) p.ticket_reply(i, counted(8, false, true));
  p.ticket_reply(3, counted(8, true));
  (void)p.ticket_decided(all_answered);
  const auto g = p.grants_at_ticket(quorum);
  REQUIRE(g);
  CHECK(*g == std::vector<bool>{true, true, true, false, false});
}

TEST_CASE("fair place: a waiter behind on more nodes than a quorum can spare waits in line") {
  FairPlace p;
  p.ticket_round_begins(nodes);
  p.ticket_reply(0, counted(2, true));
  p.ticket_reply(1, counted(2, true));
  CHECK_FALSE(p.behind_on_too_many(static_cast<int>(nodes)));  // 3 may still grant
  p.ticket_reply(2, counted(2, true));
  CHECK(p.behind_on_too_many(static_cast<int>(nodes)));
  CHECK(p.behind() == 3);
  // A new round forgets it.
  p.ticket_round_begins(nodes);
  CHECK(p.behind() == 0);
  CHECK(p.ticket() == 0);
}

TEST_CASE("fair place: a winning attempt's late nodes are told we left, once, after the end") {
  FairPlace p;
  p.attempt_sent(11);
  p.owe_leave({false, false, false, true, true});
  CHECK(p.owed(3, 11, false) == Owed::nothing);  // not before the acquisition is over
  CHECK(p.owed(3, 11, true) == Owed::leave);
  CHECK(p.owed(3, 11, true) == Owed::nothing);
  CHECK(p.owed(0, 11, true) == Owed::nothing);
  CHECK(p.owed(4, 10, true) == Owed::nothing);  // another round's answer
}

TEST_CASE("fair place: at close every word still owed is taken at once, and only once") {
  FairPlace p = decided_on_three(3, 9);
  CHECK(p.owes_words());
  p.late_ticket_reply(3, 9);
  CHECK(p.owed(3, 3, false) == Owed::nothing);  // node 3 answered: nothing left for it
  p.attempt_sent(4);
  p.owe_leave({false, false, false, false, true});
  const auto w3 = p.take_owed(3);
  CHECK_FALSE(w3.settle);
  CHECK_FALSE(w3.leave);
  // Node 4 answered neither round: told the ticket (its count is unknown) and that we left.
  const auto w4 = p.take_owed(4);
  CHECK(w4.settle);
  CHECK(w4.leave);
  CHECK_FALSE(p.owes_words());
  CHECK(p.owed(4, 3, true) == Owed::nothing);  // its late answers owe nothing more
  CHECK(p.owed(4, 4, true) == Owed::nothing);
  const auto again = p.take_owed(4);
  CHECK_FALSE(again.settle);
  CHECK_FALSE(again.leave);
  CHECK_FALSE(p.take_owed(99).leave);  // a node out of range is owed nothing
}

TEST_CASE("fair place: the heartbeat lapses after its ttl without a quorum's refresh") {
  FairPlace p;
  const auto t = BootClock::now();
  CHECK_FALSE(p.lapsed(t + Millis{60'000}, Millis{2000}));  // never refreshed: no place yet
  p.refreshed(t);
  CHECK_FALSE(p.lapsed(t + Millis{1999}, Millis{2000}));
  CHECK(p.lapsed(t + Millis{2000}, Millis{2000}));
  p.forget_refresh();
  CHECK_FALSE(p.lapsed(t + Millis{5000}, Millis{2000}));
}

TEST_CASE("fair place: polling backs off to 100 ms and a quarter of the heartbeat ttl") {
  FairPlace p;
  CHECK(p.next_poll(Millis{2000}) == Millis{5});
  CHECK(p.next_poll(Millis{2000}) == Millis{10});
  CHECK(p.next_poll(Millis{2000}) == Millis{20});
  CHECK(p.next_poll(Millis{2000}) == Millis{40});
  CHECK(p.next_poll(Millis{2000}) == Millis{80});
  CHECK(p.next_poll(Millis{2000}) == Millis{100});
  CHECK(p.next_poll(Millis{2000}) == Millis{100});
  FairPlace q;
  (void)q.next_poll(Millis{40});
  CHECK(q.next_poll(Millis{40}) == Millis{10});  // heartbeat_ttl / 4
}

TEST_CASE("fair place: each registration is a fresh token for the lock's keys") {
  FairPlace p;
  CHECK(p.registration().empty());
  p.new_registration(1);
  const auto first = p.registration();
  CHECK(first.size() == 40);
  p.new_registration(1);
  CHECK(p.registration() != first);
}
