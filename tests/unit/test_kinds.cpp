// Lock kinds without a server: the command each kind sends and what each reply means.
#include <doctest/doctest.h>

#include "core/keys.hpp"
#include "core/kinds.hpp"

using namespace redlock;
using namespace redlock::detail;
using namespace std::chrono_literals;

namespace {

Reply status(std::string s) { return Reply{Reply::Type::status, 0, std::move(s), {}}; }
Reply error(std::string s) { return Reply{Reply::Type::error, 0, std::move(s), {}}; }
Reply integer(long long v) { return Reply{Reply::Type::integer, v, {}, {}}; }
Reply bulk(std::string s) { return Reply{Reply::Type::string, 0, std::move(s), {}}; }
Reply nil() { return Reply{}; }
Reply array(std::vector<Reply> e) { return Reply{Reply::Type::array, 0, {}, std::move(e)}; }

AcquireOptions kind_opts(LockMode mode, bool fence = false, bool fair = false) {
  AcquireOptions o;
  o.mode = mode;
  o.fence = fence;
  o.fair = fair;
  return o;
}

}  // namespace

TEST_CASE("kind_for_acquire picks one kind per combination") {
  CHECK(kind_for_acquire(kind_opts(LockMode::exclusive), 1).name() == "plain");
  CHECK(kind_for_acquire(kind_opts(LockMode::exclusive), 3).name() == "multi");
  CHECK(kind_for_acquire(kind_opts(LockMode::exclusive, true), 1).name() == "fenced");
  CHECK(kind_for_acquire(kind_opts(LockMode::read), 1).name() == "read");
  CHECK(kind_for_acquire(kind_opts(LockMode::write), 1).name() == "write");
  CHECK(kind_for_acquire(kind_opts(LockMode::exclusive, false, true), 1).name() == "fair");
  // Held locks extend and release by mode and size only (a token from another process).
  CHECK(kind_for_lock(LockMode::exclusive, 1).name() == "plain");
  CHECK(kind_for_lock(LockMode::exclusive, 2).name() == "multi");
  CHECK(kind_for_lock(LockMode::read, 1).name() == "read");
  CHECK(kind_for_lock(LockMode::write, 1).name() == "write");
}

TEST_CASE("the plain kind sends exactly the wire format of the other Redlock clients") {
  std::vector<std::string> keys{"job"};
  AttemptArgs a{keys, "tok", 30000ms};
  const auto c = kind_for_acquire(kind_opts(LockMode::exclusive), 1).acquire(a);
  CHECK_FALSE(c.script);
  CHECK(c.args == std::vector<std::string>{"SET", "job", "tok", "NX", "PX", "30000"});
  const auto& plain = kind_for_lock(LockMode::exclusive, 1);
  // The release is the documented compare-and-delete on KEYS[1] with ARGV[1]: alone for an
  // uncontended lock; with waking, the waiting mark, the fair queue and its heartbeats and
  // handoff registrations (KEYS[2..5]) and the wake channel (ARGV[2]) only serve what follows it
  // (a publish, or the handoff to the queue's first waiter).
  const auto lean = plain.release(keys, "tok", false);
  CHECK(lean.script == ScriptId::release);
  CHECK(lean.args == std::vector<std::string>{"job", "tok"});
  const auto rel = plain.release(keys, "tok", true);
  CHECK(rel.script == ScriptId::release);
  CHECK(rel.numkeys == 5);
  CHECK(rel.args == std::vector<std::string>{"job", keys::waiting("job"), keys::queue("job"),
                                             keys::heartbeats("job"), keys::handoff("job"), "tok",
                                             keys::wake("job")});
  // A fair lock its ticket round granted: its release also clears that waiter's heartbeat and
  // registration (ARGV[3]).
  const auto handed = plain.release(keys, "tok", true, "w@chan");
  CHECK(handed.args == std::vector<std::string>{"job", keys::waiting("job"), keys::queue("job"),
                                                keys::heartbeats("job"), keys::handoff("job"),
                                                "tok", keys::wake("job"), "w@chan"});
  CHECK(plain.release(keys, "tok", false, "w@chan").args == std::vector<std::string>{"job", "tok"});
  const auto ext = plain.extend(keys, "tok", 5000ms);
  CHECK(ext.script == ScriptId::extend);
  CHECK(ext.args == std::vector<std::string>{"job", "tok", "5000"});
}

