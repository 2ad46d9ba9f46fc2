// Wake-ups (Options::wake_ups): waiters learn of a release over pub/sub instead of at their next
// poll. The waiters here sleep 3 s between attempts, so an acquisition well under that after the
// release can only come from a wake-up; the bounds are generous (a busy machine), the ordering
// strict.
#include <algorithm>
#include <future>
#include <thread>

#include "common.hpp"
#include "redlock/keys.hpp"

using namespace itest;
using namespace redlock;

namespace {

constexpr Millis slow_poll{3000};

Options slow_polling(const RedisCluster& c) {
  Options o = options_for(c);
  // An attempt that times out on a quorum (a loaded machine: 250 ms were outlasted under --stress
  // over TLS) fails with no quorum, and no wake-up shortens the sleep after that (hazard 12): the
  // waiter then waits its whole poll, which these tests take for a missed wake-up.
  o.node_timeout = Millis{1000};
  o.retry_delay = slow_poll;
  o.retry_jitter = Millis{0};
  return o;
}

// Every node lists `clients` clients' own wake channels (where named wake-ups come).
bool clients_listening_everywhere(const RedisCluster& c, long long clients) {
  for (std::size_t i = 0; i < c.size(); ++i) {
    auto r = c[i].command({"PUBSUB", "CHANNELS", "*" + derived_key("client:*", KeyRole::wake)});
    if (static_cast<long long>(r.elements.size()) != clients) return false;
  }
  return true;
}

// Every node lists a subscriber of `key`'s wake channel.
bool listening_everywhere(const RedisCluster& c, const std::string& key) {
  for (std::size_t i = 0; i < c.size(); ++i) {
    auto r = c[i].command({"PUBSUB", "NUMSUB", derived_key(key, KeyRole::wake)});
    if (r.elements.size() != 2 || r.elements[1].integer < 1) return false;
  }
  return true;
}

// Every node queues `waiters` fair waiters on `key`, each registered for a handoff (their ticket
// rounds ran there), and one client listens on its own channel everywhere. (A holder whose lock
// was granted or handed over keeps its registration until it releases, out of the queue.)
bool registered_everywhere(const RedisCluster& c, const std::string& key, std::size_t waiters) {
  for (std::size_t i = 0; i < c.size(); ++i) {
    const auto queued = c[i].command({"ZRANGE", derived_key(key, KeyRole::queue), "0", "-1"});
    if (queued.elements.size() != waiters) return false;
    for (const auto& w : queued.elements) {
      if (c[i].command({"HEXISTS", derived_key(key, KeyRole::handoff), w.str}).integer != 1)
        return false;
    }
  }
  return clients_listening_everywhere(c, 1);
}

// Every node holds `key`. An acquisition is decided at a quorum: a node still in its handshake may
// not have the SET yet, and a waiter's first attempt could take that node first and roll back there
// (before 2026-11-25 that rollback also took the waiter off that node's mark; seen under --stress
// with Valkey, captured with logs). Tests that count attempts or wake-ups start their waiters only
// once this holds.
bool held_everywhere(const RedisCluster& c, const std::string& key) {
  return c.count_with_key(key) == static_cast<int>(c.size());
}

// `client` takes `key`, and its lock stands on every node: tests that need the key everywhere (a
// queue behind it, a handoff, a key deleted by hand on a minority) start from here. The client's
// connections are made first: over TLS on a loaded machine, an acquisition that was a client's
// first operation lost a node whose handshake outlasted the attempt's deadline (no vote, and the
// SET never sent: the key never came; under --stress, 2026-11-28), or lost a quorum.
AcquireResult hold_everywhere(const RedisCluster& c, Client& client, const std::string& key,
                              const AcquireOptions& o) {
  connect_everywhere(client, c.size());
  auto held = client.try_acquire({key}, o);
  REQUIRE_MESSAGE(held, held.message);
  REQUIRE(eventually([&] { return held_everywhere(c, key); }));
  return held;
}

// Every node has run at least `n` SETs (calls_of counts them): the plain attempts made so far
// are over on every node, so their answers are on their way.
bool sets_everywhere(const RedisCluster& c, long long n) {
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (calls_of(c[i], "set") < n) return false;
  }
  return true;
}

struct Waited {
  AcquireResult result;
  Clock::time_point at;
};

std::future<Waited> wait_for(Client& c, const std::string& key, Millis wait = 10s) {
  return std::async(std::launch::async, [&c, key, wait] {
    auto r = c.try_acquire({key}, ttl_opts(5s, wait));
    return Waited{std::move(r), Clock::now()};
  });
}

}  // namespace

TEST_CASE("wake-ups: a waiter in another client takes the lock right after the release") {
  RedisCluster c(5);
  Client holder(options_for(c));
  Client waiter(slow_polling(c));
  auto held = holder.try_acquire({"hot"}, ttl_opts(30s));
  REQUIRE_MESSAGE(held, held.message);
  auto w = wait_for(waiter, "hot");
  REQUIRE(eventually([&] { return listening_everywhere(c, "hot"); }));
  std::this_thread::sleep_for(100ms);  // its attempt after subscribing is over: it sleeps 3 s
  // status counts the clients that wait with wake-ups.
  for (const auto& n : holder.status("hot").nodes) CHECK(n.listening_clients == 1);
  // Taken without contention, the holder's lock would release the documented way alone (its
  // waiters poll); released by token, as `redlock-cli release` does, nothing is known: it wakes.
  CHECK_FALSE(held.lock.wakes_waiters());
  const auto released = Clock::now();
  REQUIRE(holder.try_release(Lock::from_token({"hot"}, held.lock.token())));
  auto got = w.get();
  REQUIRE_MESSAGE(got.result, got.result.message);
  CHECK(got.at > released);
  CHECK_MESSAGE(got.at - released < slow_poll / 2,
                "took " << ms_since(released) << " ms: it waited for its poll");
  // The waiter found the lock held: its own release wakes whoever waits next.
  CHECK(got.result.lock.wakes_waiters());
  (void)waiter.try_release(got.result.lock);
  // Done waiting: nobody listens any more.
  CHECK(eventually([&] {
    auto r = c[0].command({"PUBSUB", "NUMSUB", derived_key("hot", KeyRole::wake)});
    return r.elements.size() == 2 && r.elements[1].integer == 0;
  }));
}

// A lock taken with nobody waiting (its release would not look for waiters if it were released
// at once), and a waiter in another client that has begun to wait for it: subscribed everywhere,
// its first attempt over, asleep until its poll in 3 s.
struct UncontendedHolder {
  UncontendedHolder(const RedisCluster& c, const std::string& key)
      : holder(options_for(c)),
        waiter(slow_polling(c)),
        held(holder.try_acquire({key}, ttl_opts(30s))) {
    REQUIRE_MESSAGE(held, held.message);
    CHECK_FALSE(held.lock.wakes_waiters());  // nobody waited when it was taken
    waited = wait_for(waiter, key);
    REQUIRE(eventually([&] { return listening_everywhere(c, key); }));
    std::this_thread::sleep_for(100ms);  // its attempt after subscribing is over: it sleeps 3 s
  }
  // Releases `lock` (the held one, or it extended) and checks the waiter took it before its poll.
  void release_and_check_woken(const Lock& lock) {
    const auto released = Clock::now();
    REQUIRE(holder.try_release(lock));
    auto got = waited.get();
    REQUIRE_MESSAGE(got.result, got.result.message);
    CHECK(got.at > released);
    CHECK_MESSAGE(got.at - released < slow_poll / 2,
                  "took " << ms_since(released) << " ms: it waited for its poll");
    (void)waiter.try_release(got.result.lock);
  }
  Client holder;
  Client waiter;
  AcquireResult held;
  std::future<Waited> waited;
};

