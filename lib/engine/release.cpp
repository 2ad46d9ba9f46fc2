// Release: compare-and-delete on every node; idempotent. Waits for every node (or its deadline):
// the caller learns, per node, deleted / not held / unreachable.

#include <algorithm>

#include "core/kinds.hpp"
#include "core/round.hpp"
#include "core/validate.hpp"
#include "engine/lock_builder.hpp"
#include "engine/operation.hpp"

namespace redlock {
namespace {

class ReleaseOp final : public Operation {
 public:
  ReleaseOp(Engine::Impl& e, Engine::ReleaseCallback cb) : Operation(e), cb_(std::move(cb)) {}

  void start(const Lock& lock) {
    // Without a key prefix the lock's resources are its keys (no copy).
    const auto& prefix = e_.options_.key_prefix;
    std::vector<std::string> prefixed;
    if (!prefix.empty()) {
      for (const auto& r : lock.resources()) prefixed.push_back(prefix + r);
    }
    const auto& keys = prefix.empty() ? lock.resources() : prefixed;
    const auto& kind = detail::kind_for_lock(lock.mode(), keys.size());
    const bool wake =
        detail::release_wakes(lock.wakes_waiters(), BootClock::now() - LockBuilder::taken_at(lock));
    const auto cmd = net::Request::make(
        kind.release(keys, lock.token(), wake, LockBuilder::handed_waiter(lock)));
    round_.reset(&e_.names());
    stamp();
    for (int i = 0; i < e_.n(); ++i) {
      if (!send(i, cmd, 0)) record(i, not_sent(i));
    }
    maybe_finish();
  }

  void on_result(int node, std::uint32_t, const net::Result& r) override {
    if (done_) return;
    if (auto f = failure(node, r)) {
      record(node, std::move(*f));
    } else {
      const auto v = detail::LockKind::classify_release(*r.reply);
      record(node,
             NodeOutcome{e_.names()[static_cast<std::size_t>(node)], v.state, v.detail, r.latency});
    }
    maybe_finish();
  }

  void shutdown() override {
    if (done_) return;
    for (int i = 0; i < e_.n(); ++i) {
      if (!round_.answered(i))
        round_.record(i, NodeOutcome{{}, NodeState::down, "engine closed", {}});
    }
    ReleaseResult res = counts();
    res.nodes = round_.take_outcomes();
    res.error = make_error_code(Errc::shutdown);
    res.message = "engine closed before the release finished";
    complete(std::move(res));
  }

 private:
  void record(int node, NodeOutcome o) {
    e_.count_node(node, o);
    round_.record(node, std::move(o));
  }

  // The result's counts (its record is added last: the round's, moved).
  ReleaseResult counts() const {
    ReleaseResult res;
    for (const auto& o : round_.outcomes()) {
      if (o.state == NodeState::ok)
        ++res.deleted;
      else if (o.state == NodeState::not_held)
        ++res.not_held;
      else
        ++res.unreachable;
    }
    return res;
  }

  void maybe_finish() {
    if (done_ || round_.tally().pending() > 0) return;
    ReleaseResult res = counts();
    if (res.deleted == 0) {
      if (res.not_held > 0) {
        res.error = make_error_code(Errc::not_held);
        res.message = "no reachable node held this token";
      } else {
        // Nothing confirmed a delete. Say which way each node failed: a node that timed out (or
        // answered an error after a timeout) may still have run the delete.
        // A quorum that refuses this client's configuration (auth, ACL, TLS): say so (exit 5 in
        // the CLI), as acquire and extend do.
        res.error = make_error_code(round_.failure_reason(Errc::not_held) == Errc::refused
                                        ? Errc::refused
                                        : Errc::no_quorum);
        const auto& nodes = round_.outcomes();
        const bool reached = std::any_of(nodes.begin(), nodes.end(), [](const NodeOutcome& o) {
          return o.state == NodeState::timeout || o.state == NodeState::error;
        });
        res.message = reached ? "no node confirmed the delete (" + round_.breakdown() +
                                    "); where a node timed out, the delete may still have run"
                              : "no node could be reached (" + round_.breakdown() + ")";
      }
    }
    res.nodes = round_.take_outcomes();
    complete(std::move(res));
  }

  void complete(ReleaseResult res) {
    done_ = true;
    ++e_.metrics_.released;
    result_ = std::move(res);
    e_.defer(this);
    finished();
  }

  void deliver() override {
    auto cb = std::move(cb_);
    cb(std::move(result_));
  }

  Engine::ReleaseCallback cb_;
  ReleaseResult result_;
  detail::Round round_;
  bool done_ = false;
};

}  // namespace

void start_release(Engine::Impl& e, const Lock& lock, Engine::ReleaseCallback cb) {
  auto fail = [&](Errc why, std::string msg) {
    ReleaseResult r;
    r.error = make_error_code(why);
    r.message = std::move(msg);
    e.defer([cb = std::move(cb), r = std::move(r)]() mutable { cb(std::move(r)); });
  };
  if (e.closing_) return fail(Errc::shutdown, "engine is closed");
  if (auto p = detail::find_token_problem(lock.resources(), lock.token(), e.options_.key_prefix))
    return fail(Errc::invalid_argument, std::move(p->reason));
  (new ReleaseOp(e, std::move(cb)))->start(lock);
}

}  // namespace redlock
