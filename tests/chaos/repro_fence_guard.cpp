// chaos-repro-fence-guard: a deterministic reproduction of a fence regression with the restart
// guard ON and no persistence, using only faults of the "must be zero" classes (kill -9 of at
// most N-Q nodes with a restart delayed past the ttl, SIGSTOP of nodes).
//
// The README says fences grow strictly "while nodes keep their counters: appendfsync always, or the
// restart guard". The guard waits out *lock keys* (they expire after one ttl), but fence counters
// never expire: a node that comes back empty comes back with counter 0 however long it is
// quarantined, and nothing re-seeds it if the resource is idle meanwhile.
//
//   1. all 5 nodes up; one fenced acquire/release so the client knows every run_id (fence 1)
//   2. kill -9 node 4; five fenced acquire/release: fences 2..6, nodes 0-3 hold counter 6
//   3. restart node 4 (empty); wait out its quarantine with the resource idle
//   4. kill -9 nodes 0 and 1, restart them after more than one ttl (empty); wait out the quarantine
//   5. SIGSTOP nodes 2 and 3 (the only ones left with counter 6)
//   6. fenced acquire: nodes 0, 1, 4 grant (a quorum), fence = 1 < 6
// At no moment are more than N-Q = 2 nodes down or paused.
//
// Exit status: 1 if the fence went backwards (reproduced), 0 if not, 77 without redis-server.

#include <chrono>
#include <cstdio>
#include <thread>

#include "redis_fixture.hpp"
#include "redlock/redlock.hpp"

using namespace std::chrono_literals;

int main() {
  if (!redlock::test::redis_server_available()) {
    std::puts("SKIP: redis-server not found");
    return 77;
  }
  redlock::test::RedisCluster c(5);  // --save "" --appendonly no
  std::string err;
  redlock::Options o;
  o.nodes = *redlock::parse_node_list(c.nodes_csv(), err);
  o.retry_count = 0;
  o.reconnect_min = 10ms;
  o.reconnect_max = 50ms;
  o.restart_quarantine = 300ms;  // guard on: longer than the ttl below (default would be ~30 s)
  o.min_node_uptime = 0ms;
  redlock::Client client(o);

  redlock::AcquireOptions ao;
  ao.ttl = 200ms;
  ao.fence = true;
  ao.wait = 2000ms;  // retried until the client has (re)connected
  const std::string res = "repro:fence";

  auto take = [&](const char* step) -> std::uint64_t {
    auto r = client.try_acquire({res}, ao);
    if (!r) {
      std::printf("%-60s acquire failed: %s\n", step, r.message.c_str());
      return 0;
    }
    std::string who;
    for (const auto& n : r.lock.nodes()) who += std::string(" ") + redlock::to_string(n.state);
    std::printf("%-60s fence %llu  (nodes:%s)\n", step,
                static_cast<unsigned long long>(*r.lock.fence()), who.c_str());
    (void)client.try_release(r.lock);
    return *r.lock.fence();
  };

  std::this_thread::sleep_for(200ms);
  take("1. all nodes up");
  c[4].kill();
  std::uint64_t highest = 0;
  for (int i = 0; i < 5; ++i) highest = take("2. node 4 down");
  c[4].start();
  std::this_thread::sleep_for(1000ms);  // quarantine 300 ms; the resource stays idle
  c[0].kill();
  c[1].kill();
  std::this_thread::sleep_for(400ms);  // delayed restart: more than ttl + drift
  c[0].start();
  c[1].start();
  std::this_thread::sleep_for(1000ms);  // quarantine passes; the resource stays idle
  c[2].stop();
  c[3].stop();
  const std::uint64_t f = take("6. nodes 2,3 paused; 0,1 restarted, 4 restarted earlier");
  c[2].cont();
  c[3].cont();
  if (f != 0 && f <= highest) {
    std::printf(
        "REPRODUCED: fence %llu handed out after fence %llu (fences went backwards with the "
        "restart guard on)\n",
        static_cast<unsigned long long>(f), static_cast<unsigned long long>(highest));
    return 1;
  }
  std::puts("not reproduced");
  return 0;
}
