#pragma once
// A fair waiter's place in the queue (AcquireOp, fair locks): its ticket and what each node
// counted in the ticket round, the grants that round may have given, what a node that answered
// after a round was decided is still owed, when a quorum last refreshed its heartbeat, how fast
// it polls, and the token a release may hand it the lock with. Bookkeeping only, no I/O: the
// acquisition sends what the answers here say, and a plain lock never enters this room. Why each
// rule holds is in engine/acquire_queue.cpp, which uses it.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/kinds.hpp"
#include "core/quorum.hpp"
#include "redlock/lock.hpp"
#include "redlock/options.hpp"

namespace redlock {

class FairPlace {
 public:
  // The agreed ticket (the maximum over the round's quorum); 0 while a ticket round is out.
  [[nodiscard]] std::uint64_t ticket() const { return ticket_; }

  // A ticket round goes out to `nodes` nodes: what the last one heard is forgotten.
  void ticket_round_begins(std::size_t nodes);
  // The round's number (AcquireOp::round_id_), for the late answers to it; and the same for an
  // attempt's (a winning attempt's late answers may owe a word that we left the queue).
  void ticket_round_sent(std::uint32_t round);
  void attempt_sent(std::uint32_t round) { attempt_round_ = round; }
  [[nodiscard]] bool is_ticket_round(std::uint32_t tag) const { return tag == ticket_round_; }
  // Node `node` answered the ticket round before it was decided (`v`: classify_ticket's).
  void ticket_reply(std::size_t node, const detail::Verdict& v);
  // Node `node` answered the ticket round after it was decided, counting `count`.
  void late_ticket_reply(std::size_t node, std::uint64_t count);

  // The ticket round found a quorum: the ticket is agreed now. `answered[i]`: node i answered
  // before the decision. When a quorum's counters already stand at the ticket, no write-back
  // round is needed: `agreed` says which nodes need no word (counted the ticket, or have not
  // answered: they are owed one if their count differs once they do).
  struct Agreement {
    bool on_quorum = false;
    std::vector<bool> agreed;
  };
  Agreement ticket_decided(const std::vector<bool>& answered);

  // The nodes whose ticket reply granted us the lock at our agreed ticket, if they are at least
  // `quorum` (a grant at another count is never counted: acquire_queue.cpp says why).
  [[nodiscard]] std::optional<std::vector<bool>> grants_at_ticket(int quorum) const;
  // Someone held the lock or was ahead of us on too many of `nodes` nodes for an attempt to win.
  [[nodiscard]] bool behind_on_too_many(int nodes) const;
  [[nodiscard]] int behind() const { return behind_; }  // on how many nodes

  // What a node that answered round `tag` after it was decided is owed now (at most once).
  // `done`: the acquisition is over (a winning attempt's owed words go only then).
  enum class Owed { nothing, settle, leave };
  [[nodiscard]] Owed owed(std::size_t node, std::uint32_t tag, bool done);
  // The acquisition won: `out[i]`, node i had not answered the winning attempt and is told that
  // we left the queue once it answers without a grant.
  void owe_leave(std::vector<bool> out);
  // The engine is closing, so no answer will be waited for: every word still owed to `node`,
  // whatever its answer will be (at most once, like owed()).
  struct OwedNow {
    bool settle = false;
    bool leave = false;
  };
  [[nodiscard]] OwedNow take_owed(std::size_t node);
  [[nodiscard]] bool owes_words() const;

  // Heartbeat: a round that a quorum ran (so refreshed our heartbeat there) was sent at `t`.
  void refreshed(BootClock::time_point t) { refreshed_ = t; }
  // No quorum has refreshed it for `heartbeat_ttl` by `now`: our place may be gone.
  [[nodiscard]] bool lapsed(BootClock::time_point now, Millis heartbeat_ttl) const {
    return refreshed_ && now >= *refreshed_ + heartbeat_ttl;
  }
  void forget_refresh() { refreshed_.reset(); }

  // The next poll's sleep, backing off up to 100 ms (and well within the heartbeat ttl).
  [[nodiscard]] Millis next_poll(Millis heartbeat_ttl);

  // The next try begins with a ticket round (the last one found no quorum).
  [[nodiscard]] bool needs_ticket() const { return need_ticket_; }
  void need_ticket() { need_ticket_ = true; }
  // The current attempt goes as the first in line (named, or nobody ahead at its ticket).
  [[nodiscard]] bool first_in_line() const { return first_in_line_; }
  void set_first_in_line(bool first) { first_in_line_ = first; }
  // The ticket round's replies gave us the lock.
  [[nodiscard]] bool won_with_ticket() const { return won_with_ticket_; }
  void set_won_with_ticket() { won_with_ticket_ = true; }

  // With wake-ups: the token of our latest registration (made by a ticket round and by every
  // attempt), which a release may set the key to for us; fresh for each, for `keys` keys.
  [[nodiscard]] const std::string& registration() const { return reg_token_; }
  void new_registration(std::size_t keys);

 private:
  std::uint64_t ticket_ = 0;
  detail::CounterMax votes_;        // the current ticket round's replies
  std::vector<std::uint64_t> at_;   // each node's count in it (0: no reply)
  std::vector<char> granted_;       // each node's reply granted the lock (before the decision)
  int behind_ = 0;                  // nodes whose reply said someone is ahead of us
  std::uint32_t ticket_round_ = 0;  // round numbers, for late answers
  std::uint32_t attempt_round_ = 0;
  std::vector<char> owe_settle_;  // per node: told the ticket once it answers, if it differs
  std::vector<char> owe_leave_;   // per node: told we left, once it answers without a grant
  std::optional<BootClock::time_point> refreshed_;
  Millis poll_{5};
  bool need_ticket_ = false;
  bool first_in_line_ = false;
  bool won_with_ticket_ = false;
  std::string reg_token_;
};

}  // namespace redlock
