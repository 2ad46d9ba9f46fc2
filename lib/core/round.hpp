#pragma once
// One voting round over the N nodes: every operation and every phase of one (an acquire attempt,
// a fence or ticket write-back, an extend) is a Round. It keeps the per-node record, the tally,
// and decides as soon as the outcome is known. Pure: the engine feeds it what the nodes said.

#include <cstdint>
#include <string>
#include <vector>

#include "core/quorum.hpp"
#include "redlock/error.hpp"

namespace redlock::detail {

class Round {
 public:
  Round() = default;
  // A fresh round over nodes named `names` (display addresses, index = node).
  explicit Round(const std::vector<std::string>* names) { reset(names); }
  void reset(const std::vector<std::string>* names);

  // Node `i` voted (its first answer only; a second one for the same node is ignored).
  // `o.state` says how: ok counts towards the quorum, held_by_other / not_held are refusals,
  // everything else (down, timeout, error, excluded) a failure.
  void record(int i, NodeOutcome o);

  // While the round's commands are being sent, a node that cannot even be sent to is recorded at
  // once; the decision waits until every node has been sent to (or refused), so the commands of
  // one round all go out before it can end.
  void begin_dispatch() { dispatching_ = true; }
  void end_dispatch() { dispatching_ = false; }

  // undecided while dispatching or while the outcome is still open.
  [[nodiscard]] Decision decision() const;
  // Closes the round: every node that has not answered is marked `pending` in the record.
  // Later answers are then ignored (record() does nothing once closed).
  void close();
  [[nodiscard]] bool open() const noexcept { return open_; }

  [[nodiscard]] bool answered(int i) const { return (answered_ >> i) & 1U; }
  [[nodiscard]] const Tally& tally() const noexcept { return tally_; }
  [[nodiscard]] const std::vector<NodeOutcome>& outcomes() const noexcept { return outcomes_; }
  // The record, moved out for a result (a copy per operation was one allocation of a lock
  // cycle's few dozen): only for a round that is over. It is closed, and its record is empty.
  [[nodiscard]] std::vector<NodeOutcome> take_outcomes() noexcept {
    open_ = false;
    return std::move(outcomes_);
  }
  [[nodiscard]] int nodes() const noexcept { return tally_.nodes; }
  // "3 ok, 2 timeout", "3 down: Connection refused": the record in a few words, for messages
  // (redlock::summarize()).
  [[nodiscard]] std::string breakdown() const { return summarize(outcomes_); }
  // Why the round failed, once it cannot reach a quorum: `refusal` (contended / not_held),
  // Errc::refused (the nodes' configuration rules a quorum out), or Errc::no_quorum.
  [[nodiscard]] Errc failure_reason(Errc refusal) const {
    return detail::failure_reason(tally_, outcomes_, refusal);
  }

 private:
  const std::vector<std::string>* names_ = nullptr;
  Tally tally_;
  std::vector<NodeOutcome> outcomes_;
  // Bit i: node i answered. A bit set, not a vector: at most 64 nodes (check_options), and a
  // round is reset for every attempt and release.
  std::uint64_t answered_ = 0;
  bool dispatching_ = false;
  bool open_ = false;
};

}  // namespace redlock::detail
