#include "engine/acquire.hpp"

#include <algorithm>

#include "core/keys.hpp"
#include "core/quorum.hpp"
#include "core/timing.hpp"
#include "core/token.hpp"
#include "engine/lock_builder.hpp"
#include "redlock/fencing.hpp"

namespace redlock {

using detail::Decision;
using detail::Round;
using detail::Verdict;

namespace {

std::chrono::microseconds to_us(BootClock::duration d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d);
}

}  // namespace

void start_acquire(Engine::Impl& e, std::vector<std::string> resources, AcquireOptions options,
                   Engine::AcquireCallback cb) {
  auto fail = [&](Errc why, std::string msg) {
    AcquireResult r;
    r.error = make_error_code(why);
    r.message = std::move(msg);
    ++e.metrics_.other_failures;
    e.defer([cb = std::move(cb), r = std::move(r)]() mutable { cb(std::move(r)); });
  };
  if (e.closing_) return fail(Errc::shutdown, "engine is closed");
  if (auto why = check_acquire(resources, options, e.options_))
    return fail(Errc::invalid_argument, *why);
  if (options.stop.stop_requested())
    return fail(Errc::cancelled, "cancelled before it started; nothing was sent");
  (new AcquireOp(e, std::move(resources), std::move(options), std::move(cb)))->start();
}

AcquireOp::AcquireOp(Engine::Impl& e, std::vector<std::string> resources, AcquireOptions opts,
                     Engine::AcquireCallback cb)
    : Operation(e),
      opts_(std::move(opts)),
      kind_(detail::kind_for_acquire(opts_, resources.size())),
      cb_(std::move(cb)) {
  const auto& prefix = e_.options_.key_prefix;
  if (prefix.empty()) {
    keys_ = std::move(resources);
  } else {
    resources_ = std::move(resources);
    keys_.reserve(resources_.size());
    for (const auto& r : resources_) keys_.push_back(prefix + r);
  }
  const int retries = opts_.retry_count.value_or(e_.options_.retry_count);
  started_ = BootClock::now();
  std::optional<BootClock::time_point> wait_until;
  if (opts_.wait) wait_until = started_ + *opts_.wait;
  // Without a wait, a fair waiter waits as long as the retries would have taken.
  if (kind_.queued() && !opts_.wait) wait_until = started_ + retries * e_.options_.retry_delay;
  budget_ = AttemptBudget(retries, wait_until);
  // A fair waiter's place in the queue and a writer's waiting mark must stay ours across
  // attempts, while every attempt's lock token is fresh.
  if (kind_.has_waiter_id()) waiter_ = new_waiter_id();
  e_.note_ttl(opts_.ttl);
}

// With wake-ups, a release that names this waiter publishes on this client's own channel.
std::string AcquireOp::new_waiter_id() const {
  return e_.options_.wake_ups ? e_.new_waiter_id() : detail::make_token();
}

void AcquireOp::start() {
  // Only a cancellable acquisition is registered by id: the engine's mailbox finds it there. It
  // is registered before the first command goes out; a stop requested meanwhile (even right now,
  // which runs the callback inside emplace) reaches cancel() through that mailbox.
  if (opts_.stop.stop_possible()) {
    id_ = e_.next_acquire_id_++;
    e_.acquires_.emplace(id_, this);
    stop_callback_.emplace(opts_.stop, CancelRequest{&e_, id_});
  }
  if (kind_.queued()) {
    // A fair waiter can be named as soon as its ticket puts it in a queue: it hears names from
    // before (on the client's own channel, once a wait of this client has subscribed it; the
    // first wait that subscribes it tries once more, a name may have come before).
    if (e_.options_.wake_ups) e_.hear_names(this);
    start_ticket();
  } else {
    start_attempt();
  }
}