TEST_CASE("wake-ups: an uncontended holder that was extended wakes the waiters that came since") {
  RedisCluster c(5);
  UncontendedHolder h(c, "long-job");
  auto ext = h.holder.try_extend(h.held.lock, 30s);  // what auto-extension does
  REQUIRE_MESSAGE(ext, ext.message);
  CHECK(ext.lock.wakes_waiters());
  h.release_and_check_woken(ext.lock);
}

// The usual job: taken with nobody waiting, held for a while, released by its holder (no
// extension, no token). Waiters that came meanwhile are woken: the hold outlasted short_hold.
TEST_CASE("wake-ups: an uncontended holder held past a short hold wakes those who came since") {
  RedisCluster c(5);
  UncontendedHolder h(c, "job");
  h.release_and_check_woken(h.held.lock);  // held for well over short_hold by now
}

TEST_CASE("wake-ups: a killed pub/sub connection comes back and listens again") {
  RedisCluster c(5);
  Client holder(options_for(c));
  Client waiter(slow_polling(c));
  auto held = holder.try_acquire({"relisten"}, ttl_opts(30s));
  REQUIRE(held);
  auto w = wait_for(waiter, "relisten", 20s);
  REQUIRE(eventually([&] { return listening_everywhere(c, "relisten"); }));
  for (std::size_t i = 0; i < c.size(); ++i)
    (void)c[i].command({"CLIENT", "KILL", "TYPE", "pubsub"});
  // Resubscribed on every node (after the reconnect backoff), and its retry after that is over.
  REQUIRE(eventually([&] { return listening_everywhere(c, "relisten"); }));
  std::this_thread::sleep_for(100ms);
  const auto released = Clock::now();
  REQUIRE(holder.try_release(Lock::from_token({"relisten"}, held.lock.token())));
  auto got = w.get();
  REQUIRE_MESSAGE(got.result, got.result.message);
  CHECK(got.at - released < slow_poll / 2);
}

TEST_CASE("wake-ups: a fair waiter's own channel comes back after its connection is killed") {
  // Fair waiters are named on their client's own channel: that subscription is resubscribed like
  // a lock's, and the waiter is named there again (no poll needed).
  RedisCluster c(5);
  AcquireOptions fair = ttl_opts(30s, 20s);
  fair.fair = true;
  fair.heartbeat_ttl = 20s;  // polls at the 3 s retry delay: only a wake-up is quick
  Client holder(options_for(c));
  Client waiter(slow_polling(c));
  auto held = holder.try_acquire({"fair-relisten"}, fair);
  REQUIRE_MESSAGE(held, held.message);
  auto w = std::async(std::launch::async, [&] {
    auto r = waiter.try_acquire({"fair-relisten"}, fair);
    return Waited{std::move(r), Clock::now()};
  });
  REQUIRE(eventually([&] { return clients_listening_everywhere(c, 1); }));
  for (std::size_t i = 0; i < c.size(); ++i)
    (void)c[i].command({"CLIENT", "KILL", "TYPE", "pubsub"});
  REQUIRE(eventually([&] { return clients_listening_everywhere(c, 1); }));
  std::this_thread::sleep_for(100ms);  // the attempt the resubscription calls for is over
  const auto released = Clock::now();
  REQUIRE(holder.try_release(held.lock));
  auto got = w.get();
  REQUIRE_MESSAGE(got.result, got.result.message);
  CHECK_MESSAGE(got.at - released < slow_poll / 2,
                "took " << ms_since(released) << " ms: it waited for its poll");
  (void)waiter.try_release(got.result.lock);
}

TEST_CASE("wake-ups: a resubscription and releases on too few nodes do not add up to an attempt") {
  // A (re)subscription says nothing about the key: counted with the releases, one node's
  // resubscription and two nodes' releases made a "quorum" and the attempt found the key still
  // held on the other three, then slept its whole poll (seen as a missed wake-up, 1 run in ~300).
  RedisCluster c(5);
  Client holder(options_for(c));
  // Its poll must not come inside the steps below, however slow the machine (seen once under
  // stress with the 3 s poll: the resubscription took long).
  Options o = slow_polling(c);
  o.retry_delay = 20s;
  Client waiter(o);
  auto held = hold_everywhere(c, holder, "partial", ttl_opts(30s));
  auto w = wait_for(waiter, "partial", 40s);
  REQUIRE(eventually([&] { return listening_everywhere(c, "partial"); }));
  // Its attempt after subscribing must be over, or a release naming it below would (rightly) make
  // it try again at once. Every node has run that attempt's SET (the holder's, the first attempt's
  // and this one: 3), so its answers are on their way; the waiter's loop reads them before it
  // notices node 0's connection closing below, and the resubscription awaited after that is
  // proof they were read. (A 100 ms sleep here lost to a loaded machine once under --stress.)
  REQUIRE(eventually([&] { return sets_everywhere(c, 3); }));
  (void)c[0].command({"CLIENT", "KILL", "TYPE", "pubsub"});
  REQUIRE(eventually([&] { return listening_everywhere(c, "partial"); }, 10s));  // within its poll
  std::this_thread::sleep_for(50ms);  // node 0's subscription is confirmed to the waiter
  const long long sets_before = calls_of(c[0], "set");
  // The release reaches nodes 3 and 4 only (a client of those two): both name the waiter.
  Client part(options_for(client_csv(c, {3, 4})));
  REQUIRE(part.try_release(Lock::from_token({"partial"}, held.lock.token())));
  std::this_thread::sleep_for(300ms);
  CHECK_MESSAGE(calls_of(c[0], "set") == sets_before,
                "the waiter tried with the key held on 3 of 5");
  // The rest of the release: now a quorum has released, and the waiter goes at once.
  Client rest(options_for(client_csv(c, {0, 1, 2})));
  const auto released = Clock::now();
  REQUIRE(rest.try_release(Lock::from_token({"partial"}, held.lock.token())));
  auto got = w.get();
  REQUIRE_MESSAGE(got.result, got.result.message);
  CHECK_MESSAGE(got.at - released < o.retry_delay / 4,
                "took " << ms_since(released) << " ms: it waited for its poll");
  (void)waiter.try_release(got.result.lock);
}

