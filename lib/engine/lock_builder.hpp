#pragma once
// Private access to Lock's fields for the engine.
#include "redlock/lock.hpp"

namespace redlock {

class LockBuilder {
 public:
  // Time left before `deadline`, zero once passed: Lock::remaining()'s rule (lib/lock.cpp).
  [[nodiscard]] static Millis time_left(BootClock::time_point deadline) noexcept;
  static Lock make(std::vector<std::string> resources, std::string token, Millis ttl,
                   Millis validity, BootClock::time_point deadline, int votes, int nodes,
                   std::vector<NodeOutcome> outcomes) {
    Lock l;
    l.resources_ = std::move(resources);
    l.token_ = std::move(token);
    l.ttl_ = ttl;
    l.validity_ = validity;
    l.deadline_ = deadline;
    l.votes_ = votes;
    l.node_count_ = nodes;
    l.nodes_ = std::move(outcomes);
    return l;
  }
  static void extended(Lock& l, Millis ttl, Millis validity, BootClock::time_point deadline,
                       int votes, std::vector<NodeOutcome> outcomes) {
    l.ttl_ = ttl;
    l.validity_ = validity;
    l.deadline_ = deadline;
    l.votes_ = votes;
    l.nodes_ = std::move(outcomes);
    // Held long enough to be extended: waiters may have come meanwhile (the uncontended holder
    // of a long job, auto-extended), and one release that publishes costs little beside it.
    l.wakes_waiters_ = true;
  }
  // Frees the per-node record: a copy kept only to extend or release needs none (the watchdog's).
  static void drop_nodes(Lock& l) { std::vector<NodeOutcome>().swap(l.nodes_); }
  static void set_fence(Lock& l, std::uint64_t f) { l.fence_ = f; }
  static void set_deadline(Lock& l, BootClock::time_point d) { l.deadline_ = d; }
  static void set_mode(Lock& l, LockMode m) { l.mode_ = m; }
  static void set_ticket(Lock& l, std::uint64_t t) { l.ticket_ = t; }
  static void set_wakes_waiters(Lock& l, bool w) { l.wakes_waiters_ = w; }
  static void set_taken_at(Lock& l, BootClock::time_point t) { l.taken_at_ = t; }
  static void set_handed_waiter(Lock& l, std::string w) { l.handed_waiter_ = std::move(w); }
  [[nodiscard]] static const std::string& handed_waiter(const Lock& l) { return l.handed_waiter_; }
  [[nodiscard]] static BootClock::time_point taken_at(const Lock& l) { return l.taken_at_; }

  // What an extension changes in a lock (its ttl stays): a held lock keeps its identity
  // (resources, token, fence ...) in one Lock that never changes, and its lease beside it, so
  // that an extension allocates nothing that outlives it (issue 46: memory per held lock).
  struct Lease {
    Millis validity{0};
    BootClock::time_point deadline{};
    int votes = 0;
    bool extended = false;  // by an extension: its release wakes waiters (extended())

    [[nodiscard]] Millis remaining() const noexcept { return time_left(deadline); }
  };
  [[nodiscard]] static Lease lease(const Lock& l) {
    return {l.validity_, l.deadline_, l.votes_, false};
  }
  // `l` with `lease` (a snapshot of a held lock).
  static void renew(Lock& l, const Lease& lease) {
    l.validity_ = lease.validity;
    l.deadline_ = lease.deadline;
    l.votes_ = lease.votes;
    if (lease.extended) l.wakes_waiters_ = true;
  }
};

}  // namespace redlock
