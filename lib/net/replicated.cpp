#include "net/replicated.hpp"

#include <optional>
#include <string>

namespace redlock::net {
namespace {

using detail::Command;
using detail::Reply;

// One write and its WAIT: collects both results, tells the caller once, and goes away after both
// commands are done with it.
class ReplicatedWrite final : public Sink {
 public:
  ReplicatedWrite(Sink& outer, std::uint32_t tag, const ReplicaPolicy& p)
      : outer_(outer), tag_(tag), policy_(p) {}

  void on_result(int node, std::uint32_t which, const Result& r) override {
    if (delivered_) return;
    // A write that cannot have granted is told at once: WAIT changes nothing for it (and on a
    // node without enough replicas it would only wait out its timeout).
    if (which == 0 && !(r.kind == Result::Kind::reply && may_grant(*r.reply))) {
      delivered_ = true;
      outer_.on_result(node, tag_, r);
      return;
    }
    Stored& s = which == 0 ? write_ : wait_;
    s.kind = r.kind;
    s.error = std::string(r.error);
    s.latency = r.latency;
    s.at = r.at;
    if (r.kind == Result::Kind::reply) s.reply = *r.reply;
    s.seen = true;
    if (write_.seen && wait_.seen) deliver(node);
  }
  void on_done() override {
    if (++done_ < 2) return;
    Sink& outer = outer_;
    delete this;
    outer.on_done();
  }
  // The WAIT could not be queued behind the write: the write's result goes out alone.
  void without_wait() {
    wait_.seen = true;
    wait_.kind = Result::Kind::down;
    wait_.error = "WAIT not sent";
    ++done_;
  }

 private:
  struct Stored {
    bool seen = false;
    Result::Kind kind = Result::Kind::down;
    std::optional<Reply> reply;
    std::string error;
    std::chrono::microseconds latency{0};
    BootClock::time_point at{};
  };

  static bool may_grant(const Reply& r) {
    return r.is_status("OK") || (r.type == Reply::Type::integer && r.integer > 0);
  }

  void deliver(int node) {
    delivered_ = true;
    Result out;
    // The vote's answer is complete when the later of the two is.
    const Stored& last = wait_.at > write_.at ? wait_ : write_;
    out.latency = last.latency;
    out.at = last.at;
    if (wait_.kind != Result::Kind::reply) {
      out.kind = wait_.kind;  // the acknowledgement did not come: no vote
      out.error = wait_.error;
      outer_.on_result(node, tag_, out);
      return;
    }
    const Reply& w = *wait_.reply;
    if (w.type == Reply::Type::integer && w.integer >= policy_.replicas) {
      out.kind = Result::Kind::reply;
      out.reply = &*write_.reply;
      outer_.on_result(node, tag_, out);
      return;
    }
    Reply refused;
    refused.type = Reply::Type::error;
    refused.str = w.type == Reply::Type::integer
                      ? "NOREPLICAS the write reached " + std::to_string(w.integer) + " of " +
                            std::to_string(policy_.replicas) + " replicas within " +
                            std::to_string(policy_.timeout.count()) + " ms (replicated votes)"
                      : "NOREPLICAS WAIT answered " + w.describe();
    out.kind = Result::Kind::reply;
    out.reply = &refused;
    outer_.on_result(node, tag_, out);
  }

  Sink& outer_;
  std::uint32_t tag_;
  ReplicaPolicy policy_;
  Stored write_, wait_;
  bool delivered_ = false;
  int done_ = 0;
};

}  // namespace

bool send_replicated(Connection& c, const std::shared_ptr<const Request>& req,
                     BootClock::time_point deadline, Sink& sink, std::uint32_t tag,
                     BootClock::time_point sent, const ReplicaPolicy& policy) {
  if (policy.replicas <= 0) return c.send(req, deadline, sink, tag, sent);
  auto* w = new ReplicatedWrite(sink, tag, policy);
  if (!c.send(req, deadline, *w, 0, sent)) {
    delete w;
    return false;
  }
  auto wait = Request::make(Command::plain({"WAIT"})
                                .arg(static_cast<long long>(policy.replicas))
                                .arg(static_cast<long long>(policy.timeout.count())));
  if (!c.send(wait, deadline + policy.allowance, *w, 1, sent)) w->without_wait();
  return true;
}

}  // namespace redlock::net