TEST_CASE("wake-ups: a release naming a client's waiter on one lock does not wake its reader") {
  // Named wake-ups come on the client's own channel, which every waiting acquisition of that
  // client hears. A reader (never named) counted them as releases of its own lock and made an
  // attempt that could only lose, one per named release.
  RedisCluster c(5);
  Client holder(options_for(c));
  Client waiter(slow_polling(c));
  AcquireOptions write = ttl_opts(30s);
  write.mode = LockMode::write;
  auto doc = holder.try_acquire({"doc"}, write);
  REQUIRE_MESSAGE(doc, doc.message);
  const auto reader_start = Clock::now();
  auto reader = std::async(std::launch::async, [&] {
    AcquireOptions read = ttl_opts(5s, 30s);
    read.mode = LockMode::read;
    auto r = waiter.try_acquire({"doc"}, read);
    return Waited{std::move(r), Clock::now()};
  });
  REQUIRE(eventually([&] { return listening_everywhere(c, "doc"); }));
  // Four times: the same client waits for "job", and a release names its waiter.
  constexpr int named_releases = 4;
  for (int k = 0; k < named_releases; ++k) {
    auto job = holder.try_acquire({"job"}, ttl_opts(30s));
    REQUIRE_MESSAGE(job, job.message);
    auto plain = wait_for(waiter, "job");
    const std::string mark = derived_key("job", KeyRole::waiting);
    REQUIRE(eventually([&] {
      for (std::size_t i = 0; i < c.size(); ++i) {
        if (c[i].command({"ZCARD", mark}).integer != 1) return false;
      }
      return true;
    }));
    // Released by token (taken uncontended, the holder's lock would not publish): it names the
    // plain waiter, on the client's own channel.
    const auto released = Clock::now();
    REQUIRE(holder.try_release(Lock::from_token({"job"}, job.lock.token())));
    auto got = plain.get();
    REQUIRE_MESSAGE(got.result, got.result.message);
    CHECK(got.at - released < slow_poll / 2);
    REQUIRE(waiter.try_release(got.result.lock));
  }
  const auto released_doc = Clock::now();
  REQUIRE(holder.try_release(Lock::from_token({"doc"}, doc.lock.token())));
  auto read = reader.get();
  REQUIRE_MESSAGE(read.result, read.result.message);
  CHECK(read.at - released_doc < slow_poll / 2);
  // One attempt at first, one or two once it listens (its two channels' confirmations can reach
  // a quorum in two sleeps on a slow build), one at the release of "doc", and one per poll if it
  // waited that long; not one per release that named the other waiter.
  CHECK(read.result.attempts <= 4 + static_cast<int>((read.at - reader_start) / slow_poll));
  (void)waiter.try_release(read.result.lock);
}

TEST_CASE("wake-ups: where pub/sub is refused, waiters are served by polling") {
  // An ACL user without channel permissions: every SUBSCRIBE fails (NOPERM). The lock works as
  // before, by polling.
  RedisCluster c(3);
  std::string csv;
  for (std::size_t i = 0; i < c.size(); ++i) {
    (void)c[i].command({"ACL", "SETUSER", "nopubsub", "on", ">pw", "~*", "+@all", "resetchannels"});
    csv += (i ? "," : "") + std::string(test_tls() ? "rediss" : "redis") +
           "://nopubsub:pw@127.0.0.1:" + std::to_string(test_tls() ? c[i].tls_port() : c[i].port());
  }
  Options o = options_for(csv);
  o.retry_delay = 200ms;
  Client holder(o), waiter(o);
  auto held = holder.try_acquire({"polled"}, ttl_opts(30s));
  REQUIRE_MESSAGE(held, held.message);
  auto w = wait_for(waiter, "polled");
  std::this_thread::sleep_for(500ms);
  const auto released = Clock::now();
  REQUIRE(holder.try_release(held.lock));
  auto got = w.get();
  REQUIRE_MESSAGE(got.result, got.result.message);
  CHECK(got.at > released);
}

TEST_CASE("wake-ups: a release by another client is noticed through keyspace notifications") {
  RedisCluster c(5);
  for (std::size_t i = 0; i < c.size(); ++i) c[i].config_set("notify-keyspace-events", "Kgx");
  // The holder is a foreign client: a raw SET NX PX on every node, released with the documented
  // compare-and-delete (no publish).
  for (std::size_t i = 0; i < c.size(); ++i) {
    (void)c[i].command({"SET", "foreign", "their-token", "NX", "PX", "30000"});
  }
  Client waiter(slow_polling(c));
  auto w = wait_for(waiter, "foreign");
  REQUIRE(eventually([&] { return listening_everywhere(c, "foreign"); }));
  std::this_thread::sleep_for(100ms);
  const auto released = Clock::now();
  for (std::size_t i = 0; i < c.size(); ++i) {
    auto r = c[i].command(
        {"EVAL",
         R"(if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end)",
         "1", "foreign", "their-token"});
    REQUIRE(r.integer == 1);
  }
  auto got = w.get();
  REQUIRE_MESSAGE(got.result, got.result.message);
  CHECK(got.at - released < slow_poll / 2);
}

TEST_CASE(
    "wake-ups: our release deletes a foreign lock's key the documented way, and theirs ours") {
  RedisCluster c(3);
  Client client(options_for(c));
  // Theirs, released by us (a token we were given, e.g. by an operator):
  for (std::size_t i = 0; i < c.size(); ++i) c[i].set("interop", std::string(40, 'e'));
  CHECK(client.try_release(Lock::from_token({"interop"}, std::string(40, 'e'))));
  for (std::size_t i = 0; i < c.size(); ++i) CHECK_FALSE(c[i].exists("interop"));
  // Ours, released by them with the documented script.
  auto ours = client.try_acquire({"interop"}, ttl_opts(30s));
  REQUIRE(ours);
  for (std::size_t i = 0; i < c.size(); ++i) {
    auto r = c[i].command(
        {"EVAL",
         R"(if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end)",
         "1", "interop", ours.lock.token()});
    CHECK(r.integer == 1);
  }
}

