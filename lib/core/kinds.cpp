#include "core/kinds.hpp"

#include <limits>

#include "core/keys.hpp"
#include "core/server_text.hpp"
#include "redlock/fencing.hpp"

namespace redlock::detail {
namespace {

Verdict yes(std::uint64_t value = 0) { return {Vote::yes, NodeState::ok, {}, value}; }
Verdict no(NodeState s) { return {Vote::no, s, {}, 0}; }

long long ms(Millis d) { return static_cast<long long>(d.count()); }

// Integer 1 grants, 0 refuses: the scripted acquisitions.
Verdict one_or_zero(const Reply& r) {
  if (r.is_integer(1)) return yes();
  if (r.is_integer(0)) return no(NodeState::held_by_other);
  return unexpected(r);
}

class Plain : public LockKind {
 public:
  std::string_view name() const override { return "plain"; }
  Command acquire(const AttemptArgs& a) const override {
    return Command::plain({"SET", a.keys[0], a.token, "NX", "PX"}).arg(ms(a.ttl));
  }
  Verdict classify_acquire(const Reply& r) const override {
    if (r.is_status("OK")) return yes();
    if (r.type == Reply::Type::nil) return no(NodeState::held_by_other);
    return unexpected(r);
  }
  bool named_wake() const override { return true; }
};

class Multi : public LockKind {
 public:
  std::string_view name() const override { return "multi"; }
  Command acquire(const AttemptArgs& a) const override {
    return Command::call(ScriptId::acquire_multi, a.keys).arg(a.token).arg(ms(a.ttl));
  }
  Verdict classify_acquire(const Reply& r) const override { return one_or_zero(r); }
  bool named_wake() const override { return true; }
};

class Fenced : public Plain {
 public:
  std::string_view name() const override { return "fenced"; }
  Command acquire(const AttemptArgs& a) const override {
    return Command::call(ScriptId::acquire_fenced, {a.keys[0], keys::fence(a.keys[0])})
        .arg(a.token)
        .arg(ms(a.ttl))
        .arg(ms(fence_counter_idle_expiry));
  }
  Verdict classify_acquire(const Reply& r) const override {
    if (r.type == Reply::Type::integer && r.integer > 0)
      return yes(static_cast<std::uint64_t>(r.integer));
    if (r.is_integer(0)) return no(NodeState::held_by_other);
    return unexpected(r);
  }
  bool fenced() const override { return true; }
};

class Read : public LockKind {
 public:
  std::string_view name() const override { return "read"; }
  Command acquire(const AttemptArgs& a) const override {
    const auto& k = a.keys[0];
    return Command::call(ScriptId::acquire_read, {k, keys::readers(k), keys::writer_waiting(k)})
        .arg(a.token)
        .arg(ms(a.ttl));
  }
  Verdict classify_acquire(const Reply& r) const override { return one_or_zero(r); }
  // A reader's token is an entry of the readers set, not the value of the lock key.
  Command extend(const std::vector<std::string>& k, std::string_view token,
                 Millis ttl) const override {
    return Command::call(ScriptId::extend_read, {keys::readers(k[0])}).arg(token).arg(ms(ttl));
  }
  Command release(const std::vector<std::string>& k, std::string_view token, bool wake,
                  std::string_view) const override {
    if (!wake) return Command::call(ScriptId::release_read, {keys::readers(k[0])}).arg(token);
    return Command::call(ScriptId::release_read, {keys::readers(k[0]), keys::waiting(k[0])})
        .arg(token)
        .arg(keys::wake(k[0]));
  }
};

class Write : public LockKind {
 public:
  std::string_view name() const override { return "write"; }
  Command acquire(const AttemptArgs& a) const override {
    const auto& k = a.keys[0];
    return Command::call(ScriptId::acquire_write, {k, keys::readers(k), keys::writer_waiting(k)})
        .arg(a.token)
        .arg(ms(a.ttl))
        .arg(ms(a.writer_mark_ttl))
        .arg(a.waiter);
  }
  Verdict classify_acquire(const Reply& r) const override { return one_or_zero(r); }
  bool has_waiter_id() const override { return true; }
  // A writer that gives up takes its waiting mark back, so readers need not wait it out (a
  // granting node deleted it already).
  std::optional<Command> finish_waiting(const std::vector<std::string>& k, std::string_view waiter,
                                        bool acquired, std::string_view) const override {
    if (acquired) return std::nullopt;
    return Command::call(ScriptId::release, {keys::writer_waiting(k[0]), keys::waiting(k[0])})
        .arg(waiter)
        .arg(keys::wake(k[0]));
  }
};

class Fair : public LockKind {
 public:
  std::string_view name() const override { return "fair"; }
  Command acquire(const AttemptArgs& a) const override {
    const auto& k = a.keys[0];
    const bool registers = !a.registered_token.empty();
    std::vector<std::string> ks{k, keys::queue(k), keys::heartbeats(k), keys::ticket(k)};
    if (registers) ks.push_back(keys::handoff(k));
    auto c = Command::call(ScriptId::acquire_fair, std::move(ks))
                 .arg(a.token)
                 .arg(ms(a.ttl))
                 .arg(static_cast<long long>(a.ticket))
                 .arg(ms(a.heartbeat_ttl))
                 .arg(a.waiter);
    if (registers) c.arg(a.registered_token);
    return c;
  }
  // 2: the key was handed over to the waiter's registered token (by a release, or by a ticket
  // round whose grant was not counted), and this attempt took it: the vote is this reply.
  Verdict classify_acquire(const Reply& r) const override {
    if (!r.is_integer(2)) return one_or_zero(r);
    Verdict v = yes();
    v.detail = "handed over";
    return v;
  }
  // (A key handed over by a release carries the registered token, not the attempt's: it stays.)
  Command rollback(const AttemptArgs& a) const override {
    const auto& k = a.keys[0];
    return Command::call(ScriptId::fair_rollback, {k, keys::queue(k), keys::heartbeats(k)})
        .arg(a.token)
        .arg(static_cast<long long>(a.ticket))
        .arg(a.waiter)
        .arg(ms(a.heartbeat_ttl));
  }
  bool queued() const override { return true; }
  bool has_waiter_id() const override { return true; }
  // Leave the queue everywhere, acquired or not, so nobody waits on a waiter that is done (the
  // engine leaves out the nodes that granted: the grant removed us there). One that gave up
  // gives back a lock that a release handed it there; one that acquired keeps it where it is
  // its lock's token (the token it registered last).
  std::optional<Command> finish_waiting(const std::vector<std::string>& k, std::string_view waiter,
                                        bool acquired, std::string_view token) const override {
    auto c = Command::call(ScriptId::fair_leave, {keys::queue(k[0]), keys::heartbeats(k[0]),
                                                  keys::waiting(k[0]), k[0], keys::handoff(k[0])})
                 .arg(waiter)
                 .arg(keys::wake(k[0]));
    if (acquired) c.arg(token);
    return c;
  }
};

// An election's leader: the plain lock key with its token, and the leader record (keys::leader)
// written, extended and deleted with it by the same scripts; fenced, and the fence is the term
// (docs/design.md, "Leader election").
class Leader : public Fenced {
 public:
  std::string_view name() const override { return "leader"; }
  Command acquire(const AttemptArgs& a) const override {
    const auto& k = a.keys[0];
    return Command::call(ScriptId::acquire_leader, {k, keys::fence(k), keys::leader(k)})
        .arg(a.token)
        .arg(ms(a.ttl))
        .arg(ms(fence_counter_idle_expiry))
        .arg(a.identity);
  }
  Command extend(const std::vector<std::string>& k, std::string_view token,
                 Millis ttl) const override {
    return Command::call(ScriptId::extend_leader, {k[0], keys::leader(k[0])})
        .arg(token)
        .arg(ms(ttl));
  }
  // With `wake`: observers hear of it on the record's channel, and the candidate that has waited
  // longest is named, as a plain release names its waiter.
  Command release(const std::vector<std::string>& k, std::string_view token, bool wake,
                  std::string_view) const override {
    const auto record = keys::leader(k[0]);
    if (!wake) return Command::call(ScriptId::release_leader, {k[0], record}).arg(token);
    return Command::call(ScriptId::release_leader, {k[0], record, keys::waiting(k[0])})
        .arg(token)
        .arg(keys::wake(record))
        .arg(keys::wake(k[0]));
  }
  Command fence_writeback(const std::string& k, std::uint64_t fence,
                          std::string_view token) const override {
    return Command::call(ScriptId::settle_leader, {keys::fence(k), k, keys::leader(k)})
        .arg(static_cast<long long>(fence))
        .arg(ms(fence_counter_idle_expiry))
        .arg(token)
        .arg(keys::wake(keys::leader(k)));
  }
  // A node that raised the counter but no longer holds our token (it expired there) gives no
  // vote: readers count only the records that carry the term.
  Verdict classify_fence_writeback(const Reply& r) const override {
    if (r.is_integer(1)) return yes();
    if (r.is_integer(0)) return no(NodeState::not_held);
    return unexpected(r);
  }
  bool always_writes_back() const override { return true; }
};

const Plain plain_kind;
const Multi multi_kind;
const Fenced fenced_kind;
const Read read_kind;
const Write write_kind;
const Fair fair_kind;
const Leader leader_kind;

}  // namespace

Command LockKind::extend(const std::vector<std::string>& keys, std::string_view token,
                         Millis ttl) const {
  return Command::call(keys.size() > 1 ? ScriptId::extend_multi : ScriptId::extend, keys)
      .arg(token)
      .arg(ms(ttl));
}

// Releases with `wake` publish on the wake channel while a waiter's mark exists (scripts.cpp); a
// single resource's also names the first waiter of its fair queue, if it has one.
Command LockKind::release(const std::vector<std::string>& lock_keys, std::string_view token,
                          bool wake, std::string_view handed_waiter) const {
  if (!wake) {
    // The keys go into a vector with room for the rest (Command::call reserves 5 more): a plain
    // copy of lock_keys would be grown again at once, one allocation more per release.
    std::vector<std::string> k;
    k.reserve(lock_keys.size() + 5);
    k.insert(k.end(), lock_keys.begin(), lock_keys.end());
    return Command::call(lock_keys.size() > 1 ? ScriptId::release_multi : ScriptId::release,
                         std::move(k))
        .arg(token);
  }
  if (lock_keys.size() > 1) {
    std::vector<std::string> k = lock_keys;
    for (const auto& key : lock_keys) k.push_back(keys::waiting(key));
    Command c = Command::call(ScriptId::release_multi, std::move(k)).arg(token);
    for (const auto& key : lock_keys) c.arg(keys::wake(key));
    return c;
  }
  const auto& key = lock_keys[0];
  Command c = Command::call(ScriptId::release, {key, keys::waiting(key), keys::queue(key),
                                                keys::heartbeats(key), keys::handoff(key)})
                  .arg(token)
                  .arg(keys::wake(key));
  if (!handed_waiter.empty()) c.arg(handed_waiter);
  return c;
}

Command LockKind::fence_writeback(const std::string& key, std::uint64_t fence,
                                  std::string_view) const {
  return raise_counter(keys::fence(key), fence, fence_counter_idle_expiry);
}

Verdict LockKind::classify_fence_writeback(const Reply& r) const { return classify_raise(r); }

Command LockKind::rollback(const AttemptArgs& a) const {
  return release(a.keys, a.token, /*wake=*/false);
}

Command mark_waiting(std::string_view key, Millis ttl, std::string_view waiter, long long since) {
  const bool named = !waiter.empty();
  return Command::call(ScriptId::mark_waiting, {keys::waiting(key)})
      .arg(named ? waiter : std::string_view("*"))
      .arg(named ? since : 0)
      .arg(ms(ttl));
}

Command unmark_waiting(std::string_view key, std::string_view waiter) {
  return Command::plain({"ZREM", keys::waiting(key), std::string(waiter)});
}

Verdict LockKind::classify_extend(const Reply& r) {
  if (r.is_integer(1)) return yes();
  if (r.is_integer(0)) return no(NodeState::not_held);
  return unexpected(r);
}

Verdict LockKind::classify_release(const Reply& r) {
  if (r.type == Reply::Type::integer && r.integer > 0) return yes();  // keys deleted
  if (r.is_integer(0)) return no(NodeState::not_held);
  return unexpected(r);
}

std::optional<Command> LockKind::finish_waiting(const std::vector<std::string>&, std::string_view,
                                                bool, std::string_view) const {
  return std::nullopt;
}

bool release_wakes(bool wakes_waiters, BootClock::duration held) noexcept {
  return wakes_waiters || held >= short_hold;
}

const LockKind& kind_for_acquire(const AcquireOptions& o, std::size_t resources) {
  if (o.mode == LockMode::leader) return leader_kind;
  if (o.fair) return fair_kind;
  if (o.mode == LockMode::read) return read_kind;
  if (o.mode == LockMode::write) return write_kind;
  if (o.fence) return fenced_kind;
  return resources > 1 ? static_cast<const LockKind&>(multi_kind) : plain_kind;
}

const LockKind& kind_for_lock(LockMode mode, std::size_t resources) {
  if (mode == LockMode::leader) return leader_kind;
  if (mode == LockMode::read) return read_kind;
  if (mode == LockMode::write) return write_kind;
  return resources > 1 ? static_cast<const LockKind&>(multi_kind) : plain_kind;
}

Command take_ticket(std::string_view key, std::string_view waiter, Millis heartbeat_ttl,
                    std::optional<Millis> mark_ttl, const Registration& reg, bool grant_if_free) {
  std::vector<std::string> k{keys::ticket(key), keys::queue(key), keys::heartbeats(key),
                             std::string(key)};
  if (mark_ttl) {
    k.push_back(keys::waiting(key));
    k.push_back(keys::handoff(key));
  }
  auto c = Command::call(ScriptId::ticket_take, std::move(k)).arg(waiter).arg(ms(heartbeat_ttl));
  if (mark_ttl) {
    c.arg(ms(*mark_ttl)).arg(ms(reg.ttl)).arg(reg.token);
    if (grant_if_free) c.arg("grant");
  }
  return c;
}

Verdict classify_ticket(const Reply& r) {
  if (r.type == Reply::Type::array && r.elements.size() == 2 &&
      r.elements[0].type == Reply::Type::integer && r.elements[0].integer > 0 &&
      r.elements[1].type == Reply::Type::integer && r.elements[1].integer >= 0 &&
      r.elements[1].integer <= 2) {
    Verdict v = yes(static_cast<std::uint64_t>(r.elements[0].integer));
    v.behind = r.elements[1].is_integer(1);
    v.granted = r.elements[1].is_integer(2);
    return v;
  }
  return unexpected(r);
}

Command raise_counter(std::string counter_key, std::uint64_t value, Millis expiry) {
  return Command::call(ScriptId::fence_raise, {std::move(counter_key)})
      .arg(static_cast<long long>(value))
      .arg(ms(expiry));
}

Command settle_ticket(std::string_view key, std::uint64_t ticket, Millis expiry,
                      std::string_view waiter) {
  return Command::call(ScriptId::fence_raise, {keys::ticket(key), keys::queue(key)})
      .arg(static_cast<long long>(ticket))
      .arg(ms(expiry))
      .arg(waiter);
}

Verdict classify_raise(const Reply& r) {
  if (r.is_integer(1)) return yes();
  return unexpected(r);
}

Command read_leader(const std::string& key) {
  return Command::call(ScriptId::read_leader, {key, keys::leader(key)});
}

Command read_status(std::string key, int list_at_most) {
  std::vector<std::string> k{key,
                             keys::readers(key),
                             keys::writer_waiting(key),
                             keys::queue(key),
                             keys::fence(key),
                             keys::ticket(key)};
  std::string channel = keys::wake(key);
  return Command::call(ScriptId::status, std::move(k)).arg(list_at_most).arg(std::move(channel));
}

namespace {

// An error reply's text as it is shown; never empty, so a record with an error always says so
// (the text may be nothing but an argument echo, which server_text() cuts off).
std::string error_reply_text(const Reply& r) {
  std::string shown = server_text(r.str);
  return shown.empty() ? "an error reply without text" : shown;
}

}  // namespace

Verdict unexpected(const Reply& r) {
  if (r.is_error()) return {Vote::failed, NodeState::error, error_reply_text(r), 0};
  return {Vote::failed, NodeState::error, "unexpected reply " + r.describe(), 0};
}

namespace {

// A counter or a time left in a status answer: an integer reply or its decimal text (what Lua
// hands back for a hash field), 0 to 2^63-1 (Redis's counters and times are signed 64-bit).
std::optional<std::uint64_t> status_number(const Reply& r) {
  if (r.type == Reply::Type::integer) {
    if (r.integer < 0) return std::nullopt;
    return static_cast<std::uint64_t>(r.integer);
  }
  if (r.type != Reply::Type::string || r.str.empty() || r.str.size() > 19) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : r.str) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');  // 19 digits fit in 64 bits
  }
  if (v > static_cast<std::uint64_t>(std::numeric_limits<long long>::max())) return std::nullopt;
  return v;
}

}  // namespace

