#include "engine/wake_watch.hpp"

#include <utility>

namespace redlock {

WakeWatch::Go WakeWatch::heard(int node, const net::Wake& w, std::string_view waiter, bool sleeping,
                               int quorum) {
  const bool names_someone = w.why == net::Wake::Why::released && !w.waiter.starts_with('#');
  if (names_someone) {
    // One waiter is named: another one's turn (perhaps another acquisition of this client, on
    // another lock: readers and writers are never named), or ours (an exclusive waiter's release
    // took it off the mark: it marks itself again if it loses; a fair waiter's may have set the
    // key to our registered token: our attempt takes it, and its replies are the vote).
    if (waiter.empty() || w.waiter != waiter) return Go::not_yet;
    if (named_kind_) named_since_mark_ = true;
    // Counted per release, asleep or not.
    const bool quorum_named = names_.named(node, w.release);
    // Named while a round of ours is out (an attempt that a poll or a resubscription started, a
    // ticket), it tries again at once if that one fails; when a quorum of names started the
    // round, only if another release's names reach a quorum (round_failed).
    if (!sleeping && !woken_by_name_) named_while_out_ = true;
    if (!may_end_sleep(sleeping) || !quorum_named) return Go::not_yet;
    woken_ = true;
    woken_by_name_ = true;
    woken_by_ = w.release;
    return Go::now;  // named: it goes at once
  }
  // Subscribed while a round of ours is out (a fair waiter hears names from its ticket on): a
  // release may have named us before, so it tries once more at once if that round does not win.
  // Not when the round out is itself the catch-up of a wake (the rest of the nodes confirming
  // the subscription whose quorum started it), and never as the first in line.
  if (w.why == net::Wake::Why::listening && queued_ && !sleeping && !woken_)
    resubscribed_while_out_ = true;
  if (!may_end_sleep(sleeping)) return Go::not_yet;
  // A fair lock goes to the first in line (named above): a deletion by someone else tells
  // nothing about the queue (polling sees it).
  if (queued_ && w.why == net::Wake::Why::key_gone) return Go::not_yet;
  const bool subscribed = w.why == net::Wake::Why::listening;
  const char bit = subscribed ? 2 : 1;
  char& seen = heard_[static_cast<std::size_t>(node)];
  if ((seen & bit) != 0) return Go::not_yet;
  seen = static_cast<char>(seen | bit);
  // Before a quorum has released, the attempt would find the key still held on too many nodes.
  const int count = subscribed ? ++listening_ : ++freed_;
  if (count < quorum) return Go::not_yet;
  woken_ = true;
  return Go::after_spread;
}

WakeWatch::WhileOut WakeWatch::round_failed(bool contended) {
  WhileOut out;
  out.resubscribed = std::exchange(resubscribed_while_out_, false);
  const bool named_while_out = std::exchange(named_while_out_, false);
  early_ = contended;
  out.named = early_ && (named_while_out || (woken_by_name_ && names_.quorum_besides(woken_by_)));
  if (out.named) retry_named_ = true;
  return out;
}

void WakeWatch::sleep_begins(int nodes) {
  heard_.assign(static_cast<std::size_t>(nodes), 0);
  freed_ = 0;
  listening_ = 0;
  names_.reset(nodes);
  woken_ = false;
  woken_by_name_ = false;
  woken_by_.clear();
}

bool WakeWatch::retry_is_named() {
  const bool named = (woken_ && woken_by_name_) || retry_named_;
  retry_named_ = false;
  return named;
}

}  // namespace redlock
