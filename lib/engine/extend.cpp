// Extend: the acquire's shape with the kind's extend command and a t1 of its own. A failed extend
// does not release the lock (the caller decides) and never re-acquires a lost key.

#include "core/kinds.hpp"
#include "core/quorum.hpp"
#include "core/round.hpp"
#include "core/validate.hpp"
#include "engine/lock_builder.hpp"
#include "engine/operation.hpp"

namespace redlock {
namespace {

class ExtendOp final : public Operation {
 public:
  ExtendOp(Engine::Impl& e, Lock lock, Millis ttl, Engine::ExtendCallback cb)
      : Operation(e), lock_(std::move(lock)), ttl_(ttl), cb_(std::move(cb)) {}

  void start() {
    e_.note_ttl(ttl_);
    std::vector<std::string> keys;
    for (const auto& r : lock_.resources()) keys.push_back(e_.options_.key_prefix + r);
    const auto& kind = detail::kind_for_lock(lock_.mode(), keys.size());
    const auto cmd =
        net::Request::make(kind.extend(keys, lock_.token(), ttl_), /*gives_vote=*/true);
    round_.reset(&e_.names());
    round_.begin_dispatch();
    stamp();
    t1_ = sent_;  // this extend's own start: validity never borrows from the acquire
    for (int i = 0; i < e_.n(); ++i) {
      if (!send(i, cmd, 0)) record(i, not_sent(i));
    }
    round_.end_dispatch();
    evaluate();
  }

  void on_result(int node, std::uint32_t, const net::Result& r) override {
    if (done_) return;
    if (auto f = failure(node, r)) {
      record(node, std::move(*f));
    } else {
      record(node,
             outcome(node, r, detail::LockKind::classify_extend(*r.reply), &round_.outcomes()));
    }
    evaluate();
  }

  void shutdown() override { finish(Errc::shutdown, "engine closed before the extend finished"); }

 private:
  void record(int node, NodeOutcome o) {
    e_.count_node(node, o);
    round_.record(node, std::move(o));
  }

  void evaluate() {
    if (done_) return;
    const auto d = round_.decision();
    if (d == detail::Decision::undecided) return;
    const auto t2 = BootClock::now();
    round_.close();
    const int n = e_.n();
    if (d == detail::Decision::quorum) {
      const auto v = detail::compute_validity(ttl_, e_.options_.drift_factor,
                                              e_.options_.min_validity, t1_, t2);
      if (v.ok) {
        LockBuilder::extended(lock_, ttl_, std::chrono::duration_cast<Millis>(v.validity),
                              v.deadline, round_.tally().ok, round_.outcomes());
        ExtendResult res;
        res.lock = lock_;
        res.nodes = round_.outcomes();
        complete(std::move(res));
        return;
      }
      finish(Errc::expired, "a quorum extended the lock but the new validity was used up");
      return;
    }
    const auto& t = round_.tally();
    const Errc why = round_.failure_reason(Errc::not_held);
    finish(why, why == Errc::not_held
                    ? "the token is no longer held on " + detail::at_least(t) +
                          std::to_string(t.refused) + " of " + std::to_string(n) + " nodes"
                    : std::string(why == Errc::refused ? "refused" : "no quorum") + ": " +
                          std::to_string(t.ok) + " of " + std::to_string(n) + " nodes extended, " +
                          std::to_string(detail::quorum_of(n)) + " needed (" + round_.breakdown() +
                          ")");
  }

  void finish(Errc why, std::string message) {
    round_.close();
    ExtendResult res;
    res.error = make_error_code(why);
    res.message = std::move(message);
    res.lock = lock_;
    res.nodes = round_.outcomes();
    complete(std::move(res));
  }

  void complete(ExtendResult res) {
    if (done_) return;
    done_ = true;
    ++(res.error ? e_.metrics_.extend_failed : e_.metrics_.extended);
    result_ = std::move(res);
    e_.defer(this);
    finished();
  }

  void deliver() override {
    auto cb = std::move(cb_);
    cb(std::move(result_));
  }

  Lock lock_;
  Millis ttl_;
  Engine::ExtendCallback cb_;
  ExtendResult result_;
  detail::Round round_;
  BootClock::time_point t1_{};
  bool done_ = false;
};

}  // namespace

void start_extend(Engine::Impl& e, Lock lock, Millis ttl, Engine::ExtendCallback cb) {
  auto fail = [&](Errc why, std::string msg) {
    ExtendResult r;
    r.error = make_error_code(why);
    r.message = std::move(msg);
    r.lock = std::move(lock);  // nothing reads it after a failure
    e.defer([cb = std::move(cb), r = std::move(r)]() mutable { cb(std::move(r)); });
  };
  if (e.closing_) return fail(Errc::shutdown, "engine is closed");
  if (auto p = detail::find_extend_problem(lock.resources(), lock.token(), ttl, e.options_))
    return fail(Errc::invalid_argument, std::move(p->reason));
  if (lock.deadline() <= BootClock::now()) {
    return fail(Errc::expired,
                "the lock's local deadline has passed; extending could resurrect a lost lock");
  }
  (new ExtendOp(e, std::move(lock), ttl, std::move(cb)))->start();
}

}  // namespace redlock