void AcquireOp::start_round(Phase phase, Round& round, detail::Command cmd) {
  phase_ = phase;
  ++round_id_;
  round.reset(&e_.names());
  round.begin_dispatch();
  const auto c = net::Request::make(std::move(cmd), phase == Phase::attempt);
  stamp();
  // An attempt's validity counts from here (read before its first command goes out), and so
  // does that of a lock a ticket round grants (take_ticket_grant).
  if (phase == Phase::attempt || phase == Phase::ticket) t1_ = sent_;
  if (phase == Phase::attempt) {
    const auto& o = e_.options_;
    // The latest an answer can come: a node's deadline, moved on by a connect still under way.
    deadlines_.begin(detail::validity_used_up_at(opts_.ttl, o.drift_factor, o.min_validity, t1_),
                     t1_ + o.node_timeout + o.connect_timeout);
  }
  if (phase == Phase::attempt) fair_.attempt_sent(round_id_);
  if (phase == Phase::ticket) fair_.ticket_round_sent(round_id_);
  for (int i = 0; i < e_.n(); ++i) {
    if (!send(i, c, round_id_)) {
      auto o = not_sent(i);
      if (&round == &attempt_) e_.count_node(i, o);
      round.record(i, std::move(o));
    }
  }
  round.end_dispatch();
  evaluate();
}

void AcquireOp::start_attempt() {
  if (kind_.queued() && fair_.lapsed(BootClock::now(), opts_.heartbeat_ttl)) {
    rejoin_queue();
    return;
  }
  ++attempts_made_;
  // Fresh for every attempt, never reused; a multi-resource lock's says how many it has.
  token_ = detail::token_for(detail::make_token(), keys_.size());
  if (registers()) new_registration();  // the attempt registers again
  fence_.reset();
  start_round(Phase::attempt, attempt_, kind_.acquire(attempt_args()));
}

detail::AttemptArgs AcquireOp::attempt_args() const {
  return {keys_,
          token_,
          opts_.ttl,
          waiter_,
          fair_.ticket(),
          opts_.heartbeat_ttl,
          writer_mark_ttl(),
          fair_.registration(),
          opts_.identity};
}

// A fair waiter is named on its client's own channel, and its lock's channel carries nothing for
// it (releases wake no fair waiter there, nor do deletions): it listens on its own channel only.
const std::vector<std::string>& AcquireOp::watched_keys() const {
  static const std::vector<std::string> none;
  return kind_.queued() ? none : keys_;
}

// A fence counter lives until it has been idle that long (a ticket counter as long as its queue:
// settle_ticket).
void AcquireOp::start_fence_writeback() {
  start_round(Phase::fence_writeback, counter_,
              kind_.fence_writeback(keys_[0], fence_.value(), token_));
}

void AcquireOp::on_result(int node, std::uint32_t tag, const net::Result& r) {
  if (tag != round_id_) {
    late_reply(node, tag, r);  // a late answer of a round already decided
    return;
  }
  switch (phase_) {
    case Phase::attempt: {
      if (!attempt_.open()) return;
      NodeOutcome o;
      if (auto f = failure(node, r)) {
        o = std::move(*f);
      } else {
        const Verdict v = kind_.classify_acquire(*r.reply);
        o = outcome(node, r, v, &attempt_.outcomes());
        if (o.state == NodeState::ok && kind_.fenced()) fence_.add(v.value);
      }
      e_.count_node(node, o);
      attempt_.record(node, std::move(o));
      break;
    }
    case Phase::ticket:
    case Phase::ticket_writeback:
    case Phase::fence_writeback: {
      if (!counter_.open()) return;
      NodeOutcome o;
      if (auto f = failure(node, r)) {
        o = std::move(*f);
      } else {
        const Verdict v = phase_ == Phase::ticket ? detail::classify_ticket(*r.reply)
                          : phase_ == Phase::fence_writeback
                              ? kind_.classify_fence_writeback(*r.reply)
                              : detail::classify_raise(*r.reply);
        o = outcome(node, r, v, &counter_.outcomes());
        if (o.state == NodeState::ok && phase_ == Phase::ticket)
          fair_.ticket_reply(static_cast<std::size_t>(node), v);
      }
      counter_.record(node, std::move(o));
      break;
    }
    case Phase::sleeping:
    case Phase::done:
      late_reply(node, tag, r);  // the sleep or the end after the round was decided
      return;
  }
  evaluate();
}

void AcquireOp::evaluate() {
  switch (phase_) {
    case Phase::attempt:
      if (auto d = attempt_.decision(); d != Decision::undecided) {
        attempt_decided(d);
      } else {
        watch_attempt();
      }
      return;
    case Phase::fence_writeback:
      if (auto d = counter_.decision(); d != Decision::undecided) fence_writeback_decided(d);
      return;
    case Phase::ticket:
      if (auto d = counter_.decision(); d != Decision::undecided) ticket_decided(d);
      return;
    case Phase::ticket_writeback:
      if (auto d = counter_.decision(); d != Decision::undecided) ticket_writeback_decided(d);
      return;
    case Phase::sleeping:
    case Phase::done:
      return;
  }
}

