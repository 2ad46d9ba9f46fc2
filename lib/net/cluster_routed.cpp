// One command through a Redis Cluster vote (cluster.cpp says how the vote works): its parts,
// their redirections, and the one result its caller hears.

#include "net/cluster_node.hpp"

namespace redlock::net::cluster {
namespace {

class IgnoreSink final : public Sink {
 public:
  void on_result(int, std::uint32_t, const Result&) override {}
  void on_done() override {}
};
IgnoreSink ignore_sink;

// --- one command through the cluster ---------------------------------------------------------

// A command sent through the cluster: its parts (the whole command, or one per slot), their
// redirections, and the one result its caller hears. Deletes itself once every part's connection
// is done with it.
class Routed final : public Sink {
 public:
  Routed(ClusterNode& node, std::shared_ptr<const Request> req, BootClock::time_point deadline,
         Sink& outer, std::uint32_t tag, BootClock::time_point sent)
      : node_(node),
        req_(std::move(req)),
        deadline_(deadline),
        outer_(outer),
        tag_(tag),
        sent_(sent) {}

  // False when no part could be sent: then the caller hears nothing (send() fails).
  bool start() {
    if (auto split = detail::split_by_slot(req_->command)) {
      split_ = std::move(*split);
      for (const auto& sp : split_) add_part(sp.slot, Request::make(sp.command, req_->gives_vote));
    } else {
      const auto slot = detail::command_slot(req_->command);
      add_part(slot.value_or(0), req_);
      keyless_ = !slot;
    }
    bool any = false;
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      Master* m = node_.owner_of(parts_[i].slot);
      if (keyless_ && m == nullptr) m = node_.any_master();
      any = dispatch(i, m, /*asking=*/false) || any;
    }
    return any;
  }

  void on_result(int, std::uint32_t i, const Result& r) override {
    Part& p = parts_[i];
    if (r.kind == Result::Kind::reply && r.reply->starts_with("TRYAGAIN") && !node_.closing() &&
        p.redirects < max_redirects) {
      // A release over a slot being migrated: again without its waiting marks (slots.hpp).
      if (auto simpler = detail::without_wake_keys(p.req->command)) {
        ++p.redirects;
        p.req = Request::make(std::move(*simpler), p.req->gives_vote);
        p.asked = false;
        if (!dispatch(i, node_.owner_of(p.slot), /*asking=*/false)) maybe_deliver();
        return;
      }
    }
    if (r.kind == Result::Kind::reply && r.reply->is_error() && !node_.closing()) {
      if (auto red = detail::parse_redirect(r.reply->str);
          red && p.redirects < max_redirects && !(red->ask && p.asked)) {
        ++p.redirects;
        ClusterEndpoint to = red->to;
        if (to.host.empty()) to.host = p.target->endpoint.host;
        Master& m = node_.master_at(to);
        if (red->ask) {
          p.asked = true;
          // The excluded source has no key: the importing master's answer is as good as its.
          if (auto why = p.target->exclusion(r.at)) {
            p.inherited = "restart guard: ASK from master " + p.target->address + ": " + *why;
          }
        } else {
          node_.moved(static_cast<unsigned>(red->slot), m, p.target);
        }
        if (!dispatch(i, &m, red->ask)) maybe_deliver();
        return;
      }
    }
    store(p, r);
    maybe_deliver();
  }

  void on_done() override {
    if (--outstanding_ > 0) return;
    if (!delivered_) {
      maybe_deliver();  // every part has its answer by now; this goes away with it
      return;
    }
    Sink& outer = outer_;
    delete this;
    outer.on_done();
  }

 private:
  struct Part {
    unsigned slot = 0;
    std::shared_ptr<const Request> req;
    Master* target = nullptr;
    int redirects = 0;
    bool asked = false;
    bool answered = false;
    Result::Kind kind = Result::Kind::down;
    std::optional<Reply> reply;
    std::string error, exclusion;
    std::string inherited;  // the exclusion of the master whose ASK led here
    BootClock::time_point at{};
    std::chrono::microseconds latency{0};
  };

  void add_part(unsigned slot, std::shared_ptr<const Request> req) {
    Part p;
    p.slot = slot;
    p.req = std::move(req);
    parts_.push_back(std::move(p));
  }

