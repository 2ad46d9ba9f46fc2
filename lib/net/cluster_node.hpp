#pragma once
// The Redis Cluster vote's pieces (cluster.cpp: the node and its masters; cluster_routed.cpp: one
// command through the cluster). Private to lib/net.

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/restart_guard.hpp"
#include "core/server_text.hpp"
#include "core/slots.hpp"
#include "net/discovering_node.hpp"
#include "redlock/keys.hpp"

namespace redlock::net::cluster {

using detail::ClusterEndpoint;
using detail::Command;
using detail::Reply;

inline constexpr Millis map_interval{1000};  // CLUSTER SLOTS, between redirections
inline constexpr Millis map_soon{20};        // after a redirection
inline constexpr int max_redirects = 5;      // per part of a command
// A master that no longer serves a slot is kept this long (a redirection may name it before the
// map does) before its connections close.
inline constexpr Millis retire_after{5000};

// An exclusion's reason without its " (N ms left)": a taint outlives that count.
std::string without_time_left(const std::string& why);

// One master of the cluster, reached through a standalone node. Its `node` is null for a master
// that core/trust.hpp does not trust: it is never contacted (no credentials, no vote), and
// `untrusted` says why, naming it.
struct Master final : DiscoveredMaster {
  ClusterEndpoint endpoint;
  std::string id;  // its cluster node id, once a map named it
  bool met_after_first_map = false;
  bool promotion_noted = false;  // from its INFO replication (once)
  BootClock::time_point last_in_map{};
  detail::RestartGuard promotion;  // promotions only
  std::string untrusted;

  Master(DiscoveringNode& o, ClusterEndpoint e)
      : DiscoveredMaster(o, host_port(e.host, e.port)), endpoint(std::move(e)) {}

  // NodeHost
  void on_server_identified(int) override {}  // the vote's identity is the cluster's
  // MasterWatcher
  void on_replication(std::optional<bool> promoted) override;

  // Why its answers must not count now (restart guard, promotion), or nullopt.
  [[nodiscard]] std::optional<std::string> exclusion(BootClock::time_point now) const;
};

class ClusterNode final : public DiscoveringNode, Sink {
 public:
  ClusterNode(uv_loop_t* loop, NodeHost& host, int index, TransportMaker transport,
              const NodeAddress& address, const Options& options, NodeMetrics* metrics)
      : DiscoveringNode(loop, host, index, std::move(transport), address, options, metrics,
                        map_interval, {auth_request(address), "AUTH failed: "}),
        ask_slots_(Request::make(Command::plain({"CLUSTER", "SLOTS"}))),
        slots_(detail::cluster_slots, nullptr) {
    seeds_.push_back({address.host, address.port});
    for (const auto& s : address.more_seeds) seeds_.push_back({s.host, s.port});
    map_error_ = "no slot map yet: asking the cluster";
  }

  bool send(const std::shared_ptr<const Request>& req, BootClock::time_point deadline, Sink& sink,
            std::uint32_t tag, BootClock::time_point sent) override;

  std::string last_error() const override { return last_error_.empty() ? map_error_ : last_error_; }
  bool refused() const override { return refused_; }
  const std::string& server_id() const override { return identity_; }
  // Per answer (Result::exclusion): the master that answered decides.
  std::optional<std::string> vote_exclusion(BootClock::time_point) const override {
    return std::nullopt;
  }
  std::optional<std::string> fence_durability_problem() const override {
    for (const auto& [addr, m] : masters_) {
      if (m->retired || !m->node) continue;
      if (auto p = m->node->fence_durability_problem()) return "master " + addr + ": " + *p;
    }
    return std::nullopt;
  }
  // Each master's own connection is probed at its connect and picks its commands' forms itself
  // (Connection::form_of), so a plain lock's release and extend run natively on the masters that
  // can. This is the vote's summary (status -v, doctor): what every master serving slots can
  // run; not probed until each of them is.
  detail::Capabilities capabilities() const override {
    detail::Capabilities all;
    all.probed = all.set_ifeq = all.delifeq = all.delex_ifeq = true;
    bool any = false;
    for (const auto& [addr, m] : masters_) {
      if (m->retired || !m->node || !serves_slots(*m)) continue;
      const auto c = m->node->capabilities();
      if (!c.probed) return {};
      any = true;
      all.scripts = all.scripts && c.scripts;
      all.set_ifeq = all.set_ifeq && c.set_ifeq;
      all.delifeq = all.delifeq && c.delifeq;
      all.delex_ifeq = all.delex_ifeq && c.delex_ifeq;
    }
    return any ? all : detail::Capabilities{};
  }
  // Asked of the master that owns the command's slot (each, for one split by slot), before it
  // is sent: a script on a master that refuses them, a native command forced on one without it.
  std::optional<std::string> cannot_run(const Request& req) const override {
    const auto ask = [&](unsigned slot) -> std::optional<std::string> {
      const Master* m = slots_[slot];
      return m != nullptr && m->node ? m->node->cannot_run(req) : std::nullopt;
    };
    if (auto split = detail::split_by_slot(req.command)) {
      for (const auto& part : *split) {
        if (auto why = ask(part.slot)) return why;
      }
      return std::nullopt;
    }
    const auto slot = detail::command_slot(req.command);
    return slot ? ask(*slot) : std::nullopt;
  }
  std::string key_owner(const std::string& key) const override {
    const unsigned slot = hash_slot(key);
    const Master* m = slots_[slot];
    return "slot " + std::to_string(slot) + " on " + (m != nullptr ? m->address : "(no master)");
  }