// An undecided attempt: whether it stops waiting for its answers now, and if not, when to ask
// again (engine/attempt_deadlines.hpp says when and why).
void AcquireOp::watch_attempt() {
  const bool in_reach = !detail::out_of_reach(attempt_.tally());
  if (deadlines_.idle(in_reach)) return;  // the usual case: the answers come first
  const auto now = BootClock::now();
  const auto next = deadlines_.at(now, in_reach, retry_follows(now), e_.options_.retry_delay);
  switch (next.step) {
    case AttemptDeadlines::Step::expired:
      validity_used_up(now);
      return;
    case AttemptDeadlines::Step::failed:
      attempt_decided(Decision::impossible, now);  // judged at this time: the retry follows
      return;
    case AttemptDeadlines::Step::wait:
      break;
  }
  if (!next.ask_again) return;
  // Rounded up: a timer that fires early (libuv counts in whole ms of a cached clock) asks again.
  const auto wait =
      std::chrono::ceil<Millis>(std::max(*next.ask_again - now, BootClock::duration::zero()));
  timer().start(static_cast<std::uint64_t>(wait.count()));
}

bool AcquireOp::retry_follows(BootClock::time_point now) const {
  return !e_.closing_ && budget_.more_tries(now);
}

void AcquireOp::attempt_decided(Decision d, BootClock::time_point t2) {
  attempt_.close();
  if (timer_) timer_->stop();  // the answers it awaited came (watch_attempt)
  const int n = e_.n();
  if (d == Decision::quorum) {
    if (kind_.fenced()) {
      // Fencing, second round: raise the counter to at least the fence on a quorum before handing
      // the lock out. Any later quorum intersects this one, so the next fence is higher. Nothing
      // to raise where the counters of a quorum of the granting nodes already stand at the fence.
      if (fence_.on_quorum(n) && !kind_.always_writes_back()) {
        hand_out_fenced();
      } else {
        start_fence_writeback();
      }
      return;
    }
    const auto v = detail::compute_validity(opts_.ttl, e_.options_.drift_factor,
                                            e_.options_.min_validity, t1_, t2);
    if (v.ok) {
      finish_ok(LockBuilder::make(resources(), token_for_lock(), opts_.ttl,
                                  std::chrono::duration_cast<Millis>(v.validity), v.deadline,
                                  attempt_.tally().ok, n, attempt_.outcomes()));
      return;
    }
    fail_attempt(Errc::expired, "a quorum granted the lock but its validity was used up (" +
                                    std::to_string(to_us(t2 - t1_).count()) + " us elapsed)");
    return;
  }
  const auto& t = attempt_.tally();
  note_failed_attempt();
  const Errc why = attempt_.failure_reason(Errc::contended);
  fail_attempt(why,
               why == Errc::contended
                   ? "held by someone else on " + detail::at_least(t) + std::to_string(t.refused) +
                         " of " + std::to_string(n) + " nodes"
                   : std::string(why == Errc::refused ? "refused" : "no quorum") + ": " +
                         std::to_string(t.ok) + " of " + std::to_string(n) + " nodes granted, " +
                         std::to_string(detail::quorum_of(n)) + " needed (" + attempt_.breakdown() +
                         ")",
               t2);
}

void AcquireOp::note_failed_attempt() {
  const auto& t = attempt_.tally();
  if (t.refused > 0) saw_contention_ = true;
  // A queued attempt that a quorum ran refreshed our heartbeat there.
  if (kind_.queued() && t.ok + t.refused >= detail::quorum_of(e_.n())) fair_.refreshed(t1_);
}

void AcquireOp::validity_used_up(BootClock::time_point now) {
  attempt_.close();  // nodes that have not answered show as pending
  note_failed_attempt();
  const auto& t = attempt_.tally();
  const int n = e_.n();
  fail_attempt(Errc::expired,
               "the validity was used up before a quorum answered (ttl " +
                   std::to_string(opts_.ttl.count()) + " ms, " + std::to_string(t.ok) + " of " +
                   std::to_string(n) + " nodes granted, " + std::to_string(detail::quorum_of(n)) +
                   " needed: " + attempt_.breakdown() + ")",
               now);
}

