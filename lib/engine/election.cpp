// Leader election on the engine: reading who leads from every node, and observing it. A
// campaign is an acquisition with LockMode::leader (acquire.cpp, kinds.cpp); this file only reads.

#include "core/election.hpp"

#include <memory>

#include "core/keys.hpp"
#include "core/kinds.hpp"
#include "core/server_text.hpp"
#include "core/validate.hpp"
#include "engine/operation.hpp"

namespace redlock {
namespace {

// One read of the leader record (and the lock key beside it) on every node.
class LeaderReadOp final : public Operation {
 public:
  LeaderReadOp(Engine::Impl& e, Engine::LeaderCallback cb) : Operation(e), cb_(std::move(cb)) {}

  void start(const std::string& key) {
    rows_.resize(static_cast<std::size_t>(e_.n()));
    const auto cmd = net::Request::make(detail::read_leader(key));
    stamp();
    for (int i = 0; i < e_.n(); ++i) {
      if (send(i, cmd, 0)) continue;
      ++answered_;  // stays unanswered: no vote either way
      rows_[static_cast<std::size_t>(i)].failure = not_sent(i);
    }
    maybe_finish();
  }

  void on_result(int node, std::uint32_t, const net::Result& r) override {
    if (done_) return;
    ++answered_;
    auto& row = rows_[static_cast<std::size_t>(node)];
    if (r.kind == net::Result::Kind::reply && r.reply) row = detail::classify_leader(*r.reply);
    if (!row.answered) row.failure = failure_of(node, r);
    maybe_finish();
  }

  void shutdown() override {
    if (done_) return;
    done_ = true;
    LeaderResult res;
    res.error = make_error_code(Errc::shutdown);
    res.message = "engine is closed";
    res.nodes = e_.n();
    deliver_result(std::move(res));
  }

 private:
  // Why node `node`'s answer is no answer: a timeout, a lost or refused connection, or a reply of
  // another shape (an error such as NOPERM: the server's words, made safe to print).
  NodeOutcome failure_of(int node, const net::Result& r) const {
    if (auto f = failure(node, r)) return std::move(*f);
    NodeOutcome o{e_.names()[static_cast<std::size_t>(node)], NodeState::error, {}, r.latency};
    o.detail = r.reply && r.reply->type == detail::Reply::Type::error
                   ? detail::server_text(r.reply->str)
                   : "unexpected reply to the leader read";
    return o;
  }
  void maybe_finish() {
    if (done_ || answered_ < e_.n()) return;
    done_ = true;
    deliver_result(detail::decide_leader(rows_));
  }
  void deliver_result(LeaderResult res) {
    e_.defer([cb = std::move(cb_), res = std::move(res)]() mutable { cb(std::move(res)); });
    finished();
  }

  Engine::LeaderCallback cb_;
  std::vector<detail::LeaderRow> rows_;
  int answered_ = 0;
  bool done_ = false;
};

void start_leader_read(Engine::Impl& e, const std::string& name, Engine::LeaderCallback cb) {
  if (e.closing_ || name.empty() || name.size() > detail::max_resource_bytes) {
    LeaderResult res;
    res.error = make_error_code(e.closing_ ? Errc::shutdown : Errc::invalid_argument);
    res.message = e.closing_ ? "engine is closed" : "bad election name";
    e.defer([cb = std::move(cb), res = std::move(res)]() mutable { cb(std::move(res)); });
    return;
  }
  (new LeaderReadOp(e, std::move(cb)))->start(e.options_.key_prefix + name);
}

}  // namespace

// Reads who leads every `poll`, and soon after a hint (a message on the leader record's
// channels); reports each read that tells something else than the last one reported.
class ObserveOp final : public std::enable_shared_from_this<ObserveOp> {
 public:
  ObserveOp(Engine::Impl& e, Engine::ObserveId id, std::string name, Millis poll,
            Engine::ChangeCallback cb)
      : e_(e), id_(id), name_(std::move(name)), poll_(poll), cb_(std::move(cb)) {}

