#pragma once
// The engine's private state, shared by the operations in this folder. Everything here runs on
// the loop's thread, except request_cancel().

#include <uv.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "engine/due_heap.hpp"
#include "net/node.hpp"
#include "net/uv.hpp"
#include "redlock/engine.hpp"
#include "redlock/metrics.hpp"

namespace redlock {

class Operation;
class AcquireOp;
class HoldOp;
class ObserveOp;

class Engine::Impl final : public net::NodeHost {
 public:
  Impl(uv_loop_t* loop, Options options);
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl();

  // NodeHost
  void log(LogLevel level, const std::string& message) override {
    if (options_.logger) options_.logger(level, message);
  }
  void on_node_closed(int) override { handle_closed(); }
  void on_server_identified(int index) override;
  // Options::restart_quarantine; else Options::max_ttl plus its drift; else the longest ttl this
  // client has used (at least the default ttl) plus its drift.
  [[nodiscard]] Millis restart_quarantine() const override;
  void on_wake(int index, const std::string& lock_key, const net::Wake& wake) override;

  // Wake-ups (Options::wake_ups): `op` hears of releases of `keys` until unwatch(); the nodes
  // listen for a key while some acquisition watches it.
  // A watching acquisition also hears what is published on this client's own wake channel
  // (waiter_id()).
  void watch(AcquireOp* op, const std::vector<std::string>& keys);
  void unwatch(AcquireOp* op, const std::vector<std::string>& keys);
  // Hears the names published on this client's own channel (if it is subscribed: watch() does
  // that), without subscribing anything: a fair waiter from its ticket round on.
  void hear_names(AcquireOp* op);
  // A new id for a waiter that a release may name (a fair queue's, a named exclusive waiter's):
  // random, then "@" and this client's own wake channel, where a release that names it publishes
  // (so only this client is woken, not every client listening on the lock's channel).
  [[nodiscard]] std::string new_waiter_id() const;

  // Runs `fn` on the loop after the current callback returns (never inside the call that asked):
  // every user callback goes through here.
  void defer(std::function<void()> fn);
  // The same for an operation's result: runs op->deliver() later, keeping the operation alive
  // until then (no allocation: the operation holds what it delivers).
  void defer(Operation* op);

  // Fails every pending operation with Errc::shutdown, closes the nodes, then calls `on_closed`.
  void close(std::function<void()> on_closed);

  // Cancellation (AcquireOptions::stop): a stop may be requested on any thread, so the request
  // only goes into a mailbox and wakes the loop. Must not block beyond the mailbox's mutex.
  void request_cancel(std::uint64_t acquire_id) noexcept;

  // Why node i's grant must not count now (restart guard, or the same server reached through two
  // addresses), or nullopt. `outcomes`, when given, is the round's record so far: a server
  // reached through two addresses votes once, for whichever address answered first; with both
  // known, the lower index votes.
  [[nodiscard]] std::optional<std::string> vote_exclusion(
      int i, BootClock::time_point now, const std::vector<NodeOutcome>* outcomes) const;

  // Pairs of nodes (lower index first) already reported as one server (equal run_id): said once
  // each, at warning. The pair's votes count once (vote_exclusion()); nothing else is refused, so
  // one node that lies about its run_id cannot stop the client.
  std::set<std::pair<int, int>> twins_reported_;

  // Counters (loop thread only).
  void count_node(int i, const NodeOutcome& o);
  void count_acquire(const AcquireResult& r, BootClock::duration took);

  void note_ttl(Millis ttl) { max_ttl_used_ = std::max(max_ttl_used_, ttl); }
  // A uniform value in [0, span].
  [[nodiscard]] Millis jitter(Millis span);
  // retry_delay +- retry_jitter, uniform, never negative.
  [[nodiscard]] Millis retry_sleep();

  [[nodiscard]] int n() const { return static_cast<int>(nodes_.size()); }
  [[nodiscard]] const std::vector<std::string>& names() const { return names_; }

