#include "engine/operation.hpp"

#include <utility>

namespace redlock {

void Operation::stamp() {
  uv_update_time(e_.loop_);
  sent_ = BootClock::now();
}

bool Operation::send(int i, const std::shared_ptr<const net::Request>& req, std::uint32_t tag) {
  auto& node = *e_.nodes_[static_cast<std::size_t>(i)];
  if (auto why = node.cannot_run(*req)) {
    cannot_run_ = std::move(*why);
    return false;
  }
  // The one deadline of this command, set here where it is stamped (sent_ + node_timeout).
  if (!node.send(req, sent_ + e_.options_.node_timeout, *this, tag, sent_)) return false;
  ref();
  return true;
}

NodeOutcome Operation::not_sent(int i) const {
  const auto& node = *e_.nodes_[static_cast<std::size_t>(i)];
  if (!cannot_run_.empty()) {
    ++e_.metrics_.nodes[static_cast<std::size_t>(i)].errors;
    return NodeOutcome{node.name(), NodeState::error, std::exchange(cannot_run_, {}), {}};
  }
  ++e_.metrics_.nodes[static_cast<std::size_t>(i)].down;  // the node never saw this one
  auto err = node.last_error();
  return NodeOutcome{node.name(),
                     node.refused() ? NodeState::auth_failed : NodeState::down,
                     err.empty() ? "not connected" : std::move(err),
                     {}};
}

std::optional<NodeOutcome> Operation::failure(int i, const net::Result& r) const {
  const auto& name = e_.names()[static_cast<std::size_t>(i)];
  if (r.kind == net::Result::Kind::timeout)
    return NodeOutcome{name, NodeState::timeout, {}, r.latency};
  if (r.kind == net::Result::Kind::down) {
    return NodeOutcome{name, NodeState::down,
                       e_.nodes_[static_cast<std::size_t>(i)]->failure_detail(r.error), r.latency};
  }
  if (r.kind == net::Result::Kind::refused)
    return NodeOutcome{name, NodeState::auth_failed, std::string(r.error), r.latency};
  return std::nullopt;
}

NodeOutcome Operation::outcome(int i, const net::Result& r, const detail::Verdict& v,
                               const std::vector<NodeOutcome>* outcomes) const {
  NodeOutcome o{e_.names()[static_cast<std::size_t>(i)], v.state, v.detail, r.latency};
  if (v.vote == detail::Vote::yes) {
    if (!r.exclusion.empty()) {
      o.state = NodeState::excluded;
      o.detail = std::string(r.exclusion);
    } else if (auto why = e_.vote_exclusion(i, r.at, outcomes)) {
      o.state = NodeState::excluded;
      o.detail = std::move(*why);
    }
  }
  return o;
}

namespace {

class Broadcast final : public Operation {
 public:
  using Operation::Operation;
  void run(detail::Command cmd, const std::vector<bool>& skip) {
    const auto req = net::Request::make(std::move(cmd));
    stamp();
    for (int i = 0; i < e_.n(); ++i) {
      if (static_cast<std::size_t>(i) < skip.size() && skip[static_cast<std::size_t>(i)]) continue;
      send(i, req, 0);
    }
    finished();
  }
  void on_result(int, std::uint32_t, const net::Result&) override {}
  void shutdown() override {}
};

}  // namespace

void broadcast(Engine::Impl& e, detail::Command cmd, const std::vector<bool>& skip) {
  (new Broadcast(e))->run(std::move(cmd), skip);
}

}  // namespace redlock