  void start() {
    std::weak_ptr<ObserveOp> weak = weak_from_this();
    timer_ = std::make_unique<net::Timer>(e_.loop_, [weak] {
      if (auto self = weak.lock()) self->read();
    });
    if (e_.options_.wake_ups) {
      record_ = detail::keys::leader(e_.options_.key_prefix + name_);
      auto& list = e_.listeners_[record_];
      if (list.empty()) {
        for (auto& n : e_.nodes_) n->subscribe(record_);
      }
      list.emplace_back(id_, [weak] {
        if (auto self = weak.lock()) self->hint();
      });
    }
    read();
  }

  void stop() {
    if (stopped_) return;
    stopped_ = true;
    if (timer_) timer_->stop();
    if (record_.empty()) return;
    auto it = e_.listeners_.find(record_);
    if (it == e_.listeners_.end()) return;
    std::erase_if(it->second, [this](const auto& l) { return l.first == id_; });
    if (it->second.empty()) {
      e_.listeners_.erase(it);
      for (auto& n : e_.nodes_) n->unsubscribe(record_);
    }
  }

 private:
  // A message says the leader may have changed: read again shortly (a few ms, so that a burst of
  // messages, or a flood someone publishes, costs at most one read per round trip).
  void hint() {
    if (stopped_) return;
    if (reading_) {
      again_ = true;
      return;
    }
    timer_->stop();
    timer_->start(hint_delay_ms);
  }

  void read() {
    if (stopped_) return;
    if (reading_) {
      again_ = true;
      return;
    }
    reading_ = true;
    timer_->stop();
    std::weak_ptr<ObserveOp> weak = weak_from_this();
    start_leader_read(e_, name_, [weak](LeaderResult r) {
      if (auto self = weak.lock()) self->on_read(std::move(r));
    });
  }

  void on_read(LeaderResult r) {
    reading_ = false;
    if (stopped_) return;
    if (r.error == Errc::shutdown) return;
    if (!reported_ || !same_leadership(last_, r)) {
      reported_ = true;
      last_ = r;
      cb_(last_);
      if (stopped_) return;  // the callback stopped it
    }
    if (std::exchange(again_, false)) {
      timer_->start(hint_delay_ms);
    } else {
      timer_->start(static_cast<std::uint64_t>(poll_.count()));
    }
  }

  static constexpr std::uint64_t hint_delay_ms = 2;

  Engine::Impl& e_;
  Engine::ObserveId id_;
  std::string name_;
  Millis poll_;
  Engine::ChangeCallback cb_;
  std::string record_;  // with wake-ups: the leader record key whose channels are heard
  std::unique_ptr<net::Timer> timer_;
  LeaderResult last_;
  bool reported_ = false;
  bool reading_ = false;
  bool again_ = false;
  bool stopped_ = false;
};

void Engine::Impl::stop_observers() {
  auto all = std::move(observers_);
  observers_.clear();
  for (auto& [id, o] : all) o->stop();
}

void Engine::leader(std::string name, LeaderCallback cb) {
  start_leader_read(*impl_, name, std::move(cb));
}

Engine::ObserveId Engine::observe(std::string name, Millis poll, ChangeCallback on_change) {
  if (impl_->closing_ || poll <= Millis{0} || name.empty() ||
      name.size() > detail::max_resource_bytes)
    return 0;
  const auto id = impl_->next_observe_id_++;
  auto op = std::make_shared<ObserveOp>(*impl_, id, std::move(name), poll, std::move(on_change));
  impl_->observers_.emplace(id, op);
  op->start();
  return id;
}

void Engine::stop_observe(ObserveId id) {
  auto it = impl_->observers_.find(id);
  if (it == impl_->observers_.end()) return;
  it->second->stop();
  impl_->observers_.erase(it);
}

}  // namespace redlock
