// A Redis Cluster as one vote. The node asks the cluster for its slot map (`CLUSTER SLOTS`: at
// start, every second, and soon after a redirection), keeps one standalone node (standalone.cpp:
// its handshake, restart guard, replicated votes and wake-up subscriber) per master, and sends
// each command to the master of its keys' slot:
// - `MOVED slot host:port`: the slot has a new owner: the map is corrected for that slot, a fresh
//   map is asked for, and the command goes to the new owner;
// - `ASK slot host:port`: the slot is being migrated and the key is not here: `ASKING` and the
//   command go to the importing master, once;
// - `TRYAGAIN`, `CLUSTERDOWN` and any other error are the answer (no vote, with the reason);
// all within the command's own deadline (a redirection that runs out of it is a timeout).
// A multi-resource command whose keys live in several slots goes out as one command per slot
// (core/slots.hpp), and the vote is yes only if every part granted.
//
// Promotion: when a slot's master is a server this node knew as a replica, or one that says
// (INFO replication, master_replid2) it was promoted since its process started and that this node
// first met after its first slot map, its answers wait out the restart quarantine from when this
// node learned of it, as a restarted server's do: asynchronous replication may have lost the key.
// A process that starts after the failover cannot tell (neither CLUSTER SLOTS nor INFO carries
// the time of a promotion); replicated votes (Options::min_replicas) are the defence then.
//
// The quarantine follows the keys, not only the server: a slot that leaves a master whose answers
// are excluded (migrated away, MOVED), or whose master is gone from the slot map (failed over),
// carries the exclusion for one quarantine from when this node saw it move, and an answer that an
// ASK from an excluded master led to is excluded as that master's would be. Otherwise the keys a
// promotion lost would be vouched for by another master: a migrating source without the key
// answers ASK, and the importing master grants.

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "core/restart_guard.hpp"
#include "core/slots.hpp"
#include "net/node.hpp"
#include "net/pending.hpp"
#include "net/uv.hpp"
#include "redlock/keys.hpp"