  uv_loop_t* loop_;
  Options options_;
  // How each node moves its bytes (plain or TLS); made before any handle touches the loop, since
  // an unusable certificate file throws. Moved into the nodes when they are made.
  std::vector<net::TransportMaker> transports_;
  std::vector<std::unique_ptr<net::Node>> nodes_;
  std::vector<std::string> names_;  // display addresses, by node
  Metrics metrics_;
  Operation* ops_ = nullptr;  // unfinished operations (an intrusive list: no allocation each)
  std::unordered_map<std::uint64_t, AcquireOp*> acquires_;  // unfinished, by id (cancellation)
  // Finished fair acquisitions that still owe a node a word once it answers (FairPlace::owed): at
  // close they say it at once, before the connections stop taking commands.
  std::unordered_set<AcquireOp*> owing_;
  std::unordered_map<std::string, std::vector<AcquireOp*>> watchers_;  // lock key -> waiters
  std::vector<AcquireOp*> waiting_;                                    // every watching acquisition
  // Not a key: its wake channel is this client's own (new_waiter_id()), listened to like a lock's
  // from the first watch() on.
  const std::string own_wake_key_;
  bool own_channel_subscribed_ = false;
  std::uint64_t next_acquire_id_ = 1;
  std::unordered_map<Engine::HoldId, std::shared_ptr<HoldOp>> holds_;  // running watchdogs
  Engine::HoldId next_hold_id_ = 1;
  // The watchdogs share one loop timer (engine/hold.cpp): hold `id` is due at `due` (it re-arms
  // by calling this again); a stopped hold calls hold_stopped().
  void arm_hold(Engine::HoldId id, BootClock::time_point due);
  void hold_stopped();
  // Election observers (engine/election.cpp), and by leader record key those that hear its
  // channels' messages (on_wake: a hint to read again).
  std::unordered_map<Engine::ObserveId, std::shared_ptr<ObserveOp>> observers_;
  std::unordered_map<std::string, std::vector<std::pair<Engine::ObserveId, std::function<void()>>>>
      listeners_;
  Engine::ObserveId next_observe_id_ = 1;
  void stop_observers();
  // Nothing under way that could run the user's code on the loop: no unfinished operation, no
  // watchdog (its listener), no election observer, no callback waiting its turn. The Client lets
  // a blocking caller run the loop itself only then (client_impl.hpp).
  [[nodiscard]] bool quiet() const {
    return ops_ == nullptr && holds_.empty() && observers_.empty() && deferred_.empty();
  }
  bool closing_ = false;
  bool fully_closed_ = false;
  bool owner_gone_ = false;  // ~Engine ran: free this once everything is closed

 private:
  void handle_closed();
  void run_deferred();
  [[nodiscard]] bool hold_due_current(const DueHeap::Entry& entry) const;
  void set_hold_timer(BootClock::time_point due);
  void on_hold_timer();
  void on_cancel_requests();

  net::Check check_;  // runs the deferred callbacks
  net::Idle idle_;    // keeps the loop from blocking while callbacks are deferred
  net::Async cancel_async_;
  std::mutex cancel_mu_;
  std::vector<std::uint64_t> cancel_requests_;  // guarded by cancel_mu_
  int open_ = 0;                                // nodes and own handles not closed yet
  struct Deferred {
    Operation* op;             // deliver() this one, or
    std::function<void()> fn;  // run this
  };
  std::vector<Deferred> deferred_;
  std::vector<Deferred> deferred_spare_;  // the other batch, kept for its capacity
  std::function<void()> on_closed_;
  Millis max_ttl_used_{0};
  std::mt19937_64 rng_;
  DueHeap hold_dues_;
  std::unique_ptr<net::Timer> hold_timer_;                               // made by the first hold
  BootClock::time_point hold_timer_due_ = BootClock::time_point::max();  // max: not set
  std::vector<DueHeap::Entry> holds_due_;  // on_hold_timer's list, kept for its capacity
};

}  // namespace redlock
