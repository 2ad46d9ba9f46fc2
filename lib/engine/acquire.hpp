#pragma once
// One acquisition: its attempts, and the rounds some lock kinds add (a fair waiter's ticket, a
// fence write-back), as an explicit sequence of phases.

#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "core/kinds.hpp"
#include "core/name_tally.hpp"
#include "core/round.hpp"
#include "engine/attempt_budget.hpp"
#include "engine/attempt_deadlines.hpp"
#include "engine/fair_place.hpp"
#include "engine/operation.hpp"
#include "engine/wake_watch.hpp"

namespace redlock {

void start_acquire(Engine::Impl& e, std::vector<std::string> resources, AcquireOptions options,
                   Engine::AcquireCallback cb);

class AcquireOp final : public Operation {
 public:
  // Where the acquisition is. Every round (ticket, ticket write-back, attempt, fence write-back)
  // has its own number; a reply tagged with an older number is late and only ignored (the keys
  // of an attempt it answers were rolled back when that attempt failed).
  enum class Phase {
    ticket,            // fair: take a place in the queue on a quorum
    ticket_writeback,  // fair: raise the ticket counter on a quorum (as fencing does)
    attempt,           // the kind's acquire command on every node
    fence_writeback,   // fenced: raise the fence counter on a quorum before handing the lock out
    sleeping,          // between attempts
    done,
  };

  AcquireOp(Engine::Impl& e, std::vector<std::string> resources, AcquireOptions opts,
            Engine::AcquireCallback cb);
  void start();
  // The caller's stop (AcquireOptions::stop), on the loop thread. Whatever this acquisition may
  // have set on the nodes is deleted: the SETs of an attempt in flight (some may have run), or the
  // grants of an attempt in its fence write-back.
  void cancel();

  void on_result(int node, std::uint32_t tag, const net::Result& r) override;
  // Node `node` heard that a key of ours may be free: while sleeping after an attempt that found
  // the lock held elsewhere, once a quorum of nodes has reported it gone (or named us, or a
  // quorum has just (re)subscribed), try again now (after a small spread) instead of at the end
  // of the sleep. Only ever a hint to try: anyone who may PUBLISH can write what it heard, so it
  // never gives the lock, only starts an attempt whose replies decide (algorithm.md, hazard 10).
  void wake(int node, const net::Wake& w);
  [[nodiscard]] Millis wake_spread(const net::Wake& w);
  [[nodiscard]] std::string new_waiter_id() const;
  void shutdown() override;
  void deliver() override;
  // The engine is closing: what nodes that have not answered a decided round are owed (late_reply)
  // is sent now, behind the command they are to answer, whatever that answer will be.
  void say_owed_words();