TEST_CASE("a release checks for waiters when the lock says so or was held past a short hold") {
  // Contended, fair, extended or rebuilt from a token: however soon it is released.
  CHECK(release_wakes(true, 0ms));
  CHECK(release_wakes(true, 1h));
  // Taken without contention: the documented compare-and-delete alone while the hold is short,
  // the check for waiters from short_hold on (a waiter may have come meanwhile).
  CHECK_FALSE(release_wakes(false, 0ms));
  CHECK_FALSE(release_wakes(false, short_hold - 1us));
  CHECK(release_wakes(false, short_hold));
  CHECK(release_wakes(false, 30s));
  // A clock read before the attempt's start (it cannot happen; a negative hold) is a short hold.
  CHECK_FALSE(release_wakes(false, -5ms));
}

TEST_CASE("derived keys of each kind") {
  std::vector<std::string> keys{"doc"};
  AttemptArgs a{keys, "tok", 1000ms, "waiter", 7, 2000ms, 500ms};
  auto fenced = kind_for_acquire(kind_opts(LockMode::exclusive, true), 1).acquire(a);
  CHECK(fenced.script == ScriptId::acquire_fenced);
  CHECK(fenced.numkeys == 2);
  CHECK(fenced.args[1] == keys::fence("doc"));
  auto read = kind_for_acquire(kind_opts(LockMode::read), 1).acquire(a);
  CHECK(read.numkeys == 3);
  CHECK(read.args[1] == keys::readers("doc"));
  CHECK(read.args[2] == keys::writer_waiting("doc"));
  auto write = kind_for_acquire(kind_opts(LockMode::write), 1).acquire(a);
  CHECK(write.args.back() == "waiter");
  auto fair = kind_for_acquire(kind_opts(LockMode::exclusive, false, true), 1).acquire(a);
  CHECK(fair.args[1] == keys::queue("doc"));
  CHECK(fair.args[2] == keys::heartbeats("doc"));
  CHECK(fair.args[3] == keys::ticket("doc"));
  CHECK(fair.args[6] == "7");  // the ticket
  // A reader's release and extend address the readers set, not the lock key.
  const auto& r = kind_for_lock(LockMode::read, 1);
  CHECK(r.release(keys, "tok", true).args[0] == keys::readers("doc"));
  CHECK(r.release(keys, "tok", false).args ==
        std::vector<std::string>{keys::readers("doc"), "tok"});
  CHECK(r.extend(keys, "tok", 1000ms).script == ScriptId::extend_read);
}

TEST_CASE("classify: only +OK grants a plain SET, nil refuses, anything else is an error") {
  const auto& k = kind_for_acquire(kind_opts(LockMode::exclusive), 1);
  CHECK(k.classify_acquire(status("OK")).vote == Vote::yes);
  CHECK(k.classify_acquire(nil()).vote == Vote::no);
  CHECK(k.classify_acquire(nil()).state == NodeState::held_by_other);
  for (const auto& r :
       {status("QUEUED"), integer(1), bulk("OK"), array({status("OK")}), error("READONLY x")}) {
    CAPTURE(r.describe());
    const auto v = k.classify_acquire(r);
    CHECK(v.vote == Vote::failed);
    CHECK(v.state == NodeState::error);
    CHECK_FALSE(v.detail.empty());
  }
  CHECK(k.classify_acquire(error("READONLY You can't write")).detail == "READONLY You can't write");
}

