// A fair waiter's direct handoff (wake-ups): the token it registers with every node (its ticket
// round and each attempt), and the lock taken when a quorum of nodes granted it with that token
// (releases that handed it over, or the ticket round itself where the key was free). What the
// scripts do is in core/scripts.cpp (release, ticket_take, acquire_fair, fair_leave); the README's
// "Wake-ups" says why a grant is safe to count.
#include "core/quorum.hpp"
#include "core/token.hpp"
#include "engine/acquire.hpp"
#include "lock_builder.hpp"

namespace redlock {

// A fresh token (never an attempt's: a rollback deletes the attempt's token only, and must leave
// a key that a release handed over), a new serial, and the grants heard so far forgotten (our
// next attempt takes a key handed over under an older registration as its own grant).
void AcquireOp::new_registration() {
  ++reg_serial_;
  reg_token_ = detail::token_for(detail::make_token(), keys_.size());
  reg_sent_ = BootClock::now();
  granted_.assign(static_cast<std::size_t>(e_.n()), Grant::none);
  granted_by_ticket_.assign(granted_.size(), 0);
  granted_count_ = 0;
}

// A release handed us the lock on `node` under registration `w.granted`: it counts if that is our
// latest registration and the node's vote may count (restart guard, same server), and, under the
// ticket round's registration, once we know it was handed over at our agreed ticket
// (judge_grant).
void AcquireOp::note_grant(int node, const net::Wake& w) {
  const auto i = static_cast<std::size_t>(node);
  if (w.granted != reg_serial_ || i >= granted_.size() || granted_[i] != Grant::none) return;
  if (auto why = e_.grant_exclusion(node, w.server, BootClock::now(), nullptr)) {
    e_.log(LogLevel::debug, e_.names()[i] + ": a handoff that does not count (" + *why +
                                "); an attempt will confirm it");
    return;
  }
  granted_[i] = Grant::unjudged;
  judge_grant(i);
}

// The ticket round itself granted us the lock on `node` (ticket_take: the key was free and we
// were first in line there), under its registration: judged as a release's handoff is.
void AcquireOp::note_ticket_grant(std::size_t i) {
  if (reg_serial_ != ticket_serial_ || i >= granted_.size() || granted_[i] != Grant::none) return;
  granted_[i] = Grant::unjudged;
  granted_by_ticket_[i] = 1;
  judge_grant(i);
}

// The ticket round places us at each node's own count, and a release hands the lock to the first
// in line. Where that count is our agreed ticket, every waiter with a lower ticket whose ticket
// round reached the node first is ahead of us there; where it is not (the node counted concurrent
// takers in another order, or missed one while a client could not reach it), a waiter with a
// lower ticket may be behind us or not there yet, and counting that node could give us a quorum
// out of turn (any quorum of ours where our count was the agreed ticket meets the quorum that
// gave the other waiter its lower ticket on a node where it is ahead of us). Such a key is not
// counted; our next attempt takes it, or gives it back if a waiter is queued below our ticket
// (acquire_fair). An attempt's registration places us at our agreed ticket: always counted.
void AcquireOp::judge_grant(std::size_t i) {
  if (granted_[i] != Grant::unjudged) return;
  if (reg_serial_ == ticket_serial_) {
    if (ticket_ == 0 || ticket_at_[i] == 0) return;  // not known yet: judged when it is
    if (ticket_at_[i] != ticket_) {
      granted_[i] = Grant::not_counted;
      e_.log(LogLevel::debug, e_.names()[i] + ": handed over at its own count " +
                                  std::to_string(ticket_at_[i]) + ", not our ticket " +
                                  std::to_string(ticket_) + ": not counted");
      return;
    }
  }
  granted_[i] = Grant::counted;
  ++granted_count_;
}

void AcquireOp::judge_grants() {
  for (std::size_t i = 0; i < granted_.size(); ++i) judge_grant(i);
}

// A node's answer to our ticket round after it was decided: its count, for judging a key it
// handed us (the settle it may be owed is late_reply's).
void AcquireOp::note_late_ticket(std::size_t i, const net::Result& r) {
  if (i >= ticket_at_.size() || ticket_at_[i] != 0 || failure(static_cast<int>(i), r)) return;
  const auto v = detail::classify_ticket(*r.reply);
  if (v.state != NodeState::ok) return;
  ticket_at_[i] = v.value;
  if (v.granted && outcome(static_cast<int>(i), r, v, nullptr).state == NodeState::ok)
    note_ticket_grant(i);
  if (i >= granted_.size() || granted_[i] != Grant::unjudged) return;
  judge_grant(i);
  if (phase_ == Phase::sleeping && granted_quorum()) retry_timer_->start(0);
}

bool AcquireOp::granted_quorum() const {
  return registers() && granted_count_ >= detail::quorum_of(e_.n());
}

// The lock is ours on a quorum without an attempt of ours: each granting node set the key to our
// token for our ttl after our registration was sent, so the validity counts from that moment, as
// an attempt's counts from its t1.
void AcquireOp::take_handoff() {
  const auto now = BootClock::now();
  const int n = e_.n();
  token_ = reg_token_;
  t1_ = reg_sent_;
  attempt_.reset(&e_.names());
  for (int i = 0; i < n; ++i) {
    if (granted_[static_cast<std::size_t>(i)] != Grant::counted) continue;
    NodeOutcome o{{},
                  NodeState::ok,
                  granted_by_ticket_[static_cast<std::size_t>(i)] != 0 ? "granted with its ticket"
                                                                       : "handed over by a release",
                  {}};
    e_.count_node(i, o);
    attempt_.record(i, std::move(o));
  }
  attempt_.close();
  const auto v = detail::compute_validity(opts_.ttl, e_.options_.drift_factor,
                                          e_.options_.min_validity, t1_, now);
  if (v.ok) {
    won_by_handoff_ = true;
    Lock lock = LockBuilder::make(resources_, token_, opts_.ttl,
                                  std::chrono::duration_cast<Millis>(v.validity), v.deadline,
                                  attempt_.tally().ok, n, attempt_.outcomes());
    LockBuilder::set_handed_waiter(lock, waiter_);
    finish_ok(std::move(lock));
    return;
  }
  // Registered too long ago to be of use: give it back everywhere (leaving the queue takes a
  // handed-over key back), and wait on with a new ticket at the back, as a waiter whose
  // heartbeat lapsed does (rejoin_queue).
  if (auto leave = kind_.finish_waiting(keys_, waiter_, false)) broadcast(e_, std::move(*leave));
  waiter_ = new_waiter_id();
  need_ticket_ = true;
  // Given back: not to be taken again at the next wake.
  granted_.assign(granted_.size(), Grant::none);
  granted_count_ = 0;
  fail_attempt(
      Errc::expired,
      "a quorum handed the lock over but its validity was used up (" +
          std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(now - t1_).count()) +
          " us since the registration)");
}

}  // namespace redlock
