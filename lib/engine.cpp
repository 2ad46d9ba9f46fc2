// The quorum engine: fan-out of each operation to every node at once, decision as soon as the
// outcome is known, rollback on every node after a failed attempt, retries with jitter.
//
// Lifetimes: an operation is reference-counted by the commands it has in flight (every command
// sent reports back exactly once, see node.hpp) plus one reference held until the operation
// has finished. Its user callback is always posted through `defer()`, so it never runs inside a
// hiredis callback nor inside the call that started the operation.

#include <hiredis/hiredis.h>
#include <uv.h>

#include <algorithm>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <stop_token>
#include <unordered_map>
#include <unordered_set>

#include "lock_builder.hpp"
#include "node.hpp"
#include "quorum.hpp"
#include "redlock/engine.hpp"
#include "redlock/fencing.hpp"
#include "redlock/metrics.hpp"
#include "scripts.hpp"
#include "token.hpp"
#include "validate.hpp"

namespace redlock {


using detail::Command;
using detail::Node;
using detail::NodeResult;
using detail::ScriptId;
using detail::Tally;

namespace {

// Read-write locks keep their extra state next to the lock key (documented in the README).
std::string readers_key(const std::string& key) { return key + ":readers"; }
std::string writer_waiting_key(const std::string& key) { return key + ":writer_waiting"; }
// Fair locks.
std::string queue_key(const std::string& key) { return key + ":queue"; }
std::string heartbeats_key(const std::string& key) { return key + ":queue:heartbeats"; }
std::string ticket_key(const std::string& key) { return key + ":ticket"; }

std::string reply_error(const redisReply* r) { return std::string(r->str, r->len); }

std::chrono::microseconds to_us(BootClock::duration d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d);
}

// "3 down, 1 timeout": the per-node record in a few words, for messages.
std::string breakdown(const std::vector<NodeOutcome>& nodes) {
  std::string out;
  for (int s = 0; s <= static_cast<int>(NodeState::pending); ++s) {
    int n = 0;
    for (const auto& o : nodes) n += static_cast<int>(o.state) == s;
    if (n == 0) continue;
    if (!out.empty()) out += ", ";
    out += std::to_string(n) + " " + to_string(static_cast<NodeState>(s));
  }
  return out;
}

Millis to_ms_floor(std::chrono::microseconds us) {
  return std::chrono::duration_cast<Millis>(us);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

class Operation;
class AcquireOp;
class HoldOp;

class Engine::Impl final : public detail::NodeHost {
 public:
  Impl(uv_loop_t* loop, Options options) : loop_(loop), options_(std::move(options)) {
    if (auto why = check_options(options_)) throw std::invalid_argument(*why);
    rng_.seed(std::random_device{}());
    uv_check_init(loop_, &check_);
    uv_idle_init(loop_, &idle_);
    check_.data = this;
    idle_.data = this;
    uv_check_start(&check_, &Impl::on_check);
    uv_unref(reinterpret_cast<uv_handle_t*>(&check_));  // does not keep the loop alive by itself
    uv_async_init(loop_, &cancel_async_, &Impl::on_cancel_requests);
    cancel_async_.data = this;
    uv_unref(reinterpret_cast<uv_handle_t*>(&cancel_async_));
    open_handles_ = 3;
    nodes_.reserve(options_.nodes.size());
    for (std::size_t i = 0; i < options_.nodes.size(); ++i) {
      nodes_.push_back(std::make_unique<Node>(loop_, *this, static_cast<int>(i), options_.nodes[i], options_));
      ++open_handles_;
    }
    metrics_.nodes.resize(nodes_.size());  // never resized again: nodes keep pointers into it
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      metrics_.nodes[i].node = nodes_[i]->name();
      nodes_[i]->set_metrics(&metrics_.nodes[i]);
    }
    for (auto& n : nodes_) n->start();
  }

  // Metrics are only touched on the loop thread. Nodes count what their connection saw; the
  // operations add what only they know (a vote excluded by the restart guard).
  void count_node(int i, const NodeOutcome& o) {
    if (o.state == NodeState::excluded) ++metrics_.nodes[static_cast<std::size_t>(i)].excluded;
  }

  void count_acquire(const AcquireResult& r, BootClock::duration took) {
    if (!r.error) ++metrics_.acquired;
    else if (r.error == Errc::contended) ++metrics_.contended;
    else if (r.error == Errc::no_quorum) ++metrics_.no_quorum;
    else if (r.error == Errc::expired) ++metrics_.expired;
    else ++metrics_.other_failures;
    metrics_.attempts += static_cast<std::uint64_t>(r.attempts);
    metrics_.acquire_latency.observe(std::chrono::duration<double>(took).count());
  }

  Metrics metrics_;

  // NodeHost
  void log(LogLevel level, const std::string& message) override {
    if (options_.logger) options_.logger(level, message);
  }
  void on_node_closed(int) override { handle_closed(); }
  Millis restart_quarantine() const override {
    if (options_.restart_quarantine) return *options_.restart_quarantine;
    // The longest ttl this client has used (at least the default ttl) plus its drift.
    Millis longest = std::max(max_ttl_used_, AcquireOptions{}.ttl);
    return longest + std::chrono::ceil<Millis>(detail::drift(longest, options_.drift_factor));
  }

  void defer(std::function<void()> fn) {
    if (fully_closed_) {
      fn();  // nothing can run later: no handle is left on the loop
      return;
    }
    deferred_.push_back(std::move(fn));
    if (!closing_ && !uv_is_active(reinterpret_cast<uv_handle_t*>(&idle_))) {
      uv_idle_start(&idle_, [](uv_idle_t*) {});  // keeps poll from blocking until on_check runs
    }
  }

  void run_deferred() {
    while (!deferred_.empty()) {
      std::vector<std::function<void()>> batch;
      batch.swap(deferred_);
      for (auto& fn : batch) fn();
    }
  }

  static void on_check(uv_check_t* h) {
    auto* self = static_cast<Impl*>(h->data);
    if (!self->closing_) uv_idle_stop(&self->idle_);
    self->run_deferred();
  }

  // Cancellation (AcquireOptions::stop). A stop may be requested on any thread, so the request
  // only goes into this mailbox and wakes the loop; the loop thread then cancels the operation.
  // Called from std::stop_callback: must not block beyond the mailbox's mutex.
  void request_cancel(std::uint64_t acquire_id) noexcept {
    {
      std::lock_guard<std::mutex> g(cancel_mu_);
      cancel_requests_.push_back(acquire_id);
    }
    uv_async_send(&cancel_async_);
  }
  static void on_cancel_requests(uv_async_t* h);
  std::unordered_map<std::uint64_t, AcquireOp*> acquires_;  // unfinished, by id
  std::uint64_t next_acquire_id_ = 1;

  void close(std::function<void()> on_closed);
  void handle_closed() {
    if (--open_handles_ > 0) return;
    fully_closed_ = true;
    run_deferred();
    if (on_closed_) {
      auto cb = std::move(on_closed_);
      cb();
    }
    if (owner_gone_) delete this;
  }

  // Restart guard and duplicate detection: why node i's grant must not count, or nullopt.
  // `outcomes`, when given, is the operation's record so far: a server reached through two
  // addresses votes once, for whichever address answered first (its twin's run_id may not even
  // be known yet at that moment); with both known, the lower index votes.
  std::optional<std::string> vote_exclusion(int i, BootClock::time_point now,
                                            const std::vector<NodeOutcome>* outcomes = nullptr) const {
    if (auto why = nodes_[i]->vote_exclusion(now)) return why;
    const auto& id = nodes_[i]->run_id();
    if (!id.empty()) {
      for (int j = 0; j < n(); ++j) {
        if (j == i || nodes_[j]->run_id() != id) continue;
        const bool twin_voted = outcomes != nullptr && (*outcomes)[static_cast<std::size_t>(j)].state == NodeState::ok;
        if (j < i || twin_voted) {
          return "same server as " + nodes_[j]->name() + " (equal run_id): one vote per server";
        }
      }
    }
    return std::nullopt;
  }

  void note_ttl(Millis ttl) { max_ttl_used_ = std::max(max_ttl_used_, ttl); }

  // A uniform value in [0, span].
  Millis jitter(Millis span) {
    std::uniform_int_distribution<long long> dist(0, std::max<long long>(0, span.count()));
    return Millis{dist(rng_)};
  }

  Millis retry_sleep() {
    auto d = options_.retry_delay.count();
    auto j = options_.retry_jitter.count();
    std::uniform_int_distribution<long long> dist(-j, j);
    return Millis{std::max<long long>(0, d + dist(rng_))};
  }

  int n() const { return static_cast<int>(nodes_.size()); }

  uv_loop_t* loop_;
  Options options_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::unordered_set<Operation*> ops_;  // unfinished operations
  std::unordered_map<Engine::HoldId, std::shared_ptr<HoldOp>> holds_;  // running watchdogs
  Engine::HoldId next_hold_id_ = 1;
  bool closing_ = false;
  bool fully_closed_ = false;
  bool owner_gone_ = false;

 private:
  uv_check_t check_;
  uv_idle_t idle_;
  uv_async_t cancel_async_;
  std::mutex cancel_mu_;
  std::vector<std::uint64_t> cancel_requests_;  // guarded by cancel_mu_
  int open_handles_ = 0;
  std::vector<std::function<void()>> deferred_;
  std::function<void()> on_closed_;
  Millis max_ttl_used_{0};
  std::mt19937_64 rng_;
};

// ---------------------------------------------------------------------------------------------

class Operation : public detail::Sink {
 public:
  explicit Operation(Engine::Impl& e) : e_(e) { e_.ops_.insert(this); }
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;
  // The engine is closing: finish now with Errc::shutdown.
  virtual void shutdown() = 0;
  void on_done() final { unref(); }

