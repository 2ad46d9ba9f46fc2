#pragma once
// When each of many timers is due, for one loop timer that serves them all (the holds'
// watchdogs: one uv timer per held lock cost more than the rest of the hold). A min-heap of
// (due, id); re-arming pushes a new entry and cancelling pushes nothing: the owner says which
// entries still count (`is_current`), and the others are dropped as they surface. Pure: no I/O,
// no clock.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "redlock/lock.hpp"

namespace redlock {

class DueHeap {
 public:
  using Id = std::uint64_t;
  struct Entry {
    BootClock::time_point due;
    Id id = 0;
  };
  // Whether `entry` is still its id's due time (not cancelled, not re-armed since).
  using IsCurrent = std::function<bool(const Entry&)>;

  void push(BootClock::time_point due, Id id) {
    entries_.push_back({due, id});
    std::push_heap(entries_.begin(), entries_.end(), later);
  }

  // The earliest current due time, nullopt when none; drops the outdated entries before it.
  [[nodiscard]] std::optional<BootClock::time_point> earliest(const IsCurrent& is_current) {
    drop_outdated(is_current);
    if (entries_.empty()) return std::nullopt;
    return entries_.front().due;
  }

  // Moves the current entries due at `now` into `due`, earliest first (outdated ones are
  // dropped). Entries pushed afterwards, even if already due, wait for the next call.
  void take_due(BootClock::time_point now, const IsCurrent& is_current, std::vector<Entry>& due) {
    due.clear();
    for (drop_outdated(is_current); !entries_.empty() && entries_.front().due <= now;
         drop_outdated(is_current)) {
      std::pop_heap(entries_.begin(), entries_.end(), later);
      due.push_back(entries_.back());
      entries_.pop_back();
    }
  }

  // Drops every outdated entry, not only those that surfaced: an owner that re-arms far ahead
  // and cancels often would otherwise keep each old entry until its time came.
  void prune(const IsCurrent& is_current) {
    std::erase_if(entries_, [&](const Entry& e) { return !is_current(e); });
    std::make_heap(entries_.begin(), entries_.end(), later);
  }

  [[nodiscard]] std::size_t size() const { return entries_.size(); }

 private:
  static bool later(const Entry& a, const Entry& b) { return a.due > b.due; }
  void drop_outdated(const IsCurrent& is_current) {
    while (!entries_.empty() && !is_current(entries_.front())) {
      std::pop_heap(entries_.begin(), entries_.end(), later);
      entries_.pop_back();
    }
  }

  std::vector<Entry> entries_;
};

}  // namespace redlock