TEST_CASE("wake-ups: a fair release wakes the waiter it names, and the queue keeps its order") {
  RedisCluster c(5);
  AcquireOptions fair = ttl_opts(30s, 15s);
  fair.fair = true;
  // With wake-ups a fair waiter polls at the retry delay (3 s here), bounded by a quarter of its
  // heartbeat ttl: 20 s keeps that bound out of the way, so only a wake-up can be quick.
  fair.heartbeat_ttl = 20s;
  Client holder(options_for(c));
  Client first(slow_polling(c)), second(slow_polling(c));
  // A ticket taken on a node the key has not reached would not see the lock held there.
  auto held = hold_everywhere(c, holder, "queue", fair);
  const auto start1 = Clock::now();
  auto w1 = std::async(std::launch::async, [&] {
    auto r = first.try_acquire({"queue"}, fair);
    return Waited{std::move(r), Clock::now()};
  });
  REQUIRE(eventually([&] {
    auto r = c[0].command({"ZCARD", derived_key("queue", KeyRole::queue)});
    return r.integer == 1;
  }));
  const auto start2 = Clock::now();
  auto w2 = std::async(std::launch::async, [&] {
    auto r = second.try_acquire({"queue"}, fair);
    return Waited{std::move(r), Clock::now()};
  });
  REQUIRE(eventually([&] {
    auto r = c[0].command({"ZCARD", derived_key("queue", KeyRole::queue)});
    return r.integer == 2;
  }));
  // Fair waiters listen on their clients' own channels only (the lock's carries nothing for them).
  REQUIRE(eventually([&] { return clients_listening_everywhere(c, 2); }));
  CHECK(
      c[0].command({"PUBSUB", "NUMSUB", derived_key("queue", KeyRole::wake)}).elements[1].integer ==
      0);
  const auto released = Clock::now();
  REQUIRE(holder.try_release(held.lock));
  auto got1 = w1.get();
  REQUIRE_MESSAGE(got1.result, got1.result.message);
  CHECK(got1.at > released);
  CHECK_MESSAGE(got1.at - released < slow_poll / 2,
                "took " << ms_since(released) << " ms: it waited for its poll");
  CHECK(w2.wait_for(0s) != std::future_status::ready);  // second in line still waits
  const auto released1 = Clock::now();
  REQUIRE(first.try_release(got1.result.lock));
  auto got2 = w2.get();
  REQUIRE_MESSAGE(got2.result, got2.result.message);
  CHECK(got2.at > released1);
  CHECK(got2.at - released1 < slow_poll / 2);
  CHECK(got2.result.lock.ticket() > got1.result.lock.ticket());
  // Someone ahead on every node when it took its ticket, a waiter does not try before its turn:
  // one attempt once it listens (a release may have come before), one when it is named, and one
  // per poll if a slow build made it wait that long.
  const auto polls = [](Clock::duration waited) { return static_cast<int>(waited / slow_poll); };
  CHECK(got1.result.attempts <= 2 + polls(got1.at - start1));
  CHECK(got2.result.attempts <= 2 + polls(got2.at - start2));
  (void)second.try_release(got2.result.lock);
}

namespace {

// A fair lock on `key` held by `holder`, `waiter` in line for it (registered for a handoff and
// listening on every node), the lock released after `hold`: what the waiter got, and what the
// nodes say of it.
struct FairHandoff {
  Waited got;
  Clock::time_point registered_by;  // the waiter's registration was sent before this
  Clock::time_point released;
  int handed = 0;      // nodes whose per-node record says the attempt took a key handed over
  int with_token = 0;  // nodes that hold the waiter's token
};

FairHandoff fair_handoff(const RedisCluster& c, Client& holder, Client& waiter,
                         const std::string& key, Millis hold) {
  AcquireOptions fair = ttl_opts(30s, 15s);
  fair.fair = true;
  fair.heartbeat_ttl = 20s;  // the waiter polls every 3 s (its retry delay): only a wake is quick
  auto held = hold_everywhere(c, holder, key, fair);
  auto w = std::async(std::launch::async, [&] {
    auto r = waiter.try_acquire({key}, fair);
    return Waited{std::move(r), Clock::now()};
  });
  // Registered (its ticket round did it) and listening everywhere.
  REQUIRE(eventually([&] { return registered_everywhere(c, key, 1); }));
  FairHandoff h;
  h.registered_by = Clock::now();
  std::this_thread::sleep_for(hold);
  h.released = Clock::now();
  REQUIRE(holder.try_release(held.lock));
  h.got = w.get();
  REQUIRE_MESSAGE(h.got.result, h.got.result.message);
  for (const auto& n : h.got.result.lock.nodes()) {
    if (n.state == NodeState::ok && n.detail == "handed over") ++h.handed;
  }
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (c[i].get(key) == h.got.result.lock.token()) ++h.with_token;
  }
  return h;
}

}  // namespace

TEST_CASE("wake-ups: a fair release hands the key to the first waiter, whose attempt takes it") {
  RedisCluster c(5);
  Client holder(options_for(c));
  Client waiter(slow_polling(c));
  // The registration ages 1.5 s before the release (no poll comes meanwhile).
  const auto h = fair_handoff(c, holder, waiter, "handed", 1500ms);
  CHECK_MESSAGE(h.got.at - h.released < slow_poll / 2,
                "took " << ms_since(h.released) << " ms: it waited for its poll");
  // The release's name made it try at once; its attempt took the keys handed over to it (a
  // quorum of nodes say so) and holds its own token there.
  CHECK(h.handed >= 3);
  CHECK(h.with_token >= 3);
  // Its validity counts from that attempt, sent after the release: not from the registration
  // (1.5 s older), as when the release's message alone gave the lock.
  const auto since_release = std::chrono::duration_cast<Millis>(h.got.at - h.released) + Millis{1};
  const auto drift = Millis{302};  // 30 s x 0.01 + 2 ms
  CHECK(h.got.result.lock.validity() >= 30s - drift - since_release);
  CHECK(h.got.result.lock.validity() >
        30s - std::chrono::duration_cast<Millis>(h.got.at - h.registered_by));
  CHECK(waiter.try_release(h.got.result.lock));
  CHECK(c.count_with_key("handed") == 0);
  // The handoff left the waiter's heartbeat and registration with the key; the attempt that took
  // it cleared them (they would otherwise stay until the heartbeat lapsed, 20 s).
  for (std::size_t i = 0; i < c.size(); ++i) {
    CHECK(c[i].command({"HLEN", derived_key("handed", KeyRole::handoff)}).integer == 0);
    CHECK(c[i].command({"ZCARD", derived_key("handed", KeyRole::heartbeats)}).integer == 0);
  }
}

TEST_CASE(
    "wake-ups: a handoff's validity counts from the attempt that takes it, not the registration") {
  // The waiter asks for more validity than a registration 600 ms old could leave (ttl 3 s,
  // min_validity 2.7 s). When the release's message alone gave the lock, its validity counted
  // from the registration: such a handoff was given back and the waiter took a new ticket. The
  // attempt that confirms the handoff takes the key with its own t1: validity to spare.
  RedisCluster c(5);
  Options o = slow_polling(c);
  o.min_validity = 2700ms;
  Client holder(options_for(c));
  Client waiter(o);
  AcquireOptions fair = ttl_opts(3s, 10s);
  fair.fair = true;
  fair.heartbeat_ttl = 20s;
  auto held = hold_everywhere(c, holder, "stale", fair);
  auto w = std::async(std::launch::async, [&] {
    auto r = waiter.try_acquire({"stale"}, fair);
    return Waited{std::move(r), Clock::now()};
  });
  REQUIRE(eventually([&] { return registered_everywhere(c, "stale", 1); }));
  std::this_thread::sleep_for(600ms);
  const auto released = Clock::now();
  REQUIRE(holder.try_release(held.lock));
  auto got = w.get();
  REQUIRE_MESSAGE(got.result, got.result.message);
  CHECK_MESSAGE(got.at - released < slow_poll / 2,
                "took " << ms_since(released) << " ms: it waited for its poll");
  CHECK(got.result.lock.validity() > 2700ms);
  CHECK(count_state(got.result.lock.nodes(), NodeState::ok) >= 3);
  int handed = 0;
  for (const auto& n : got.result.lock.nodes()) handed += n.detail == "handed over" ? 1 : 0;
  CHECK(handed >= 3);
  CHECK(waiter.try_release(got.result.lock));
}