 protected:
  virtual ~Operation() = default;
  void ref() { ++refs_; }
  void unref() {
    if (--refs_ == 0) delete this;
  }
  // Marks the operation finished: it leaves the engine's registry and drops its own reference.
  // Commands still in flight keep it alive until they report back.
  void finished() {
    e_.ops_.erase(this);
    unref();
  }
  bool send(int node, const Command& c, std::uint32_t tag) {
    if (!e_.nodes_[node]->send(c, e_.options_.node_timeout, *this, tag)) return false;
    ref();
    return true;
  }
  bool send_script(int node, ScriptId id, int numkeys, const Command& c, std::uint32_t tag) {
    if (!e_.nodes_[node]->send_script(id, numkeys, c, e_.options_.node_timeout, *this, tag)) return false;
    ref();
    return true;
  }
  NodeOutcome outcome(int node, NodeState s, std::string detail = {},
                      std::chrono::microseconds latency = {}) const {
    return NodeOutcome{e_.nodes_[node]->name(), s, std::move(detail), latency};
  }
  NodeOutcome not_sent(int node) const {
    ++e_.metrics_.nodes[static_cast<std::size_t>(node)].down;  // the node never saw this one
    const auto& err = e_.nodes_[node]->last_error();
    return outcome(node, NodeState::down, err.empty() ? "not connected" : err);
  }
  // Common classification of a non-reply.
  static bool failure_state(const NodeResult& r, NodeState& s, std::string& detail) {
    if (r.kind == NodeResult::Kind::timeout) {
      s = NodeState::timeout;
      return true;
    }
    if (r.kind == NodeResult::Kind::down) {
      s = NodeState::down;
      detail = std::string(r.error);
      return true;
    }
    if (r.reply->type == REDIS_REPLY_ERROR) {
      s = NodeState::error;
      detail = reply_error(r.reply);
      return true;
    }
    return false;
  }

  Engine::Impl& e_;

 private:
  int refs_ = 1;
};

// Sends the compare-and-delete for `token` on every node, ignoring the answers. Used to roll back
// a failed attempt: nodes that timed out or have not answered yet may still have run the SET, and
// on each connection the delete is pipelined behind it, so it runs after it.
class Rollback final : public Operation {
 public:
  // Sends one script to every node and forgets about it.
  static void broadcast(Engine::Impl& e, ScriptId id, int numkeys, const Command& c) {
    auto* op = new Rollback(e);
    for (int i = 0; i < e.n(); ++i) op->send_script(i, id, numkeys, c, 0);
    op->finished();
  }

  static void run(Engine::Impl& e, const std::vector<std::string>& keys, const std::string& token, LockMode mode) {
    auto* op = new Rollback(e);
    Command c;
    ScriptId id = ScriptId::release;
    int numkeys = static_cast<int>(keys.size());
    if (mode == LockMode::read) {
      c.arg(readers_key(keys[0]));
      id = ScriptId::release_read;
      numkeys = 1;
    } else {
      for (const auto& k : keys) c.arg(k);
      if (keys.size() > 1) id = ScriptId::release_multi;
    }
    c.arg(token);
    for (int i = 0; i < e.n(); ++i) op->send_script(i, id, numkeys, c, 0);
    op->finished();
  }
  void on_result(int, std::uint32_t, const NodeResult&) override {}
  void shutdown() override {}

 private:
  using Operation::Operation;
};

// ---------------------------------------------------------------------------------------------

class AcquireOp final : public Operation {
 public:
  AcquireOp(Engine::Impl& e, std::vector<std::string> resources, AcquireOptions opts,
            Engine::AcquireCallback cb)
      : Operation(e), resources_(std::move(resources)), opts_(opts), cb_(std::move(cb)) {
    keys_.reserve(resources_.size());
    for (const auto& r : resources_) keys_.push_back(e_.options_.key_prefix + r);
    retries_left_ = opts_.retry_count.value_or(e_.options_.retry_count);
    started_ = BootClock::now();
    if (opts_.wait) wait_until_ = BootClock::now() + *opts_.wait;
    // A fair waiter's place in the queue and a writer's waiting mark must stay ours across
    // attempts, while every attempt's lock token is fresh.
    if (opts_.fair || opts_.mode == LockMode::write) waiter_ = detail::make_token();
    if (opts_.fair) {
      if (!opts_.wait) wait_until_ = started_ + retries_left_ * e_.options_.retry_delay;
    }
    e_.note_ttl(opts_.ttl);
  }

