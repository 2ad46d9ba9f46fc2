// How a waiter reads and counts the releases that name it (wake-ups), without servers.
#include <doctest/doctest.h>

#include <string>

#include "core/name_tally.hpp"
#include "core/scripts.hpp"

using namespace redlock::detail;

namespace {
const std::string hash_a(40, 'a');
const std::string hash_b = "0123456789abcdef0123456789abcdef01234567";
const std::string id = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b@client:x:wake";
}  // namespace

TEST_CASE("a release's name splits into the waiter and the release's hash") {
  const std::string message = id + "/" + hash_b;  // the views returned point into it
  const auto n = parse_wake_message(message);
  CHECK(n.waiter == id);
  CHECK(n.release == hash_b);
  // What carries no hash is all waiter: "#<n>", an id without one, a suffix that is not 40
  // lowercase hex digits after a slash.
  for (const std::string& m : {std::string("#3"), id, id + "/" + hash_b.substr(1),
                               id + "/" + std::string(40, 'A'), id + "-" + hash_b, "/" + hash_b}) {
    CAPTURE(m);
    const auto p = parse_wake_message(m);
    CHECK(p.waiter == m);
    CHECK(p.release.empty());
  }
  // A channel with slashes in it (a user's key prefix) stays in the waiter.
  const std::string slashed = "tok@a/b/c:wake";
  const std::string with_hash = slashed + "/" + hash_a;
  CHECK(parse_wake_message(with_hash).waiter == slashed);
}

TEST_CASE("a name carries no grant: what follows the hash makes it all waiter") {
  // Releases before 2026-12 added "/<serial>" when they handed a fair lock over, and the waiter
  // took the lock on a quorum of such messages: anyone who may PUBLISH could forge one. A name is
  // now only a hint (the waiter's attempt confirms a handoff), and such a message names nobody.
  for (const std::string& m : {id + "/" + hash_b + "/42", id + "/" + hash_b + "/"}) {
    CAPTURE(m);
    const auto p = parse_wake_message(m);
    CHECK(p.waiter == m);
    CHECK(p.release.empty());
  }
}

TEST_CASE("names count per release: a rollback's names never add up with a release's") {
  NameTally t;
  t.reset(5);
  // An attempt won nodes 0 and 1 and rolled back there, naming us (release a).
  CHECK_FALSE(t.named(0, hash_a));
  CHECK_FALSE(t.named(1, hash_a));
  // The holder's release reaches node 2 first, then nodes 0 and 1: three nodes of release b.
  CHECK_FALSE(t.named(2, hash_b));
  CHECK_FALSE(t.named(0, hash_b));
  CHECK(t.named(1, hash_b));
  // Once per release: the fourth and fifth node say nothing new.
  CHECK_FALSE(t.named(3, hash_b));
  CHECK_FALSE(t.named(4, hash_b));
  CHECK(t.quorum_besides(hash_a));
  CHECK_FALSE(t.quorum_besides(hash_b));
}

TEST_CASE("names count once per node in a release (several keys of one lock)") {
  NameTally t;
  t.reset(3);
  CHECK_FALSE(t.named(0, hash_a));
  CHECK_FALSE(t.named(0, hash_a));  // the same release, its second key
  CHECK(t.named(1, hash_a));        // quorum of 3 is 2
  t.reset(3);                       // a new sleep forgets everything
  CHECK_FALSE(t.named(1, hash_a));
  CHECK_FALSE(t.quorum_besides(hash_b));
  // A node outside the lock's nodes is ignored.
  CHECK_FALSE(t.named(3, hash_a));
  CHECK_FALSE(t.named(-1, hash_a));
}

TEST_CASE("names count per release: a later release during the attempt that names started") {
  NameTally t;
  t.reset(5);
  CHECK_FALSE(t.named(0, hash_a));
  CHECK_FALSE(t.named(1, hash_a));
  CHECK(t.named(2, hash_a));  // the attempt goes; it loses to a client that had not waited
  CHECK_FALSE(t.named(3, hash_a));
  CHECK_FALSE(t.quorum_besides(hash_a));  // the rest of the same release: nothing new
  CHECK_FALSE(t.named(0, hash_b));        // that client's release names us again
  CHECK_FALSE(t.named(4, hash_b));
  CHECK(t.named(2, hash_b));
  CHECK(t.quorum_besides(hash_a));  // so the lost attempt is retried at once
}

TEST_CASE("names count per release: the oldest release is forgotten first") {
  // One node's name in each of `others` releases after "old", then a second node's in "old".
  auto second_name_of_old_counts = [](std::size_t others) {
    NameTally t;
    t.reset(3);
    (void)t.named(0, "old");
    for (std::size_t i = 0; i < others; ++i) (void)t.named(0, "r" + std::to_string(i));
    return t.named(1, "old");
  };
  CHECK(second_name_of_old_counts(NameTally::max_releases - 1));
  CHECK_FALSE(second_name_of_old_counts(NameTally::max_releases));
}