TEST_CASE("wake-ups: a ticket round without a quorum gives back the keys it was granted") {
  // Three of five nodes down: no ticket round finds a quorum, but the two nodes up find the key
  // free and the waiter first, and grant it. Every new ticket round registers a new token, and
  // the waiter's leaving at the end knows only its latest: each round takes a key granted under
  // the one before as its own (granted again, or given back), or it would stay for its ttl, 30 s.
  RedisCluster c(5);
  for (std::size_t i = 2; i < c.size(); ++i) c[i].kill();
  Client waiter(options_for(c));
  AcquireOptions fair = ttl_opts(30s, 1s);
  fair.fair = true;
  const auto r = waiter.try_acquire({"short"}, fair);
  CHECK_MESSAGE(r.error == Errc::no_quorum, r.message);
  CHECK(eventually([&] { return !c[0].exists("short") && !c[1].exists("short"); }, 5s));
}

TEST_CASE(
    "wake-ups: a waiter granted on too few nodes by its ticket round gives the keys back at once") {
  // Someone else holds the key on three of five nodes (set by hand; it expires silently in 2 s):
  // the waiter's ticket round is granted the two free nodes, where it is first. Node 2 answers
  // 150 ms late (CLIENT PAUSE), so the round is decided with two nodes behind, not three, and its
  // attempt goes at once; it takes the two keys as its own (acquire_fair), loses, and gives them
  // back (fair_rollback), and then waits for its poll (6 s, cut to the end of its 4 s wait)
  // holding nothing. Were the keys kept, nobody could have those two nodes until then.
  RedisCluster c(5);
  Options o = options_for(c);
  o.node_timeout = 1s;  // node 2's late answers are answers
  o.retry_delay = 6s;
  o.retry_jitter = Millis{0};
  Client waiter(o);
  AcquireOptions fair = ttl_opts(30s, 300ms);
  fair.fair = true;
  fair.heartbeat_ttl = 40s;
  // Its client listens already (a first wait's subscription would make it try once at once).
  for (std::size_t i = 0; i < c.size(); ++i)
    REQUIRE(c[i].command({"SET", "warm", "x"}).is_status("OK"));
  CHECK(waiter.try_acquire({"warm"}, fair).error == Errc::contended);
  REQUIRE(eventually([&] { return clients_listening_everywhere(c, 1); }));
  for (std::size_t i = 0; i < 3; ++i)
    REQUIRE(c[i].command({"SET", "few", "someone", "PX", "2000"}).is_status("OK"));
  fair.wait = 4s;
  REQUIRE(c[2].command({"CLIENT", "PAUSE", "150"}).is_status("OK"));
  auto w = std::async(std::launch::async, [&] { return waiter.try_acquire({"few"}, fair); });
  // Queued again on the two free nodes (the rollback put it back), their keys free.
  auto given_back = [&] {
    for (std::size_t i = 3; i < 5; ++i) {
      if (c[i].exists("few") ||
          c[i].command({"ZCARD", derived_key("few", KeyRole::queue)}).integer != 1)
        return false;
    }
    return true;
  };
  CHECK(eventually(given_back, 3s));
  auto r = w.get();
  REQUIRE_MESSAGE(r, r.message);  // its last attempt, at the end of its wait, finds the key free
  CHECK(waiter.try_release(r.lock));
}

TEST_CASE("wake-ups: a user without INFO is handed the lock too") {
  // Before handoffs were confirmed by the waiter's attempt, a handoff heard on the wake-up
  // connection counted only from a server that connection identified by INFO, which this user
  // may not run. The attempt that confirms a handoff needs nothing but the lock's own commands.
  RedisCluster c(5);
  std::string csv;
  for (std::size_t i = 0; i < c.size(); ++i) {
    (void)c[i].command({"ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info"});
    csv += (i ? "," : "") + std::string(test_tls() ? "rediss" : "redis") +
           "://noinfo:pw@127.0.0.1:" + std::to_string(test_tls() ? c[i].tls_port() : c[i].port());
  }
  // The restart guard off: on, it fails closed for a user without INFO (issue 41 item 2), and
  // these nodes would give no vote at all.
  Options unguarded = options_for(csv);
  unguarded.restart_quarantine = Millis{0};
  Options slow = unguarded;
  slow.retry_delay = slow_poll;
  slow.retry_jitter = Millis{0};
  Client holder(unguarded);
  Client waiter(slow);
  // (200 ms: past the attempt that a first subscription makes.)
  const auto h = fair_handoff(c, holder, waiter, "unvouched", 200ms);
  CHECK_MESSAGE(h.got.at - h.released < slow_poll / 2,
                "took " << ms_since(h.released) << " ms: it waited for its poll");
  CHECK(h.handed >= 3);
  CHECK(h.with_token >= 3);
  CHECK(waiter.try_release(h.got.result.lock));
  CHECK(eventually([&] { return c.count_with_key("unvouched") == 0; }));
}

