// How many attempts one acquisition makes (engine/attempt_budget.hpp), without servers: a count
// of retries, a wait whose last attempt is at its end, and the timer that fires a fraction of a
// millisecond early. The whole acquisition against real servers: test_acquire.cpp ("a wait shorter
// than the retry delay", "retries: ...").
#include <doctest/doctest.h>

#include "engine/attempt_budget.hpp"

using redlock::AttemptBudget;
using redlock::BootClock;
using redlock::Millis;
using namespace std::chrono_literals;

TEST_CASE("attempt budget: a count of retries, whatever the time") {
  const auto t = BootClock::time_point{} + 1h;
  AttemptBudget b(2, std::nullopt);
  REQUIRE(b.more_tries(t));
  CHECK(b.sleep_before_next(t, 200ms) == 200ms);  // never cut: there is no end to cut it to
  REQUIRE(b.more_tries(t + 10h));
  CHECK(b.sleep_before_next(t, 200ms) == 200ms);
  CHECK_FALSE(b.more_tries(t));  // 1 + 2 attempts made
  CHECK_FALSE(AttemptBudget(0, std::nullopt).more_tries(t));
}

TEST_CASE("attempt budget: a wait, the last attempt at its end") {
  const auto start = BootClock::time_point{} + 1h;
  AttemptBudget b(0, start + 2500ms);  // the count is not used with a wait
  // Attempts at 0, 1 s and 2 s sleep the retry delay; the one after 2 s sleeps to the end.
  for (const auto failed_at : {start + 5ms, start + 1005ms}) {
    REQUIRE(b.more_tries(failed_at));
    CHECK(b.sleep_before_next(failed_at, 1s) == 1s);
  }
  REQUIRE(b.more_tries(start + 2005ms));
  CHECK(b.sleep_before_next(start + 2005ms, 1s) == 495ms);
  SUBCASE("the attempt at the end is the last, even when its timer fired early") {
    // The timer counts whole milliseconds: the attempt started (and failed) just before the end.
    CHECK_FALSE(b.more_tries(start + 2500ms - 300us));
    CHECK_FALSE(b.more_tries(start + 2501ms));
  }
  SUBCASE("a wake-up that ends that sleep early leaves the end's attempt to come") {
    b.woken_early();
    REQUIRE(b.more_tries(start + 2100ms));
    CHECK(b.sleep_before_next(start + 2100ms, 1s) == 400ms);
    CHECK_FALSE(b.more_tries(start + 2500ms - 300us));
  }
  SUBCASE("a sleep shorter than what is left is not cut, and is not the last") {
    AttemptBudget c(0, start + 2500ms);
    REQUIRE(c.more_tries(start + 2005ms));
    CHECK(c.sleep_before_next(start + 2005ms, 100ms) == 100ms);
    CHECK(c.more_tries(start + 2106ms));
  }
}

TEST_CASE("attempt budget: a wait that has ended allows no attempt more") {
  const auto start = BootClock::time_point{} + 1h;
  AttemptBudget b(5, start + 100ms);
  CHECK(b.more_tries(start + 99ms));
  CHECK_FALSE(b.more_tries(start + 100ms));
  CHECK_FALSE(b.more_tries(start + 1s));
  // A partial millisecond left rounds up: the sleep reaches the end, never stops short of it.
  CHECK(b.sleep_before_next(start + 99ms + 400us, 1s) == 1ms);
}