void AcquireOp::fence_writeback_decided(Decision d) {
  counter_.close();
  if (d == Decision::impossible) {
    fail_attempt(Errc::no_quorum,
                 "no quorum for the fence write-back: " + std::to_string(counter_.tally().ok) +
                     " of " + std::to_string(e_.n()) + " nodes acknowledged");
    return;
  }
  hand_out_fenced();
}

void AcquireOp::hand_out_fenced() {
  const auto t2 = BootClock::now();
  const auto v = detail::compute_validity(opts_.ttl, e_.options_.drift_factor,
                                          e_.options_.min_validity, t1_, t2);
  if (!v.ok) {
    fail_attempt(Errc::expired, "the lock and its fence were granted but the validity was used up");
    return;
  }
  Lock lock = LockBuilder::make(resources(), token_for_lock(), opts_.ttl,
                                std::chrono::duration_cast<Millis>(v.validity), v.deadline,
                                attempt_.tally().ok, e_.n(), attempt_.outcomes());
  LockBuilder::set_fence(lock, fence_.value());
  warn_fence_durability();
  finish_ok(std::move(lock));
}

// Fences grow only while nodes keep their counters (appendfsync always); the restart guard does
// not help (docs/design.md, "Safety model"). Say so once per node that is known not to be durable.
void AcquireOp::warn_fence_durability() {
  for (auto& node : e_.nodes_) {
    if (node->fence_warned) continue;
    if (auto why = node->fence_durability_problem()) {
      node->fence_warned = true;
      e_.log(LogLevel::warning,
             node->name() + ": fencing on a node with " + *why +
                 ": a crash or restart loses its fence counters and fences can "
                 "go backwards; run lock nodes with appendonly yes + appendfsync always");
    }
  }
}

void AcquireOp::fail_attempt(Errc why, std::string message, BootClock::time_point now) {
  if (may_hold_keys()) broadcast(e_, kind_.rollback(attempt_args()));
  // A ticket or write-back round that the nodes' configuration failed (auth, ACL, TLS).
  if (why == Errc::no_quorum && phase_ != Phase::attempt &&
      counter_.failure_reason(Errc::no_quorum) == Errc::refused) {
    why = Errc::refused;
    message = "refused: " + message + " (" + counter_.breakdown() + ")";
  }
  // Refused by configuration on too many nodes: no retry can help until someone fixes it, and
  // retrying would only hammer the nodes with refused logins.
  if (why == Errc::refused) {
    finish(why, std::move(message));
    return;
  }
  last_error_ = why;
  last_message_ = std::move(message);
  Millis sleep = e_.retry_sleep();
  // Only a lock held elsewhere is worth trying again before the retry delay, and only on word
  // that it was released. A failure of no quorum (nodes down, votes excluded by the restart
  // guard or a promotion's quarantine) or of validity is not undone by a release: every waiter
  // woken at once by the others' releases and attempts would try again and again against the
  // nodes that are left (issue 41: thousands of attempts per waiter and second). It sleeps the
  // retry delay, jitter and all, and no wake-up shortens that (algorithm.md, hazard 12).
  const bool contended = why == Errc::contended;
  const WakeWatch::WhileOut heard = watch_.round_failed(contended);
  if (!contended) {
    // (A fair waiter still refreshes its heartbeat well within its ttl, or loses its place.)
    if (kind_.queued()) sleep = std::min(sleep, opts_.heartbeat_ttl / 4);
  } else if (heard.named) {
    // Named while this round was out: the lock may be free now, and nobody else was told.
    sleep = Millis{0};
  } else if (kind_.queued() &&
             (!e_.options_.wake_ups || (fair_.first_in_line() && phase_ == Phase::attempt))) {
    // Without wake-ups; or an attempt made as the first in line (named, or nobody ahead at its
    // ticket) that lost: to a waiter with the same ticket whose place a node had not updated yet
    // (ties go by waiter id), or to a release still on its way. Nobody will name us: poll.
    // A waiter in the queue polls quickly, backing off: the lock is usually handed on soon after
    // a release, and the heartbeat must be refreshed well within heartbeat_ttl.
    sleep = fair_.next_poll(opts_.heartbeat_ttl);
  } else if (heard.resubscribed) {
    // Our channel was (re)subscribed while this round was out: a name published before that
    // is lost, so one attempt at once (as a waiter that is not first in line).
    sleep = Millis{0};
  } else if (kind_.queued() && e_.options_.wake_ups) {
    // The release names the first in line: polling is the fallback (a first waiter that died
    // before its turn, a lost subscription), and refreshes the heartbeat well within its ttl.
    sleep = std::min(sleep, opts_.heartbeat_ttl / 4);
  }
  if (!budget_.more_tries(now) || e_.closing_) {
    finish(last_error_, last_message_);
    return;
  }
  sleep_then_retry(budget_.sleep_before_next(now, sleep));
}

