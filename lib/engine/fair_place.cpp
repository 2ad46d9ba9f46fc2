#include "engine/fair_place.hpp"

#include <algorithm>

#include "core/token.hpp"

namespace redlock {

void FairPlace::ticket_round_begins(std::size_t nodes) {
  need_ticket_ = false;
  behind_ = 0;
  votes_.reset();
  at_.assign(nodes, 0);
  granted_.assign(nodes, 0);
  ticket_ = 0;  // until this round decides
}

void FairPlace::ticket_round_sent(std::uint32_t round) {
  ticket_round_ = round;
  owe_settle_.clear();
}

void FairPlace::ticket_reply(std::size_t node, const detail::Verdict& v) {
  if (node >= at_.size()) return;
  votes_.add(v.value);
  at_[node] = v.value;
  behind_ += v.behind ? 1 : 0;
  granted_[node] = v.granted ? 1 : 0;
}

void FairPlace::late_ticket_reply(std::size_t node, std::uint64_t count) {
  if (node < at_.size() && at_[node] == 0) at_[node] = count;
}

FairPlace::Agreement FairPlace::ticket_decided(const std::vector<bool>& answered) {
  ticket_ = votes_.value();
  Agreement a;
  const int n = static_cast<int>(at_.size());
  a.on_quorum = votes_.on_quorum(n);
  if (!a.on_quorum) return a;
  a.agreed.assign(at_.size(), false);
  owe_settle_.assign(at_.size(), 0);
  for (std::size_t i = 0; i < at_.size(); ++i) {
    const bool waiting = i >= answered.size() || !answered[i];
    owe_settle_[i] = waiting ? 1 : 0;
    a.agreed[i] = at_[i] == ticket_ || waiting;
  }
  return a;
}

std::optional<std::vector<bool>> FairPlace::grants_at_ticket(int quorum) const {
  std::vector<bool> counted(at_.size(), false);
  int count = 0;
  for (std::size_t i = 0; i < counted.size(); ++i) {
    counted[i] = granted_[i] != 0 && at_[i] == ticket_;
    count += counted[i] ? 1 : 0;
  }
  if (count < quorum) return std::nullopt;
  return counted;
}

bool FairPlace::behind_on_too_many(int nodes) const {
  return behind_ > nodes - detail::quorum_of(nodes);
}

FairPlace::Owed FairPlace::owed(std::size_t node, std::uint32_t tag, bool done) {
  const bool settle = tag == ticket_round_ && node < owe_settle_.size() && owe_settle_[node] != 0;
  const bool leave =
      !settle && tag == attempt_round_ && done && node < owe_leave_.size() && owe_leave_[node] != 0;
  if (settle) {
    owe_settle_[node] = 0;
    // Its count (late_ticket_reply; 0 for a failure): the agreed ticket already, or not.
    return at_[node] == ticket_ ? Owed::nothing : Owed::settle;
  }
  if (leave) {
    owe_leave_[node] = 0;
    return Owed::leave;
  }
  return Owed::nothing;
}

void FairPlace::owe_leave(std::vector<bool> out) {
  owe_leave_.assign(out.size(), 0);
  for (std::size_t i = 0; i < out.size(); ++i) owe_leave_[i] = out[i] ? 1 : 0;
}

FairPlace::OwedNow FairPlace::take_owed(std::size_t node) {
  OwedNow w;
  if (node < owe_settle_.size()) {
    w.settle = owe_settle_[node] != 0;
    owe_settle_[node] = 0;
  }
  if (node < owe_leave_.size()) {
    w.leave = owe_leave_[node] != 0;
    owe_leave_[node] = 0;
  }
  return w;
}

bool FairPlace::owes_words() const {
  auto any = [](const std::vector<char>& v) {
    return std::find(v.begin(), v.end(), char{1}) != v.end();
  };
  return any(owe_settle_) || any(owe_leave_);
}

Millis FairPlace::next_poll(Millis heartbeat_ttl) {
  const Millis sleep = poll_;
  poll_ = std::min(poll_ * 2, std::min(Millis{100}, heartbeat_ttl / 4));
  return sleep;
}

void FairPlace::new_registration(std::size_t keys) {
  reg_token_ = detail::token_for(detail::make_token(), keys);
}

}  // namespace redlock
