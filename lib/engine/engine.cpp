// The quorum engine: fan-out of each operation to every node at once, decision as soon as the
// outcome is known, rollback on every node after a failed attempt, retries with jitter. The
// operations live in this folder, one file each; this file holds the Engine's own state and its
// public entry points.

#include "redlock/engine.hpp"

#include <algorithm>
#include <stdexcept>

#include "core/keys.hpp"
#include "core/quorum.hpp"
#include "core/timing.hpp"
#include "core/token.hpp"
#include "core/validate.hpp"
#include "engine/acquire.hpp"
#include "engine/hold.hpp"
#include "engine/operation.hpp"

namespace redlock {

namespace {

// Before any handle touches the loop: a constructor that throws must leave the loop as it was.
Options checked(Options o) {
  if (auto why = check_options(o)) throw std::invalid_argument(*why);
  return o;
}

// One per node: how it makes the transports of its connections.
std::vector<net::TransportMaker> transports_for(const Options& o) {
  net::TlsContexts contexts;
  std::vector<net::TransportMaker> out;
  for (const auto& a : o.nodes) {
    std::string error;
    auto t = net::transport_for(a, o, contexts, error);
    if (!t) throw std::invalid_argument(error);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

Engine::Impl::Impl(uv_loop_t* loop, Options options)
    : loop_(loop),
      options_(checked(std::move(options))),
      transports_(transports_for(options_)),
      own_wake_key_(options_.key_prefix + "client:" + detail::make_token()),
      check_(loop,
             [this] {
               if (!closing_) idle_.stop();
               run_deferred();
             }),
      idle_(loop),
      cancel_async_(loop, [this] { on_cancel_requests(); }) {
  rng_.seed(std::random_device{}());
  check_.start();
  check_.unref();  // does not keep the loop alive by itself
  cancel_async_.unref();
  open_ = 3;                                     // check_, idle_, cancel_async_
  metrics_.nodes.resize(options_.nodes.size());  // never resized again: nodes keep pointers into it
  nodes_.reserve(options_.nodes.size());
  for (std::size_t i = 0; i < options_.nodes.size(); ++i) {
    nodes_.push_back(net::make_node(loop_, *this, static_cast<int>(i), std::move(transports_[i]),
                                    options_.nodes[i], options_, &metrics_.nodes[i]));
    names_.push_back(nodes_.back()->name());
    metrics_.nodes[i].node = names_.back();
    ++open_;
  }
  for (auto& n : nodes_) n->start();
}

Engine::Impl::~Impl() = default;

void Engine::Impl::watch(AcquireOp* op, const std::vector<std::string>& keys) {
  // The client's own channel stays subscribed once a waiter needed it: a client that waits again
  // (a hot lock) would otherwise miss the releases that come before its subscription is back.
  if (!own_channel_subscribed_) {
    own_channel_subscribed_ = true;
    for (auto& n : nodes_) n->subscribe(own_wake_key_);
  }
  hear_names(op);
  for (const auto& k : keys) {
    auto& ops = watchers_[k];
    if (ops.empty()) {
      for (auto& n : nodes_) n->subscribe(k);
    }
    ops.push_back(op);
  }
}

void Engine::Impl::hear_names(AcquireOp* op) {
  if (std::find(waiting_.begin(), waiting_.end(), op) == waiting_.end()) waiting_.push_back(op);
}

void Engine::Impl::unwatch(AcquireOp* op, const std::vector<std::string>& keys) {
  std::erase(waiting_, op);
  for (const auto& k : keys) {
    auto it = watchers_.find(k);
    if (it == watchers_.end()) continue;
    std::erase(it->second, op);
    if (it->second.empty()) {
      watchers_.erase(it);
      for (auto& n : nodes_) n->unsubscribe(k);
    }
  }
}

std::string Engine::Impl::new_waiter_id() const {
  return detail::make_token() + "@" + detail::keys::wake(own_wake_key_);
}

void Engine::Impl::on_wake(int index, const std::string& lock_key, const net::Wake& wake) {
  if (lock_key == own_wake_key_) {
    // Names one waiter of this client (or says the channel is listened to again): each waiting
    // acquisition checks whether it is the one.
    for (AcquireOp* op : waiting_) op->wake(index, wake);
    return;
  }
  if (auto l = listeners_.find(lock_key); l != listeners_.end()) {
    const auto hints = l->second;  // a hint may stop an observer: it leaves this list
    for (const auto& [id, hint] : hints) hint();
    return;
  }
  auto it = watchers_.find(lock_key);
  if (it == watchers_.end()) return;
  // A woken waiter only arms its timer: nothing here changes the list.
  for (AcquireOp* op : it->second) op->wake(index, wake);
}

Millis Engine::Impl::restart_quarantine() const {
  if (options_.restart_quarantine) return *options_.restart_quarantine;
  // The declared longest ttl of every client of the nodes (acquire and extend refuse longer
  // ones). Without it, what this client has used, and at least the default ttl: a fresh process
  // does not know the ttls the other clients use, and most keep the default (options.hpp).
  const Millis longest =
      options_.max_ttl ? *options_.max_ttl : std::max(max_ttl_used_, AcquireOptions{}.ttl);
  return longest + std::chrono::ceil<Millis>(detail::drift(longest, options_.drift_factor));
}

void Engine::Impl::defer(std::function<void()> fn) {
  if (fully_closed_) {
    fn();  // nothing can run later: no handle is left on the loop
    return;
  }
  deferred_.push_back(Deferred{nullptr, std::move(fn)});
  if (!closing_) idle_.start();  // keeps poll from blocking until the check handle runs
}

void Engine::Impl::defer(Operation* op) {
  op->hold();
  if (fully_closed_) {
    op->deliver();
    op->release();
    return;
  }
  deferred_.push_back(Deferred{op, {}});
  if (!closing_) idle_.start();
}

void Engine::Impl::run_deferred() {
  while (!deferred_.empty()) {
    std::vector<Deferred> batch;
    batch.swap(deferred_spare_);
    batch.swap(deferred_);
    for (auto& d : batch) {
      if (d.op != nullptr) {
        d.op->deliver();
        d.op->release();
      } else {
        d.fn();
      }
    }
    batch.clear();
    if (deferred_spare_.capacity() < batch.capacity()) deferred_spare_.swap(batch);
  }
}

void Engine::Impl::request_cancel(std::uint64_t acquire_id) noexcept {
  {
    std::lock_guard<std::mutex> g(cancel_mu_);
    cancel_requests_.push_back(acquire_id);
  }
  cancel_async_.send();
}

void Engine::Impl::on_cancel_requests() {
  std::vector<std::uint64_t> ids;
  {
    std::lock_guard<std::mutex> g(cancel_mu_);
    ids.swap(cancel_requests_);
  }
  for (auto id : ids) {
    // An id that is gone finished first: its outcome stands.
    if (auto it = acquires_.find(id); it != acquires_.end()) it->second->cancel();
  }
}

std::optional<std::string> Engine::Impl::vote_exclusion(
    int i, BootClock::time_point now, const std::vector<NodeOutcome>* outcomes) const {
  if (auto why = nodes_[static_cast<std::size_t>(i)]->vote_exclusion(now)) return why;
  const std::string& id = nodes_[static_cast<std::size_t>(i)]->server_id();
  if (id.empty()) return std::nullopt;
  for (int j = 0; j < n(); ++j) {
    if (j == i || nodes_[static_cast<std::size_t>(j)]->server_id() != id) continue;
    const bool twin_voted =
        outcomes != nullptr && (*outcomes)[static_cast<std::size_t>(j)].state == NodeState::ok;
    if (j < i || twin_voted) {
      return "same server as " + names_[static_cast<std::size_t>(j)] +
             " (equal run_id): one vote per server";
    }
  }
  return std::nullopt;
}

void Engine::Impl::on_server_identified(int index) {
  const auto id = nodes_[static_cast<std::size_t>(index)]->server_id();
  if (id.empty()) return;
  for (int j = 0; j < n(); ++j) {
    if (j == index || nodes_[static_cast<std::size_t>(j)]->server_id() != id) continue;
    const int lo = std::min(j, index);
    const int hi = std::max(j, index);
    if (!twins_reported_.emplace(lo, hi).second) continue;
    // Either the same server listed twice under two names (127.0.0.1:7001 and localhost:7001), or
    // a node that answers INFO with another's run_id. Its vote counts once (vote_exclusion); the
    // rest of the client goes on: refusing every operation let one lying node stop them all.
    log(LogLevel::warning, "nodes " + names_[static_cast<std::size_t>(lo)] + " and " +
                               names_[static_cast<std::size_t>(hi)] +
                               " are the same server (equal run_id " + id.substr(0, 8) +
                               "...): their vote counts once; list each server once");
  }
}

void Engine::Impl::count_node(int i, const NodeOutcome& o) {
  // Nodes count what their connection saw; operations add what only they know.
  if (o.state == NodeState::excluded) ++metrics_.nodes[static_cast<std::size_t>(i)].excluded;
}

void Engine::Impl::count_acquire(const AcquireResult& r, BootClock::duration took) {
  if (!r.error)
    ++metrics_.acquired;
  else if (r.error == Errc::contended)
    ++metrics_.contended;
  else if (r.error == Errc::no_quorum)
    ++metrics_.no_quorum;
  else if (r.error == Errc::expired)
    ++metrics_.expired;
  else
    ++metrics_.other_failures;
  metrics_.attempts += static_cast<std::uint64_t>(r.attempts);
  metrics_.acquire_latency.observe(std::chrono::duration<double>(took).count());
}

Millis Engine::Impl::jitter(Millis span) {
  std::uniform_int_distribution<long long> dist(0, std::max<long long>(0, span.count()));
  return Millis{dist(rng_)};
}

Millis Engine::Impl::retry_sleep() {
  const auto d = options_.retry_delay.count();
  const auto j = options_.retry_jitter.count();
  std::uniform_int_distribution<long long> dist(-j, j);
  return Millis{std::max<long long>(0, d + dist(rng_))};
}

void Engine::Impl::close(std::function<void()> on_closed) {
  if (closing_) {
    if (on_closed) {
      if (fully_closed_)
        on_closed();
      else
        on_closed_ = std::move(on_closed);
    }
    return;
  }
  closing_ = true;
  on_closed_ = std::move(on_closed);
  for (auto& [id, h] : holds_) h->stop();
  holds_.clear();
  hold_timer_.reset();
  hold_dues_ = {};
  stop_observers();
  std::vector<Operation*> live;
  for (Operation* op = ops_; op != nullptr; op = op->next_) live.push_back(op);
  for (auto* op : live) op->shutdown();
  // A process that exits right after a fair lock was won must not leave its place in the queue
  // of a node that has not answered yet: a release there would hand that waiter the key.
  std::vector<AcquireOp*> owing(owing_.begin(), owing_.end());
  for (auto* op : owing) op->say_owed_words();
  for (auto& node : nodes_) node->close();
  check_.close([this] { handle_closed(); });
  idle_.close([this] { handle_closed(); });
  // Every acquisition has finished above, and with it its stop callback: nobody sends to this
  // handle any more.
  cancel_async_.close([this] { handle_closed(); });
}

void Engine::Impl::handle_closed() {
  if (--open_ > 0) return;
  fully_closed_ = true;
  run_deferred();
  if (on_closed_) {
    auto cb = std::move(on_closed_);
    cb();
  }
  if (owner_gone_) delete this;
}

// ---------------------------------------------------------------------------------------------
// Engine

Engine::Engine(uv_loop_s* loop, Options options) : impl_(new Impl(loop, std::move(options))) {}

Engine::~Engine() {
  impl_->owner_gone_ = true;
  if (impl_->fully_closed_) {
    delete impl_;
    return;
  }
  impl_->close({});
}

void Engine::acquire(std::vector<std::string> resources, AcquireOptions options,
                     AcquireCallback cb) {
  start_acquire(*impl_, std::move(resources), std::move(options), std::move(cb));
}

void Engine::extend(const Lock& lock, Millis ttl, ExtendCallback cb) {
  start_extend(*impl_, lock, ttl, std::move(cb));
}

void Engine::release(const Lock& lock, ReleaseCallback cb) {
  start_release(*impl_, lock, std::move(cb));
}

void Engine::status(std::string resource, StatusCallback cb) {
  start_status(*impl_, std::move(resource), std::move(cb));
}

Engine::HoldId Engine::hold(const Lock& lock, const HoldOptions& options,
                            ExtendedCallback on_extended, LostCallback on_lost,
                            RenewFailingCallback on_renew_failing) {
  return start_hold(*impl_, lock, options, std::move(on_extended), std::move(on_lost),
                    std::move(on_renew_failing));
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