namespace redlock::net {
namespace {

using detail::ClusterEndpoint;
using detail::Command;
using detail::Reply;

constexpr Millis map_interval{1000};  // CLUSTER SLOTS, between redirections
constexpr Millis map_soon{20};        // after a redirection
constexpr int max_redirects = 5;      // per part of a command
// A master that no longer serves a slot is kept this long (a redirection may name it before the
// map does) before its connections close.
constexpr Millis retire_after{5000};

// An exclusion's reason without its " (N ms left)": a taint outlives that count.
std::string without_time_left(const std::string& why) {
  const auto at = why.rfind(" (");
  return at != std::string::npos && why.ends_with(" ms left)") ? why.substr(0, at) : why;
}

std::string host_port(const std::string& host, int port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

// For the answers nobody waits for (ASKING, a rollback).
class IgnoreSink final : public Sink {
 public:
  void on_result(int, std::uint32_t, const Result&) override {}
  void on_done() override {}
};
IgnoreSink ignore_sink;

class ClusterNode;

// One master of the cluster, reached through a standalone node.
struct Master final : NodeHost, MasterWatcher {
  ClusterNode& owner;
  ClusterEndpoint endpoint;
  std::string address;  // host:port
  std::string id;       // its cluster node id, once a map named it
  bool met_after_first_map = false;
  bool promotion_noted = false;  // from its INFO replication (once)
  bool closed = false;
  bool retired = false;
  BootClock::time_point last_in_map{};
  detail::RestartGuard promotion;  // promotions only
  std::unique_ptr<Node> node;

  Master(ClusterNode& o, ClusterEndpoint e) : owner(o), endpoint(std::move(e)) {
    address = host_port(endpoint.host, endpoint.port);
  }

  // NodeHost
  void log(LogLevel level, const std::string& message) override;
  void on_node_closed(int) override;
  void on_server_identified(int) override {}  // the vote's identity is the cluster's
  Millis restart_quarantine() const override;
  void on_wake(int index, const std::string& lock_key, const Wake& wake) override;
  // MasterWatcher
  void on_replication(std::optional<bool> promoted) override;

  // Why its answers must not count now (restart guard, promotion), or nullopt.
  [[nodiscard]] std::optional<std::string> exclusion(BootClock::time_point now) const;
};

class ClusterNode final : public Node, Connection::Listener, Sink {
 public:
  ClusterNode(uv_loop_t* loop, NodeHost& host, int index, TransportMaker transport,
              const NodeAddress& address, const Options& options, NodeMetrics* metrics)
      : loop_(loop),
        host_(host),
        index_(index),
        transport_(std::move(transport)),
        address_(address),
        name_(address.to_string()),
        options_(options),
        metrics_(metrics),
        ask_slots_(Request::make(Command::plain({"CLUSTER", "SLOTS"}))),
        map_timer_(loop, [this] { on_map_timer(); }),
        waiting_(loop, index, [this] { return map_error_; }),
        slots_(detail::cluster_slots, nullptr) {
    seeds_.push_back({address.host, address.port});
    for (const auto& s : address.more_seeds) seeds_.push_back({s.host, s.port});
    if (!address_.password.empty()) {
      Command auth = Command::plain({"AUTH"});
      if (!address_.user.empty()) auth.arg(address_.user);
      auth.arg(address_.password);
      auth_ = Request::make(std::move(auth));
    }
    map_error_ = "no slot map yet: asking the cluster";
  }

  void start() override {
    map_timer_.unref();
    connect_topology();
    map_timer_.start(static_cast<std::uint64_t>(map_interval.count()));
  }

  void close() override {
    if (closing_) return;
    closing_ = true;
    map_timer_.close();
    waiting_.close();
    for (auto& t : topology_) t.conn->close();
    for (auto& [addr, m] : masters_) m->node->close();
    finish_if_closed();  // (retired masters are closing already)
  }

  bool send(const std::shared_ptr<const Request>& req, Millis timeout, Sink& sink,
            std::uint32_t tag, BootClock::time_point sent) override;

  const std::string& name() const override { return name_; }
  std::string last_error() const override { return last_error_.empty() ? map_error_ : last_error_; }
  bool refused() const override { return refused_; }
  std::string server_id() const override { return identity_; }
  // Per answer (Result::exclusion): the master that answered decides.
  std::optional<std::string> vote_exclusion(BootClock::time_point) const override {
    return std::nullopt;
  }
  void subscribe(const std::string& lock_key) override {
    auto& s = subscriptions_[lock_key];
    if (++s.users == 1) resubscribe(lock_key, s);
  }
  void unsubscribe(const std::string& lock_key) override {
    auto it = subscriptions_.find(lock_key);
    if (it == subscriptions_.end()) return;
    if (--it->second.users == 0) {
      if (Master* m = it->second.on) m->node->unsubscribe(lock_key);
      subscriptions_.erase(it);
    }
  }
  std::optional<std::string> fence_durability_problem() const override {
    for (const auto& [addr, m] : masters_) {
      if (m->retired) continue;
      if (auto p = m->node->fence_durability_problem()) return "master " + addr + ": " + *p;
    }
    return std::nullopt;
  }
  std::string key_owner(const std::string& key) const override {
    const unsigned slot = hash_slot(key);
    const Master* m = slots_[slot];
    return "slot " + std::to_string(slot) + " on " + (m != nullptr ? m->address : "(no master)");
  }

  // --- for Master and Routed -------------------------------------------------------------------
  NodeHost& host() { return host_; }
  const std::string& display() const { return name_; }
  int index() const { return index_; }
  bool closing() const { return closing_; }
  void finish_if_closed();
  // The master at `e` (made and started if new). An empty host is the seed's.
  Master& master_at(ClusterEndpoint e);
  Master* owner_of(unsigned slot) const { return slots_[slot]; }
  Master* any_master() const;
  // A MOVED answer from `from`: the slot is `m`'s now (and excluded as long as `from`'s answers
  // would be, for one quarantine); a fresh map soon.
  void moved(unsigned slot, Master& m, const Master* from) {
    const auto now = BootClock::now();
    if (from != nullptr && from != &m) {
      if (auto why = from->exclusion(now))
        taint(slot, slot, now, from->address, without_time_left(*why));
    }
    slots_[slot] = &m;
    ask_map_soon();
  }
  // Why answers about keys of `slot` must not count at `now`: they came from a master that may
  // have lost them (see the top of this file).
  [[nodiscard]] std::optional<std::string> slot_exclusion(unsigned slot,
                                                          BootClock::time_point now) const {
    for (const auto& t : taints_) {
      if (slot >= t.first && slot <= t.last && now < t.until) {
        return "restart guard: slot " + std::to_string(slot) + " came from " + t.why + " (" +
               std::to_string(std::chrono::ceil<Millis>(t.until - now).count()) + " ms left)";
      }
    }
    return std::nullopt;
  }
  void note_failure(const Result& r, const Master* m) {
    if (r.kind == Result::Kind::refused) refused_ = true;
    if (r.kind == Result::Kind::down && m != nullptr)
      last_error_ = "master " + m->address + ": " + std::string(r.error);
  }
  bool first_map_seen() const { return have_map_; }

 private:
  struct Subscription {
    int users = 0;
    Master* on = nullptr;  // the master it is subscribed on
  };
  struct TopologyLink {
    std::unique_ptr<Connection> conn;
    bool closed = false;
  };
  // Slots [first, last] whose keys came from a master that may have lost them.
  struct Taint {
    unsigned first = 0, last = 0;
    BootClock::time_point until;
    std::string why;
  };

  // Slots [first, last] left `from` at `now` for the reason `why`: their answers wait out one
  // quarantine (none with a quarantine of 0: the guard is off).
  void taint(unsigned first, unsigned last, BootClock::time_point now, const std::string& from,
             const std::string& why) {
    const Millis q = host_.restart_quarantine();
    if (q <= Millis{0}) return;
    taints_.push_back({first, last, now + q, "master " + from + " (" + why + ")"});
    host_.log(LogLevel::warning, name_ + ": slots " + std::to_string(first) + "-" +
                                     std::to_string(last) + " left master " + from + " (" + why +
                                     "): their answers wait out the restart quarantine");
  }

  void resubscribe(const std::string& key, Subscription& s) {
    Master* owner = slots_[hash_slot(key)];
    if (owner == s.on) return;
    if (s.on != nullptr) s.on->node->unsubscribe(key);
    s.on = owner;
    if (owner != nullptr) owner->node->subscribe(key);
  }

  ConnectionSettings topology_settings() const {
    ConnectionSettings s;
    s.connect_timeout = options_.connect_timeout;
    s.reconnect_min = options_.reconnect_min;
    s.reconnect_max = options_.reconnect_max;
    s.stall_limit = std::max(Millis{1000}, options_.connect_timeout * 4);
    s.drain_limit = Millis{0};
    return s;
  }

  // The connection the slot map is asked on: a seed, or a master the last map named, in turn.
  void connect_topology() {
    std::erase_if(topology_, [](const TopologyLink& l) { return l.closed; });
    std::vector<ClusterEndpoint> candidates = seeds_;
    for (const auto& [addr, m] : masters_) {
      if (!m->retired &&
          std::find(candidates.begin(), candidates.end(), m->endpoint) == candidates.end()) {
        candidates.push_back(m->endpoint);
      }
    }
    const auto& e = candidates[next_candidate_++ % candidates.size()];
    Endpoint ep;
    ep.host = e.host;
    ep.port = e.port;
    asking_on_ = e;
    TopologyLink link;
    link.conn = std::make_unique<Connection>(loop_, static_cast<Connection::Listener&>(*this),
                                             index_, ep, transport_(e.host), topology_settings());
    question_ = link.conn.get();
    topology_.push_back(std::move(link));
    question_->start();
    asked_ = false;
  }

  void next_topology(const std::string& why) {
    if (closing_) return;
    map_error_ = "slot map from " + host_port(asking_on_.host, asking_on_.port) + ": " + why;
    host_.log(LogLevel::debug, name_ + ": " + map_error_);
    if (switches_this_interval_ > seeds_.size() + masters_.size()) return;
    ++switches_this_interval_;
    if (question_ != nullptr) question_->close();
    question_ = nullptr;
    connect_topology();
  }

  void ask_map_soon() {
    if (closing_ || soon_) return;
    soon_ = true;
    map_timer_.start(static_cast<std::uint64_t>(map_soon.count()));
  }

  // Every map_interval, and map_soon after a redirection.
  void on_map_timer() {
    if (closing_) return;
    map_timer_.start(static_cast<std::uint64_t>(map_interval.count()));
    if (soon_) {
      soon_ = false;
      ask_map();
      return;
    }
    switches_this_interval_ = 0;
    retire_unused();
    if (question_ != nullptr && !question_->ready() && !asked_) {
      next_topology(question_->last_error().empty() ? "not connected" : question_->last_error());
      return;
    }
    ask_map();
  }

  void ask_map() {
    if (closing_ || question_ == nullptr || asked_ || !question_->ready()) return;
    asked_ = question_->send(ask_slots_, options_.connect_timeout, *this, 0, BootClock::now());
  }

  // Connection::Listener (the topology connection)
  void on_connecting(Connection& c) override {
    if (auth_) (void)c.send(auth_, options_.connect_timeout, *this, 1, BootClock::now());
  }
  void on_ready(Connection& c, const std::string&) override {
    if (&c == question_) ask_map();
  }
  void on_dropped(Connection& c, const std::string& why, bool) override {
    if (&c != question_) return;
    asked_ = false;
    next_topology(why);
  }
  void on_closed(Connection& c) override {
    for (auto& l : topology_) {
      if (l.conn.get() == &c) l.closed = true;
    }
    finish_if_closed();
  }

  // Sink: CLUSTER SLOTS (tag 0) and AUTH (tag 1) on the topology connection.
  void on_result(int, std::uint32_t tag, const Result& r) override {
    if (closing_) return;
    if (tag == 1) {
      if (r.kind == Result::Kind::reply && r.reply->is_error() && question_ != nullptr) {
        refused_ = true;
        question_->drop("AUTH failed: " + r.reply->str, Connection::Failure::refused);
      }
      return;
    }
    asked_ = false;
    if (r.kind != Result::Kind::reply) {
      next_topology(r.kind == Result::Kind::timeout ? "CLUSTER SLOTS timed out"
                                                    : std::string(r.error));
      return;
    }
    std::string error;
    auto map = detail::parse_cluster_slots(*r.reply, error);
    if (!map) {
      next_topology(r.reply->is_error() ? r.reply->str : error);
      return;
    }
    if (map->empty()) {
      map_error_ = "the cluster serves no slots (CLUSTER SLOTS is empty)";
      return;
    }
    apply(*map, r.at);
  }
  void on_done() override {}

  void apply(const std::vector<detail::SlotRange>& map, BootClock::time_point at);
  void taint_moved_slots(const std::vector<Master*>& owners, BootClock::time_point at);
  void retire_unused();

  uv_loop_t* loop_;
  NodeHost& host_;
  int index_;
  TransportMaker transport_;
  NodeAddress address_;
  std::string name_;
  const Options& options_;
  NodeMetrics* metrics_;
  std::shared_ptr<const Request> ask_slots_, auth_;
  std::vector<ClusterEndpoint> seeds_;
  std::size_t next_candidate_ = 0;
  ClusterEndpoint asking_on_;
  Connection* question_ = nullptr;
  bool asked_ = false;
  bool soon_ = false;
  std::size_t switches_this_interval_ = 0;
  std::vector<TopologyLink> topology_;
  std::string map_error_, last_error_;
  bool refused_ = false;
  bool have_map_ = false;
  std::string identity_;
  std::set<std::string> replica_ids_;  // every node id a map named as a replica
  std::map<std::string, Subscription> subscriptions_;
  bool closing_ = false;
  bool finished_ = false;
  Timer map_timer_;
  PendingCommands waiting_;                                 // commands sent before the first map
  std::map<std::string, std::unique_ptr<Master>> masters_;  // by host:port
  std::vector<std::unique_ptr<Master>> retired_;            // closing; dropped once closed
  std::vector<Master*> slots_;                              // the owner of each slot, or null
  std::vector<Taint> taints_;                               // dropped once over
};

// --- Master ---------------------------------------------------------------------------------

void Master::log(LogLevel level, const std::string& message) {
  owner.host().log(level, owner.display() + ": " + message);
}
void Master::on_node_closed(int) {
  closed = true;
  owner.finish_if_closed();
}
Millis Master::restart_quarantine() const { return owner.host().restart_quarantine(); }
void Master::on_wake(int index, const std::string& lock_key, const Wake& wake) {
  if (!retired) owner.host().on_wake(index, lock_key, wake);
}
void Master::on_replication(std::optional<bool> promoted_since_start) {
  // A master met only after the first map (through a redirection or a newer map) that was a
  // replica when its process started has been promoted, at the latest now.
  if (met_after_first_map && promoted_since_start.value_or(false) && !promotion_noted) {
    promotion_noted = true;
    promotion.promoted(BootClock::now(),
                       "master " + address + " was promoted from replica (a cluster failover)");
    log(LogLevel::warning, address +
                               " was promoted from replica: its answers wait out the restart "
                               "quarantine");
  }
}
std::optional<std::string> Master::exclusion(BootClock::time_point now) const {
  if (auto why = promotion.exclusion(now, /*durable=*/false, restart_quarantine())) return why;
  if (auto why = node->vote_exclusion(now)) return "master " + address + ": " + *why;
  return std::nullopt;
}

// --- one command through the cluster ---------------------------------------------------------

// A command sent through the cluster: its parts (the whole command, or one per slot), their
// redirections, and the one result its caller hears. Deletes itself once every part's connection
// is done with it.
class Routed final : public Sink {
 public:
  Routed(ClusterNode& node, std::shared_ptr<const Request> req, Millis timeout, Sink& outer,
         std::uint32_t tag, BootClock::time_point sent)
      : node_(node),
        req_(std::move(req)),
        deadline_(BootClock::now() + timeout),
        outer_(outer),
        tag_(tag),
        sent_(sent) {}

  // False when no part could be sent: then the caller hears nothing (send() fails).
  bool start() {
    if (auto split = detail::split_by_slot(req_->command)) {
      split_ = std::move(*split);
      for (const auto& sp : split_) add_part(sp.slot, Request::make(sp.command, req_->gives_vote));
    } else {
      const auto slot = detail::command_slot(req_->command);
      add_part(slot.value_or(0), req_);
      keyless_ = !slot;
    }
    bool any = false;
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      Master* m = node_.owner_of(parts_[i].slot);
      if (keyless_ && m == nullptr) m = node_.any_master();
      any = dispatch(i, m, /*asking=*/false) || any;
    }
    return any;
  }

  void on_result(int, std::uint32_t i, const Result& r) override {
    Part& p = parts_[i];
    if (r.kind == Result::Kind::reply && r.reply->is_error() && !node_.closing()) {
      if (auto red = detail::parse_redirect(r.reply->str);
          red && p.redirects < max_redirects && !(red->ask && p.asked)) {
        ++p.redirects;
        ClusterEndpoint to = red->to;
        if (to.host.empty()) to.host = p.target->endpoint.host;
        Master& m = node_.master_at(to);
        if (red->ask) {
          p.asked = true;
          // The excluded source has no key: the importing master's answer is as good as its.
          if (auto why = p.target->exclusion(r.at)) {
            p.inherited = "restart guard: ASK from master " + p.target->address + ": " + *why;
          }
        } else {
          node_.moved(static_cast<unsigned>(red->slot), m, p.target);
        }
        if (!dispatch(i, &m, red->ask)) maybe_deliver();
        return;
      }
    }
    store(p, r);
    maybe_deliver();
  }

  void on_done() override {
    if (--outstanding_ > 0) return;
    if (!delivered_) {
      maybe_deliver();  // every part has its answer by now; this goes away with it
      return;
    }
    Sink& outer = outer_;
    delete this;
    outer.on_done();
  }

 private:
  struct Part {
    unsigned slot = 0;
    std::shared_ptr<const Request> req;
    Master* target = nullptr;
    int redirects = 0;
    bool asked = false;
    bool answered = false;
    Result::Kind kind = Result::Kind::down;
    std::optional<Reply> reply;
    std::string error, exclusion;
    std::string inherited;  // the exclusion of the master whose ASK led here
    BootClock::time_point at{};
    std::chrono::microseconds latency{0};
  };

  void add_part(unsigned slot, std::shared_ptr<const Request> req) {
    Part p;
    p.slot = slot;
    p.req = std::move(req);
    parts_.push_back(std::move(p));
  }

  // Sends part i to `m` (after ASKING when `asking`); false, with the part answered "down" or
  // "timeout", when it could not go.
  bool dispatch(std::size_t i, Master* m, bool asking) {
    Part& p = parts_[i];
    const auto now = BootClock::now();
    const auto left = std::chrono::floor<Millis>(deadline_ - now);
    Result r;
    r.at = now;
    r.latency = std::chrono::duration_cast<std::chrono::microseconds>(now - sent_);
    std::string why;
    if (left <= Millis{0}) {
      r.kind = Result::Kind::timeout;  // redirections used up the deadline
    } else if (m == nullptr) {
      why = "slot " + std::to_string(p.slot) + " has no master in the slot map";
      r.kind = Result::Kind::down;
    } else {
      static const auto asking_req = Request::make(Command::plain({"ASKING"}));
      if (asking) (void)m->node->send(asking_req, left, ignore_sink, 0, now);
      if (m->node->send(p.req, left, *this, static_cast<std::uint32_t>(i), sent_)) {
        p.target = m;
        ++outstanding_;
        return true;
      }
      why = "master " + m->address + ": " +
            (m->node->last_error().empty() ? "not connected" : m->node->last_error());
      r.kind = Result::Kind::down;
    }
    r.error = why;
    p.target = m;
    store(p, r);
    return false;
  }

  void store(Part& p, const Result& r) {
    p.answered = true;
    p.kind = r.kind;
    p.error = std::string(r.error);
    p.at = r.at;
    p.latency = r.latency;
    if (r.kind == Result::Kind::reply) {
      p.reply = *r.reply;
      if (p.target != nullptr) {
        if (auto why = p.target->exclusion(r.at)) p.exclusion = std::move(*why);
      }
      if (p.exclusion.empty()) {
        if (auto why = node_.slot_exclusion(p.slot, r.at)) p.exclusion = std::move(*why);
      }
      if (p.exclusion.empty()) p.exclusion = p.inherited;
    }
    node_.note_failure(r, p.target);
  }

  void maybe_deliver() {
    if (delivered_) return;
    for (const auto& p : parts_) {
      if (!p.answered) return;
    }
    delivered_ = true;
    Result out;
    const Part* last = &parts_[0];
    const Part* failed = nullptr;
    for (const auto& p : parts_) {
      if (p.at > last->at) last = &p;
      if (failed == nullptr && p.kind != Result::Kind::reply) failed = &p;
    }
    out.at = last->at;
    out.latency = last->latency;
    Reply combined;
    if (failed != nullptr) {
      out.kind = failed->kind;
      out.error = failed->error;
    } else {
      out.kind = Result::Kind::reply;
      if (parts_.size() == 1) {
        out.reply = &*parts_[0].reply;
      } else {
        std::vector<const Reply*> replies;
        for (const auto& p : parts_) replies.push_back(&*p.reply);
        combined = detail::combine_parts(req_->command, replies);
        out.reply = &combined;
      }
      for (const auto& p : parts_) {
        if (!p.exclusion.empty()) {
          out.exclusion = p.exclusion;
          break;
        }
      }
    }
    roll_back_partial_grant(failed != nullptr || !out.reply->is_integer(1));
    outer_.on_result(node_.index(), tag_, out);
    if (outstanding_ == 0) {
      // Called from on_done(): no connection will call back any more.
      Sink& outer = outer_;
      delete this;
      outer.on_done();
    }
  }

  // An acquire_multi split over slots that is not a yes on the whole: the parts that granted are
  // taken back here (their keys carry our token), as one script on one server would have set none.
  void roll_back_partial_grant(bool refused) {
    if (!refused || split_.empty() || *req_->command.script != detail::ScriptId::acquire_multi)
      return;
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      const Part& p = parts_[i];
      if (p.kind != Result::Kind::reply || !p.reply->is_integer(1) || p.target == nullptr) continue;
      auto undo = Request::make(detail::rollback(req_->command, split_[i]));
      (void)p.target->node->send(undo, Millis{1000}, ignore_sink, 0, BootClock::now());
    }
  }