  // Sends part i to `m` (after ASKING when `asking`); false, with the part answered "down" or
  // "timeout", when it could not go.
  bool dispatch(std::size_t i, Master* m, bool asking) {
    Part& p = parts_[i];
    const auto now = BootClock::now();
    Result r;
    r.at = now;
    r.latency = std::chrono::duration_cast<std::chrono::microseconds>(now - sent_);
    std::string why;
    if (deadline_ <= now) {
      r.kind = Result::Kind::timeout;  // redirections used up the deadline
    } else if (m == nullptr) {
      why = "slot " + std::to_string(p.slot) + " has no master in the slot map";
      r.kind = Result::Kind::down;
    } else if (!m->node) {
      why = m->untrusted;  // never contacted
      r.kind = Result::Kind::down;
    } else {
      static const auto asking_req = Request::make(Command::plain({"ASKING"}));
      if (asking) (void)m->node->send(asking_req, deadline_, ignore_sink, 0, now);
      if (m->node->send(p.req, deadline_, *this, static_cast<std::uint32_t>(i), sent_)) {
        p.target = m;
        ++outstanding_;
        return true;
      }
      why = "master " + m->address + ": " +
            (m->node->last_error().empty() ? "not connected" : m->node->last_error());
      r.kind = Result::Kind::down;
    }
    r.error = why;
    p.target = m;
    store(p, r);
    return false;
  }

  void store(Part& p, const Result& r) {
    p.answered = true;
    p.kind = r.kind;
    p.error = std::string(r.error);
    p.at = r.at;
    p.latency = r.latency;
    if (r.kind == Result::Kind::reply) {
      p.reply = *r.reply;
      if (p.target != nullptr) {
        if (auto why = p.target->exclusion(r.at)) p.exclusion = std::move(*why);
      }
      if (p.exclusion.empty()) {
        if (auto why = node_.slot_exclusion(p.slot, r.at)) p.exclusion = std::move(*why);
      }
      if (p.exclusion.empty()) p.exclusion = p.inherited;
    }
    node_.note_result(r, p.target);
  }

  void maybe_deliver() {
    if (delivered_) return;
    for (const auto& p : parts_) {
      if (!p.answered) return;
    }
    delivered_ = true;
    Result out;
    const Part* last = &parts_[0];
    const Part* failed = nullptr;
    for (const auto& p : parts_) {
      if (p.at > last->at) last = &p;
      if (failed == nullptr && p.kind != Result::Kind::reply) failed = &p;
    }
    out.at = last->at;
    out.latency = last->latency;
    Reply combined;
    if (failed != nullptr) {
      out.kind = failed->kind;
      out.error = failed->error;
    } else {
      out.kind = Result::Kind::reply;
      if (parts_.size() == 1) {
        out.reply = &*parts_[0].reply;
      } else {
        std::vector<const Reply*> replies;
        for (const auto& p : parts_) replies.push_back(&*p.reply);
        combined = detail::combine_parts(req_->command, replies);
        out.reply = &combined;
      }
      for (const auto& p : parts_) {
        if (!p.exclusion.empty()) {
          out.exclusion = p.exclusion;
          break;
        }
      }
    }
    roll_back_partial_grant(failed != nullptr || !out.reply->is_integer(1));
    outer_.on_result(node_.index(), tag_, out);
    if (outstanding_ == 0) {
      // Called from on_done(): no connection will call back any more.
      Sink& outer = outer_;
      delete this;
      outer.on_done();
    }
  }

  // An acquire_multi split over slots that is not a yes on the whole: the parts that granted are
  // taken back here (their keys carry our token), as one script on one server would have set none.
  void roll_back_partial_grant(bool refused) {
    if (!refused || split_.empty() || *req_->command.script != detail::ScriptId::acquire_multi)
      return;
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      const Part& p = parts_[i];
      if (p.kind != Result::Kind::reply || !p.reply->is_integer(1) || p.target == nullptr) continue;
      auto undo = Request::make(detail::rollback(req_->command, split_[i]));
      const auto now = BootClock::now();
      (void)p.target->node->send(undo, now + Millis{1000}, ignore_sink, 0, now);
    }
  }

  ClusterNode& node_;
  std::shared_ptr<const Request> req_;
  BootClock::time_point deadline_;
  Sink& outer_;
  std::uint32_t tag_;
  BootClock::time_point sent_;
  std::vector<detail::SlotPart> split_;  // empty: the command goes whole
  std::vector<Part> parts_;
  bool keyless_ = false;
  int outstanding_ = 0;  // sends whose on_done() has not come
  bool delivered_ = false;
};

}  // namespace

// --- ClusterNode ------------------------------------------------------------------------------

bool ClusterNode::send(const std::shared_ptr<const Request>& req, BootClock::time_point deadline,
                       Sink& sink, std::uint32_t tag, BootClock::time_point sent) {
  if (closing_) return false;
  if (!have_map_) {
    waiting_.push(req, deadline, sink, tag, sent);
    return true;
  }
  auto* routed = new Routed(*this, req, deadline, sink, tag, sent);
  if (!routed->start()) {
    delete routed;
    return false;
  }
  return true;
}

}  // namespace redlock::net::cluster
