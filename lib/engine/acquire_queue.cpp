// A fair waiter's place in the queue: its ticket round (and the write-back where the nodes'
// counters disagree), the lock that round may grant, its registration for a release's direct
// handoff (wake-ups), rejoining the queue when its heartbeat may have lapsed, and what a node
// that answered after a round was decided is still owed. The attempts themselves are
// acquire.cpp's.
//
// Direct handoff, and why only replies count: a release whose queue's first waiter registered a
// token sets the key to that token and names the waiter (core/scripts.cpp). The name is a
// message, which anyone who may PUBLISH can forge, so it only makes the waiter try at once; its
// attempt (acquire_fair) takes a key set to its registered token as granted, where nobody is
// queued below its ticket, and that attempt's replies are judged as any attempt's (restart
// guard, one vote per server, quorum, validity from the attempt's own t1). The attempt is the
// confirming round: a GET of the token, or the extend script with it, would confirm the
// handoff as well and as fast (one round either way), but could not give back a key handed over
// out of turn (at a node's own count, not our ticket), and would be a second way to take a lock.
// The ticket round's own grants are replies: counted where the node's count was our ticket.
#include <algorithm>

#include "core/quorum.hpp"
#include "core/timing.hpp"
#include "core/token.hpp"
#include "engine/acquire.hpp"
#include "engine/lock_builder.hpp"

