// Redis Cluster without a server: the slot function, the derived keys' slots, the slot map and
// redirections as the cluster answers them, and multi-resource commands split per slot.
#include <doctest/doctest.h>

#include <random>
#include <set>

#include "core/keys.hpp"
#include "core/kinds.hpp"
#include "core/slots.hpp"
#include "core/validate.hpp"

using namespace redlock;
using namespace redlock::detail;

namespace {

Reply error(std::string s) { return Reply{Reply::Type::error, 0, std::move(s), {}}; }
Reply integer(long long v) { return Reply{Reply::Type::integer, v, {}, {}}; }
Reply bulk(std::string s) { return Reply{Reply::Type::string, 0, std::move(s), {}}; }
Reply array(std::vector<Reply> e) { return Reply{Reply::Type::array, 0, {}, std::move(e)}; }

constexpr KeyRole all_roles[] = {KeyRole::fence,  KeyRole::readers, KeyRole::writer_waiting,
                                 KeyRole::ticket, KeyRole::queue,   KeyRole::heartbeats,
                                 KeyRole::wake,   KeyRole::waiting};

}  // namespace

TEST_CASE("hash_slot: the Redis Cluster specification's CRC16 and hash tags") {
  CHECK(hash_slot("123456789") == (0x31C3u & 16383u));  // the spec's CRC16 check value
  CHECK(hash_slot("foo") == 12182);                     // CLUSTER KEYSLOT foo
  CHECK(hash_slot("hello") == 866);
  CHECK(hash_slot("bar") == 5061);
  CHECK(hash_slot("{user1000}.following") == hash_slot("{user1000}.followers"));
  CHECK(hash_slot("{user1000}.following") == hash_slot("user1000"));
  CHECK(hash_slot("foo{}{bar}") == hash_slot("foo{}{bar}"));  // empty first tag: the whole key
  CHECK(hash_tag("foo{}{bar}") == "foo{}{bar}");
  CHECK(hash_tag("foo{{bar}}zap") == "{bar");
  CHECK(hash_tag("foo{bar}{zap}") == "bar");
  CHECK(hash_tag("a}b{c") == "a}b{c");  // no '}' after the '{'
}

TEST_CASE("derived keys share their lock key's slot, for every kind of resource name") {
  std::vector<std::string> names = {
      "job",    "orders:42", "{user1000}.x", "a{tag}b", "{}",      "{}x",   "x{}",  "a}b",  "}",
      "}{",     "{",         "}}",           "a}b{c}",  "{a}{b}",  "x{}y}", "{{}}", "{x}}", "",
      "日本語", "a\nb",      "{ }",          "{}}{",    "ab}{}cd", "}}}{x}"};
  std::mt19937 rng(7);
  const std::string alphabet = "ab{}:x";
  for (int i = 0; i < 2000; ++i) {
    std::string s;
    const int len = static_cast<int>(rng() % 9);
    for (int j = 0; j < len; ++j) s += alphabet[rng() % alphabet.size()];
    names.push_back(s);
  }
  for (const auto& name : names) {
    const auto slot = hash_slot(name);
    for (auto role : all_roles) {
      const auto k = derived_key(name, role);
      INFO("lock key '", name, "', derived key '", k, "'");
      CHECK(hash_slot(k) == slot);
      CHECK(is_derived_key(k));
      CHECK(k.ends_with(name));  // the whole lock key: two resources never share one
    }
  }
  // Keys that can be their own tag keep the readable form.
  CHECK(derived_key("job", KeyRole::fence) == "{job}:redlock:fence:job");
  CHECK(derived_key("a{tag}b", KeyRole::fence) == "{tag}:redlock:fence:a{tag}b");
  // A '}' without a tag: a number of the same slot stands in.
  const auto k = derived_key("a}b", KeyRole::queue);
  CHECK(k == "{" + slot_tag(hash_slot("a}b")) + "}:redlock:queue:a}b");
}

TEST_CASE("slot_tag: a number for every slot, in that slot") {
  std::set<std::string> seen;
  for (unsigned s = 0; s < 16384; ++s) {
    const auto t = slot_tag(s);
    CHECK(hash_slot(t) == s);
    CHECK(t.find('}') == std::string::npos);
    seen.insert(t);
  }
  CHECK(seen.size() == 16384);
}

