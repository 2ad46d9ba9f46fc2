#include "net/pending.hpp"

#include <algorithm>

namespace redlock::net {

PendingCommands::PendingCommands(uv_loop_t* loop, int index, std::function<std::string()> why)
    : index_(index), why_(std::move(why)), timer_(loop, [this] { expire(/*all=*/false); }) {}

void PendingCommands::push(const std::shared_ptr<const Request>& req,
                           BootClock::time_point deadline, Sink& sink, std::uint32_t tag,
                           BootClock::time_point sent) {
  waiting_.push_back({req, deadline, &sink, tag, sent});
  if (!timer_.active() || deadline < next_expiry_) {
    next_expiry_ = deadline;
    timer_.start(static_cast<std::uint64_t>(
        std::max<long long>(1, std::chrono::ceil<Millis>(deadline - BootClock::now()).count())));
  }
}

void PendingCommands::release(const Sender& send) {
  timer_.stop();
  auto queued = std::move(waiting_);
  waiting_.clear();
  const auto now = BootClock::now();
  std::vector<Command> late;
  for (auto& c : queued) {
    if (c.deadline <= now || !send(c)) late.push_back(std::move(c));
  }
  waiting_ = std::move(late);
  expire(/*all=*/true);
}

void PendingCommands::close() {
  timer_.close();
  expire(/*all=*/true);
}

// Commands whose deadline passed before the node knew where to send them: "down", with why.
void PendingCommands::expire(bool all) {
  const auto now = BootClock::now();
  std::vector<Command> due;
  std::erase_if(waiting_, [&](const Command& c) {
    if (!all && c.deadline > now) return false;
    due.push_back(c);
    return true;
  });
  if (!due.empty()) {
    const std::string why = why_();
    for (auto& c : due) {
      Result r;
      r.kind = Result::Kind::down;
      r.error = why;
      r.at = now;
      r.latency = std::chrono::duration_cast<std::chrono::microseconds>(now - c.sent);
      c.sink->on_result(index_, c.tag, r);
      c.sink->on_done();
    }
  }
  if (waiting_.empty()) return;
  next_expiry_ =
      std::min_element(waiting_.begin(), waiting_.end(), [](const auto& a, const auto& b) {
        return a.deadline < b.deadline;
      })->deadline;
  timer_.start(static_cast<std::uint64_t>(
      std::max<long long>(1, std::chrono::ceil<Millis>(next_expiry_ - now).count())));
}

}  // namespace redlock::net
