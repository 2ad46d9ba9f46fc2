// The checks of a call's arguments (core/validate.hpp): one check each, naming the field at fault,
// so that the public checks (check_acquire) and the CLI's usage errors are the same check and
// cannot disagree (issue 42: the CLI once re-checked the ttl its own way).
#include <doctest/doctest.h>

#include "core/timing.hpp"
#include "core/validate.hpp"
#include "redlock/guard.hpp"

using namespace redlock;
using namespace redlock::detail;
using namespace std::chrono_literals;

namespace {

AcquireOptions with_ttl(Millis ttl) {
  AcquireOptions o;
  o.ttl = ttl;
  return o;
}

std::string field_of(const std::vector<std::string>& resources, const AcquireOptions& o,
                     const Options& client = {}) {
  const auto p = find_acquire_problem(resources, o, client);
  // The public check is the reason of this one, for every case.
  const auto why = check_acquire(resources, o, client);
  CHECK(why.has_value() == p.has_value());
  if (!p) return {};
  CHECK(*why == p->reason);
  return p->field;
}

}  // namespace

TEST_CASE("an acquisition's problem names its field; check_acquire says its reason") {
  CHECK(field_of({"r"}, with_ttl(30s)).empty());
  CHECK(field_of({}, with_ttl(30s)) == "resources");
  CHECK(field_of({""}, with_ttl(30s)) == "resources");
  CHECK(field_of({"r"}, with_ttl(0ms)) == "ttl");
  CHECK(field_of({"r"}, with_ttl(max_ttl + 1ms)) == "ttl");
  CHECK(field_of({"r"}, with_ttl(max_ttl)).empty());
  // Too short for the drift term: refused for the library's own reason, named as the ttl.
  CHECK(field_of({"r"}, with_ttl(2ms)) == "ttl");
  CHECK(find_acquire_problem({"r"}, with_ttl(2ms), Options{})->reason.find("clock-drift") !=
        std::string::npos);
  // Above the client's declared max_ttl.
  Options declared;
  declared.max_ttl = 10s;
  CHECK(field_of({"r"}, with_ttl(10s), declared).empty());
  CHECK(field_of({"r"}, with_ttl(11s), declared) == "ttl");
  CHECK(find_acquire_problem({"r"}, with_ttl(11s), declared)->reason.find("declared max_ttl") !=
        std::string::npos);
  // The key prefix makes the key one of the library's own: the resources are at fault.
  Options prefixed;
  prefixed.key_prefix = "{a}:redlock:";
  CHECK(field_of({"x"}, with_ttl(30s), prefixed) == "resources");

  auto o = with_ttl(30s);
  o.wait = -1ms;
  CHECK(field_of({"r"}, o) == "wait");
  o = with_ttl(30s);
  o.fence = true;
  CHECK(field_of({"a", "b"}, o) == "fence");
  o = with_ttl(30s);
  o.mode = LockMode::read;
  CHECK(field_of({"a", "b"}, o) == "mode");
  o = with_ttl(30s);
  o.fair = true;
  o.heartbeat_ttl = 50ms;
  CHECK(field_of({"r"}, o) == "heartbeat_ttl");
  o = with_ttl(30s);
  o.mode = LockMode::leader;
  o.identity = "";
  CHECK(field_of({"svc"}, o) == "identity");
  o.identity = "node-a";
  CHECK(field_of({"svc"}, o).empty());
  CHECK(field_of({"a", "b"}, o) == "mode");
}

TEST_CASE("a held lock's problem: the token, the resources, extend's new ttl") {
  const Options client;
  CHECK(find_token_problem({"r"}, "", "")->field == "token");
  CHECK(find_token_problem({"r"}, "", "")->reason == "empty lock (no token)");
  CHECK(find_token_problem({""}, "tok", "")->field == "resources");
  CHECK_FALSE(find_token_problem({"r"}, "tok", ""));
  CHECK_FALSE(find_extend_problem({"r"}, "tok", 30s, client));
  CHECK(find_extend_problem({"r"}, "tok", 0ms, client)->field == "ttl");
  CHECK(find_extend_problem({"r"}, "tok", 2ms, client)->field == "ttl");
  CHECK(find_extend_problem({"r"}, "", 0ms, client)->field == "token");  // the lock first
  Options declared;
  declared.max_ttl = 10s;
  CHECK(find_extend_problem({"r"}, "tok", 11s, declared)->field == "ttl");
  // The same ttl check as an acquisition's: the same reason for the same value.
  for (const Millis ttl :
       std::initializer_list<Millis>{0ms, 1ms, 2ms, 3ms, 30s, max_ttl, max_ttl + 1ms}) {
    const auto a = find_acquire_problem({"r"}, with_ttl(ttl), client);
    const auto e = find_extend_problem({"r"}, "tok", ttl, client);
    REQUIRE(a.has_value() == e.has_value());
    if (a) CHECK(a->reason == e->reason);
  }
}

TEST_CASE("a hold's problem: the run rule (30 ms) is core's, and check_hold says it") {
  HoldOptions h;
  h.auto_extend = true;
  CHECK(find_hold_problem(29ms, h)->field == "ttl");
  CHECK(check_hold(29ms, h) == find_hold_problem(29ms, h)->reason);
  CHECK_FALSE(find_hold_problem(min_auto_extended_ttl, h));
  h.renew_deadline = 31s;
  CHECK(find_hold_problem(30s, h)->field == "renew_deadline");
  CHECK(check_hold(30s, h) == find_hold_problem(30s, h)->reason);
  h.auto_extend = false;
  h.renew_deadline.reset();
  CHECK_FALSE(find_hold_problem(29ms, h));  // a hold that is not extended has no minimum
}
