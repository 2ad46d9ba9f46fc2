// The one-line summary of a per-node record (redlock::summarize) and the refusals no retry fixes
// (issue 41 items 4 and 5), without servers.
#include <doctest/doctest.h>

#include "core/quorum.hpp"
#include "core/round.hpp"

using namespace redlock;
using namespace redlock::detail;

namespace {
NodeOutcome on(std::string node, NodeState s, std::string detail = {}) {
  return NodeOutcome{std::move(node), s, std::move(detail), {}};
}
const std::string expired =
    "TLS handshake failed: certificate verify failed: certificate has expired";
}  // namespace

TEST_CASE("summarize: states with counts, in order; no reason where the state says it all") {
  CHECK(summarize({}).empty());
  CHECK(summarize({on("a", NodeState::ok), on("b", NodeState::pending), on("c", NodeState::ok)}) ==
        "2 ok, 1 pending");
  CHECK(summarize({on("a", NodeState::timeout), on("b", NodeState::held_by_other, "x")}) ==
        "1 held-by-other, 1 timeout");
}

TEST_CASE("summarize: a reason the failed nodes share is named once") {
  CHECK(summarize({on("a", NodeState::down, expired), on("b", NodeState::down, expired),
                   on("c", NodeState::down, expired)}) == "3 down: " + expired);
  CHECK(summarize({on("a", NodeState::ok), on("b", NodeState::down, "Connection refused")}) ==
        "1 ok, 1 down: Connection refused");
  // An exclusion's countdown differs on every node; the cause is the same.
  CHECK(
      summarize({on("a", NodeState::excluded, "restart guard: server restarted (1200 ms left)"),
                 on("b", NodeState::excluded, "restart guard: server restarted (987 ms left)")}) ==
      "2 excluded: restart guard: server restarted");
  // Only a countdown is dropped, not any parenthesis.
  CHECK(summarize({on("a", NodeState::error, "ERR x (y ms left)")}) ==
        "1 error: ERR x (y ms left)");
}

TEST_CASE("summarize: different reasons: the most common with its count, else the first") {
  CHECK(
      summarize({on("a", NodeState::down, "Connection refused"), on("b", NodeState::down, expired),
                 on("c", NodeState::down, "Connection refused")}) ==
      "3 down (2 of them: Connection refused)");
  // A reason missing on some nodes of the state: counted among the others.
  CHECK(summarize({on("a", NodeState::down, "Connection refused"), on("b", NodeState::down)}) ==
        "2 down (a: Connection refused; ...)");
  CHECK(summarize({on("a", NodeState::down, "r1"), on("b", NodeState::down, "r2")}) ==
        "2 down (a: r1; ...)");
  CHECK(summarize({on("a", NodeState::down, "r1"), on("b", NodeState::down, "r2"),
                   on("c", NodeState::down, "r2"), on("d", NodeState::down, "r1")}) ==
        "4 down (2 of them: r1)");  // equals: the first seen
  // Long server text is cut.
  const std::string s = summarize({on("a", NodeState::error, std::string(500, 'x'))});
  // (server_text(): at most 120 bytes with its own mark of the cut)
  CHECK_MESSAGE(s.size() <= std::string_view("1 error: ").size() + 120, s);
  CHECK_MESSAGE(s.starts_with("1 error: " + std::string(100, 'x')), s);
  CHECK_MESSAGE(s.ends_with("..."), s);
}

TEST_CASE("refused_by_configuration: auth, ACL and TLS verification; never an outage") {
  CHECK(refused_by_configuration(on("a", NodeState::auth_failed, "AUTH failed: WRONGPASS ...")));
  CHECK(refused_by_configuration(
      on("a", NodeState::error, "NOPERM this user has no permissions to run the 'set' command")));
  CHECK(refused_by_configuration(
      on("a", NodeState::excluded, "restart guard: cannot read INFO server: NOPERM ...")));
  // Inside a script (Redis 7.0's words; tests/cli/test_acl.py meets them on a real server).
  CHECK(refused_by_configuration(
      on("a", NodeState::error,
         "ERR The user executing the script can't run this command or subcommand script: <hex>")));
  CHECK(refused_by_configuration(
      on("a", NodeState::error,
         "ERR The user executing the script can't access at least one of the keys mentioned")));
  CHECK(refused_by_configuration(on("a", NodeState::error,
                                    "ERR ACL failure in script: User lock has no permissions to "
                                    "run the 'incr' command script: <hex>, on @user_script:1.")));
  CHECK(refused_by_configuration(on("a", NodeState::down, expired)));
  CHECK(refused_by_configuration(on(
      "a", NodeState::down, "TLS handshake failed: certificate verify failed: Hostname mismatch")));
  CHECK(
      refused_by_configuration(on("a", NodeState::down,
                                  "TLS handshake failed: error:0A00045C:SSL routines::tlsv13 alert "
                                  "certificate required")));
  CHECK_FALSE(refused_by_configuration(on("a", NodeState::down, "Connection refused")));
  CHECK_FALSE(refused_by_configuration(on("a", NodeState::timeout)));
  CHECK_FALSE(refused_by_configuration(on("a", NodeState::excluded, "restart guard: uptime 3 s")));
  CHECK_FALSE(refused_by_configuration(
      on("a", NodeState::down,
         "TLS handshake failed: wrong version number (is the server speaking TLS on this port?)")));
  // A server's own word, not a state the library gives: still only what the record says.
  CHECK_FALSE(refused_by_configuration(on("a", NodeState::held_by_other, "NOPERM")));
}

TEST_CASE("failure_reason: refused only when the refusals alone rule out a quorum") {
  const std::vector<std::string> three{"a", "b", "c"};
  auto round = [&](std::vector<NodeOutcome> os) {
    Round r(&three);
    for (int i = 0; i < 3; ++i) r.record(i, os[static_cast<std::size_t>(i)]);
    return r;
  };
  const auto wrongpass = on("", NodeState::auth_failed, "AUTH failed: WRONGPASS");
  CHECK(round({wrongpass, wrongpass, on("", NodeState::ok)}).failure_reason(Errc::contended) ==
        Errc::refused);
  CHECK(round({wrongpass, wrongpass, wrongpass}).failure_reason(Errc::not_held) == Errc::refused);
  // One refusal and one outage: the outage may end, so it is tried again.
  CHECK(round({wrongpass, on("", NodeState::down, "Connection refused"), on("", NodeState::ok)})
            .failure_reason(Errc::contended) == Errc::no_quorum);
  // Held elsewhere wins: that is the answer.
  const auto held = on("", NodeState::held_by_other);
  CHECK(round({held, held, wrongpass}).failure_reason(Errc::contended) == Errc::contended);
  // Four nodes (a quorum of three): two refusals rule it out.
  const std::vector<std::string> four{"a", "b", "c", "d"};
  Round r(&four);
  r.record(0, wrongpass);
  r.record(1, on("", NodeState::down, expired));
  r.record(2, on("", NodeState::ok));
  r.record(3, on("", NodeState::ok));
  CHECK(r.failure_reason(Errc::contended) == Errc::refused);
}