TEST_CASE("CLUSTER SLOTS: ranges, masters, replicas; malformed answers are refused") {
  auto node = [](std::string ip, long long port, std::string id) {
    return array({bulk(std::move(ip)), integer(port), bulk(std::move(id))});
  };
  Reply r = array({
      array({integer(0), integer(5460), node("127.0.0.1", 7000, "m1"),
             node("127.0.0.1", 7003, "r1")}),
      array({integer(5461), integer(10922), node("?", 7001, "m2")}),
      array({integer(10923), integer(16383), array({bulk("10.0.0.3"), integer(7002)})}),
  });
  std::string err;
  auto map = parse_cluster_slots(r, err);
  REQUIRE_MESSAGE(map, err);
  REQUIRE(map->size() == 3);
  CHECK((*map)[0].first == 0);
  CHECK((*map)[0].last == 5460);
  CHECK((*map)[0].master == ClusterEndpoint{"127.0.0.1", 7000});
  CHECK((*map)[0].master_id == "m1");
  CHECK((*map)[0].replica_ids == std::vector<std::string>{"r1"});
  CHECK((*map)[1].master.host.empty());  // unknown endpoint: the asked node's host
  CHECK((*map)[2].master_id.empty());    // Redis before 4 names no ids
  CHECK(parse_cluster_slots(array({}), err)->empty());
  CHECK_FALSE(parse_cluster_slots(error("ERR This instance has cluster support disabled"), err));
  CHECK(err.find("cluster support disabled") != std::string::npos);
  CHECK_FALSE(
      parse_cluster_slots(array({array({integer(0), integer(16384), node("h", 1, "x")})}), err));
  CHECK(err.find("0-16384") != std::string::npos);
  CHECK_FALSE(
      parse_cluster_slots(array({array({integer(9), integer(3), node("h", 1, "x")})}), err));
  CHECK_FALSE(parse_cluster_slots(array({array({integer(0), integer(3), bulk("h")})}), err));
  CHECK_FALSE(
      parse_cluster_slots(array({array({integer(0), integer(3), node("h", 70000, "x")})}), err));
}

TEST_CASE("redirections: MOVED and ASK; anything else is not one") {
  auto m = parse_redirect("MOVED 3999 127.0.0.1:6381");
  REQUIRE(m);
  CHECK_FALSE(m->ask);
  CHECK(m->slot == 3999);
  CHECK(m->to == ClusterEndpoint{"127.0.0.1", 6381});
  auto a = parse_redirect("ASK 1 [::1]:7000");
  REQUIRE(a);
  CHECK(a->ask);
  CHECK(a->to == ClusterEndpoint{"::1", 7000});
  auto unknown = parse_redirect("MOVED 12 :7001");
  REQUIRE(unknown);
  CHECK(unknown->to.host.empty());
  CHECK_FALSE(parse_redirect("TRYAGAIN Multiple keys request during rehashing of slot"));
  CHECK_FALSE(parse_redirect("CLUSTERDOWN The cluster is down"));
  CHECK_FALSE(parse_redirect("MOVED 16384 h:1"));
  CHECK_FALSE(parse_redirect("MOVED x h:1"));
  CHECK_FALSE(parse_redirect("MOVED 1 h:0"));
  CHECK_FALSE(parse_redirect("MOVED 1 h"));
  CHECK_FALSE(parse_redirect("MOVED 1"));
}

TEST_CASE("command_slot: the key a lock command names, none for keyless commands") {
  CHECK(command_slot(Command::plain({"SET", "foo", "t", "NX", "PX", "100"})) == 12182u);
  CHECK(command_slot(Command::plain({"ZREM", "foo", "w"})) == 12182u);  // a waiter leaves
  CHECK(command_slot(Command::call(ScriptId::acquire_fenced, {"hello", keys::fence("hello")})) ==
        866u);
  CHECK_FALSE(command_slot(Command::plain({"PING"})));
  CHECK_FALSE(command_slot(Command::plain({"INFO", "server"})));
}

TEST_CASE("split_by_slot: a multi-resource command whose keys span slots, one part per slot") {
  // foo 12182, hello 866, {foo}x with foo: two slots among three resources.
  const std::vector<std::string> keys = {"foo", "hello", "{foo}x"};
  const AttemptArgs args{.keys = keys, .token = "tok", .ttl = Millis{5000}};
  const Command acquire = kind_for_acquire(AcquireOptions{}, keys.size()).acquire(args);
  REQUIRE(acquire.script == ScriptId::acquire_multi);
  auto parts = split_by_slot(acquire);
  REQUIRE(parts);
  REQUIRE(parts->size() == 2);
  CHECK((*parts)[0].slot == 12182);
  CHECK((*parts)[0].lock_keys == std::vector<std::string>{"foo", "{foo}x"});
  CHECK((*parts)[0].command.numkeys == 2);
  CHECK((*parts)[0].command.args == std::vector<std::string>{"foo", "{foo}x", "tok", "5000"});
  CHECK((*parts)[1].command.args == std::vector<std::string>{"hello", "tok", "5000"});

  // Release with wake-ups: lock keys, their marks, the token, their channels.
  const Command release =
      kind_for_acquire(AcquireOptions{}, keys.size()).release(keys, "tok", true);
  auto rp = split_by_slot(release);
  REQUIRE(rp);
  REQUIRE(rp->size() == 2);
  CHECK((*rp)[0].command.numkeys == 4);
  CHECK((*rp)[0].command.args == std::vector<std::string>{"foo", "{foo}x", keys::waiting("foo"),
                                                          keys::waiting("{foo}x"), "tok",
                                                          keys::wake("foo"), keys::wake("{foo}x")});
  CHECK((*rp)[1].command.args ==
        std::vector<std::string>{"hello", keys::waiting("hello"), "tok", keys::wake("hello")});
  for (const auto& p : *rp) {
    for (int i = 0; i < p.command.numkeys; ++i) CHECK(hash_slot(p.command.args[i]) == p.slot);
  }
  // A rollback's: the compare-and-delete alone, lock keys only (it wakes nobody).
  const Command undo =
      kind_for_acquire(AcquireOptions{}, keys.size())
          .rollback(AttemptArgs{.keys = keys, .token = "tok", .ttl = Millis{1}, .waiter = "w@c"});
  auto up = split_by_slot(undo);
  REQUIRE(up);
  REQUIRE(up->size() == 2);
  CHECK((*up)[0].command.args == std::vector<std::string>{"foo", "{foo}x", "tok"});
  CHECK((*up)[1].command.args == std::vector<std::string>{"hello", "tok"});
  // Without wake-ups: lock keys only.
  auto plain =
      split_by_slot(kind_for_acquire(AcquireOptions{}, keys.size()).release(keys, "tok", false));
  REQUIRE(plain);
  CHECK((*plain)[1].command.args == std::vector<std::string>{"hello", "tok"});

  // One slot, or one resource: the command goes whole.
  const std::vector<std::string> same_slot = {"{a}1", "{a}2"};
  CHECK_FALSE(
      split_by_slot(kind_for_acquire(AcquireOptions{}, 2)
                        .acquire(AttemptArgs{.keys = same_slot, .token = "t", .ttl = Millis{1}})));
  CHECK_FALSE(split_by_slot(Command::plain({"SET", "foo", "t"})));
}

