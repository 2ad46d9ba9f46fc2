// A fair waiter's direct handoff (wake-ups): the token it registers with every node (its ticket
// round and each attempt), and the lock taken when a quorum of releases handed it over with that
// token. What the scripts do is in core/scripts.cpp (release, ticket_take, acquire_fair,
// fair_leave); the README's "Wake-ups" says why a grant is safe to count.
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
  granted_.assign(static_cast<std::size_t>(e_.n()), 0);
  granted_count_ = 0;
}

// A release handed us the lock on `node` under registration `w.granted`: it counts if that is our
// latest registration and the node's vote may count (restart guard, same server).
void AcquireOp::note_grant(int node, const net::Wake& w) {
  const auto i = static_cast<std::size_t>(node);
  if (w.granted != reg_serial_ || i >= granted_.size() || granted_[i] != 0) return;
  if (auto why = e_.grant_exclusion(node, w.server, BootClock::now(), nullptr)) {
    e_.log(LogLevel::debug, e_.names()[i] + ": a handoff that does not count (" + *why +
                                "); an attempt will confirm it");
    return;
  }
  granted_[i] = 1;
  ++granted_count_;
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
    if (granted_[static_cast<std::size_t>(i)] == 0) continue;
    NodeOutcome o{{}, NodeState::ok, "handed over by a release", {}};
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
  granted_.assign(granted_.size(), 0);  // given back: not to be taken again at the next wake
  granted_count_ = 0;
  fail_attempt(
      Errc::expired,
      "a quorum handed the lock over but its validity was used up (" +
          std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(now - t1_).count()) +
          " us since the registration)");
}

}  // namespace redlock