void AcquireOp::sleep_then_retry(Millis sleep) {
  phase_ = Phase::sleeping;
  if (e_.options_.wake_ups) {
    if (!watching_) {
      watching_ = true;
      e_.watch(this, watched_keys());
    }
    watch_.sleep_begins(e_.n());
    // Releases publish only while a waiter's mark says someone listens: kept for the whole wait
    // (renewed before it could lapse during a sleep), so an uncontended release costs nothing.
    // A named waiter marks itself by its id, ranked by when it began to wait (the same rank on
    // every node, so their releases name the same waiter), and again once a release named it.
    const auto now = BootClock::now();
    if (kind_.named_wake() && waiting_since_ == 0) {
      waiter_ = new_waiter_id();
      waiting_since_ =
          std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch())
              .count();
    }
    if (watch_.mark_due(now, sleep)) {
      const Millis ttl = 2 * sleep + Millis{1000};
      for (const auto& k : keys_) {
        broadcast(e_, kind_.named_wake() ? detail::mark_waiting(k, ttl, waiter_, waiting_since_)
                                         : detail::mark_waiting(k, ttl));
      }
      watch_.marked(now + ttl);
    }
  }
  // Every way back to an attempt after a failure goes through this timer: at the end of the
  // sleep, or earlier when a wake-up may end it (wake()).
  timer().start(static_cast<std::uint64_t>(sleep.count()));
}

net::Timer& AcquireOp::timer() {
  if (!timer_) timer_ = std::make_unique<net::Timer>(e_.loop_, [this] { on_timer(); });
  return *timer_;
}

void AcquireOp::on_timer() {
  switch (phase_) {
    case Phase::attempt:
      if (attempt_.open()) watch_attempt();  // it stops waiting now, or asks again later
      return;
    case Phase::sleeping:
      fair_.set_first_in_line(watch_.retry_is_named());
      if (fair_.needs_ticket()) {
        start_ticket();
      } else {
        start_attempt();
      }
      return;
    case Phase::ticket:
    case Phase::ticket_writeback:
    case Phase::fence_writeback:
    case Phase::done:
      return;
  }
}

void AcquireOp::wake(int node, const net::Wake& w) {
  switch (watch_.heard(node, w, waiter_, phase_ == Phase::sleeping, detail::quorum_of(e_.n()))) {
    case WakeWatch::Go::not_yet:
      return;
    case WakeWatch::Go::now:
      budget_.woken_early();
      timer_->start(0);  // named: it goes at once (wake_spread)
      return;
    case WakeWatch::Go::after_spread:
      budget_.woken_early();
      timer_->start(static_cast<std::uint64_t>(wake_spread(w).count()));
      return;
  }
}

// A release that names one waiter wakes only it, and it goes at once (wake). Any other wakes
// every waiter of every listening client, so they spread out over a window of 2 ms per other
// client the release counted ("#<n>"): the first goes early on average, and two rarely collide
// (split votes). A keyspace notification counts nobody: a fixed small window.
Millis AcquireOp::wake_spread(const net::Wake& w) {
  const long long listeners = detail::wake_listeners(w.waiter).value_or(2);
  return e_.jitter(Millis{2 * std::max(0LL, listeners - 1)});
}

void AcquireOp::cancel() {
  if (phase_ == Phase::done) return;
  attempt_.close();  // nodes that have not answered show as pending
  if (may_hold_keys()) broadcast(e_, kind_.rollback(attempt_args()));
  finish(Errc::cancelled,
         "cancelled by the caller after " + std::to_string(attempts_made_) + " attempt(s)" +
             (last_message_.empty() ? std::string() : "; last attempt: " + last_message_));
}