void classify_status(const Reply& rep, NodeKeyState& row) {
  using T = Reply::Type;
  if (rep.is_error()) {
    row.detail = error_reply_text(rep);
    return;
  }
  if (rep.type != T::array || rep.elements.size() != 11) {
    row.detail = "unexpected reply " + rep.describe();
    return;
  }
  const auto& el = rep.elements;
  // The type name is shown as it is (tools print it bare): only a short, plain one.
  if (el[0].type == T::string || el[0].type == T::status) row.type = server_text(el[0].str, 32);
  if (el[1].type == T::string) row.value = el[1].str;
  if (el[2].type == T::integer && el[2].integer >= 0) row.pttl = Millis{el[2].integer};
  if (el[3].type == T::integer && el[3].integer > 0)
    row.reader_count = static_cast<std::size_t>(el[3].integer);
  if (el[4].type == T::array) {
    for (std::size_t i = 0; i + 1 < el[4].elements.size(); i += 2) {
      const auto left = status_number(el[4].elements[i + 1]).value_or(0);
      row.readers.push_back({el[4].elements[i].str, Millis{static_cast<Millis::rep>(left)}});
    }
  }
  if (el[5].type == T::string) row.writer_waiting = el[5].str;
  if (el[6].type == T::integer && el[6].integer > 0)
    row.queue_length = static_cast<std::size_t>(el[6].integer);
  if (el[7].type == T::array) {
    for (std::size_t i = 0; i + 1 < el[7].elements.size(); i += 2) {
      row.queue.push_back(
          {el[7].elements[i].str, status_number(el[7].elements[i + 1]).value_or(0)});
    }
  }
  row.fence = status_number(el[8]);
  row.ticket = status_number(el[9]);
  row.listening_clients = static_cast<std::size_t>(status_number(el[10]).value_or(0));
}

}  // namespace redlock::detail
