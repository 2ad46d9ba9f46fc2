#include "core/round.hpp"

#include <cassert>

namespace redlock::detail {

void Round::reset(const std::vector<std::string>* names) {
  names_ = names;
  const int n = static_cast<int>(names->size());
  assert(n <= 64);  // check_options refuses more nodes
  tally_ = Tally{n};
  outcomes_.assign(static_cast<std::size_t>(n), NodeOutcome{});
  answered_ = 0;
  dispatching_ = false;
  open_ = true;
}

void Round::record(int i, NodeOutcome o) {
  const auto idx = static_cast<std::size_t>(i);
  if (!open_ || answered(i)) return;
  answered_ |= std::uint64_t{1} << i;
  switch (o.state) {
    case NodeState::ok:
      ++tally_.ok;
      break;
    case NodeState::held_by_other:
    case NodeState::not_held:
      ++tally_.refused;
      break;
    default:
      ++tally_.failed;
      break;
  }
  if (o.node.empty()) o.node = (*names_)[idx];
  outcomes_[idx] = std::move(o);
}

Decision Round::decision() const {
  if (dispatching_ || !open_) return Decision::undecided;
  return decide(tally_);
}

void Round::close() {
  if (!open_) return;
  open_ = false;
  for (std::size_t i = 0; i < outcomes_.size(); ++i) {
    if (!answered(static_cast<int>(i)))
      outcomes_[i] = NodeOutcome{(*names_)[i], NodeState::pending, {}, {}};
  }
}

}  // namespace redlock::detail