  // --- for Routed --------------------------------------------------------------------------------
  // The master at `e` (made and started if new). An empty host is the seed's.
  Master& master_at(ClusterEndpoint e);
  Master* owner_of(unsigned slot) const { return slots_[slot]; }
  Master* any_master() const;
  bool serves_slots(const Master& m) const {
    return std::find(slots_.begin(), slots_.end(), &m) != slots_.end();
  }
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
  // have lost them (see the top of cluster.cpp).
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
  // A part's result, for last_error() and refused(). A master that is down may have been failed
  // over: a fresh map soon.
  void note_result(const Result& r, const Master* m) {
    if (r.kind == Result::Kind::reply) {
      last_error_.clear();
      refused_ = false;
      return;
    }
    if (r.kind == Result::Kind::refused) refused_ = true;
    if (r.kind != Result::Kind::down) return;
    if (m != nullptr) {
      last_error_ = m->node ? "master " + m->address + ": " + std::string(r.error)
                            : std::string(r.error);  // (names it already)
    }
    if (have_map_) ask_map_soon();
  }

 private:
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

  // DiscoveringNode
  void discover() override { connect_topology(); }
  void on_interval() override { on_map_timer(); }
  DiscoveredMaster* wake_master(const std::string& key) const override {
    return slots_[hash_slot(key)];
  }
  void on_discovery_refused(Connection&) override { refused_ = true; }

  // The connection the slot map is asked on: a seed, or a master the last map named, in turn.
  void connect_topology() {
    drop_closed_discovery();
    // The user's seeds first, then every master of the last map (so the vote outlives its seeds),
    // but never one that is not trusted: the topology connection sends the credentials.
    std::vector<ClusterEndpoint> candidates = seeds_;
    for (const auto& [addr, m] : masters_) {
      if (!m->retired && m->node &&
          std::find(candidates.begin(), candidates.end(), m->endpoint) == candidates.end()) {
        candidates.push_back(m->endpoint);
      }
    }
    const auto& e = candidates[next_candidate_++ % candidates.size()];
    asking_on_ = e;
    question_ = &open_discovery(e.host, e.port);
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
    timer_.start(static_cast<std::uint64_t>(map_soon.count()));
  }

  // Every map_interval, and map_soon after a redirection.
  void on_map_timer() {
    if (closing_) return;
    timer_.start(static_cast<std::uint64_t>(map_interval.count()));
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
    const auto now = BootClock::now();
    asked_ = question_->send(ask_slots_, now + options_.connect_timeout, *this, 0, now);
  }

  // Connection::Listener (the topology connection; DiscoveringNode sends its AUTH)
  void on_ready(Connection& c, const std::string&) override {
    if (&c == question_) ask_map();
  }
  void on_dropped(Connection& c, const std::string& why, bool) override {
    if (&c != question_) return;
    asked_ = false;
    next_topology(why);
  }
  // Sink: CLUSTER SLOTS on the topology connection.
  void on_result(int, std::uint32_t, const Result& r) override {
    if (closing_) return;
    asked_ = false;
    if (r.kind != Result::Kind::reply) {
      next_topology(r.kind == Result::Kind::timeout ? "CLUSTER SLOTS timed out"
                                                    : std::string(r.error));
      return;
    }
    std::string error;
    auto map = detail::parse_cluster_slots(*r.reply, error);
    if (!map) {
      next_topology(r.reply->is_error() ? detail::server_text(r.reply->str) : error);
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

  std::shared_ptr<const Request> ask_slots_;
  std::vector<ClusterEndpoint> seeds_;
  std::size_t next_candidate_ = 0;
  ClusterEndpoint asking_on_;
  Connection* question_ = nullptr;
  bool asked_ = false;
  bool soon_ = false;
  std::size_t switches_this_interval_ = 0;
  std::string map_error_, last_error_;
  bool refused_ = false;
  bool have_map_ = false;
  std::string identity_;
  std::set<std::string> replica_ids_;       // every node id a map named as a replica
  std::map<std::string, Master*> masters_;  // the live ones, by host:port (DiscoveringNode owns)
  std::vector<Master*> slots_;              // the owner of each slot, or null
  std::vector<Taint> taints_;               // dropped once over
};

}  // namespace redlock::net::cluster