  ClusterNode& node_;
  std::shared_ptr<const Request> req_;
  BootClock::time_point deadline_;
  Sink& outer_;
  std::uint32_t tag_;
  BootClock::time_point sent_;
  std::vector<detail::SlotPart> split_;  // empty: the command goes whole
  std::vector<Part> parts_;
  bool keyless_ = false;
  int outstanding_ = 0;  // sends whose on_done() has not come
  bool delivered_ = false;
};

// --- ClusterNode ------------------------------------------------------------------------------

bool ClusterNode::send(const std::shared_ptr<const Request>& req, Millis timeout, Sink& sink,
                       std::uint32_t tag, BootClock::time_point sent) {
  if (closing_) return false;
  if (!have_map_) {
    waiting_.push(req, timeout, sink, tag, sent);
    return true;
  }
  auto* routed = new Routed(*this, req, timeout, sink, tag, sent);
  if (!routed->start()) {
    delete routed;
    return false;
  }
  return true;
}

Master* ClusterNode::any_master() const {
  for (const auto& [addr, m] : masters_) {
    if (!m->retired) return m.get();
  }
  return nullptr;
}

Master& ClusterNode::master_at(ClusterEndpoint e) {
  if (e.host.empty()) e.host = asking_on_.host;
  const std::string key = host_port(e.host, e.port);
  if (auto it = masters_.find(key); it != masters_.end()) return *it->second;
  auto m = std::make_unique<Master>(*this, e);
  m->met_after_first_map = have_map_;
  m->last_in_map = BootClock::now();
  NodeAddress a = address_;
  a.kind = NodeAddress::Kind::server;
  a.host = e.host;
  a.port = e.port;
  a.more_seeds.clear();
  m->node = make_standalone_node(loop_, *m, index_, transport_, a, options_, metrics_, m.get());
  Master& ref = *m;
  masters_.emplace(key, std::move(m));
  if (closing_) {
    ref.node->close();
  } else {
    ref.node->start();
  }
  return ref;
}

void ClusterNode::apply(const std::vector<detail::SlotRange>& map, BootClock::time_point at) {
  const bool first = !have_map_;
  std::vector<Master*> owners(detail::cluster_slots, nullptr);
  std::set<std::string> replicas;
  for (const auto& range : map) {
    Master& m = master_at(range.master);
    m.last_in_map = at;
    if (!range.master_id.empty()) {
      if (!first && replica_ids_.count(range.master_id) != 0) {
        m.promotion.promoted(
            at, "master " + m.address + " was a replica in the last slot map (a cluster failover)");
        host_.log(LogLevel::warning, name_ + ": " + m.address +
                                         " was promoted from replica: its answers wait out the "
                                         "restart quarantine");
      }
      m.id = range.master_id;
    }
    for (int s = range.first; s <= range.last; ++s) owners[static_cast<std::size_t>(s)] = &m;
    replicas.insert(range.replica_ids.begin(), range.replica_ids.end());
  }
  if (!first) taint_moved_slots(owners, at);
  slots_ = std::move(owners);
  replica_ids_ = std::move(replicas);
  map_error_.clear();
  for (auto& [key, sub] : subscriptions_) resubscribe(key, sub);
  if (!first) return;
  have_map_ = true;
  if (const Master* m = slots_[0]; m != nullptr) {
    identity_ = "cluster " + (m->id.empty() ? m->address : m->id);
    host_.on_server_identified(index_);
  }
  waiting_.release([this](const PendingCommands::Command& c, Millis left) {
    return send(c.req, left, *c.sink, c.tag, c.sent);
  });
}

// A new map moves slots from `slots_` to `owners`: those that leave a master whose answers are
// excluded now, or a master that serves no slot any more (failed over: killed, or a replica now),
// are tainted. A migration between live masters taints nothing.
void ClusterNode::taint_moved_slots(const std::vector<Master*>& owners, BootClock::time_point at) {
  const std::set<const Master*> serving(owners.begin(), owners.end());
  std::map<const Master*, std::optional<std::string>> why_of;  // per old owner, asked once
  auto reason = [&](const Master* old) -> const std::optional<std::string>& {
    auto it = why_of.find(old);
    if (it != why_of.end()) return it->second;
    std::optional<std::string> why = old->exclusion(at);
    if (why) why = without_time_left(*why);
    if (!why && serving.count(old) == 0) why = "it serves no slot any more: a failover";
    return why_of.emplace(old, std::move(why)).first->second;
  };
  // Consecutive slots with the same old owner and reason become one range.
  constexpr auto n = static_cast<unsigned>(detail::cluster_slots);
  unsigned start = 0;
  const Master* run_owner = nullptr;
  for (unsigned s = 0; s <= n; ++s) {  // one past the end closes the last range
    const Master* old = s < n ? slots_[s] : nullptr;
    const bool moved = old != nullptr && owners[s] != old && reason(old).has_value();
    if (run_owner != nullptr && (!moved || old != run_owner)) {
      taint(start, s - 1, at, run_owner->address, *reason(run_owner));
      run_owner = nullptr;
    }
    if (moved && run_owner == nullptr) {
      start = s;
      run_owner = old;
    }
  }
}

void ClusterNode::retire_unused() {
  std::set<const Master*> serving(slots_.begin(), slots_.end());
  const auto now = BootClock::now();
  std::erase_if(taints_, [now](const Taint& t) { return now >= t.until; });
  for (auto it = masters_.begin(); it != masters_.end();) {
    Master& m = *it->second;
    if (serving.count(&m) != 0 || now - m.last_in_map < retire_after) {
      ++it;
      continue;
    }
    host_.log(LogLevel::debug, name_ + ": " + m.address + " serves no slot any more");
    m.retired = true;
    for (auto& [key, sub] : subscriptions_) {
      if (sub.on == &m) sub.on = nullptr;  // (resubscribed below, on the slot's owner)
    }
    m.node->close();
    retired_.push_back(std::move(it->second));
    it = masters_.erase(it);
  }
  std::erase_if(retired_, [](const std::unique_ptr<Master>& m) { return m->closed; });
  for (auto& [key, sub] : subscriptions_) resubscribe(key, sub);
}

void ClusterNode::finish_if_closed() {
  if (!closing_ || finished_) return;
  for (const auto& l : topology_) {
    if (!l.closed) return;
  }
  for (const auto& [addr, m] : masters_) {
    if (!m->closed) return;
  }
  for (const auto& m : retired_) {
    if (!m->closed) return;
  }
  finished_ = true;
  host_.on_node_closed(index_);
}

}  // namespace

std::unique_ptr<Node> make_cluster_node(uv_loop_t* loop, NodeHost& host, int index,
                                        TransportMaker transport, const NodeAddress& address,
                                        const Options& options, NodeMetrics* metrics) {
  return std::make_unique<ClusterNode>(loop, host, index, std::move(transport), address, options,
                                       metrics);
}

}  // namespace redlock::net
