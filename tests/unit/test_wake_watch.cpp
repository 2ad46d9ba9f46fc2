// The wake-up watch of one acquisition (engine/wake_watch.hpp), without servers: which words
// from the nodes may end a sleep, and when. The behaviour against real servers (storms, forged
// messages, fair handoffs) is in tests/integration/test_wake.cpp.
#include <doctest/doctest.h>

#include <string>

#include "engine/wake_watch.hpp"

using redlock::WakeWatch;
using redlock::net::Wake;
using Go = WakeWatch::Go;

namespace {

constexpr int nodes = 5;
constexpr int quorum = 3;
const std::string me = "waiter-me";
const std::string release_a(40, 'a');
const std::string release_b(40, 'b');

Wake freed() { return {Wake::Why::released, "#2", {}}; }
Wake gone() { return {Wake::Why::key_gone, {}, {}}; }
Wake subscribed() { return {Wake::Why::listening, {}, {}}; }
Wake named(const std::string& waiter, const std::string& release) {
  return {Wake::Why::released, waiter, release};
}

// A watch asleep after a round that failed as `contended` says.
WakeWatch asleep(bool contended, bool queued = false, bool named_kind = false) {
  WakeWatch w(queued, named_kind);
  (void)w.round_failed(contended);
  w.sleep_begins(nodes);
  return w;
}

}  // namespace

TEST_CASE("wake watch: a quorum of releases ends a sleep after contention, once, after a spread") {
  auto w = asleep(true);
  CHECK(w.heard(0, freed(), me, true, quorum) == Go::not_yet);
  CHECK(w.heard(0, freed(), me, true, quorum) == Go::not_yet);  // one node counts once
  CHECK(w.heard(1, gone(), me, true, quorum) == Go::not_yet);
  CHECK(w.heard(2, freed(), me, true, quorum) == Go::after_spread);
  CHECK(w.heard(3, freed(), me, true, quorum) == Go::not_yet);  // once per sleep
  // The next sleep counts again from nothing.
  (void)w.round_failed(true);
  w.sleep_begins(nodes);
  CHECK(w.heard(3, freed(), me, true, quorum) == Go::not_yet);
  CHECK(w.heard(4, freed(), me, true, quorum) == Go::not_yet);
  CHECK(w.heard(0, freed(), me, true, quorum) == Go::after_spread);
}

TEST_CASE("wake watch: after no quorum nothing heard ends the sleep (no retry storm)") {
  // Votes excluded or nodes down: a release says nothing that undoes that (algorithm.md,
  // hazard 12); the sleep lasts the retry delay.
  auto w = asleep(false, false, true);
  for (int n = 0; n < nodes; ++n) {
    CHECK(w.heard(n, freed(), me, true, quorum) == Go::not_yet);
    CHECK(w.heard(n, subscribed(), me, true, quorum) == Go::not_yet);
    CHECK(w.heard(n, named(me, release_a), me, true, quorum) == Go::not_yet);
  }
  CHECK_FALSE(w.retry_is_named());
}

TEST_CASE("wake watch: names go at once, only from one release on a quorum, only ours") {
  auto w = asleep(true, false, true);
  CHECK(w.heard(0, named("someone-else", release_a), me, true, quorum) == Go::not_yet);
  CHECK_FALSE(w.named_since_marked());
  CHECK(w.heard(0, named(me, release_a), me, true, quorum) == Go::not_yet);
  CHECK(w.named_since_marked());  // the release took us off the mark
  CHECK(w.heard(1, named(me, release_b), me, true, quorum) == Go::not_yet);
  CHECK(w.heard(2, named(me, release_b), me, true, quorum) == Go::not_yet);
  // Two releases, each named us on two nodes: no quorum of one release yet.
  CHECK(w.heard(3, named(me, release_a), me, true, quorum) == Go::not_yet);
  CHECK(w.heard(4, named(me, release_a), me, true, quorum) == Go::now);
  CHECK(w.retry_is_named());  // the retry goes as the first in line
  const auto now = redlock::BootClock::now();
  CHECK(w.mark_due(now, redlock::Millis{100}));  // named: written again before the next sleep
  w.marked(now + redlock::Millis{2000});
  CHECK_FALSE(w.named_since_marked());
  CHECK_FALSE(w.mark_due(now, redlock::Millis{1000}));
  CHECK(w.mark_due(now, redlock::Millis{1600}));  // it could lapse during that sleep
  // Without an id of ours, nothing names us.
  auto anonymous = asleep(true);
  for (int n = 0; n < nodes; ++n)
    CHECK(anonymous.heard(n, named(me, release_a), "", true, quorum) == Go::not_yet);
}

TEST_CASE("wake watch: named while a round was out: at once again after a contended failure") {
  WakeWatch w(true, true);
  // An attempt is out (not sleeping): a release names us on one node.
  CHECK(w.heard(0, named(me, release_a), me, false, quorum) == Go::not_yet);
  auto out = w.round_failed(true);
  CHECK(out.named);
  w.sleep_begins(nodes);
  CHECK(w.retry_is_named());
  CHECK_FALSE(w.retry_is_named());  // said once
  // The same after a failure of no quorum: it waits the retry delay.
  WakeWatch v(true, true);
  CHECK(v.heard(0, named(me, release_a), me, false, quorum) == Go::not_yet);
  CHECK_FALSE(v.round_failed(false).named);
  // A name that started the attempt does not count again; a later release's quorum does.
  auto u = asleep(true, true, true);
  for (int n = 0; n < quorum - 1; ++n)
    CHECK(u.heard(n, named(me, release_a), me, true, quorum) == Go::not_yet);
  CHECK(u.heard(quorum - 1, named(me, release_a), me, true, quorum) == Go::now);
  CHECK(u.retry_is_named());
  CHECK_FALSE(u.round_failed(true).named);  // the attempt it started lost: nothing new
  u.sleep_begins(nodes);
  auto t = asleep(true, true, true);
  for (int n = 0; n < quorum; ++n) (void)t.heard(n, named(me, release_a), me, true, quorum);
  for (int n = 0; n < quorum; ++n)
    CHECK(t.heard(n, named(me, release_b), me, false, quorum) == Go::not_yet);
  CHECK(t.round_failed(true).named);  // release b reached a quorum while the attempt was out
}

TEST_CASE("wake watch: a fair waiter ignores deletions and catches up after a resubscription") {
  auto w = asleep(true, true, true);
  for (int n = 0; n < nodes; ++n) CHECK(w.heard(n, gone(), me, true, quorum) == Go::not_yet);
  // Subscriptions are counted apart from releases: a quorum of them ends the sleep.
  CHECK(w.heard(0, subscribed(), me, true, quorum) == Go::not_yet);
  CHECK(w.heard(1, freed(), me, true, quorum) == Go::not_yet);
  CHECK(w.heard(2, subscribed(), me, true, quorum) == Go::not_yet);
  CHECK(w.heard(3, subscribed(), me, true, quorum) == Go::after_spread);
  // (Re)subscribed while its ticket round was out: one more try at once if that round fails.
  WakeWatch fair(true, true);
  CHECK(fair.heard(0, subscribed(), me, false, quorum) == Go::not_yet);
  CHECK(fair.round_failed(true).resubscribed);
  CHECK_FALSE(fair.round_failed(true).resubscribed);
  // Not for a lock that has no queue.
  WakeWatch plain(false, false);
  CHECK(plain.heard(0, subscribed(), me, false, quorum) == Go::not_yet);
  CHECK_FALSE(plain.round_failed(true).resubscribed);
}