TEST_CASE("combine_parts and rollback: the whole command's answer from its parts") {
  const Command acquire =
      Command::call(ScriptId::acquire_multi, {"foo", "hello"}).arg("tok").arg(1000);
  Reply one = integer(1), zero = integer(0), two = integer(2), err = error("TRYAGAIN later");
  CHECK(combine_parts(acquire, {&one, &one}).is_integer(1));
  CHECK(combine_parts(acquire, {&one, &zero}).is_integer(0));
  CHECK(combine_parts(acquire, {&one, &err}).str == "TRYAGAIN later");
  const Command extend =
      Command::call(ScriptId::extend_multi, {"foo", "hello"}).arg("tok").arg(1000);
  CHECK(combine_parts(extend, {&one, &one}).is_integer(1));
  CHECK(combine_parts(extend, {&zero, &one}).is_integer(0));
  const Command release = Command::call(ScriptId::release_multi, {"foo", "hello"}).arg("tok");
  CHECK(combine_parts(release, {&one, &two}).is_integer(3));
  auto parts = split_by_slot(acquire);
  REQUIRE(parts);
  const Command undo = rollback(acquire, (*parts)[1]);
  CHECK(undo.script == ScriptId::release_multi);
  CHECK(undo.args == std::vector<std::string>{"hello", "tok"});
}

TEST_CASE("without_wake_keys: a publishing release as the compare-and-delete alone") {
  const auto& kind = kind_for_acquire(AcquireOptions{}, 1);
  const Command one = kind.release({"job"}, "tok", /*wake=*/true);
  REQUIRE(one.numkeys == 5);
  auto plain = without_wake_keys(one);
  REQUIRE(plain);
  CHECK(plain->script == ScriptId::release);
  CHECK(plain->numkeys == 1);
  CHECK(plain->args == std::vector<std::string>{"job", "tok"});
  const Command many = kind_for_acquire(AcquireOptions{}, 2).release({"a", "b"}, "tok", true);
  auto lock_keys = without_wake_keys(many);
  REQUIRE(lock_keys);
  CHECK(lock_keys->script == ScriptId::release_multi);
  CHECK(lock_keys->args == std::vector<std::string>{"a", "b", "tok"});
  // Nothing to leave out, or not a release.
  CHECK_FALSE(without_wake_keys(kind.release({"job"}, "tok", false)));
  CHECK_FALSE(
      without_wake_keys(kind_for_acquire(AcquireOptions{}, 2).release({"a", "b"}, "t", false)));
  CHECK_FALSE(without_wake_keys(Command::call(ScriptId::extend_multi, {"a", "b"}).arg("t").arg(1)));
}

TEST_CASE("a lock key in the form of the library's own keys is refused, naming what made it") {
  // The resource alone.
  auto why = check_resources({"{a}:redlock:fence:a"}, "");
  REQUIRE(why);
  CHECK(why->starts_with("resource '{a}:redlock:fence:a' has the form"));
  // The key prefix makes it so: the prefix is named, not only the resource.
  why = check_resources({"x"}, "{a}:redlock:");
  REQUIRE(why);
  CHECK(why->starts_with("the key '{a}:redlock:x' (key prefix '{a}:redlock:', resource 'x')"));
  // Ordinary prefixes and resources pass.
  CHECK_FALSE(check_resources({"x"}, "svc:"));
  CHECK_FALSE(check_resources({"job"}, ""));
}