  void start() {
    id_ = e_.next_acquire_id_++;
    e_.acquires_.emplace(id_, this);
    // Registered before the first command goes out; a stop requested meanwhile (even right now,
    // which runs the callback inside emplace) reaches cancel() through the engine's mailbox.
    if (opts_.stop.stop_possible()) stop_callback_.emplace(opts_.stop, CancelRequest{&e_, id_});
    if (opts_.fair) {
      start_ticket();
    } else {
      start_attempt();
    }
  }

  void start_attempt() {
    ++attempt_;
    ++attempts_made_;
    token_ = detail::make_token();  // fresh for every attempt, never reused
    tally_ = Tally{e_.n()};
    outcomes_.assign(static_cast<std::size_t>(e_.n()), NodeOutcome{});
    answered_.assign(static_cast<std::size_t>(e_.n()), false);
    open_ = true;
    dispatching_ = true;
    fence_max_ = 0;
    Command c;
    const bool multi = keys_.size() > 1;
    if (opts_.fair) {
      c.arg(keys_[0]).arg(queue_key(keys_[0])).arg(heartbeats_key(keys_[0]));
      c.arg(token_).arg(static_cast<long long>(opts_.ttl.count())).arg(static_cast<long long>(ticket_));
      c.arg(static_cast<long long>(opts_.heartbeat_ttl.count())).arg(waiter_);
    } else if (opts_.mode != LockMode::exclusive) {
      c.arg(keys_[0]).arg(readers_key(keys_[0])).arg(writer_waiting_key(keys_[0]));
      c.arg(token_).arg(static_cast<long long>(opts_.ttl.count()));
      if (opts_.mode == LockMode::write) c.arg(static_cast<long long>(writer_mark_ttl().count())).arg(waiter_);
    } else if (opts_.fence) {
      c.arg(keys_[0]).arg(keys_[0] + std::string(fence_key_suffix));
      c.arg(token_).arg(static_cast<long long>(opts_.ttl.count()));
    } else if (multi) {
      for (const auto& k : keys_) c.arg(k);
      c.arg(token_).arg(static_cast<long long>(opts_.ttl.count()));
    } else {
      c.arg("SET").arg(keys_[0]).arg(token_).arg("NX").arg("PX").arg(static_cast<long long>(opts_.ttl.count()));
    }
    t1_ = BootClock::now();
    for (int i = 0; i < e_.n(); ++i) {
      bool sent = opts_.fair ? send_script(i, ScriptId::acquire_fair, 3, c, attempt_)
                  : opts_.mode == LockMode::read  ? send_script(i, ScriptId::acquire_read, 3, c, attempt_)
                  : opts_.mode == LockMode::write ? send_script(i, ScriptId::acquire_write, 3, c, attempt_)
                  : opts_.fence ? send_script(i, ScriptId::acquire_fenced, 2, c, attempt_)
                  : multi     ? send_script(i, ScriptId::acquire_multi, static_cast<int>(keys_.size()), c, attempt_)
                              : send(i, c, attempt_);
      if (!sent) record(i, not_sent(i));
    }
    dispatching_ = false;
    evaluate();
  }

  void on_result(int node, std::uint32_t tag, const NodeResult& r) override {
    if (tag == ticket_tag) {
      on_ticket(node, r);
      return;
    }
    if (tag == (attempt_ | writeback_tag)) {
      on_writeback(node, r);
      return;
    }
    if (tag != attempt_ || !open_) return;  // a late answer of an attempt already decided
    NodeState s = NodeState::ok;
    std::string detail;
    if (!failure_state(r, s, detail)) {
      const redisReply* rep = r.reply;
      bool granted, refused;
      if (opts_.fence) {
        granted = rep->type == REDIS_REPLY_INTEGER && rep->integer > 0;
        refused = rep->type == REDIS_REPLY_INTEGER && rep->integer == 0;
      } else if (opts_.fair) {
        granted = rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
        refused = rep->type == REDIS_REPLY_INTEGER && rep->integer == 0;
      } else if (keys_.size() > 1 || opts_.mode != LockMode::exclusive) {
        granted = rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
        refused = rep->type == REDIS_REPLY_INTEGER && rep->integer == 0;
      } else {
        granted = rep->type == REDIS_REPLY_STATUS && std::string_view(rep->str, rep->len) == "OK";
        refused = rep->type == REDIS_REPLY_NIL;
      }
      if (granted) {
        s = NodeState::ok;
        if (auto why = e_.vote_exclusion(node, BootClock::now(), &outcomes_)) {
          s = NodeState::excluded;
          detail = *why;
        } else if (opts_.fence) {
          fence_max_ = std::max(fence_max_, static_cast<std::uint64_t>(rep->integer));
        }
      } else if (refused) {
        s = NodeState::held_by_other;
      } else {
        s = NodeState::error;
        detail = "unexpected reply type " + std::to_string(rep->type);
      }
    }
    record(node, outcome(node, s, std::move(detail), r.latency));
    evaluate();
  }

  void shutdown() override {
    if (done_) return;
    open_ = false;
    wb_open_ = false;
    tk_open_ = false;
    const bool timer_was_pending = cancel_retry_timer();
    finish(Errc::shutdown, "engine closed before the lock was acquired");
    if (timer_was_pending) unref();  // the timer's reference; may delete this
  }

  // The caller's stop (AcquireOptions::stop), on the loop thread. Whatever this operation may
  // have set on the nodes is deleted: the SETs of an attempt still in flight (some may have run),
  // or the grants of an attempt that is in its fence write-back round.
  void cancel() {
    if (done_) return;
    const bool may_hold_keys = open_ || (wb_open_ && !wb_for_ticket_);
    if (open_) mark_pending();
    open_ = false;
    wb_open_ = false;
    tk_open_ = false;
    if (may_hold_keys) Rollback::run(e_, keys_, token_, opts_.mode);
    const bool timer_was_pending = cancel_retry_timer();
    finish(Errc::cancelled, "cancelled by the caller after " + std::to_string(attempts_made_) + " attempt(s)" +
                                (last_message_.empty() ? std::string() : "; last attempt: " + last_message_));
    if (timer_was_pending) unref();  // the timer's reference; may delete this
  }

 private:
  void record(int node, NodeOutcome o) {
    answered_[node] = true;
    switch (o.state) {
      case NodeState::ok: ++tally_.ok; break;
      case NodeState::held_by_other: ++tally_.refused; break;
      default: ++tally_.failed; break;
    }
    e_.count_node(node, o);
    outcomes_[node] = std::move(o);
  }

