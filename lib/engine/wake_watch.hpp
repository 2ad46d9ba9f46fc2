#pragma once
// The wake-up watch of one acquisition (AcquireOp, with wake-ups): what the nodes told it while it
// waited (releases that freed the key, releases that named it, (re)subscriptions of its channel)
// and whether that may end its sleep now. Bookkeeping only, no I/O: the acquisition starts its
// retry timer on the answer, and a plain lock that never sleeps never asks. A wake-up is only a
// hint to try: the attempt's replies decide (algorithm.md, hazard 10), and only a failure of
// contention may be cut short by one (hazard 12).

#include <string>
#include <string_view>
#include <vector>

#include "core/name_tally.hpp"
#include "net/subscriber.hpp"
#include "redlock/lock.hpp"
#include "redlock/options.hpp"

namespace redlock {

class WakeWatch {
 public:
  // `queued`: a fair waiter (a release hands the lock to the first in line and names it; a
  // deletion by someone else says nothing about the queue). `named`: releases name this kind's
  // waiters by their id (the waiting mark holds it).
  WakeWatch(bool queued, bool named) : queued_(queued), named_kind_(named) {}

  // What a word from a node asks of the acquisition.
  enum class Go {
    not_yet,       // nothing: keep sleeping (or keep the round that is out)
    now,           // a quorum of nodes named us in one release: try at once
    after_spread,  // a quorum reported the key gone, or (re)subscribed: try after a small spread
  };

  // Node `node` said `w`. `waiter`: our id (empty: none); `sleeping`: between attempts now.
  Go heard(int node, const net::Wake& w, std::string_view waiter, bool sleeping, int quorum);

  // A round of ours failed, `contended` when the lock was held elsewhere (else no quorum or
  // validity, which no release undoes: that sleep lasts the retry delay). Returns what was
  // heard while the round was out that may cut the sleep short.
  struct WhileOut {
    // A release named us while the round was out (it lost to a client that had not waited, or
    // went out before the release), or, when names started it, a later release's names reached
    // a quorum meanwhile: the lock may be free now, and nobody else was told. Only if contended.
    bool named = false;
    // Our channel was (re)subscribed while the round was out: a name published before that is
    // lost (a fair waiter's ticket round hears names from its start).
    bool resubscribed = false;
  };
  WhileOut round_failed(bool contended);

  // A sleep begins (with wake-ups): what was heard during the last one is forgotten.
  void sleep_begins(int nodes);
  // The sleep ends (its timer fired): whether this retry goes as a waiter named by a release
  // (the first in line), at once after a name or after a name heard while a round was out.
  bool retry_is_named();

  // A release named us since our waiting mark was last written: it took us off the mark, which
  // must be written again.
  [[nodiscard]] bool named_since_marked() const { return named_since_mark_; }
  // Our waiting mark was written (or a ticket round wrote it) and lasts until `until`.
  void marked(BootClock::time_point until) {
    named_since_mark_ = false;
    marked_until_ = until;
  }
  // The mark must be written before a sleep of `sleep` from `now`: it could lapse during it
  // (half a second to spare), or a release took us off it.
  [[nodiscard]] bool mark_due(BootClock::time_point now, Millis sleep) const {
    return marked_until_ < now + sleep + Millis{500} || named_since_mark_;
  }

 private:
  [[nodiscard]] bool may_end_sleep(bool sleeping) const { return sleeping && !woken_ && early_; }

  bool queued_;
  bool named_kind_;
  // Whether a wake-up may end the current sleep: only after a round that found the lock held
  // elsewhere (set by round_failed).
  bool early_ = false;
  bool woken_ = false;  // once per sleep
  // This sleep, per node: bit 1 it reported our key gone (a release that names nobody, a
  // deletion, an expiry), bit 2 it (re)subscribed. Counted apart: a quorum of the first means the
  // key is free on a quorum; a subscription says nothing about the key.
  std::vector<char> heard_;
  int freed_ = 0;
  int listening_ = 0;
  // Releases that name us, counted per release (names from releases that each reached too few
  // nodes must not add up: core/name_tally.hpp), this sleep and since.
  detail::NameTally names_;
  bool woken_by_name_ = false;  // this sleep's wake-up was a release naming us
  std::string woken_by_;        // the release whose names woke us
  bool named_while_out_ = false;
  bool resubscribed_while_out_ = false;
  bool retry_named_ = false;  // the sleep ending now is the at-once retry of a named waiter
  bool named_since_mark_ = false;
  BootClock::time_point marked_until_{};  // our waiting mark lasts until then
};

}  // namespace redlock
