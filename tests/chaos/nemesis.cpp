#include "nemesis.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <thread>

#include "common.hpp"
#include "nodes/client.hpp"
#include "oracle.hpp"
#include "partition.hpp"
#include "sentinel_fixture.hpp"
#include "workers.hpp"

namespace chaos {

const char* to_string(Fault f) {
  switch (f) {
    case Fault::node_kill_delayed:
      return "node-kill-delayed";
    case Fault::node_kill_aof:
      return "node-kill-aof";
    case Fault::node_pause:
      return "node-pause";
    case Fault::client_pause_acquire:
      return "client-pause-acquire";
    case Fault::client_kill:
      return "client-kill";
    case Fault::clock_jump:
      return "clock-jump";
    case Fault::holder_pause:
      return "holder-pause";
    case Fault::leader_pause:
      return "leader-pause";
    case Fault::restart_empty:
      return "restart-empty";
    case Fault::partition:
      return "partition";
    case Fault::sentinel_failover:
      return "sentinel-failover";
    case Fault::sentinel_kill_master:
      return "sentinel-kill-master";
    case Fault::cluster_migrate:
      return "cluster-migrate";
    case Fault::cluster_kill_master:
      return "cluster-kill-master";
    case Fault::cluster_failover:
      return "cluster-failover";
  }
  return "?";
}

Nemesis::Nemesis(NemesisSettings s, redlock::test::RedisCluster* cluster, WorkerPool& workers,
                 Oracle& oracle, std::uint64_t seed)
    : s_(std::move(s)),
      cluster_(cluster),
      workers_(workers),
      oracle_(oracle),
      rng_(seed),
      node_down_(cluster != nullptr ? cluster->size() : 0, false),
      node_paused_(cluster != nullptr ? cluster->size() : 0, false),
      slot_busy_(static_cast<std::size_t>(workers.size()), false),
      vote_busy_(std::max(s_.master_names.size(), s_.clusters.size()), false) {}

long Nemesis::uniform(long lo, long hi) {
  if (hi <= lo) return lo;
  return std::uniform_int_distribution<long>(lo, hi)(rng_);
}

void Nemesis::note(const std::string& what) {
  const std::lock_guard<std::recursive_mutex> lock(mu_);
  char head[32];
  std::snprintf(head, sizeof head, "%8.3f s  ", static_cast<double>(mono_ns() - t0_) / 1e9);
  log_.push_back(head + what);
  if (s_.verbose) std::fprintf(stderr, "  nemesis %s%s\n", head, what.c_str());
}

void Nemesis::at(Clock when, std::function<void()> fn) { queue_.emplace(when, std::move(fn)); }

void Nemesis::run_due(Clock now) {
  while (!queue_.empty() && queue_.begin()->first <= now) {
    auto fn = std::move(queue_.begin()->second);
    queue_.erase(queue_.begin());
    fn();
  }
}

void Nemesis::run(long duration_ms) {
  t0_ = mono_ns();
  const Clock end = t0_ + duration_ms * 1'000'000LL;
  // The first fault comes after a short warm-up so every mix starts from a working system.
  Clock next_fault = t0_ + uniform(s_.gap_min_ms, s_.gap_max_ms) * 1'000'000LL;
  for (;;) {
    const Clock now = mono_ns();
    if (now >= end) break;
    run_due(now);
    workers_.check_unexpected_exits();
    // No new fault in the last second: every mix ends with a moment of calm before the heal.
    if (!s_.faults.empty() && now >= next_fault && now < end - 1'000'000'000LL) {
      const Fault f =
          s_.faults[static_cast<std::size_t>(uniform(0, static_cast<long>(s_.faults.size()) - 1))];
      inject(f);
      next_fault = mono_ns() + uniform(s_.gap_min_ms, s_.gap_max_ms) * 1'000'000LL;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  heal_all();
}

void Nemesis::heal_all() {
  // Run every pending heal now (restarts, SIGCONTs, end of pauses), in time order.
  while (!queue_.empty()) run_due(queue_.rbegin()->first);
  if (cluster_ != nullptr) cluster_->heal();
  for (int i = 0; i < workers_.size(); ++i) {
    workers_.cont(i);
    oracle_.end_pause(i);
  }
  if (!s_.faketime_file.empty()) write_faketime("+0");
  if (s_.partitioner != nullptr) s_.partitioner->heal();
  note("healed everything");
}

void Nemesis::inject(Fault f) {
  switch (f) {
    case Fault::node_kill_delayed:
      node_kill(false);
      break;
    case Fault::node_kill_aof:
      node_kill(true);
      break;
    case Fault::node_pause:
      node_pause();
      break;
    case Fault::client_pause_acquire:
      client_pause_acquire();
      break;
    case Fault::client_kill:
      client_kill();
      break;
    case Fault::clock_jump:
      clock_jump();
      break;
    case Fault::holder_pause:
      holder_pause();
      break;
    case Fault::leader_pause:
      leader_pause();
      break;
    case Fault::restart_empty:
      restart_empty();
      break;
    case Fault::partition:
      partition();
      break;
    case Fault::sentinel_failover:
      sentinel_failover();
      break;
    case Fault::sentinel_kill_master:
      sentinel_kill_master();
      break;
    case Fault::cluster_migrate:
      cluster_migrate();
      break;
    case Fault::cluster_kill_master:
      cluster_promote(/*kill=*/true);
      break;
    case Fault::cluster_failover:
      cluster_promote(/*kill=*/false);
      break;
  }
}

int Nemesis::pick_idle_slot() {
  std::vector<int> idle;
  for (int i = 0; i < workers_.size(); ++i) {
    if (!slot_busy_[static_cast<std::size_t>(i)]) idle.push_back(i);
  }
  if (idle.empty()) return -1;
  return idle[static_cast<std::size_t>(uniform(0, static_cast<long>(idle.size()) - 1))];
}

void Nemesis::start_node(int i) {
  auto& srv = (*cluster_)[static_cast<std::size_t>(i)];
  const auto port = srv.port();
  try {
    srv.start();
  } catch (const std::exception& e) {
    errors_.push_back(std::string("restart of node ") + std::to_string(i) + " failed: " + e.what());
  }
  if (srv.port() != port)
    errors_.push_back("node " + std::to_string(i) + " came back on another port");
  node_down_[static_cast<std::size_t>(i)] = false;
}

// kill -9 of up to N-Q nodes. Without AOF the restart waits more than one ttl (plus drift), so
// every key the node held has expired everywhere by then; with AOF always it is at once.
void Nemesis::node_kill(bool aof) {
  const int n = static_cast<int>(cluster_->size());
  const int max_down = n - (n / 2 + 1);
  int down = 0;
  std::vector<int> up;
  for (int i = 0; i < n; ++i) {
    if (node_down_[static_cast<std::size_t>(i)])
      ++down;
    else if (!node_paused_[static_cast<std::size_t>(i)])
      up.push_back(i);
  }
  const int room = max_down - down;
  if (room <= 0 || up.empty()) return;
  const int k = static_cast<int>(uniform(1, std::min<long>(room, static_cast<long>(up.size()))));
  std::shuffle(up.begin(), up.end(), rng_);
  for (int j = 0; j < k; ++j) {
    const int i = up[static_cast<std::size_t>(j)];
    (*cluster_)[static_cast<std::size_t>(i)].kill();
    node_down_[static_cast<std::size_t>(i)] = true;
    ++counts_[aof ? "node-kill-aof" : "node-kill-delayed"];
    if (aof) {
      note("kill -9 node " + std::to_string(i) + ", restart at once (AOF always)");
      start_node(i);
    } else {
      const long delay = uniform(s_.ttl_ms + 300, 2 * s_.ttl_ms + 500);
      note("kill -9 node " + std::to_string(i) + ", restart in " + std::to_string(delay) + " ms");
      at(mono_ns() + delay * 1'000'000LL, [this, i] {
        start_node(i);
        note("restarted node " + std::to_string(i) + " (empty)");
      });
    }
  }
}

// SIGSTOP of 1..N-Q+1 nodes (sometimes a majority: no quorum at all) for 50 ms .. 2 ttl.
void Nemesis::node_pause() {
  const int n = static_cast<int>(cluster_->size());
  std::vector<int> up;
  for (int i = 0; i < n; ++i) {
    if (!node_down_[static_cast<std::size_t>(i)] && !node_paused_[static_cast<std::size_t>(i)])
      up.push_back(i);
  }
  if (up.empty()) return;
  const int k = static_cast<int>(
      uniform(1, std::min<long>(n - (n / 2 + 1) + 1, static_cast<long>(up.size()))));
  std::shuffle(up.begin(), up.end(), rng_);
  for (int j = 0; j < k; ++j) {
    const int i = up[static_cast<std::size_t>(j)];
    const long dur = uniform(50, 2 * s_.ttl_ms);
    (*cluster_)[static_cast<std::size_t>(i)].stop();
    node_paused_[static_cast<std::size_t>(i)] = true;
    ++counts_["node-pause"];
    note("SIGSTOP node " + std::to_string(i) + " for " + std::to_string(dur) + " ms");
    at(mono_ns() + dur * 1'000'000LL, [this, i] {
      (*cluster_)[static_cast<std::size_t>(i)].cont();
      node_paused_[static_cast<std::size_t>(i)] = false;
      note("SIGCONT node " + std::to_string(i));
    });
  }
}

// SIGSTOP of a worker while it acquires: half the time right after it announced a try_acquire
// (the pause falls inside the call), half the time right after a successful one (between the
// acquisition and its validity check). Half the pauses outlast the ttl: that worker must then
// not enter its critical section.
void Nemesis::client_pause_acquire() {
  const int slot = pick_idle_slot();
  if (slot < 0) return;
  const bool in_call = uniform(0, 1) == 1;
  oracle_.arm(slot, in_call ? Oracle::Trigger::at_acquire : Oracle::Trigger::at_acquired);
  auto fired = oracle_.wait_trigger(1000);
  if (!fired) {
    oracle_.end_pause(slot);
    return;
  }
  if (in_call) std::this_thread::sleep_for(std::chrono::microseconds(uniform(0, 1500)));
  workers_.stop(slot);
  slot_busy_[static_cast<std::size_t>(slot)] = true;
  const bool was_inside = oracle_.inside(slot);  // cannot be: ENTER answers RECHECK meanwhile
  if (was_inside)
    errors_.push_back("client-pause-acquire caught slot " + std::to_string(slot) + " inside");
  const bool long_pause = uniform(0, 1) == 1;
  const long dur =
      long_pause ? uniform(s_.ttl_ms + 100, 2 * s_.ttl_ms) : uniform(20, s_.ttl_ms / 3);
  ++counts_["client-pause-acquire"];
  note("SIGSTOP worker " + std::to_string(slot) +
       (in_call ? " in try_acquire" : " after acquiring") + ", for " + std::to_string(dur) + " ms");
  at(mono_ns() + dur * 1'000'000LL, [this, slot] {
    workers_.cont(slot);
    oracle_.end_pause(slot);
    slot_busy_[static_cast<std::size_t>(slot)] = false;
    note("SIGCONT worker " + std::to_string(slot));
  });
}

// kill -9 of a worker; half the time right after it entered its critical section. Respawned.
void Nemesis::client_kill() {
  int slot = pick_idle_slot();
  if (slot < 0) return;
  bool inside = false;
  if (uniform(0, 1) == 1) {
    oracle_.arm(slot, Oracle::Trigger::at_enter);
    inside = oracle_.wait_trigger(1000).has_value();
    if (inside) std::this_thread::sleep_for(std::chrono::microseconds(uniform(0, 3000)));
  }
  workers_.kill_and_respawn(slot);
  ++counts_["client-kill"];
  note("kill -9 worker " + std::to_string(slot) + (inside ? " inside its critical section" : "") +
       ", respawned");
}

void Nemesis::write_faketime(const std::string& spec) {
  const std::string tmp = s_.faketime_file + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << spec << "\n";
  }
  std::rename(tmp.c_str(), s_.faketime_file.c_str());
}

// The workers' wall clock jumps forward or back by seconds to days (libfaketime, read by the
// workers at most one second later). The library must not notice: it only reads CLOCK_BOOTTIME.
void Nemesis::clock_jump() {
  static const char* const specs[] = {"+3600", "-3600",     "+86400", "-86400", "+30",
                                      "-30",   "+31536000", "-600",   "+0"};
  const std::string spec = specs[uniform(0, static_cast<long>(std::size(specs)) - 1)];
  write_faketime(spec);
  ++counts_["clock-jump"];
  note("workers' wall clock set to real time " + spec + " s");
}

// SIGSTOP of a worker just after it entered its critical section, for longer than the ttl:
// its lease runs out while it is paused. No lease can prevent what follows; fencing can.
void Nemesis::holder_pause() {
  const int slot = pick_idle_slot();
  if (slot < 0) return;
  oracle_.arm(slot, Oracle::Trigger::at_enter);
  if (!oracle_.wait_trigger(1000)) return;
  std::this_thread::sleep_for(std::chrono::microseconds(uniform(0, 2000)));
  workers_.stop(slot);
  const bool inside = oracle_.mark_paused_inside(slot);
  slot_busy_[static_cast<std::size_t>(slot)] = true;
  const long dur = uniform(s_.ttl_ms + 200, s_.ttl_ms + 1000);
  ++counts_["holder-pause"];
  note("SIGSTOP worker " + std::to_string(slot) + (inside ? " inside" : " (just left)") +
       " its critical section, for " + std::to_string(dur) + " ms");
  at(mono_ns() + dur * 1'000'000LL, [this, slot] {
    workers_.cont(slot);
    slot_busy_[static_cast<std::size_t>(slot)] = false;
    note("SIGCONT worker " + std::to_string(slot));
  });
}

// The election mix: whoever is elected next (one candidate in three leads, so a fixed slot would
// rarely be caught), paused right after it told the oracle. A long pause outlives its validity:
// it must find itself no longer leader when it resumes (its leadership ends at its deadline).
void Nemesis::leader_pause() {
  oracle_.arm(-1, Oracle::Trigger::at_enter);
  auto fired = oracle_.wait_trigger(static_cast<int>(2 * s_.ttl_ms));
  if (!fired) return;
  const int slot = fired->first;
  if (slot_busy_[static_cast<std::size_t>(slot)]) return;
  std::this_thread::sleep_for(std::chrono::microseconds(uniform(0, 2000)));
  workers_.stop(slot);
  const bool inside = oracle_.mark_paused_inside(slot);
  slot_busy_[static_cast<std::size_t>(slot)] = true;
  const long dur =
      uniform(0, 1) == 1 ? uniform(s_.ttl_ms + 200, 2 * s_.ttl_ms) : uniform(20, s_.ttl_ms / 3);
  ++counts_["leader-pause"];
  note("SIGSTOP worker " + std::to_string(slot) + (inside ? " leading" : " (just resigned)") +
       ", for " + std::to_string(dur) + " ms");
  at(mono_ns() + dur * 1'000'000LL, [this, slot] {
    workers_.cont(slot);
    slot_busy_[static_cast<std::size_t>(slot)] = false;
    note("SIGCONT worker " + std::to_string(slot));
  });
}

// Right after someone entered a critical section: kill -9 a majority of the nodes and restart
// them at once, empty (no AOF). With the restart guard off the next acquirer gets a quorum from
// the emptied nodes while the holder is still inside.
void Nemesis::restart_empty() {
  const int n = static_cast<int>(cluster_->size());
  const int k = n / 2 + 1;
  oracle_.arm(-1, Oracle::Trigger::at_enter);
  if (!oracle_.wait_trigger(1000)) return;
  std::vector<int> all;
  for (int i = 0; i < n; ++i) all.push_back(i);
  std::shuffle(all.begin(), all.end(), rng_);
  std::string which;
  for (int j = 0; j < k; ++j) {
    const int i = all[static_cast<std::size_t>(j)];
    if (node_paused_[static_cast<std::size_t>(i)]) continue;
    (*cluster_)[static_cast<std::size_t>(i)].kill();
    node_down_[static_cast<std::size_t>(i)] = true;
    which += " " + std::to_string(i);
  }
  for (int j = 0; j < k; ++j) {
    const int i = all[static_cast<std::size_t>(j)];
    if (node_down_[static_cast<std::size_t>(i)]) start_node(i);
  }
  ++counts_["restart-empty"];
  note("kill -9 nodes" + which + " and restarted them at once, empty");
}

void Nemesis::partition() {
  if (s_.partitioner == nullptr) return;
  const int n = static_cast<int>(cluster_->size());
  // Cut a random non-empty proper subset of the workers off from a random minority-or-majority
  // subset of the nodes: both sides may think they have a quorum only if exclusion is broken.
  std::vector<int> slots;
  for (int i = 0; i < workers_.size(); ++i) {
    if (uniform(0, 1) == 1) slots.push_back(i);
  }
  if (slots.empty()) slots.push_back(static_cast<int>(uniform(0, workers_.size() - 1)));
  std::vector<int> nodes;
  for (int i = 0; i < n; ++i) nodes.push_back(i);
  std::shuffle(nodes.begin(), nodes.end(), rng_);
  nodes.resize(static_cast<std::size_t>(uniform(1, n / 2 + 1)));
  const long dur = uniform(100, 2 * s_.ttl_ms);
  std::string what;
  if (!s_.partitioner->cut(slots, nodes, what)) {
    errors_.push_back("partition failed: " + what);
    return;
  }
  ++counts_["partition"];
  note("partition: " + what + " for " + std::to_string(dur) + " ms");
  at(mono_ns() + dur * 1'000'000LL, [this] {
    s_.partitioner->heal();
    note("partition healed");
  });
}

}  // namespace chaos

namespace chaos {

namespace {

using redlock::test::SentinelFixture;
constexpr long long ms = 1'000'000LL;  // in mono_ns() units
constexpr long failover_limit_ms = 15000;

// A field of a flat [k1, v1, k2, v2, ...] reply (SENTINEL MASTER).
std::string field(const redlock::nodes::Reply& r, const std::string& key) {
  for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    if (r.elements[i].str == key) return r.elements[i + 1].str;
  }
  return {};
}

bool live(const redlock::test::RedisServer& s) { return s.running() && !s.stopped(); }

// One command; an I/O error is an error reply, not an exception: a failover's Sentinel resets
// the clients of the nodes it reconfigures (CLIENT KILL TYPE normal), ours included.
redlock::nodes::Reply ask(const redlock::test::RedisServer& s,
                          const std::vector<std::string>& argv) {
  try {
    return s.command(argv, std::chrono::milliseconds(500));
  } catch (const std::exception& e) {
    redlock::nodes::Reply r;
    r.type = redlock::nodes::Reply::Type::error;
    r.str = e.what();
    return r;
  }
}

std::string role(const redlock::test::RedisServer& s) {
  if (!live(s)) return {};
  const auto r = ask(s, {"INFO", "replication"});
  return redlock::nodes::info_field(r.str, "role").value_or("");
}

// The same, tried up to 3 times while the connection fails (not for an error reply).
redlock::nodes::Reply ask_again(const redlock::test::RedisServer& s,
                                const std::vector<std::string>& argv) {
  redlock::nodes::Reply r;
  for (int i = 0; i < 3; ++i) {
    r = ask(s, argv);
    if (!r.is_error() || r.str.rfind("ERR", 0) == 0 || r.str.rfind("READONLY", 0) == 0) break;
  }
  return r;
}

// Every running sentinel's SENTINEL MASTER (what clients ask) names `port`, failover over.
bool switched(SentinelFixture& f, const std::string& name, std::uint16_t port) {
  bool any = false;
  for (std::size_t i = 0; i < f.sentinel_count(); ++i) {
    if (!live(f.sentinel(i))) continue;
    any = true;
    const auto r = ask(f.sentinel(i), {"SENTINEL", "MASTER", name});
    if (field(r, "port") != std::to_string(port) || field(r, "flags") != "master") return false;
  }
  return any;
}

}  // namespace

void Nemesis::lose_replication(std::size_t g, std::size_t promoted) {
  if (uniform(1, 100) > s_.delete_key_percent) return;
  auto& node = s_.sentinels->node(s_.master_names[g], promoted);
  for (const auto& key : s_.lock_keys) (void)ask_again(node, {"DEL", key});
  ++counts_["keys-lost"];
  note("  DEL the lock keys on the promoted " + s_.master_names[g] + " node " +
       std::to_string(promoted) + " (replication lost them)");
}

// SENTINEL FAILOVER of 1..Q votes at once (sometimes a majority). As soon as a replica says
// role:master its lock keys may be deleted (lose_replication) and the old master is made its
// replica at once (Sentinel itself would do so only 10-20 s later). Blocks until every sentinel
// names the new masters and sees the old ones as replicas, so the next fault finds a replica to
// promote.
void Nemesis::sentinel_failover() {
  SentinelFixture& f = *s_.sentinels;
  const int n = static_cast<int>(s_.master_names.size());
  // Half the time right after someone entered a critical section: the lost keys then include a
  // held lock's, on a majority of the votes.
  bool inside = false;
  if (uniform(0, 1) == 1) {
    oracle_.arm(-1, Oracle::Trigger::at_enter);
    inside = oracle_.wait_trigger(1000).has_value();
  }
  std::vector<std::size_t> idle;
  for (std::size_t g = 0; g < s_.master_names.size(); ++g) {
    if (!vote_busy_[g]) idle.push_back(g);
  }
  if (idle.empty()) return;
  std::shuffle(idle.begin(), idle.end(), rng_);
  // After an ENTER a majority, so that the holder's key is lost on a quorum; else 1..Q.
  const long most = std::min<long>(n / 2 + 1, static_cast<long>(idle.size()));
  idle.resize(static_cast<std::size_t>(inside ? most : uniform(1, most)));
  struct Pending {
    std::size_t g;
    std::size_t old;
    std::optional<std::size_t> promoted;
    bool switched = false;
  };
  std::vector<Pending> pending;
  for (std::size_t g : idle) {
    const std::string& name = s_.master_names[g];
    std::size_t old = 0;
    try {
      old = f.current_master_index(name);
    } catch (const std::exception& e) {
      note("skip failover of " + name + ": " + e.what());
      continue;
    }
    redlock::nodes::Reply r;
    for (std::size_t i = 0; i < f.sentinel_count(); ++i) {
      if (!live(f.sentinel(i))) continue;
      r = ask(f.sentinel(i), {"SENTINEL", "FAILOVER", name});
      break;
    }
    if (!r.is_status("OK")) {
      note("SENTINEL FAILOVER " + name + " refused: " + redlock::nodes::reply_text(r));
      continue;
    }
    ++counts_["sentinel-failover"];
    note("SENTINEL FAILOVER " + name + " (master node " + std::to_string(old) + ")" +
         (inside ? ", just after an ENTER" : ""));
    pending.push_back({g, old, std::nullopt});
  }
  const Clock deadline = mono_ns() + failover_limit_ms * ms;
  auto all_switched = [&] {
    return std::all_of(pending.begin(), pending.end(), [](const Pending& p) { return p.switched; });
  };
  while (!all_switched() && mono_ns() < deadline) {
    for (auto& p : pending) {
      const std::string& name = s_.master_names[p.g];
      if (!p.promoted) {
        for (std::size_t i = 0; i < f.node_count(name); ++i) {
          if (i == p.old || role(f.node(name, i)) != "master") continue;
          p.promoted = i;
          note("  " + name + ": node " + std::to_string(i) + " promoted");
          lose_replication(p.g, i);
          if (live(f.node(name, p.old))) {
            (void)ask_again(f.node(name, p.old),
                            {"REPLICAOF", "127.0.0.1", std::to_string(f.node(name, i).port())});
          }
          break;
        }
      }
      if (p.promoted && !p.switched && switched(f, name, f.node(name, *p.promoted).port())) {
        p.switched = true;
        // The sentinels may have told the old master something else meanwhile.
        if (role(f.node(name, p.old)) == "master") {
          (void)ask_again(f.node(name, p.old), {"REPLICAOF", "127.0.0.1",
                                                std::to_string(f.node(name, *p.promoted).port())});
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (const auto& p : pending) {
    if (!p.switched) {
      errors_.push_back("failover of " + s_.master_names[p.g] + " not complete within " +
                        std::to_string(failover_limit_ms) + " ms");
    }
  }
  try {
    f.wait_until_stable();
  } catch (const std::exception& e) {
    errors_.push_back(std::string("after a failover: ") + e.what());
  }
  note("  sentinels agree again");
}

// kill -9 of one vote's master: Sentinel fails it over by itself (down after down_after); the
// promoted replica's lock keys may be deleted; the killed node is started again later, as a
// replica of the new master (empty: a replica gets the master's data by a full sync).
void Nemesis::sentinel_kill_master() {
  SentinelFixture& f = *s_.sentinels;
  std::vector<std::size_t> idle;
  for (std::size_t g = 0; g < s_.master_names.size(); ++g) {
    if (!vote_busy_[g]) idle.push_back(g);
  }
  if (idle.empty()) return;
  const std::size_t g =
      idle[static_cast<std::size_t>(uniform(0, static_cast<long>(idle.size()) - 1))];
  const std::string& name = s_.master_names[g];
  std::size_t old = 0;
  try {
    old = f.current_master_index(name);
  } catch (const std::exception& e) {
    note("skip kill of the master of " + name + ": " + e.what());
    return;
  }
  f.node(name, old).kill();
  vote_busy_[g] = true;
  ++counts_["sentinel-kill-master"];
  note("kill -9 the master of " + name + " (node " + std::to_string(old) + ")");
  std::optional<std::size_t> promoted;
  bool done = false;
  const Clock deadline = mono_ns() + failover_limit_ms * ms;
  while (!done && mono_ns() < deadline) {
    if (!promoted) {
      for (std::size_t i = 0; i < f.node_count(name); ++i) {
        if (i == old || role(f.node(name, i)) != "master") continue;
        promoted = i;
        note("  " + name + ": node " + std::to_string(i) + " promoted by Sentinel");
        lose_replication(g, i);
        break;
      }
    }
    done = promoted && switched(f, name, f.node(name, *promoted).port());
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!done) {
    errors_.push_back("automatic failover of " + name + " not complete within " +
                      std::to_string(failover_limit_ms) + " ms");
  }
  const long delay = uniform(200, 2 * s_.ttl_ms);
  at(mono_ns() + delay * ms, [this, g, old] {
    const std::string& name = s_.master_names[g];
    try {
      s_.sentinels->restart_node(name, old, SentinelFixture::Rejoin::now);
      note("restarted node " + std::to_string(old) + " of " + name + " as a replica");
    } catch (const std::exception& e) {
      errors_.push_back("restart of node " + std::to_string(old) + " of " + name + ": " + e.what());
    }
    vote_busy_[g] = false;
  });
}

}  // namespace chaos