  void mark_pending() {
    for (int i = 0; i < e_.n(); ++i) {
      if (!answered_[i]) outcomes_[i] = outcome(i, NodeState::pending);
    }
  }

  void evaluate() {
    if (dispatching_ || !open_) return;
    auto d = detail::decide(tally_);
    if (d == detail::Decision::undecided) return;
    open_ = false;
    const auto t2 = BootClock::now();
    mark_pending();
    if (d == detail::Decision::quorum) {
      if (opts_.fence) {
        start_writeback();
        return;
      }
      auto v = detail::compute_validity(opts_.ttl, e_.options_.drift_factor, e_.options_.min_validity, t1_, t2);
      if (v.ok) {
        Lock lock = LockBuilder::make(resources_, token_, opts_.ttl, to_ms_floor(v.validity), v.deadline,
                                      tally_.ok, e_.n(), outcomes_);
        finish_ok(std::move(lock));
        return;
      }
      fail_attempt(Errc::expired, "a quorum granted the lock but its validity was used up (" +
                                      std::to_string(to_us(t2 - t1_).count()) + " us elapsed)");
      return;
    }
    Errc why = detail::failure_reason(tally_, Errc::contended);
    fail_attempt(why, why == Errc::contended
                          ? "held by someone else on " + std::to_string(tally_.refused) + " of " + std::to_string(e_.n()) + " nodes"
                          : "no quorum: " + std::to_string(tally_.ok) + " of " + std::to_string(e_.n()) +
                                " nodes granted, " + std::to_string(detail::quorum_of(e_.n())) + " needed (" +
                                breakdown(outcomes_) + ")");
  }

  // Fencing, second round: raise the counter to at least the fence on a quorum before handing
  // the lock out. Any later quorum intersects this one, so the next fence is higher.
  // Fair locks, first round: a ticket from the quorum (the same counter-and-write-back
  // construction as fencing), so every node orders the waiters the same way.
  void start_ticket() {
    need_ticket_ = false;
    tk_tally_ = Tally{e_.n()};
    tk_open_ = true;
    dispatching_ = true;
    Command c;
    c.arg(ticket_key(keys_[0])).arg(queue_key(keys_[0])).arg(heartbeats_key(keys_[0]));
    c.arg(waiter_).arg(static_cast<long long>(opts_.heartbeat_ttl.count()));
    for (int i = 0; i < e_.n(); ++i) {
      if (!send_script(i, ScriptId::ticket_take, 3, c, ticket_tag)) ++tk_tally_.failed;
    }
    dispatching_ = false;
    evaluate_ticket();
  }

  void on_ticket(int node, const NodeResult& r) {
    if (!tk_open_) return;
    NodeState s;
    std::string detail;
    if (!failure_state(r, s, detail) && r.reply->type == REDIS_REPLY_INTEGER && r.reply->integer > 0 &&
        !e_.vote_exclusion(node, BootClock::now())) {
      ++tk_tally_.ok;
      ticket_ = std::max(ticket_, static_cast<std::uint64_t>(r.reply->integer));
    } else {
      ++tk_tally_.failed;
    }
    evaluate_ticket();
  }

  void evaluate_ticket() {
    if (dispatching_ || !tk_open_) return;
    auto d = detail::decide(tk_tally_);
    if (d == detail::Decision::undecided) return;
    tk_open_ = false;
    if (d == detail::Decision::impossible) {
      fail_ticket("no quorum for a queue ticket");
      return;
    }
    wb_for_ticket_ = true;
    start_writeback();
  }

  void start_writeback() {
    wb_tally_ = Tally{e_.n()};
    wb_open_ = true;
    dispatching_ = true;
    Command c;
    if (wb_for_ticket_) {
      c.arg(ticket_key(keys_[0])).arg(static_cast<long long>(ticket_));
    } else {
      c.arg(keys_[0] + std::string(fence_key_suffix)).arg(static_cast<long long>(fence_max_));
    }
    for (int i = 0; i < e_.n(); ++i) {
      if (!send_script(i, ScriptId::fence_raise, 1, c, attempt_ | writeback_tag)) ++wb_tally_.failed;
    }
    dispatching_ = false;
    evaluate_writeback();
  }

  void on_writeback(int node, const NodeResult& r) {
    if (!wb_open_) return;
    NodeState s;
    std::string detail;
    if (!failure_state(r, s, detail) && r.reply->type == REDIS_REPLY_INTEGER && r.reply->integer == 1 &&
        !e_.vote_exclusion(node, BootClock::now())) {
      ++wb_tally_.ok;
    } else {
      ++wb_tally_.failed;
    }
    evaluate_writeback();
  }

  void evaluate_writeback() {
    if (dispatching_ || !wb_open_) return;
    auto d = detail::decide(wb_tally_);
    if (d == detail::Decision::undecided) return;
    wb_open_ = false;
    if (wb_for_ticket_) {
      wb_for_ticket_ = false;
      if (d == detail::Decision::impossible) {
        fail_ticket("no quorum for the queue ticket's write-back");
      } else {
        start_attempt();
      }
      return;
    }
    if (d == detail::Decision::impossible) {
      fail_attempt(Errc::no_quorum, "no quorum for the fence write-back: " + std::to_string(wb_tally_.ok) + " of " +
                                        std::to_string(e_.n()) + " nodes acknowledged");
      return;
    }
    const auto t2 = BootClock::now();
    auto v = detail::compute_validity(opts_.ttl, e_.options_.drift_factor, e_.options_.min_validity, t1_, t2);
    if (!v.ok) {
      fail_attempt(Errc::expired, "the lock and its fence were granted but the validity was used up");
      return;
    }
    Lock lock = LockBuilder::make(resources_, token_, opts_.ttl, to_ms_floor(v.validity), v.deadline, tally_.ok,
                                  e_.n(), outcomes_);
    LockBuilder::set_fence(lock, fence_max_);
    warn_fence_durability();
    finish_ok(std::move(lock));
  }

  // Fences grow only while nodes keep their counters (appendfsync always); the restart guard does
  // not help (README, "Safety model"). Say so once per node that is known not to be durable.
  void warn_fence_durability() {
    for (auto& node : e_.nodes_) {
      if (node->fence_warned) continue;
      if (auto why = node->fence_durability_problem()) {
        node->fence_warned = true;
        e_.log(LogLevel::warning, node->name() + ": fencing on a node with " + *why +
                                      ": a crash or restart loses its fence counters and fences can "
                                      "go backwards; run lock nodes with appendonly yes + appendfsync always");
      }
    }
  }

  // A fair waiter whose ticket round (or its write-back) found no quorum has set no lock key, so
  // there is nothing to roll back; like any attempt that found no quorum it tries again (for a
  // ticket) while its wait allows, rather than giving up at once on a node that is briefly gone.
  void fail_ticket(std::string message) {
    need_ticket_ = true;
    fail_attempt(Errc::no_quorum, std::move(message));
  }