TEST_CASE("classify: scripted kinds grant on :1, refuse on :0; a fence is the positive integer") {
  for (auto o : {kind_opts(LockMode::exclusive), kind_opts(LockMode::read),
                 kind_opts(LockMode::write), kind_opts(LockMode::exclusive, false, true)}) {
    const auto& k = kind_for_acquire(o, o.mode == LockMode::exclusive && !o.fair ? 2 : 1);
    CAPTURE(k.name());
    CHECK(k.classify_acquire(integer(1)).vote == Vote::yes);
    CHECK(k.classify_acquire(integer(0)).vote == Vote::no);
    // (The fair kind's 2 is a grant too: a key handed over, taken by the attempt.)
    CHECK(k.classify_acquire(integer(2)).vote == (o.fair ? Vote::yes : Vote::failed));
    CHECK(k.classify_acquire(status("OK")).vote == Vote::failed);
    CHECK(k.classify_acquire(nil()).vote == Vote::failed);
  }
  const auto& f = kind_for_acquire(kind_opts(LockMode::exclusive, true), 1);
  CHECK(f.classify_acquire(integer(42)).vote == Vote::yes);
  CHECK(f.classify_acquire(integer(42)).value == 42);
  CHECK(f.classify_acquire(integer(0)).vote == Vote::no);
  CHECK(f.classify_acquire(integer(-3)).vote == Vote::failed);
}

TEST_CASE("classify: extend, release, ticket and write-back rounds") {
  CHECK(LockKind::classify_extend(integer(1)).vote == Vote::yes);
  CHECK(LockKind::classify_extend(integer(0)).state == NodeState::not_held);
  CHECK(LockKind::classify_extend(integer(3)).vote == Vote::failed);
  CHECK(LockKind::classify_release(integer(3)).vote ==
        Vote::yes);  // a multi-key release counts keys
  CHECK(LockKind::classify_release(integer(0)).state == NodeState::not_held);
  CHECK(LockKind::classify_release(nil()).vote == Vote::failed);
  CHECK(classify_ticket(array({integer(9), integer(0)})).value == 9);
  CHECK_FALSE(classify_ticket(array({integer(9), integer(0)})).behind);
  CHECK(classify_ticket(array({integer(9), integer(1)})).behind);
  CHECK(classify_ticket(array({integer(0), integer(0)})).vote == Vote::failed);
  CHECK_FALSE(classify_ticket(array({integer(9), integer(1)})).granted);
  CHECK(classify_ticket(array({integer(9), integer(2)})).granted);
  CHECK_FALSE(classify_ticket(array({integer(9), integer(2)})).behind);
  CHECK(classify_ticket(array({integer(9), integer(3)})).vote == Vote::failed);
  CHECK(classify_ticket(array({integer(9), integer(-1)})).vote == Vote::failed);
  CHECK(classify_ticket(integer(9)).vote == Vote::failed);
  CHECK(classify_raise(integer(1)).vote == Vote::yes);
  CHECK(classify_raise(integer(0)).vote == Vote::failed);
}

TEST_CASE(
    "finish_waiting: a fair waiter always leaves the queue; a writer takes its mark back only when "
    "it gave up") {
  std::vector<std::string> keys{"q"};
  const auto& fair = kind_for_acquire(kind_opts(LockMode::exclusive, false, true), 1);
  CHECK(fair.finish_waiting(keys, "w", true));
  CHECK(fair.finish_waiting(keys, "w", false)->script == ScriptId::fair_leave);
  const auto& write = kind_for_acquire(kind_opts(LockMode::write), 1);
  CHECK_FALSE(write.finish_waiting(keys, "w", true));
  CHECK(write.finish_waiting(keys, "w", false)->args[0] == keys::writer_waiting("q"));
  CHECK_FALSE(kind_for_acquire(kind_opts(LockMode::exclusive), 1).finish_waiting(keys, "w", false));
}