namespace redlock {

// A fresh token (never an attempt's: a rollback deletes the attempt's token only, and must leave
// a key that a release handed over, which our next attempt takes as its own).
void AcquireOp::new_registration() { fair_.new_registration(keys_.size()); }

using detail::Decision;

// A fair waiter that no quorum has heard from for heartbeat_ttl (its process stalled, or its
// rounds timed out) may have been dropped from the queues, and waiters behind it served. With its
// old ticket it would cut in ahead of them; it leaves instead (as a new waiter) and takes a new
// ticket at the back.
void AcquireOp::rejoin_queue() {
  if (auto leave = kind_.finish_waiting(keys_, waiter_, false)) broadcast(e_, std::move(*leave));
  e_.log(LogLevel::debug, "fair waiter not refreshed for " +
                              std::to_string(opts_.heartbeat_ttl.count()) +
                              " ms: it may have lost its place; joining the queue again");
  waiter_ = new_waiter_id();
  fair_.forget_refresh();
  start_ticket();
}

void AcquireOp::start_ticket() {
  fair_.ticket_round_begins(static_cast<std::size_t>(e_.n()));
  // With wake-ups the ticket also registers a token (a release may set the key to it for us
  // from here on): fresh, as an attempt's.
  if (registers()) new_registration();
  // Where the key is free and we are first in line, the round also grants it
  // (take_ticket_grant); not with replicated votes, whose grants count only by an attempt.
  const bool grant_if_free = registers() && !detail::any_replicated(e_.options_);
  start_round(Phase::ticket, counter_,
              detail::take_ticket(keys_[0], waiter_, opts_.heartbeat_ttl, ticket_mark_ttl(),
                                  {opts_.ttl, fair_.registration()}, grant_if_free));
}

// With wake-ups, the ticket round marks a fair waiter waiting (it is named from there on, also
// by a release that comes before it sleeps), for as long as a mark_waiting would.
std::optional<Millis> AcquireOp::ticket_mark_ttl() const {
  if (!e_.options_.wake_ups) return std::nullopt;
  const auto& o = e_.options_;
  return 2 * std::min(o.retry_delay + o.retry_jitter, opts_.heartbeat_ttl / 4) + Millis{1000};
}

// Fair locks, first round: a ticket from the quorum (the counter-and-write-back construction of
// fencing), so every node orders the waiters the same way.
void AcquireOp::ticket_decided(Decision d) {
  counter_.close();
  if (d == Decision::impossible) {
    fail_ticket("no quorum for a queue ticket");
    return;
  }
  fair_.refreshed(sent_);  // the ticket round set our heartbeat on a quorum
  if (auto ttl = ticket_mark_ttl()) watch_.marked(sent_ + *ttl);  // and our waiting mark
  std::vector<bool> answered(static_cast<std::size_t>(e_.n()));
  for (std::size_t i = 0; i < answered.size(); ++i)
    answered[i] = counter_.answered(static_cast<int>(i));
  const auto agreement = fair_.ticket_decided(answered);
  auto settle = settle_command();
  // Where a quorum's counters already stand at the ticket (the usual case: every node counted the
  // same takers), the write-back round would change nothing: the attempt goes at once, and only
  // the nodes that gave another count are told the ticket, without waiting for them (those that
  // have not answered yet, once they answer with another count: late_reply).
  if (agreement.on_quorum) {
    const auto& agreed = agreement.agreed;
    if (std::find(agreed.begin(), agreed.end(), false) != agreed.end())
      broadcast(e_, std::move(settle), agreed);
    ticket_agreed();
  } else {
    start_round(Phase::ticket_writeback, counter_, std::move(settle));
  }
}

void AcquireOp::ticket_writeback_decided(Decision d) {
  counter_.close();
  if (d == Decision::impossible) {
    fail_ticket("no quorum for the queue ticket's write-back");
    return;
  }
  ticket_agreed();
}

detail::Command AcquireOp::settle_command() const {
  return detail::settle_ticket(keys_[0], fair_.ticket(), 2 * opts_.heartbeat_ttl, waiter_);
}

// Someone was ahead of us (or held the lock) on too many nodes for an attempt to win now: we wait
// for our turn (the release names us; polling is the fallback) instead of an attempt that would
// lose, unless this is our last try (it then reports each node, as any attempt does).
bool AcquireOp::waits_in_line() const {
  return fair_.behind_on_too_many(e_.n()) && budget_.more_tries(BootClock::now());
}

void AcquireOp::ticket_agreed() {
  if (take_ticket_grant()) return;
  if (waits_in_line()) {
    saw_contention_ = true;
    fail_attempt(Errc::contended, "waiting in line: someone is ahead on " +
                                      std::to_string(fair_.behind()) + " of " +
                                      std::to_string(e_.n()) + " nodes");
    return;
  }
  fair_.set_first_in_line(true);
  start_attempt();
}

// The ticket round's replies granted us the lock (ticket_take: the key free and we first in line
// there) on a quorum of nodes whose count was our agreed ticket: ours, on the word of those
// replies, with the validity of a lock whose round was sent at t1_. The ticket round places us
// at each node's own count, and where that is not our agreed ticket (the node counted concurrent
// takers in another order, or missed one while a client could not reach it), a waiter with a
// lower ticket may be behind us there or not there yet: counting that node could give us a
// quorum out of turn (any quorum of ours where our count was the agreed ticket meets the quorum
// that gave the other waiter its lower ticket on a node where it is ahead of us). Such a grant,
// a grant that came after the round was decided, and too few grants are taken by our attempt
// (acquire_fair: as its own, or given back if a waiter is queued below our ticket).
bool AcquireOp::take_ticket_grant() {
  if (!registers()) return false;
  const int n = e_.n();
  const auto counted = fair_.grants_at_ticket(detail::quorum_of(n));
  if (!counted) return false;
  const auto v = detail::compute_validity(opts_.ttl, e_.options_.drift_factor,
                                          e_.options_.min_validity, t1_, BootClock::now());
  if (!v.ok) return false;  // the attempt takes the keys, with a validity from its own t1
  token_ = fair_.registration();
  attempt_.reset(&e_.names());
  for (int i = 0; i < n; ++i) {
    if (!(*counted)[static_cast<std::size_t>(i)]) continue;
    NodeOutcome o = counter_.outcomes()[static_cast<std::size_t>(i)];
    o.detail = "granted with its ticket";
    e_.count_node(i, o);
    attempt_.record(i, std::move(o));
  }
  attempt_.close();
  fair_.set_won_with_ticket();
  Lock lock = LockBuilder::make(resources(), token_, opts_.ttl,
                                std::chrono::duration_cast<Millis>(v.validity), v.deadline,
                                attempt_.tally().ok, n, attempt_.outcomes());
  // The grant left our heartbeat and registration there: the release clears them.
  LockBuilder::set_handed_waiter(lock, waiter_);
  finish_ok(std::move(lock));
  return true;
}

// A node's answer to our ticket round after it was decided: its count, for the settle it may be
// owed (late_reply). A grant in it is not counted (take_ticket_grant).
void AcquireOp::note_late_ticket(std::size_t i, const net::Result& r) {
  if (failure(static_cast<int>(i), r)) return;
  const auto v = detail::classify_ticket(*r.reply);
  if (v.state == NodeState::ok) fair_.late_ticket_reply(i, v.value);
}

// A fair waiter whose ticket round (or its write-back) found no quorum has set no lock key that
// its next round does not deal with (a key granted under this round's registration is granted
// again or given back by the next ticket round: ticket_take), so there is nothing to roll back;
// like any attempt that found no quorum it tries again (for a ticket) while its wait allows,
// rather than giving up at once on a node that is briefly gone.
void AcquireOp::fail_ticket(std::string message) {
  fair_.need_ticket();
  fail_attempt(Errc::no_quorum, std::move(message));
}

// A fair waiter's rounds decide at a quorum and do not wait for the others' answers; what those
// nodes must be told depends on their answer, so it is sent when the answer comes (on the same
// connection, so behind the command answered). Where the answer is a failure (a timeout: the
// command may still run), the word goes anyway.
void AcquireOp::late_reply(int node, std::uint32_t tag, const net::Result& r) {
  const auto i = static_cast<std::size_t>(node);
  if (fair_.is_ticket_round(tag)) note_late_ticket(i, r);
  // (A settle is owed only where the node's count, as note_late_ticket recorded it, differs.)
  const auto owed = fair_.owed(i, tag, phase_ == Phase::done);
  if (owed == FairPlace::Owed::nothing) return;  // the usual late answer: nothing is owed
  if (e_.closing_) return;
  if (owed == FairPlace::Owed::settle) {
    tell(node, settle_command());
    return;
  }
  const bool replied = !failure(node, r).has_value();
  // A node that granted took us out of its queue in the same script.
  if (replied && kind_.classify_acquire(*r.reply).state == NodeState::ok) return;
  if (auto c = kind_.finish_waiting(keys_, waiter_, true, token_)) tell(node, std::move(*c));
}

// At close nobody waits for the answers, so the words go at once, on the same connection behind
// the command they follow, which the node runs first. They are right whatever that command's
// answer: a settle only raises the node's counter to our agreed ticket, and a leave after a grant
// finds us out of the queue already and never takes the key of our lock (fair_leave's ARGV[3]).
// This is the order the model has (spec/fair.pml: OP_SETTLE and OP_LEAVE sent at the decision).
void AcquireOp::say_owed_words() {
  for (int i = 0; i < e_.n(); ++i) {
    const auto w = fair_.take_owed(static_cast<std::size_t>(i));
    if (w.settle) tell(i, settle_command());
    if (w.leave) {
      if (auto c = kind_.finish_waiting(keys_, waiter_, true, token_)) tell(i, std::move(*c));
    }
  }
}

void AcquireOp::tell(int node, detail::Command cmd) {
  std::vector<bool> others(static_cast<std::size_t>(e_.n()), true);
  others[static_cast<std::size_t>(node)] = false;
  broadcast(e_, std::move(cmd), others);
}

}  // namespace redlock
