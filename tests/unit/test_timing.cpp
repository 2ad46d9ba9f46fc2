// How long things wait (core/timing.hpp): the watchdog's schedule, the replicated vote's deadline.
#include <doctest/doctest.h>

#include "core/timing.hpp"

using namespace redlock;
using namespace redlock::detail;
using namespace std::chrono_literals;

namespace {
std::optional<HoldSchedule> schedule(Millis ttl, std::optional<Millis> every = {},
                                     std::optional<Millis> renew = {}) {
  HoldOptions o;
  o.extend_every = every;
  o.renew_deadline = renew;
  OptionsProblem why;
  auto s = hold_schedule(ttl, o, why);
  if (!s) INFO(why.reason);
  CHECK(s.has_value() == why.reason.empty());
  return s;
}
}  // namespace

TEST_CASE("hold schedule: extend at ttl/3, give up at 2/3 of the ttl by default") {
  auto s = schedule(30s);
  REQUIRE(s);
  CHECK(s->extend_every == 10s);
  CHECK(s->renew_deadline == 20s);
  // Halfway between the first extension and the ttl, whatever extend_every is.
  s = schedule(10s, 5s);
  REQUIRE(s);
  CHECK(s->renew_deadline == 7500ms);
  s = schedule(30ms, 29ms);  // at least 1 ms past the first extension: at the ttl here
  REQUIRE(s);
  CHECK(s->renew_deadline == 30ms);
  s = schedule(9s, {}, 4s);
  REQUIRE(s);
  CHECK(s->renew_deadline == 4s);
  CHECK(schedule(9s, {}, 9s));  // at the ttl: give up only at the validity deadline
}

TEST_CASE("hold schedule: unusable values are refused with the value and its field named") {
  HoldOptions o;
  OptionsProblem why;
  o.extend_every = 3s;
  CHECK_FALSE(hold_schedule(3s, o, why));
  CHECK(why.field == "extend_every");
  CHECK(why.reason.find("extend_every must be positive and below the ttl (3000 ms), got 3000 ms") !=
        std::string::npos);
  o.extend_every = 1s;
  o.renew_deadline = 1s;
  CHECK_FALSE(hold_schedule(3s, o, why));
  CHECK(why.field == "renew_deadline");
  CHECK(why.reason.find("renew_deadline must be above extend_every (1000 ms) and at most the ttl "
                        "(3000 ms), got 1000 ms") != std::string::npos);
  o.renew_deadline = 3001ms;
  CHECK_FALSE(hold_schedule(3s, o, why));
  o.extend_every.reset();
  o.renew_deadline.reset();
  CHECK_FALSE(hold_schedule(2ms, o, why));  // ttl/3 is 0
  CHECK(why.field == "extend_every");
  // The run rule (redlock-cli run, elect, any auto-extended hold) is core's: the ttl is named.
  o.auto_extend = true;
  CHECK_FALSE(hold_schedule(29ms, o, why));
  CHECK(why.field == "ttl");
  CHECK(why.reason == "a ttl of 29 ms is too short to be extended (at least 30 ms)");
  CHECK(hold_schedule(30ms, o, why));
  CHECK(find_hold_problem(29ms, o)->reason == why.reason);
  CHECK_FALSE(find_hold_problem(30ms, o));
}

TEST_CASE("replicated votes: per vote, and a deadline that covers WAIT and the server's tick") {
  Options o;
  NodeAddress plain, own;
  own.min_replicas = 2;
  CHECK(replica_wait(o, plain).replicas == 0);
  CHECK(replica_wait(o, plain).allowance == 0ms);
  auto w = replica_wait(o, own);
  CHECK(w.replicas == 2);
  CHECK(w.timeout == 25ms);  // half of the 50 ms node_timeout
  // Redis answers WAIT 1 25 on a master without replicas after up to 100 ms more.
  CHECK(w.allowance == 125ms);
  CHECK(o.node_timeout + w.allowance >= w.timeout + server_cycle);
  o.min_replicas = 1;
  o.replica_timeout = 40ms;
  CHECK(replica_wait(o, plain).replicas == 1);
  CHECK(replica_wait(o, plain).allowance == 140ms);
  own.min_replicas = 0;  // off for this vote only
  CHECK(replica_wait(o, own).replicas == 0);
  o.nodes = {own};
  CHECK_FALSE(any_replicated(o));
  o.nodes.push_back(plain);
  CHECK(any_replicated(o));
}

// The timing table (issue 42 item 2): each multiple of a deadline, derived from the options in one
// place. The figures are the documented ones (core/timing.hpp).
TEST_CASE("timing table: connection limits, retry pacing and marks derive from the options") {
  Options o;
  o.node_timeout = Millis{50};
  o.connect_timeout = Millis{250};
  CHECK(command_stall_limit(o) == Millis{1000});  // 10 x 50 ms is below the 1 s floor
  o.node_timeout = Millis{300};
  CHECK(command_stall_limit(o) == Millis{3000});
  CHECK(drain_limit(o) == Millis{600});
  CHECK(discovery_stall_limit(o) == Millis{1000});
  o.connect_timeout = Millis{2000};
  CHECK(discovery_stall_limit(o) == Millis{8000});
  CHECK(allowance_while_connecting(Millis{250}) == Millis{250});
  CHECK(connection_attempt_delay(Millis{250}) == Millis{62});
  CHECK(connection_attempt_delay(Millis{10'000}) == Millis{250});
  CHECK(connection_attempt_delay(Millis{8}) == Millis{10});
  CHECK(extend_retry_after(Millis{50}, Millis{10'000}) == Millis{1000});
  CHECK(extend_retry_after(Millis{50}, Millis{300}) == Millis{100});
  o.retry_delay = Millis{200};
  o.retry_jitter = Millis{100};
  o.node_timeout = Millis{50};
  CHECK(writer_mark_ttl(o) == Millis{650});
  o.retry_delay = Millis{10};
  o.retry_jitter = Millis{0};
  CHECK(writer_mark_ttl(o) == Millis{500});
}