  void fail_attempt(Errc why, std::string message) {
    if (!need_ticket_) Rollback::run(e_, keys_, token_, opts_.mode);
    last_error_ = why;
    last_message_ = std::move(message);
    auto now = BootClock::now();
    Millis sleep = e_.retry_sleep();
    if (opts_.fair) {
      // A waiter in the queue polls quickly, backing off: the lock is usually handed on soon after
      // a release, and the heartbeat must be refreshed well within heartbeat_ttl.
      sleep = poll_;
      poll_ = std::min(poll_ * 2, std::min(Millis{100}, opts_.heartbeat_ttl / 4));
    }
    bool again;
    if (wait_until_) {
      again = now < *wait_until_;
      if (again) sleep = std::min(sleep, std::chrono::ceil<Millis>(*wait_until_ - now));
    } else {
      again = retries_left_ > 0;
      --retries_left_;
    }
    if (!again || e_.closing_) {
      finish(last_error_, last_message_);
      return;
    }
    retry_timer_ = new uv_timer_t;
    uv_timer_init(e_.loop_, retry_timer_);
    retry_timer_->data = this;
    ref();
    uv_timer_start(retry_timer_, [](uv_timer_t* t) {
      auto* self = static_cast<AcquireOp*>(t->data);
      self->cancel_retry_timer();
      if (!self->done_) {
        if (self->need_ticket_) self->start_ticket();
        else self->start_attempt();
      }
      self->unref();
    }, static_cast<std::uint64_t>(sleep.count()), 0);
  }