namespace {

// How many waiters each node's waiting mark of `key` lists (0: no mark).
std::vector<long long> marked(const RedisCluster& c, const std::string& key) {
  std::vector<long long> n;
  for (std::size_t i = 0; i < c.size(); ++i)
    n.push_back(c[i].command({"ZCARD", derived_key(key, KeyRole::waiting)}).integer);
  return n;
}

bool marked_everywhere(const RedisCluster& c, const std::string& key, long long count) {
  for (long long n : marked(c, key)) {
    if (n != count) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("wake-ups: a release names the plain waiter that has waited longest, and only it tries") {
  RedisCluster c(5);
  Client holder(options_for(c));
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(std::make_unique<Client>(slow_polling(c)));
  auto held = hold_everywhere(c, holder, "named", ttl_opts(30s));
  // Each starts waiting once the one before is on the mark: that is the order they are served
  // in. They poll every 3 s: only a release naming each in turn can serve all four quickly; a
  // release that woke everyone would hand the lock to a random one of them.
  std::vector<std::future<Waited>> waits;
  for (int i = 0; i < 4; ++i) {
    waits.push_back(wait_for(*clients[static_cast<std::size_t>(i)], "named", 20s));
    REQUIRE(eventually([&] { return marked_everywhere(c, "named", i + 1); }));
  }
  std::this_thread::sleep_for(100ms);  // their attempts after subscribing are over
  auto released = Clock::now();
  REQUIRE(holder.try_release(Lock::from_token({"named"}, held.lock.token())));
  for (int i = 0; i < 4; ++i) {
    auto got = waits[static_cast<std::size_t>(i)].get();
    REQUIRE_MESSAGE(got.result, "waiter " << i << ": " << got.result.message);
    CHECK(got.at > released);
    CHECK_MESSAGE(got.at - released < slow_poll / 2, "waiter " << i << " took "
                                                               << ms_since(released)
                                                               << " ms: it waited for its poll");
    for (int j = i + 1; j < 4; ++j)
      CHECK_MESSAGE(waits[static_cast<std::size_t>(j)].wait_for(0s) != std::future_status::ready,
                    "waiter " << j << " got the lock before waiter " << i);
    released = Clock::now();
    REQUIRE(clients[static_cast<std::size_t>(i)]->try_release(got.result.lock));
  }
  // Every waiter took itself off the mark: nothing is left behind.
  CHECK(eventually([&] {
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (c[i].exists(derived_key("named", KeyRole::waiting))) return false;
    }
    return true;
  }));
}

TEST_CASE("wake-ups: a release that names a waiter that is gone leaves the lock to polling") {
  RedisCluster c(5);
  Client holder(options_for(c));
  Options quick = options_for(c);
  quick.retry_delay = 300ms;
  quick.retry_jitter = 0ms;
  Client waiter(quick);
  auto held = holder.try_acquire({"ghost"}, ttl_opts(30s));
  REQUIRE_MESSAGE(held, held.message);
  auto w = wait_for(waiter, "ghost", 20s);
  REQUIRE(eventually([&] { return marked_everywhere(c, "ghost", 1); }));
  // A waiter whose process died first in line: the release names it, and nobody hears.
  for (std::size_t i = 0; i < c.size(); ++i) {
    (void)c[i].command({"ZADD", derived_key("ghost", KeyRole::waiting), "1",
                        "dead-waiter@" + derived_key("nobody", KeyRole::wake)});
  }
  REQUIRE(holder.try_release(Lock::from_token({"ghost"}, held.lock.token())));
  auto got = w.get();
  REQUIRE_MESSAGE(got.result, got.result.message);
  // It was named (and so taken off the mark), and the live waiter was served by its poll. The
  // release returns once every node answered or timed out: on a loaded machine a node may run it
  // after the waiter's poll won on the others (seen once under load).
  for (std::size_t i = 0; i < c.size(); ++i) {
    CHECK(eventually([&] {
      return c[i]
          .command({"ZSCORE", derived_key("ghost", KeyRole::waiting),
                    "dead-waiter@" + derived_key("nobody", KeyRole::wake)})
          .is_nil();
    }));
  }
  (void)waiter.try_release(got.result.lock);
}

TEST_CASE("wake-ups: a waiter's attempt that won too few nodes stays first in line there") {
  // The holder's key is deleted by hand on nodes 0 and 1 (as a release that reached only them
  // would): the first waiter's next poll wins those two, loses the quorum and rolls back there.
  // That rollback must leave the waiters' marks as they were: had it taken the first waiter off
  // (naming itself), the next release would name it on three nodes and someone else on two.
  // And it names nobody: an attempt that held nothing frees nothing a waiter waits for (it named
  // the next waiter until 2026-12, and waiters woke each other into a storm: hazard 12).
  RedisCluster c(5);
  Client holder(options_for(c));
  Client first(slow_polling(c));
  Options later = slow_polling(c);
  later.retry_delay = 20s;  // its own poll never comes inside this test's steps
  Client second(later);
  auto held = hold_everywhere(c, holder, "minority", ttl_opts(30s));
  const std::string mark = derived_key("minority", KeyRole::waiting);
  // Each waiter's first attempt and the one its subscription calls for are over (a SET each on
  // every node), so the only attempt below is the first's poll.
  auto w1 = wait_for(first, "minority", 20s);
  REQUIRE(eventually([&] { return marked_everywhere(c, "minority", 1); }));
  REQUIRE(eventually([&] { return sets_everywhere(c, 3); }));
  const std::string first_id = c[0].command({"ZRANGE", mark, "0", "0"}).elements.at(0).str;
  std::optional<std::future<Waited>> w2;
  SUBCASE("alone: its rollback names nobody") {}
  SUBCASE("with a second waiter: not named either, and neither leaves the mark") {
    std::this_thread::sleep_for(5ms);  // a later rank than the first's (ms)
    w2 = wait_for(second, "minority", 40s);
    REQUIRE(eventually([&] { return marked_everywhere(c, "minority", 2); }));
    REQUIRE(eventually([&] { return sets_everywhere(c, 5); }));
  }
  const long long sets[2] = {calls_of(c[0], "set"), calls_of(c[1], "set")};
  const long long published[2] = {calls_of(c[0], "publish"), calls_of(c[1], "publish")};
  c[0].del("minority");
  c[1].del("minority");
  // Its poll (3 s) took both nodes and gave them back (the rollback follows the SET on its
  // connection: a node that ran the SET and has no key ran the rollback).
  REQUIRE(eventually(
      [&] {
        for (std::size_t i = 0; i < 2; ++i) {
          if (calls_of(c[i], "set") == sets[i] || c[i].exists("minority")) return false;
        }
        return true;
      },
      10s));
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK_FALSE(c[i].command({"ZSCORE", mark, first_id}).is_nil());
    CHECK(c[i].command({"ZCARD", mark}).integer == (w2 ? 2 : 1));
    CHECK(calls_of(c[i], "publish") == published[i]);
  }
  CHECK(w1.wait_for(0s) != std::future_status::ready);
  // Then the holder's release names the first everywhere, and the first's names the second.
  auto released = Clock::now();
  REQUIRE(holder.try_release(Lock::from_token({"minority"}, held.lock.token())));
  auto got = w1.get();
  REQUIRE_MESSAGE(got.result, got.result.message);
  CHECK_MESSAGE(got.at - released < slow_poll / 2,
                "took " << ms_since(released) << " ms: it waited for its poll");
  if (w2) {
    CHECK(w2->wait_for(0s) != std::future_status::ready);
    // Let the first's release reach node 4 first: one node of that release is no quorum. (Before
    // names were counted per release, a rollback's names on nodes 0 and 1 counted with it: the
    // second tried here, lost on the four nodes still held and slept its 20 s poll.)
    const long long sets_before = calls_of(c[0], "set");
    Client part(options_for(client_csv(c, {4})));
    REQUIRE(part.try_release(Lock::from_token({"minority"}, got.result.lock.token())));
    std::this_thread::sleep_for(300ms);
    CHECK_MESSAGE(calls_of(c[0], "set") == sets_before,
                  "the second tried with the key held on 4 of 5");
    // The rest of the release: a quorum of its nodes names the second, which goes at once.
    released = Clock::now();
    REQUIRE(first.try_release(got.result.lock));
    auto got2 = w2->get();
    REQUIRE_MESSAGE(got2.result, got2.result.message);
    CHECK(got2.at > released);
    CHECK_MESSAGE(got2.at - released < later.retry_delay / 4,
                  "took " << ms_since(released) << " ms: it waited for its poll");
    (void)second.try_release(got2.result.lock);
  } else {
    (void)first.try_release(got.result.lock);
  }
}

TEST_CASE("wake-ups: a key handed over at a node's own count, not the agreed ticket, goes back") {
  // The window a release can fall in on nodes whose ticket counter lags (they missed a taker
  // while its client could not reach them): a newcomer's ticket round is placed there by the
  // node's count, 222, ahead of a waiter x queued at its ticket 223, while the newcomer's agreed
  // ticket, from the other nodes, is 224. A release there before the newcomer's settle hands it
  // the key. The race itself cannot be timed from a test, so the state it leaves is made by hand:
  // the three keys set to the newcomer's registered token and the names published, as the
  // release script does. Taken, they would be a quorum out of turn; the newcomer's attempt (the
  // names woke it) gives them back instead (x is queued below its ticket there).
  RedisCluster c(5);
  const std::string key = "lagging";
  const std::string holder = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  const std::string x = "x@chan-x";
  const long long later = 4'000'000'000'000LL;  // heartbeats (server ms) that stay live
  for (std::size_t i = 0; i < c.size(); ++i) {
    const bool lags = i < 3;
    (void)c[i].command({"SET", key, holder, "PX", "30000"});
    (void)c[i].command({"SET", derived_key(key, KeyRole::ticket), lags ? "221" : "223"});
    (void)c[i].command({"ZADD", derived_key(key, KeyRole::queue), "223", x});
    (void)c[i].command({"ZADD", derived_key(key, KeyRole::heartbeats), std::to_string(later), x});
    (void)c[i].command({"HSET", derived_key(key, KeyRole::handoff), x, "30000 " + holder});
  }
  Options o = slow_polling(c);
  o.node_timeout = 2s;  // node 2's answer comes late (paused), and still counts as its count
  o.retry_delay = 20s;  // no poll of its own (an attempt: a new registration) inside the steps
  Client newcomer(o);
  AcquireOptions fair = ttl_opts(30s, 20s);
  fair.fair = true;
  fair.heartbeat_ttl = 20s;
  {
    // A fair wait subscribes the client's own channel, which stays: the wait below makes no
    // attempt for a first subscription, and its ticket round's registration stays its latest.
    for (std::size_t i = 0; i < c.size(); ++i) (void)c[i].command({"SET", "warm-up", holder});
    AcquireOptions briefly = fair;
    briefly.wait = 300ms;
    CHECK_FALSE(newcomer.try_acquire({"warm-up"}, briefly));
    REQUIRE(eventually([&] { return clients_listening_everywhere(c, 1); }));
  }
  // Node 2 answers the ticket round late: the round is decided with 224 from node 3 or 4 (nodes
  // 0 and 1 alone are no quorum).
  REQUIRE(c[2].command({"CLIENT", "PAUSE", "400"}).is_status("OK"));
  auto w = std::async(std::launch::async, [&] {
    auto r = newcomer.try_acquire({key}, fair);
    return Waited{std::move(r), Clock::now()};
  });
  // Its ticket round ran everywhere (x and it registered) and its client listens everywhere.
  REQUIRE(eventually([&] { return registered_everywhere(c, key, 2); }));
  std::string id;
  for (const auto& f : c[0].command({"HKEYS", derived_key(key, KeyRole::handoff)}).elements) {
    if (f.str != x) id = f.str;
  }
  REQUIRE(id.find('@') != std::string::npos);
  const std::string channel = id.substr(id.find('@') + 1);
  const std::string sha = c[0].command({"EVAL", "return redis.sha1hex(ARGV[1])", "0", holder}).str;
  for (std::size_t i = 0; i < 3; ++i) {
    const auto reg = c[i].command({"HGET", derived_key(key, KeyRole::handoff), id}).str;
    const auto space = reg.find(' ');
    REQUIRE_MESSAGE(space != std::string::npos, reg);
    (void)c[i].command({"SET", key, reg.substr(space + 1), "PX", "30000"});
    (void)c[i].command({"ZREM", derived_key(key, KeyRole::queue), id});
    (void)c[i].command({"PUBLISH", channel, id + "/" + sha});
  }
  // Its attempt (the three names woke it) gave the keys back where x is below its ticket.
  CHECK(eventually([&] {
    for (std::size_t i = 0; i < 3; ++i) {
      if (c[i].exists(key)) return false;
    }
    return true;
  }));
  std::this_thread::sleep_for(500ms);
  CHECK_MESSAGE(w.wait_for(0s) != std::future_status::ready,
                "the newcomer acquired ahead of the waiter with the lower ticket");
  // x leaves and the holder's keys go: the newcomer's turn.
  for (std::size_t i = 0; i < c.size(); ++i) {
    (void)c[i].command({"ZREM", derived_key(key, KeyRole::queue), x});
    (void)c[i].command({"ZREM", derived_key(key, KeyRole::heartbeats), x});
    (void)c[i].command({"HDEL", derived_key(key, KeyRole::handoff), x});
    c[i].del(key);
  }
  auto got = w.get();
  REQUIRE_MESSAGE(got.result, got.result.message);
  CHECK(newcomer.try_release(got.result.lock));
}

// Forged messages (algorithm.md, hazard 10): a lock is held only on the word of a quorum of
// replies to commands the client sent, never of a message. The forger is what an ACL user that
// may only read keys and PUBLISH can do: everything a wake-up says can be written by it.
namespace {

class Forger {
 public:
  explicit Forger(const RedisCluster& c) {
    for (std::size_t i = 0; i < c.size(); ++i) {
      REQUIRE(c[i].command({"ACL", "SETUSER", "forger", "reset", "on", ">pw", "~*", "&*", "+@read",
                            "+publish"})
                  .is_status("OK"));
      auto at = nodes::Endpoint::local(test_tls() ? c[i].tls_port() : c[i].port());
      if (const auto* tls = test_tls()) at.tls = nodes::Tls{.ca_file = tls->ca_cert()};
      nodes::ClientOptions o;
      o.user = "forger";
      o.password = "pw";
      clients_.emplace_back(at, o);
      REQUIRE_MESSAGE(clients_.back().ok(), clients_.back().error());
    }
    // It may not write a key (so it cannot take or hand over a lock itself).
    auto set = as_forger(0, {"SET", "forger-was-here", "x"});
    REQUIRE_MESSAGE(set.is_error("NOPERM"), nodes::reply_text(set));
  }
  // One command as the forger on node i.
  nodes::Reply as_forger(std::size_t i, const std::vector<std::string>& argv) {
    auto r = clients_.at(i).command(argv);
    REQUIRE_MESSAGE(r, clients_.at(i).error());
    return *r;
  }
  // `message` on `channel` on every node, as a release publishes it on every node it reaches.
  void publish_everywhere(const std::string& channel, const std::string& message) {
    for (std::size_t i = 0; i < clients_.size(); ++i) {
      auto r = as_forger(i, {"PUBLISH", channel, message});
      REQUIRE_MESSAGE(r.type == nodes::Reply::Type::integer, nodes::reply_text(r));
    }
  }