AcquireOp::~AcquireOp() { e_.owing_.erase(this); }

void AcquireOp::shutdown() {
  if (phase_ == Phase::done) return;
  say_owed_words();  // a ticket the nodes that have not answered may still need to be told
  attempt_.close();
  // The nodes drain what is queued before they close: the keys of an attempt in flight go too,
  // and (direct handoff) a key a release may have handed us: leaving the queue takes it back.
  if (may_hold_keys()) broadcast(e_, kind_.rollback(attempt_args()));
  // complete() says we are done waiting, as for any failure (the connections still take it).
  finish(Errc::shutdown, "engine closed before the lock was acquired");
}

// The winning attempt's token, for its Lock: moved, unless the kind still names it once the lock
// is won (a fair waiter's leave carries the token of the lock it took: finish_waiting), so that
// the usual acquisition does not copy it.
std::string AcquireOp::token_for_lock() { return kind_.queued() ? token_ : std::move(token_); }

Millis AcquireOp::writer_mark_ttl() const { return detail::writer_mark_ttl(e_.options_); }

void AcquireOp::finish_ok(Lock lock) {
  LockBuilder::set_mode(lock, opts_.mode);
  if (kind_.queued()) LockBuilder::set_ticket(lock, fair_.ticket());
  LockBuilder::set_wakes_waiters(lock, kind_.queued() || saw_contention_);
  LockBuilder::set_taken_at(lock, t1_);
  AcquireResult res;
  res.lock = std::move(lock);
  res.nodes = attempt_.outcomes();
  res.attempts = attempts_made_;
  complete(std::move(res));
}

void AcquireOp::finish(Errc why, std::string message) {
  AcquireResult res;
  res.error = make_error_code(why);
  res.message = std::move(message);
  res.nodes = attempt_.outcomes();
  res.attempts = attempts_made_;
  complete(std::move(res));
}

void AcquireOp::deliver() {
  auto cb = std::move(cb_);
  cb(std::move(result_));
}

void AcquireOp::complete(AcquireResult res) {
  if (phase_ == Phase::done) return;
  phase_ = Phase::done;
  if (timer_) timer_->stop();
  if (id_ != 0) e_.acquires_.erase(id_);
  if (watching_ || kind_.queued()) {
    watching_ = false;
    e_.unwatch(this, watched_keys());
  }
  stop_callback_.reset();  // waits if another thread is inside request_cancel() right now
  // (At close this runs from shutdown(), before the connections stop taking commands: a waiter
  // whose client closes leaves its queue, mark and registration as one that gives up does.)
  if (auto c = kind_.finish_waiting(keys_, waiter_, !res.error, token_)) {
    // A node that granted the lock took the waiter out of its queue in the same script; one
    // that has not answered yet is told once it answers without granting (late_reply).
    std::vector<bool> skip(static_cast<std::size_t>(e_.n()), false);
    // Won by the ticket round's grants, no attempt of ours is out: every node that did not
    // grant is told now (behind the ticket round, on its connection), before our release can
    // reach it. Were it not, a release still on its way there could hand it to us after our
    // own release had come and gone, and the key would stay until its ttl. One that granted
    // already keeps the key (our lock's token).
    if (!res.error) {
      std::vector<bool> out(skip.size(), false);
      for (int i = 0; i < e_.n(); ++i) {
        const auto u = static_cast<std::size_t>(i);
        out[u] = !fair_.won_with_ticket() && !attempt_.answered(i);
        skip[u] = out[u] || attempt_.outcomes()[u].state == NodeState::ok;
      }
      fair_.owe_leave(std::move(out));
    }
    broadcast(e_, std::move(*c), skip);
    if (fair_.owes_words()) e_.owing_.insert(this);
  }
  // A named waiter that is done leaves the mark, so no release names it any more.
  if (kind_.named_wake() && waiting_since_ != 0) {
    for (const auto& k : keys_) broadcast(e_, detail::unmark_waiting(k, waiter_));
  }
  e_.count_acquire(res, BootClock::now() - started_);
  result_ = std::move(res);
  e_.defer(this);
  finished();
}

}  // namespace redlock