  bool cancel_retry_timer() {
    if (retry_timer_ == nullptr) return false;
    uv_close(reinterpret_cast<uv_handle_t*>(retry_timer_), [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
    retry_timer_ = nullptr;
    return true;
  }

  // A waiting writer's mark must outlive the sleep between its attempts, but not a writer that
  // gave up or died: readers are only held back while a writer is really trying.
  Millis writer_mark_ttl() const {
    return std::max(Millis{500}, 2 * (e_.options_.retry_delay + e_.options_.retry_jitter) + e_.options_.node_timeout);
  }

  void finish_ok(Lock lock) {
    LockBuilder::set_mode(lock, opts_.mode);
    if (opts_.fair) LockBuilder::set_ticket(lock, ticket_);
    AcquireResult res;
    res.lock = std::move(lock);
    res.nodes = outcomes_;
    res.attempts = attempts_made_;
    complete(std::move(res));
  }

  void finish(Errc why, std::string message) {
    AcquireResult res;
    res.error = make_error_code(why);
    res.message = std::move(message);
    res.nodes = outcomes_;
    res.attempts = attempts_made_;
    complete(std::move(res));
  }

  void complete(AcquireResult res) {
    if (done_) return;
    done_ = true;
    e_.acquires_.erase(id_);
    stop_callback_.reset();  // waits if another thread is inside request_cancel() right now
    if (opts_.mode == LockMode::write && res.error && !e_.closing_) {
      // A writer that gives up takes its waiting mark back, so readers need not wait it out.
      Command c;
      c.arg(writer_waiting_key(keys_[0])).arg(waiter_);
      Rollback::broadcast(e_, ScriptId::release, 1, c);
    }
    if (opts_.fair && !waiter_.empty() && !e_.closing_) {
      // Leave the queue everywhere (granting nodes already removed us), so nobody waits on a
      // waiter that is done.
      Command c;
      c.arg(queue_key(keys_[0])).arg(heartbeats_key(keys_[0])).arg(waiter_);
      Rollback::broadcast(e_, ScriptId::fair_leave, 2, c);
    }
    e_.count_acquire(res, BootClock::now() - started_);
    e_.defer([cb = std::move(cb_), res = std::move(res)]() mutable { cb(std::move(res)); });
    finished();
  }

  struct CancelRequest {
    Engine::Impl* engine;
    std::uint64_t id;
    void operator()() const noexcept { engine->request_cancel(id); }
  };

  std::vector<std::string> resources_;
  std::vector<std::string> keys_;
  AcquireOptions opts_;
  Engine::AcquireCallback cb_;
  std::uint64_t id_ = 0;
  std::optional<std::stop_callback<CancelRequest>> stop_callback_;
  std::uint32_t attempt_ = 0;
  int attempts_made_ = 0;
  int retries_left_ = 0;
  std::optional<BootClock::time_point> wait_until_;
  BootClock::time_point started_{};
  std::string token_;
  BootClock::time_point t1_{};
  Tally tally_;
  std::vector<NodeOutcome> outcomes_;
  std::vector<bool> answered_;
  bool open_ = false;
  bool dispatching_ = false;
  bool done_ = false;
  uv_timer_t* retry_timer_ = nullptr;
  static constexpr std::uint32_t writeback_tag = 0x80000000u;
  static constexpr std::uint32_t ticket_tag = 0x40000000u;
  std::string waiter_;
  std::uint64_t ticket_ = 0;
  Tally tk_tally_;
  bool tk_open_ = false;
  bool wb_for_ticket_ = false;
  bool need_ticket_ = false;  // the next retry starts with a ticket round (see fail_ticket)
  Millis poll_{5};
  std::uint64_t fence_max_ = 0;
  Tally wb_tally_;
  bool wb_open_ = false;
  Errc last_error_ = Errc::no_quorum;
  std::string last_message_;
};

// ---------------------------------------------------------------------------------------------

class ExtendOp final : public Operation {
 public:
  ExtendOp(Engine::Impl& e, Lock lock, Millis ttl, Engine::ExtendCallback cb)
      : Operation(e), lock_(std::move(lock)), ttl_(ttl), cb_(std::move(cb)) {}

  void start() {
    e_.note_ttl(ttl_);
    tally_ = Tally{e_.n()};
    outcomes_.assign(static_cast<std::size_t>(e_.n()), NodeOutcome{});
    answered_.assign(static_cast<std::size_t>(e_.n()), false);
    Command c;
    ScriptId id = lock_.resources().size() > 1 ? ScriptId::extend_multi : ScriptId::extend;
    int numkeys = static_cast<int>(lock_.resources().size());
    if (lock_.mode() == LockMode::read) {
      c.arg(readers_key(e_.options_.key_prefix + lock_.resource()));
      id = ScriptId::extend_read;
      numkeys = 1;
    } else {
      for (const auto& r : lock_.resources()) c.arg(e_.options_.key_prefix + r);
    }
    c.arg(lock_.token()).arg(static_cast<long long>(ttl_.count()));
    dispatching_ = true;
    t1_ = BootClock::now();  // this extend's own start: validity never borrows from the acquire
    for (int i = 0; i < e_.n(); ++i) {
      if (!send_script(i, id, numkeys, c, 1)) record(i, not_sent(i));
    }
    dispatching_ = false;
    evaluate();
  }

  void on_result(int node, std::uint32_t, const NodeResult& r) override {
    if (done_) return;
    NodeState s;
    std::string detail;
    if (!failure_state(r, s, detail)) {
      const redisReply* rep = r.reply;
      if (rep->type == REDIS_REPLY_INTEGER && rep->integer == 1) {
        s = NodeState::ok;
        if (auto why = e_.vote_exclusion(node, BootClock::now(), &outcomes_)) {
          s = NodeState::excluded;
          detail = *why;
        }
      } else if (rep->type == REDIS_REPLY_INTEGER && rep->integer == 0) {
        s = NodeState::not_held;
      } else {
        s = NodeState::error;
        detail = "unexpected reply type " + std::to_string(rep->type);
      }
    }
    record(node, outcome(node, s, std::move(detail), r.latency));
    evaluate();
  }

  void shutdown() override { finish(Errc::shutdown, "engine closed before the extend finished"); }

 private:
  void record(int node, NodeOutcome o) {
    answered_[node] = true;
    switch (o.state) {
      case NodeState::ok: ++tally_.ok; break;
      case NodeState::not_held: ++tally_.refused; break;
      default: ++tally_.failed; break;
    }
    e_.count_node(node, o);
    outcomes_[node] = std::move(o);
  }

  void evaluate() {
    if (dispatching_ || done_) return;
    auto d = detail::decide(tally_);
    if (d == detail::Decision::undecided) return;
    const auto t2 = BootClock::now();
    for (int i = 0; i < e_.n(); ++i) {
      if (!answered_[i]) outcomes_[i] = outcome(i, NodeState::pending);
    }
    if (d == detail::Decision::quorum) {
      auto v = detail::compute_validity(ttl_, e_.options_.drift_factor, e_.options_.min_validity, t1_, t2);
      if (v.ok) {
        LockBuilder::extended(lock_, ttl_, to_ms_floor(v.validity), v.deadline, tally_.ok, outcomes_);
        ExtendResult res;
        res.lock = lock_;
        res.nodes = outcomes_;
        complete(std::move(res));
        return;
      }
      finish(Errc::expired, "a quorum extended the lock but the new validity was used up");
      return;
    }
    Errc why = detail::failure_reason(tally_, Errc::not_held);
    finish(why, why == Errc::not_held
                    ? "the token is no longer held on " + std::to_string(tally_.refused) + " of " + std::to_string(e_.n()) + " nodes"
                    : "no quorum: " + std::to_string(tally_.ok) + " of " + std::to_string(e_.n()) + " nodes extended, " +
                          std::to_string(detail::quorum_of(e_.n())) + " needed (" + breakdown(outcomes_) + ")");
  }

  void finish(Errc why, std::string message) {
    ExtendResult res;
    res.error = make_error_code(why);
    res.message = std::move(message);
    res.lock = lock_;
    res.nodes = outcomes_;
    complete(std::move(res));
  }

  void complete(ExtendResult res) {
    if (done_) return;
    done_ = true;
    ++(res.error ? e_.metrics_.extend_failed : e_.metrics_.extended);
    e_.defer([cb = std::move(cb_), res = std::move(res)]() mutable { cb(std::move(res)); });
    finished();
  }

  Lock lock_;
  Millis ttl_;
  Engine::ExtendCallback cb_;
  Tally tally_;
  std::vector<NodeOutcome> outcomes_;
  std::vector<bool> answered_;
  BootClock::time_point t1_{};
  bool dispatching_ = false;
  bool done_ = false;
};

// ---------------------------------------------------------------------------------------------

class ReleaseOp final : public Operation {
 public:
  ReleaseOp(Engine::Impl& e, const Lock& lock, Engine::ReleaseCallback cb) : Operation(e), cb_(std::move(cb)) {
    outcomes_.assign(static_cast<std::size_t>(e_.n()), NodeOutcome{});
    Command c;
    ScriptId id = lock.resources().size() > 1 ? ScriptId::release_multi : ScriptId::release;
    int numkeys = static_cast<int>(lock.resources().size());
    if (lock.mode() == LockMode::read) {
      c.arg(readers_key(e_.options_.key_prefix + lock.resource()));
      id = ScriptId::release_read;
      numkeys = 1;
    } else {
      for (const auto& r : lock.resources()) c.arg(e_.options_.key_prefix + r);
    }
    c.arg(lock.token());
    for (int i = 0; i < e_.n(); ++i) {
      if (!send_script(i, id, numkeys, c, 0)) record(i, not_sent(i));
    }
    maybe_finish();
  }

  void on_result(int node, std::uint32_t, const NodeResult& r) override {
    if (done_) return;
    NodeState s;
    std::string detail;
    if (!failure_state(r, s, detail)) {
      const redisReply* rep = r.reply;
      if (rep->type == REDIS_REPLY_INTEGER) {
        s = rep->integer > 0 ? NodeState::ok : NodeState::not_held;
      } else {
        s = NodeState::error;
        detail = "unexpected reply type " + std::to_string(rep->type);
      }
    }
    record(node, outcome(node, s, std::move(detail), r.latency));
    maybe_finish();
  }

  void shutdown() override {
    if (done_) return;
    for (auto& o : outcomes_) {
      if (o.node.empty()) o = NodeOutcome{"", NodeState::down, "engine closed", {}};
    }
    ReleaseResult res = summary();
    res.error = make_error_code(Errc::shutdown);
    res.message = "engine closed before the release finished";
    complete(std::move(res));
  }

 private:
  void record(int node, NodeOutcome o) {
    ++answered_;
    e_.count_node(node, o);
    outcomes_[node] = std::move(o);
  }

  ReleaseResult summary() const {
    ReleaseResult res;
    for (const auto& o : outcomes_) {
      if (o.state == NodeState::ok) ++res.deleted;
      else if (o.state == NodeState::not_held) ++res.not_held;
      else ++res.unreachable;
    }
    res.nodes = outcomes_;
    return res;
  }

  void maybe_finish() {
    if (done_ || answered_ < e_.n()) return;
    ReleaseResult res = summary();
    if (res.deleted == 0) {
      if (res.not_held > 0) {
        res.error = make_error_code(Errc::not_held);
        res.message = "no reachable node held this token";
      } else {
        // Nothing confirmed a delete. Say which way each node failed: a node that timed out (or
        // answered an error after a timeout) may still have run the delete.
        res.error = make_error_code(Errc::no_quorum);
        const bool reached = std::any_of(outcomes_.begin(), outcomes_.end(), [](const NodeOutcome& o) {
          return o.state == NodeState::timeout || o.state == NodeState::error;
        });
        res.message = reached ? "no node confirmed the delete (" + breakdown(outcomes_) +
                                    "); where a node timed out, the delete may still have run"
                              : "no node could be reached (" + breakdown(outcomes_) + ")";
      }
    }
    complete(std::move(res));
  }

  void complete(ReleaseResult res) {
    done_ = true;
    ++e_.metrics_.released;
    e_.defer([cb = std::move(cb_), res = std::move(res)]() mutable { cb(std::move(res)); });
    finished();
  }

  Engine::ReleaseCallback cb_;
  std::vector<NodeOutcome> outcomes_;
  int answered_ = 0;
  bool done_ = false;
};

// ---------------------------------------------------------------------------------------------

class StatusOp final : public Operation {
 public:
  StatusOp(Engine::Impl& e, const std::string& resource, Engine::StatusCallback cb) : Operation(e), cb_(std::move(cb)) {
    res_.nodes.resize(static_cast<std::size_t>(e_.n()));
    Command c;
    c.arg(e_.options_.key_prefix + resource);
    for (int i = 0; i < e_.n(); ++i) {
      res_.nodes[i].node = e_.nodes_[i]->name();
      if (!send_script(i, ScriptId::status, 1, c, 0)) {
        res_.nodes[i].detail = e_.nodes_[i]->last_error().empty() ? "not connected" : e_.nodes_[i]->last_error();
        ++answered_;
      }
    }
    maybe_finish();
  }

  void on_result(int node, std::uint32_t, const NodeResult& r) override {
    if (done_) return;
    auto& row = res_.nodes[node];
    ++answered_;
    if (r.kind == NodeResult::Kind::timeout) {
      row.detail = "timeout";
    } else if (r.kind == NodeResult::Kind::down) {
      row.detail = std::string(r.error);
    } else if (r.reply->type == REDIS_REPLY_ERROR) {
      row.up = true;
      row.detail = reply_error(r.reply);
    } else if (r.reply->type == REDIS_REPLY_ARRAY && r.reply->elements == 3) {
      row.up = true;
      auto* el = r.reply->element;
      if (el[0]->type == REDIS_REPLY_STRING || el[0]->type == REDIS_REPLY_STATUS) row.type.assign(el[0]->str, el[0]->len);
      if (el[1]->type == REDIS_REPLY_STRING) row.value = std::string(el[1]->str, el[1]->len);
      if (el[2]->type == REDIS_REPLY_INTEGER && el[2]->integer >= 0) row.pttl = Millis{el[2]->integer};
    } else {
      row.up = true;
      row.detail = "unexpected reply";
    }
    maybe_finish();
  }

  void shutdown() override {
    if (done_) return;
    complete();
  }

 private:
  void maybe_finish() {
    if (!done_ && answered_ >= e_.n()) complete();
  }
  void complete() {
    done_ = true;
    e_.defer([cb = std::move(cb_), res = std::move(res_)]() mutable { cb(std::move(res)); });
    finished();
  }

  Engine::StatusCallback cb_;
  StatusResult res_;
  int answered_ = 0;
  bool done_ = false;
};

// ---------------------------------------------------------------------------------------------

void start_extend(Engine::Impl& e, const Lock& lock, Millis ttl, Engine::ExtendCallback cb);

// The watchdog of one held lock: one timer on the loop, due at the next extension or at the local
// deadline, whichever comes first.
class HoldOp final : public std::enable_shared_from_this<HoldOp> {
 public:
  HoldOp(Engine::Impl& e, Engine::HoldId id, Lock lock, const HoldOptions& o, Millis period,
         Engine::ExtendedCallback on_extended, Engine::LostCallback on_lost)
      : e_(e), id_(id), lock_(std::move(lock)), options_(o), period_(period),
        on_extended_(std::move(on_extended)), on_lost_(std::move(on_lost)) {
    started_ = BootClock::now();
    // The first extension is due one period after the lock was taken or last extended (its
    // deadline is that moment + ttl - drift), not one period after hold() was called: a lock
    // handed to hold() late would otherwise reach its deadline before any extension was tried.
    const auto taken = lock_.deadline() - std::chrono::duration_cast<BootClock::duration>(lock_.ttl());
    next_extend_ = std::min(started_ + period_, taken + std::chrono::duration_cast<BootClock::duration>(period_));
  }

  void start() {
    timer_ = new uv_timer_t;
    uv_timer_init(e_.loop_, timer_);
    timer_->data = this;
    arm();
  }

  // No callback runs after this.
  void stop() {
    if (stopped_) return;
    stopped_ = true;
    if (timer_ != nullptr) {
      uv_close(reinterpret_cast<uv_handle_t*>(timer_), [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
      timer_ = nullptr;
    }
  }

 private:
  bool limit_reached() const {
    if (options_.max_extensions && extensions_ >= *options_.max_extensions) return true;
    if (options_.max_hold && BootClock::now() - started_ >= *options_.max_hold) return true;
    return false;
  }

  void arm() {
    if (stopped_) return;
    auto due = lock_.deadline();
    if (!extending_ && !limit_reached()) due = std::min(due, next_extend_);
    auto now = BootClock::now();
    auto wait = due > now ? std::chrono::ceil<Millis>(due - now) : Millis{0};
    uv_timer_start(timer_, [](uv_timer_t* t) { static_cast<HoldOp*>(t->data)->on_timer(); },
                   static_cast<std::uint64_t>(wait.count()), 0);
  }

  void on_timer() {
    if (stopped_) return;
    auto now = BootClock::now();
    if (now >= lock_.deadline()) {
      lose(Errc::expired, limit_reached() ? "the hold limit stopped the extensions and the lock expired"
                                          : "the local deadline passed before an extension succeeded",
           {});
      return;
    }
    if (!extending_ && !limit_reached() && now >= next_extend_) {
      extending_ = true;
      auto self = shared_from_this();
      start_extend(e_, lock_, lock_.ttl(), [self](ExtendResult r) { self->on_extend(std::move(r)); });
    }
    arm();
  }

  void on_extend(ExtendResult r) {
    extending_ = false;
    if (stopped_) return;
    if (r) {
      lock_ = std::move(r.lock);
      ++extensions_;
      // About +-10 % so locks taken together do not all extend in the same loop iteration.
      next_extend_ = BootClock::now() + period_ - period_ / 10 + e_.jitter(period_ / 5);
      if (on_extended_) on_extended_(lock_);
    } else if (r.error == Errc::not_held) {
      // The nodes no longer have our token: extending again would never succeed, and
      // re-acquiring silently would hide the gap from the holder.
      lose(Errc::not_held, r.message, std::move(r.nodes));
      return;
    } else if (std::count_if(r.nodes.begin(), r.nodes.end(), [](const NodeOutcome& o) { return o.state == NodeState::down; }) >
               e_.n() - detail::quorum_of(e_.n())) {
      // A majority of the nodes is gone: no extension can succeed, so say so now rather than
      // at the deadline; stopping early is the safe side for the holder.
      lose(Errc::no_quorum, r.message, std::move(r.nodes));
      return;
    } else {
      // Uncertain (timeouts, error replies): try again soon, while the deadline allows.
      auto retry = std::max(e_.options_.node_timeout * 2, period_ / 10);
      next_extend_ = BootClock::now() + retry;
      e_.log(LogLevel::warning, "extending '" + lock_.resource() + "' failed: " + r.message + "; retrying");
    }
    arm();
  }

  void lose(Errc why, std::string message, std::vector<NodeOutcome> nodes) {
    ++e_.metrics_.lost;
    auto cb = std::move(on_lost_);
    auto self = shared_from_this();  // stop() may drop the engine's reference
    e_.holds_.erase(id_);
    stop();
    if (cb) cb(LossInfo{make_error_code(why), std::move(message), std::move(nodes)});
  }

  Engine::Impl& e_;
  Engine::HoldId id_;
  Lock lock_;
  HoldOptions options_;
  Millis period_;
  Engine::ExtendedCallback on_extended_;
  Engine::LostCallback on_lost_;
  uv_timer_t* timer_ = nullptr;
  BootClock::time_point started_{};
  BootClock::time_point next_extend_{};
  int extensions_ = 0;
  bool extending_ = false;
  bool stopped_ = false;
};

void Engine::Impl::close(std::function<void()> on_closed) {
  if (closing_) {
    if (on_closed) {
      if (fully_closed_) on_closed();
      else on_closed_ = std::move(on_closed);
    }
    return;
  }
  closing_ = true;
  on_closed_ = std::move(on_closed);
  for (auto& [id, h] : holds_) h->stop();
  holds_.clear();
  std::vector<Operation*> live(ops_.begin(), ops_.end());
  for (auto* op : live) op->shutdown();
  for (auto& n : nodes_) n->close();
  uv_close(reinterpret_cast<uv_handle_t*>(&check_), [](uv_handle_t* h) { static_cast<Impl*>(h->data)->handle_closed(); });
  uv_close(reinterpret_cast<uv_handle_t*>(&idle_), [](uv_handle_t* h) { static_cast<Impl*>(h->data)->handle_closed(); });
  // Every acquisition has finished above, and with it its stop callback: nobody sends to this
  // handle any more.
  uv_close(reinterpret_cast<uv_handle_t*>(&cancel_async_), [](uv_handle_t* h) { static_cast<Impl*>(h->data)->handle_closed(); });
}

void Engine::Impl::on_cancel_requests(uv_async_t* h) {
  auto* self = static_cast<Impl*>(h->data);
  std::vector<std::uint64_t> ids;
  {
    std::lock_guard<std::mutex> g(self->cancel_mu_);
    ids.swap(self->cancel_requests_);
  }
  for (auto id : ids) {
    // An id that is gone finished first: its outcome stands.
    if (auto it = self->acquires_.find(id); it != self->acquires_.end()) it->second->cancel();
  }
}


Engine::Engine(uv_loop_s* loop, Options options) : impl_(new Impl(loop, std::move(options))) {}

Engine::~Engine() {
  impl_->owner_gone_ = true;
  if (impl_->fully_closed_) {
    delete impl_;
    return;
  }
  impl_->close({});
}

void Engine::acquire(std::vector<std::string> resources, AcquireOptions options, AcquireCallback cb) {
  auto fail = [&](Errc e, std::string msg) {
    AcquireResult r;
    r.error = make_error_code(e);
    r.message = std::move(msg);
    impl_->defer([cb = std::move(cb), r = std::move(r)]() mutable { cb(std::move(r)); });
  };
  if (impl_->closing_) return fail(Errc::shutdown, "engine is closed");
  if (auto why = check_acquire(resources, options, impl_->options_.drift_factor)) {
    return fail(Errc::invalid_argument, *why);
  }
  if (options.stop.stop_requested()) return fail(Errc::cancelled, "cancelled before it started; nothing was sent");
  auto* op = new AcquireOp(*impl_, std::move(resources), options, std::move(cb));
  op->start();
}

void start_extend(Engine::Impl& e, const Lock& lock, Millis ttl, Engine::ExtendCallback cb) {
  auto fail = [&](Errc why, std::string msg) {
    ExtendResult r;
    r.error = make_error_code(why);
    r.message = std::move(msg);
    r.lock = lock;
    e.defer([cb = std::move(cb), r = std::move(r)]() mutable { cb(std::move(r)); });
  };
  if (e.closing_) return fail(Errc::shutdown, "engine is closed");
  if (lock.empty()) return fail(Errc::invalid_argument, "empty lock (no token)");
  if (auto why = detail::check_resources(lock.resources())) return fail(Errc::invalid_argument, *why);
  if (auto why = detail::check_ttl(ttl, e.options_.drift_factor)) return fail(Errc::invalid_argument, *why);
  if (lock.deadline() <= BootClock::now()) {
    return fail(Errc::expired, "the lock's local deadline has passed; extending could resurrect a lost lock");
  }
  auto* op = new ExtendOp(e, lock, ttl, std::move(cb));
  op->start();
}

void Engine::extend(const Lock& lock, Millis ttl, ExtendCallback cb) {
  start_extend(*impl_, lock, ttl, std::move(cb));
}

void Engine::release(const Lock& lock, ReleaseCallback cb) {
  auto fail = [&](Errc e, std::string msg) {
    ReleaseResult r;
    r.error = make_error_code(e);
    r.message = std::move(msg);
    impl_->defer([cb = std::move(cb), r = std::move(r)]() mutable { cb(std::move(r)); });
  };
  if (impl_->closing_) return fail(Errc::shutdown, "engine is closed");
  if (lock.empty()) return fail(Errc::invalid_argument, "empty lock (no token)");
  if (auto why = detail::check_resources(lock.resources())) return fail(Errc::invalid_argument, *why);
  new ReleaseOp(*impl_, lock, std::move(cb));
}

void Engine::status(std::string resource, StatusCallback cb) {
  if (impl_->closing_ || resource.empty() || resource.size() > detail::max_resource_bytes) {
    StatusResult r;
    impl_->defer([cb = std::move(cb), r = std::move(r)]() mutable { cb(std::move(r)); });
    return;
  }
  new StatusOp(*impl_, resource, std::move(cb));
}

Engine::HoldId Engine::hold(const Lock& lock, const HoldOptions& options, ExtendedCallback on_extended,
                           LostCallback on_lost) {
  if (impl_->closing_ || lock.empty() || lock.ttl() <= Millis{0}) return 0;
  Millis period = options.extend_every.value_or(lock.ttl() / 3);
  if (period <= Millis{0} || period >= lock.ttl()) return 0;
  const HoldId id = impl_->next_hold_id_++;
  auto h = std::make_shared<HoldOp>(*impl_, id, lock, options, period, std::move(on_extended), std::move(on_lost));
  impl_->holds_.emplace(id, h);
  h->start();
  return id;
}

void Engine::stop_hold(HoldId id) {
  auto it = impl_->holds_.find(id);
  if (it == impl_->holds_.end()) return;
  it->second->stop();
  impl_->holds_.erase(it);
}

void Engine::close(std::function<void()> on_closed) { impl_->close(std::move(on_closed)); }

const Options& Engine::options() const noexcept { return impl_->options_; }

Metrics Engine::metrics() const { return impl_->metrics_; }

int Engine::quorum() const noexcept { return detail::quorum_of(impl_->n()); }

}  // namespace redlock