TEST_CASE("describe never shows a bulk string's bytes (it may be a token)") {
  CHECK(bulk("0123456789abcdef0123456789abcdef01234567").describe() == "(string of 40 bytes)");
  CHECK(integer(-5).describe() == "(integer) -5");
  CHECK(nil().describe() == "(nil)");
  CHECK(array({nil(), nil()}).describe() == "(array of 2)");
  CHECK(error("ERR x").describe() == "(error) ERR x");
}

TEST_CASE(
    "wake-ups: exclusive waiters mark themselves by id and are named one at a time; readers, "
    "writers and fair waiters mark '*' and hear every release") {
  CHECK(kind_for_acquire(kind_opts(LockMode::exclusive), 1).named_wake());
  CHECK(kind_for_acquire(kind_opts(LockMode::exclusive), 2).named_wake());        // multi
  CHECK(kind_for_acquire(kind_opts(LockMode::exclusive, true), 1).named_wake());  // fenced
  CHECK_FALSE(kind_for_acquire(kind_opts(LockMode::read), 1).named_wake());
  CHECK_FALSE(kind_for_acquire(kind_opts(LockMode::write), 1).named_wake());
  CHECK_FALSE(kind_for_acquire(kind_opts(LockMode::exclusive, false, true), 1).named_wake());
  const auto named = mark_waiting("job", 1500ms, "w1@chan", 1234);
  CHECK(named.script == ScriptId::mark_waiting);
  CHECK(named.args == std::vector<std::string>{keys::waiting("job"), "w1@chan", "1234", "1500"});
  CHECK(mark_waiting("job", 1500ms).args ==
        std::vector<std::string>{keys::waiting("job"), "*", "0", "1500"});
  CHECK(unmark_waiting("job", "w1@chan").args ==
        std::vector<std::string>{"ZREM", keys::waiting("job"), "w1@chan"});
}

TEST_CASE(
    "rollback: a fair attempt takes its place in the queue back with its key; others release") {
  std::vector<std::string> keys{"q"};
  AttemptArgs a{keys, "tok", 1000ms, "w@c", 7, 2000ms, 0ms};
  const auto& fair_kind = kind_for_acquire(kind_opts(LockMode::exclusive, false, true), 1);
  const auto fair = fair_kind.rollback(a);
  CHECK(fair.script == ScriptId::fair_rollback);
  CHECK(fair.args == std::vector<std::string>{"q", keys::queue("q"), keys::heartbeats("q"), "tok",
                                              "7", "w@c", "2000"});
  // With wake-ups the attempt also registers a token of its own (a release hands the lock over
  // with it): the rollback, which deletes the attempt's token only, leaves such a key alone.
  AttemptArgs r = a;
  r.registered_token = "reg";
  CHECK(fair_kind.rollback(r).args == fair.args);
  CHECK(fair_kind.acquire(r).args ==
        std::vector<std::string>{"q", keys::queue("q"), keys::heartbeats("q"), keys::ticket("q"),
                                 keys::handoff("q"), "tok", "1000", "7", "2000", "w@c", "reg"});
  // Its attempt's reply 2: it took a key handed over to that token, a vote like 1.
  CHECK(fair_kind.classify_acquire(integer(2)).vote == Vote::yes);
  CHECK(fair_kind.classify_acquire(integer(2)).detail == "handed over");
  CHECK(fair_kind.classify_acquire(integer(1)).detail.empty());
  CHECK(fair_kind.classify_acquire(integer(3)).vote == Vote::failed);
  // The others' rollback is the compare-and-delete alone: it names and wakes nobody (an attempt
  // that did not win frees nothing a waiter waits for; hazard 12).
  for (auto mode : {LockMode::exclusive, LockMode::write, LockMode::read}) {
    const auto& kind = kind_for_acquire(kind_opts(mode), 1);
    CHECK(kind.rollback(a).args == kind.release(keys, "tok", /*wake=*/false).args);
  }
  CHECK(kind_for_acquire(kind_opts(LockMode::exclusive), 1).rollback(a).args ==
        std::vector<std::string>{"q", "tok"});
}