 private:
  std::vector<nodes::SyncClient> clients_;
};

bool holds_everywhere(const RedisCluster& c, const std::string& key, const std::string& token) {
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (c[i].get(key) != token) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("forged wake-ups: a forged handoff does not give a fair waiter the lock another holds") {
  // A holds a fair lock, B waits for it in line. The forger reads B's id (and, where the
  // registration carries one, its serial) in the handoff hash and publishes on B's channel on
  // every node what a release that handed B the lock publishes. Before 2026-12 B took the lock on
  // those messages alone, A's token still on every node (issue 40, item 2).
  RedisCluster c(5);
  Forger forger(c);
  AcquireOptions fair = ttl_opts(30s, 20s);
  fair.fair = true;
  fair.heartbeat_ttl = 20s;  // B polls at its 3 s retry delay: nothing else happens meanwhile
  Client a(options_for(c));
  Client b(slow_polling(c));
  auto held = hold_everywhere(c, a, "forged", fair);
  AcquireOptions briefly = fair;
  briefly.wait = 2500ms;  // ends before its first poll
  auto w = std::async(std::launch::async, [&] {
    auto r = b.try_acquire({"forged"}, briefly);
    return Waited{std::move(r), Clock::now()};
  });
  REQUIRE(eventually([&] { return registered_everywhere(c, "forged", 1); }));
  // B is the queue's first (A's own registration stays in the hash while it holds the lock).
  const std::string id =
      forger.as_forger(0, {"ZRANGE", derived_key("forged", KeyRole::queue), "0", "0"})
          .elements.at(0)
          .str;
  REQUIRE(forger.as_forger(0, {"HEXISTS", derived_key("forged", KeyRole::handoff), id}).integer ==
          1);
  const std::string channel = id.substr(id.find('@') + 1);
  const std::string hash(40, 'f');  // any: the waiter cannot tell which token was released
  // What a release that handed B the lock publishes: the name, and (while registrations carried
  // one, "<serial> <ttl> <token>") the serial of B's registration; then a name alone.
  const std::string reg =
      forger.as_forger(0, {"HGET", derived_key("forged", KeyRole::handoff), id}).str;
  if (std::count(reg.begin(), reg.end(), ' ') == 2)
    forger.publish_everywhere(channel, id + "/" + hash + "/" + reg.substr(0, reg.find(' ')));
  forger.publish_everywhere(channel, id + "/" + hash);
  auto got = w.get();
  CHECK_MESSAGE(got.result.error == Errc::contended,
                "B acquired while A holds the lock: " << got.result.message);
  CHECK(holds_everywhere(c, "forged", held.lock.token()));
  // The messages were a hint: an attempt (its replies said held), not a lock.
  CHECK(got.result.attempts >= 1);
  CHECK(a.try_release(held.lock));
}

TEST_CASE("forged wake-ups: each forged wake-up of a plain waiter costs one attempt, no lock") {
  // The other wake-up paths: a release that names nobody ("#<n>" on the lock's channel), one that
  // names the waiter (on its client's channel), and keyspace notifications of a deletion or an
  // expiry (anyone may publish on a __keyspace@ channel). Each may make the waiter try once; the
  // try finds the key held on every node and the waiter goes back to sleep. (The `listening`
  // wake-up is a reply to the client's own SUBSCRIBE: a PUBLISH cannot make one.)
  RedisCluster c(5);
  Forger forger(c);
  Client a(options_for(c));
  Options o = slow_polling(c);
  o.retry_delay = 30s;  // no poll of its own inside the test
  Client b(o);
  auto held = hold_everywhere(c, a, "swept", ttl_opts(30s));
  auto w = wait_for(b, "swept", 60s);
  REQUIRE(eventually([&] { return marked_everywhere(c, "swept", 1); }));
  REQUIRE(eventually([&] { return listening_everywhere(c, "swept"); }));
  // Its first attempt and the one or two its subscriptions call for (its two channels'
  // confirmations can reach a quorum in two sleeps on a slow machine) are over: no SET for 500 ms.
  REQUIRE(eventually([&] { return sets_everywhere(c, 3); }));
  REQUIRE(eventually([&] {
    const long long before = calls_of(c[0], "set");
    std::this_thread::sleep_for(500ms);
    return calls_of(c[0], "set") == before;
  }));
  const long long attempts_before = calls_of(c[0], "set") - 1;  // all but A's SET
  const std::string id =
      forger.as_forger(0, {"ZRANGE", derived_key("swept", KeyRole::waiting), "0", "0"})
          .elements.at(0)
          .str;
  struct Forgery {
    std::string what;
    std::string channel, message;
  };
  const std::string keyspace = "__keyspace@0__:swept";
  const Forgery forgeries[] = {
      {"a release that names nobody", derived_key("swept", KeyRole::wake), "#1"},
      {"a release that names the waiter", id.substr(id.find('@') + 1),
       id + "/" + std::string(40, 'e')},
      {"a keyspace deletion", keyspace, "del"},
      {"a keyspace expiry", keyspace, "expired"},
  };
  const long long sets_before = calls_of(c[0], "set");
  for (const auto& f : forgeries) {
    CAPTURE(f.what);
    const long long sets = calls_of(c[0], "set");
    forger.publish_everywhere(f.channel, f.message);
    CHECK(eventually([&] { return sets_everywhere(c, sets + 1); }));
    std::this_thread::sleep_for(300ms);
    CHECK(w.wait_for(0s) != std::future_status::ready);
    CHECK(holds_everywhere(c, "swept", held.lock.token()));
    // Named, it marks itself waiting again (a release's name takes it off; a forged one does not).
    REQUIRE(eventually([&] { return marked_everywhere(c, "swept", 1); }));
  }
  // An attempt needs a quorum of messages heard in one sleep: 4 x 5 messages make at most 6. (A
  // forgery's last messages can land in the sleep after the attempt its first ones started, and
  // count there with the next forgery's: seen beside stress-ng, 5 attempts for the 4.)
  const long long forged_attempts = calls_of(c[0], "set") - sets_before;
  CHECK(forged_attempts >= 4);
  CHECK(forged_attempts <= 4 * 5 / 3);
  // A real release still wakes it.
  REQUIRE(a.try_release(Lock::from_token({"swept"}, held.lock.token())));
  auto got = w.get();
  REQUIRE_MESSAGE(got.result, got.result.message);
  CHECK(got.result.attempts == attempts_before + forged_attempts + 1);
  CHECK(b.try_release(got.result.lock));
}

TEST_CASE("forged wake-ups: after a failure of no quorum, nothing heard shortens the retry delay") {
  // Hazard 12. No vote counts here (restart guard: no node has been up for an hour), so no
  // attempt can win, and no release would change that. What the waiter hears meanwhile (a
  // release that names nobody, its own name, a keyspace deletion: forged here; real ones, from
  // the other waiters' releases and attempts, made thousands of attempts per waiter in 3 s in
  // issue 41) must not make it try before its retry delay is over.
  RedisCluster c(5);
  Forger forger(c);
  Options o = options_for(c);
  o.min_node_uptime = std::chrono::hours{1};
  o.retry_delay = 1s;
  o.retry_jitter = Millis{0};
  Client b(o);
  auto w = wait_for(b, "quarantined", 2500ms);
  REQUIRE(eventually([&] { return listening_everywhere(c, "quarantined"); }));
  REQUIRE(eventually([&] { return marked_everywhere(c, "quarantined", 1); }));
  const std::string id =
      forger.as_forger(0, {"ZRANGE", derived_key("quarantined", KeyRole::waiting), "0", "0"})
          .elements.at(0)
          .str;
  for (int k = 0; k < 10 && w.wait_for(0s) != std::future_status::ready; ++k) {
    forger.publish_everywhere(derived_key("quarantined", KeyRole::wake), "#1");
    forger.publish_everywhere(id.substr(id.find('@') + 1), id + "/" + std::string(40, 'd'));
    forger.publish_everywhere("__keyspace@0__:quarantined", "del");
    std::this_thread::sleep_for(100ms);
  }
  auto got = w.get();
  CHECK_MESSAGE(got.result.error == Errc::no_quorum, got.result.message);
  // At 0, 1 s and 2 s, and the last one at the end of the wait (2.5 s); fewer on a slow machine.
  CHECK(got.result.attempts <= 4);
  CHECK(eventually([&] { return c.count_with_key("quarantined") == 0; }));
}