 private:
  ~AcquireOp() override;
  void start_round(Phase phase, detail::Round& round, detail::Command cmd);
  void start_ticket();
  void rejoin_queue();
  void start_attempt();
  void start_fence_writeback();
  void evaluate();
  void watch_attempt();  // an undecided attempt: what the timer waits for
  [[nodiscard]] bool retry_follows(BootClock::time_point now) const;
  void on_timer();
  net::Timer& timer();
  void late_reply(int node, std::uint32_t tag, const net::Result& r);
  void tell(int node, detail::Command cmd);
  void attempt_decided(detail::Decision d, BootClock::time_point t2 = BootClock::now());
  void validity_used_up(BootClock::time_point now);  // no grant can be a lock any more
  void note_failed_attempt();  // what a failed attempt's answers say beyond its failure
  void fence_writeback_decided(detail::Decision d);
  void hand_out_fenced();  // the fence stands on a quorum: validity, then the lock
  void ticket_decided(detail::Decision d);
  void ticket_writeback_decided(detail::Decision d);
  void ticket_agreed();      // a quorum's counters stand at our ticket: attempt, or wait in line
  bool take_ticket_grant();  // the ticket round's replies granted us the lock: taken
  [[nodiscard]] bool waits_in_line() const;              // after the ticket: sleep until named
  [[nodiscard]] detail::Command settle_command() const;  // our agreed ticket, for one node
  void fail_ticket(std::string message);
  // `now`: when the failure was decided; whether another attempt follows is judged at that time.
  void fail_attempt(Errc why, std::string message, BootClock::time_point now = BootClock::now());
  void sleep_then_retry(Millis sleep);
  // Fair, with wake-ups: direct handoff (a release sets the key to the token the first waiter
  // registered and names it; the waiter's attempt takes such a key as granted).
  [[nodiscard]] bool registers() const { return kind_.queued() && e_.options_.wake_ups; }
  void new_registration();
  void note_late_ticket(std::size_t node, const net::Result& r);
  void warn_fence_durability();
  [[nodiscard]] bool may_hold_keys() const {
    return phase_ == Phase::attempt || phase_ == Phase::fence_writeback;
  }
  [[nodiscard]] Millis writer_mark_ttl() const;
  [[nodiscard]] std::optional<Millis> ticket_mark_ttl() const;
  [[nodiscard]] const std::vector<std::string>& watched_keys() const;
  [[nodiscard]] detail::AttemptArgs attempt_args() const;  // the current attempt's
  void finish_ok(Lock lock);
  void finish(Errc why, std::string message);
  [[nodiscard]] std::string token_for_lock();
  void complete(AcquireResult res);

  struct CancelRequest {
    Engine::Impl* engine;
    std::uint64_t id;
    void operator()() const noexcept { engine->request_cancel(id); }
  };

  // The resources as the caller named them, and as keys (with the key prefix). Without a prefix
  // the names are the keys, kept once, in keys_ (resources_ stays empty: two allocations fewer
  // per acquisition); resources() is the names either way.
  [[nodiscard]] const std::vector<std::string>& resources() const {
    return resources_.empty() ? keys_ : resources_;
  }
  std::vector<std::string> resources_;
  std::vector<std::string> keys_;
  AcquireOptions opts_;
  const detail::LockKind& kind_;
  Engine::AcquireCallback cb_;
  std::uint64_t id_ = 0;
  std::optional<std::stop_callback<CancelRequest>> stop_callback_;

  Phase phase_ = Phase::sleeping;
  std::uint32_t round_id_ = 0;
  int attempts_made_ = 0;
  AttemptBudget budget_;  // how many more attempts: retries, or a wait's end
  BootClock::time_point started_{};
  // The one timer of the acquisition: the sleep before the next attempt; during an attempt, when
  // it stops waiting for its answers (deadlines_).
  std::unique_ptr<net::Timer> timer_;
  // Wake-ups: what the nodes told us while we waited, and whether it may end a sleep now.
  WakeWatch watch_{kind_.queued(), kind_.named_wake()};
  bool watching_ = false;        // registered with the engine (from the first sleep on)
  bool saw_contention_ = false;  // an attempt found the lock held elsewhere
  // Kinds that are named (named_wake()): when we began to wait (wall clock ms, our rank on the
  // mark; 0 before the first sleep).
  long long waiting_since_ = 0;

  detail::Round attempt_;  // the current (or last) attempt: its record is what the caller sees
  detail::Round counter_;  // the current ticket or write-back round
  std::string token_;      // the current attempt's, fresh for every attempt
  // When the current attempt (or a ticket round, which can grant the lock too) was sent.
  BootClock::time_point t1_{};
  AttemptDeadlines deadlines_;  // when the current attempt stops waiting for its answers
  detail::CounterMax fence_;    // over the granting nodes
  std::string waiter_;          // write, fair and named waiters: kept across attempts
  // Fair: our place in the queue (the ticket, what each node counted, the grants of the ticket
  // round, what late nodes are owed, the heartbeat, polling, the registered token).
  FairPlace fair_;
  AcquireResult result_;  // what deliver() hands over
  Errc last_error_ = Errc::no_quorum;
  std::string last_message_;
};

}  // namespace redlock
