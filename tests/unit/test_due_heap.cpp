// The due times of the holds' shared timer (engine/due_heap.hpp), without a loop: the order in
// which entries come due, and that re-armed and cancelled ones never fire.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "engine/due_heap.hpp"

using redlock::BootClock;
using redlock::DueHeap;

namespace {

BootClock::time_point at(int ms) { return BootClock::time_point{} + std::chrono::milliseconds(ms); }

// The owner's side: each id's current due time; an id without one is cancelled.
struct Owner {
  DueHeap heap;
  std::map<DueHeap::Id, BootClock::time_point> current;
  DueHeap::IsCurrent is_current = [this](const DueHeap::Entry& e) {
    auto it = current.find(e.id);
    return it != current.end() && it->second == e.due;
  };
  void arm(DueHeap::Id id, int ms) {
    current[id] = at(ms);
    heap.push(at(ms), id);
  }
  std::vector<DueHeap::Id> take(int now_ms) {
    std::vector<DueHeap::Entry> due;
    heap.take_due(at(now_ms), is_current, due);
    std::vector<DueHeap::Id> ids;
    for (const auto& e : due) ids.push_back(e.id);
    return ids;
  }
};

}  // namespace

TEST_CASE("due heap: entries come due earliest first, and only once due") {
  Owner o;
  o.arm(1, 300);
  o.arm(2, 100);
  o.arm(3, 200);
  CHECK(o.heap.earliest(o.is_current) == at(100));
  CHECK(o.take(50).empty());
  CHECK(o.take(250) == std::vector<DueHeap::Id>{2, 3});
  CHECK(o.heap.earliest(o.is_current) == at(300));
  CHECK(o.take(300) == std::vector<DueHeap::Id>{1});
  CHECK_FALSE(o.heap.earliest(o.is_current).has_value());
  CHECK(o.heap.size() == 0);
}

TEST_CASE("due heap: a re-armed entry fires at its new time only") {
  Owner o;
  o.arm(1, 100);
  o.arm(2, 150);
  o.arm(1, 400);  // later
  CHECK(o.heap.earliest(o.is_current) == at(150));
  CHECK(o.take(200) == std::vector<DueHeap::Id>{2});
  o.arm(2, 50);  // earlier than the next one due
  CHECK(o.heap.earliest(o.is_current) == at(50));
  CHECK(o.take(399) == std::vector<DueHeap::Id>{2});
  CHECK(o.take(400) == std::vector<DueHeap::Id>{1});
  CHECK(o.heap.size() == 0);
}

TEST_CASE("due heap: a cancelled entry never fires, and does not hold the next time back") {
  Owner o;
  o.arm(1, 100);
  o.arm(2, 200);
  o.current.erase(1);
  CHECK(o.heap.earliest(o.is_current) == at(200));
  CHECK(o.take(1000) == std::vector<DueHeap::Id>{2});
  o.current.erase(2);
  o.arm(3, 10);
  o.current.erase(3);
  CHECK_FALSE(o.heap.earliest(o.is_current).has_value());
  CHECK(o.take(1000).empty());
}

TEST_CASE("due heap: prune drops every outdated entry and keeps the order") {
  Owner o;
  for (int i = 0; i < 50; ++i) o.arm(static_cast<DueHeap::Id>(i % 5), 1000 - i);
  for (DueHeap::Id id = 0; id < 5; ++id) CHECK(o.current.count(id) == 1);
  o.current.erase(2);
  o.heap.prune(o.is_current);
  CHECK(o.heap.size() == 4);
  // The last arms were ids 0, 1, 3, 4 (2 is cancelled) at 955, 954, 952, 951.
  CHECK(o.heap.earliest(o.is_current) == at(951));
  CHECK(o.take(1000) == std::vector<DueHeap::Id>{4, 3, 1, 0});
}

TEST_CASE("due heap: against a plain model, under many arms and cancels") {
  // A small linear congruential generator: the same sequence on every run and platform.
  std::uint64_t seed = 12345;
  auto next = [&seed](int n) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>((seed >> 33) % static_cast<std::uint64_t>(n));
  };
  Owner o;
  // An id armed again for a time it had before would find its old entry current again (the
  // watchdogs never do: ids are not reused and a re-arm for the same time pushes nothing).
  std::set<std::pair<DueHeap::Id, int>> used;
  int now = 0;
  for (int step = 0; step < 5000; ++step) {
    const int what = next(10);
    const auto id = static_cast<DueHeap::Id>(next(40));
    if (what < 6) {
      const int due = now + next(500);
      if (used.emplace(id, due).second) o.arm(id, due);
    } else if (what < 8) {
      o.current.erase(id);
    } else if (what < 9) {
      o.heap.prune(o.is_current);
      CHECK(o.heap.size() == o.current.size());
    } else {
      now += next(100);
      // The model: every current due time at or before now, earliest first (ties by id: the
      // heap may give tied entries in any order, so compare sorted pairs).
      std::vector<std::pair<int, DueHeap::Id>> want;
      for (const auto& [cid, due] : o.current) {
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(due - BootClock::time_point{})
                .count();
        if (ms <= now) want.emplace_back(static_cast<int>(ms), cid);
      }
      std::sort(want.begin(), want.end());
      std::vector<DueHeap::Entry> due;
      o.heap.take_due(at(now), o.is_current, due);
      std::vector<std::pair<int, DueHeap::Id>> got;
      for (const auto& e : due) {
        got.emplace_back(static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                              e.due - BootClock::time_point{})
                                              .count()),
                         e.id);
      }
      // Earliest first, as taken.
      CHECK(std::is_sorted(got.begin(), got.end(),
                           [](const auto& a, const auto& b) { return a.first < b.first; }));
      std::sort(got.begin(), got.end());
      REQUIRE(got == want);
      for (const auto& [ms, cid] : got) o.current.erase(cid);  // fired: no longer armed
    }
    if (const auto e = o.heap.earliest(o.is_current)) {
      auto best = BootClock::time_point::max();
      for (const auto& [cid, due] : o.current) best = std::min(best, due);
      REQUIRE(*e == best);
    } else {
      REQUIRE(o.current.empty());
    }
  }
}
