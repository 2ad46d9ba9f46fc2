// When an undecided attempt stops waiting for its answers (engine/attempt_deadlines.hpp), without
// servers. Against real servers with paused nodes: test_faults.cpp ("an attempt whose validity is
// used up ...", "a failed attempt gives a paused node's answer the retry delay ...", "the last
// attempt waits ...").
#include <doctest/doctest.h>

#include "engine/attempt_deadlines.hpp"

using redlock::AttemptDeadlines;
using redlock::BootClock;
using namespace std::chrono_literals;
using Step = AttemptDeadlines::Step;

namespace {
const auto t1 = BootClock::time_point{} + 1h;
}

TEST_CASE("attempt deadlines: answers due before the validity ends need no timer") {
  AttemptDeadlines d;
  d.begin(t1 + 9898ms, t1 + 50ms + 250ms);  // ttl 10 s, node_timeout 50 ms, connect 250 ms
  CHECK(d.idle(true));
  const auto next = d.at(t1 + 10ms, true, true, 200ms);
  CHECK(next.step == Step::wait);
  CHECK_FALSE(next.ask_again);
  // Even long after (a grant then is judged by its validity when the quorum decides it).
  CHECK(d.at(t1 + 1h, true, true, 200ms).step == Step::wait);
}

TEST_CASE("attempt deadlines: an attempt still in reach fails as expired when its validity ends") {
  AttemptDeadlines d;
  const auto gone = t1 + 493ms;  // ttl 500 ms
  d.begin(gone, t1 + 20s);       // node_timeout 20 s
  CHECK_FALSE(d.idle(true));
  auto next = d.at(t1 + 1ms, true, true, 50ms);
  CHECK(next.step == Step::wait);
  CHECK(next.ask_again == gone);
  next = d.at(gone - 1us, true, true, 50ms);  // a timer that fired early: not yet
  CHECK(next.step == Step::wait);
  CHECK(next.ask_again == gone);
  CHECK(d.at(gone, true, true, 50ms).step == Step::expired);
  CHECK(d.at(gone, true, false, 50ms).step == Step::expired);  // the last attempt too
  // A new attempt starts afresh.
  d.begin(t1 + 10s, t1 + 50ms);
  CHECK(d.idle(true));
}

TEST_CASE(
    "attempt deadlines: out of reach, the reason gets the retry delay while a retry follows") {
  AttemptDeadlines d;
  d.begin(t1 + 9898ms, t1 + 2s);  // ttl 10 s, node_timeout 2 s: answers before the validity ends
  CHECK_FALSE(d.idle(false));     // out of reach: never idle
  const auto out = t1 + 5ms;      // the answer that put it out of reach
  auto next = d.at(out, false, true, 50ms);
  CHECK(next.step == Step::wait);
  CHECK(next.ask_again == out + 50ms);
  // Later answers do not move that on.
  next = d.at(out + 20ms, false, true, 50ms);
  CHECK(next.ask_again == out + 50ms);
  CHECK(d.at(out + 50ms, false, true, 50ms).step == Step::failed);
  // The validity plays no part once it cannot win.
  d.begin(t1 + 100ms, t1 + 20s);
  CHECK(d.at(t1 + 1s, false, true, 5s).step == Step::wait);
}

TEST_CASE("attempt deadlines: the last attempt waits for the answers that tell why it failed") {
  // Waiting for them with no time of its own to ask again: until they come (their deadlines).
  const auto until_they_come = [](const AttemptDeadlines::Next& n) {
    return n.step == Step::wait && !n.ask_again;
  };
  AttemptDeadlines d;
  d.begin(t1 + 9898ms, t1 + 5s);
  SUBCASE("no retry follows when it falls out of reach") {
    CHECK(until_they_come(d.at(t1 + 5ms, false, false, 100ms)));
  }
  SUBCASE("the wait ends while the reason has the retry delay") {
    CHECK(d.at(t1 + 5ms, false, true, 100ms).ask_again == t1 + 105ms);
    CHECK(until_they_come(d.at(t1 + 105ms, false, false, 100ms)));  // due: no retry follows now
  }
  // Not even if a retry would follow later (it does not: a budget only shrinks).
  CHECK(until_they_come(d.at(t1 + 2s, false, true, 100ms)));
}

TEST_CASE("attempt deadlines: a zero retry delay fails the attempt at its next look") {
  AttemptDeadlines d;
  d.begin(t1 + 9898ms, t1 + 5s);
  auto next = d.at(t1 + 5ms, false, true, 0ms);
  CHECK(next.step == Step::wait);
  CHECK(next.ask_again == t1 + 5ms);
  CHECK(d.at(t1 + 5ms, false, true, 0ms).step == Step::failed);
}
