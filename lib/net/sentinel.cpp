// A Sentinel-managed master as a node. It asks every sentinel listed `SENTINEL MASTER <name>` (at
// start, every second, and at once when a sentinel publishes +switch-master for the name), and
// talks to the master a majority of the sentinels that answered name (core/trust.hpp) through a
// standalone node (standalone.cpp) that it replaces when the master changes. One sentinel that
// lies, or a path that rewrites a plaintext answer, cannot move the vote alone. Sentinels that
// disagree: no vote (the current master's answers are excluded with what each one said). The
// sentinels get the address's sentinel credentials (AUTH on both connections to each).
//
// The master is a server the user did not name: it gets the vote's credentials and counts as a
// vote only when core/trust.hpp trusts it (the user's hosts, the allow-list, or verified TLS
// against a name the user gave). Otherwise it is never contacted, and the vote is down with the
// reason.
//
// A failover is the hazard the Redlock documentation warns about: the promoted replica may never
// have received a lock key (replication is asynchronous), so its votes wait out the restart
// quarantine from the promotion, as a restarted server's do. The promotion time comes from what
// Sentinel knows, so a process that starts after the failover (every redlock-cli call) holds the
// guard too:
// - a switch this node saw itself (the address or the config epoch changed): promoted then;
// - a master whose `INFO replication` shows it was a replica (master_replid2 not zero): promoted
//   `role-reported-time` before Sentinel answered, or later (a sentinel learns of a failover when
//   it happens or after; its own restart resets that time too, which only makes the guard
//   longer). A master that never was a replica since its process started gets no quarantine
//   from this (a restart is the restart guard's business, --min-uptime for a fresh process).
// Until the master's INFO replication has been read, its votes do not count.

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <vector>

#include "core/info.hpp"
#include "core/restart_guard.hpp"
#include "core/server_text.hpp"
#include "net/discovering_node.hpp"

namespace redlock::net {
namespace {

using detail::Command;
using detail::Reply;

constexpr Millis poll_interval{1000};  // SENTINEL MASTER, between +switch-master messages
// How long after Sentinel's switch another client of the same sentinels may still use the old
// master: its question every poll interval, and one more if that one failed.
constexpr Millis follow_window = 2 * poll_interval;

// Tags of the sentinel connections' commands: the sentinel's index times tag_kinds, plus the kind.
enum : std::uint32_t { tag_master, tag_subscribe, tag_kinds };

// AUTH to the sentinels, with the address's sentinel credentials; null without them.
std::shared_ptr<const Request> sentinel_auth(const NodeAddress& address) {
  if (address.sentinel_password.empty()) return nullptr;
  Command auth = Command::plain({"AUTH"});
  if (!address.sentinel_user.empty()) auth.arg(address.sentinel_user);
  auth.arg(address.sentinel_password);
  return Request::make(std::move(auth));
}

class SentinelNode final : public DiscoveringNode, Sink, Connection::PushHandler {
 public:
  SentinelNode(uv_loop_t* loop, NodeHost& host, int index, TransportMaker transport,
               const NodeAddress& address, const Options& options, NodeMetrics* metrics)
      : DiscoveringNode(
            loop, host, index, std::move(transport), address, options, metrics, poll_interval,
            {sentinel_auth(address), "AUTH to sentinel failed: ", &NodeAddress::sentinel_password}),
        ask_master_(Request::make(Command::plain({"SENTINEL", "MASTER", address.master_name}))),
        subscribe_(Request::make(Command::plain({"SUBSCRIBE", "+switch-master"}))) {
    links_.push_back(std::make_unique<SentinelLink>(NodeAddress::Host{address.host, address.port}));
    for (const auto& s : address.more_sentinels)
      links_.push_back(std::make_unique<SentinelLink>(s));
    resolve_error_ = "no master known yet: asking the sentinels";
  }

  // Before the first master is known (a fresh process: the sentinels are being asked), commands
  // wait here, within their deadline, and go to the master once the sentinels have named it. When
  // the last answers named none that can be used (disagreement, an untrusted master), at once:
  // no vote.
  bool send(const std::shared_ptr<const Request>& req, BootClock::time_point deadline, Sink& sink,
            std::uint32_t tag, BootClock::time_point sent) override {
    if (Master* m = current()) return m->node->send(req, deadline, sink, tag, sent);
    if (closing_ || !refusal_.empty()) return false;
    waiting_.push(req, deadline, sink, tag, sent);
    return true;
  }

  std::string last_error() const override {
    const Master* m = current();
    if (m == nullptr) return resolve_error_;
    return "master " + m->address + ": " + m->node->last_error();
  }
  bool refused() const override {
    const Master* m = current();
    if (m != nullptr) return m->node->refused();
    // No master known because every sentinel refused our credentials.
    return std::all_of(links_.begin(), links_.end(), [](const auto& l) {
      return l->question->last_failure() == Connection::Failure::refused;
    });
  }
  const std::string& server_id() const override {
    static const std::string unknown;
    const Master* m = current();
    return m != nullptr ? m->node->server_id() : unknown;
  }
  std::optional<std::string> vote_exclusion(BootClock::time_point now) const override {
    const Master* m = current();
    if (m == nullptr) return "no master known";
    if (!refusal_.empty()) return refusal_;
    if (!m->replication_read) {
      return "master " + m->address + ": its INFO replication was not read yet";
    }
    if (m->not_master) return "master " + m->address + " does not say role:master";
    if (auto why = guard_.exclusion(now, options_.durable_nodes, host_.restart_quarantine())) {
      return why;
    }
    return m->node->vote_exclusion(now);
  }
  std::string key_owner(const std::string&) const override {
    const Master* m = current();
    return m != nullptr ? "master " + m->address : std::string();
  }
  std::optional<std::string> fence_durability_problem() const override {
    const Master* m = current();
    return m != nullptr ? m->node->fence_durability_problem() : std::nullopt;
  }
  detail::Capabilities capabilities() const override {
    const Master* m = current();
    return m != nullptr ? m->node->capabilities() : detail::Capabilities{};
  }
  std::optional<std::string> cannot_run(const Request& req) const override {
    const Master* m = current();
    return m != nullptr ? m->node->cannot_run(req) : std::nullopt;
  }

 private:
  // One master this node has talked to. The current one is the last adopted (unless retired);
  // retired ones close and are dropped once closed.
  struct Master final : DiscoveredMaster, Sink {
    SentinelNode& vote;
    BootClock::time_point resolved_at;
    long long role_reported_ms = 0;  // what Sentinel said when this master was named
    bool switched = false;           // this node saw the switch to it: promoted then (or later)
    bool replication_read = false;
    bool not_master = false;

    // `address`: "ip:port" as Sentinel named it.
    Master(SentinelNode& o, std::string address)
        : DiscoveredMaster(o, std::move(address)), vote(o) {}

    // MasterWatcher
    void on_replication(std::optional<bool> promoted) override {
      if (retired) return;
      vote.on_replication(*this, promoted);
    }
    // Sink: INFO replication asked again (check_role()).
    void on_result(int, std::uint32_t, const Result& r) override {
      on_replication(r.kind == Result::Kind::reply && r.reply->type == Reply::Type::string
                         ? detail::parse_promoted(r.reply->str)
                         : std::nullopt);
    }
    void on_done() override {}
  };

  // One sentinel: a question connection (SENTINEL MASTER) and one for +switch-master (both owned
  // by DiscoveringNode).
  struct SentinelLink {
    explicit SentinelLink(NodeAddress::Host h)
        : at(std::move(h)), name(host_port(at.host, at.port)) {}
    NodeAddress::Host at;
    std::string name;  // host:port
    Connection* question = nullptr;
    Connection* events = nullptr;
    bool asked = false;  // a SENTINEL MASTER of the current round is out (or waits for the connect)
    // Its first connect has not ended yet: a round waits for it (else the sentinel that connects
    // first would decide alone), and asks it once it is up.
    bool first_connect = true;
    bool ask_when_ready = false;
    std::optional<detail::SentinelAnswer> answer;  // this round's, when it answered
    std::string failure;                           // this round's, when it did not
  };

  Master* current() const {
    const auto& all = masters();
    return all.empty() || all.back()->retired ? nullptr : static_cast<Master*>(all.back().get());
  }

  // DiscoveringNode
  void discover() override {
    for (auto& l : links_) {
      l->question = &open_discovery(l->at.host, l->at.port);
      l->events = &open_discovery(l->at.host, l->at.port, this);
      l->question->start();
      l->events->start();
    }
  }
  void on_interval() override { ask(); }
  DiscoveredMaster* wake_master(const std::string&) const override { return current(); }
  void on_discovery_connecting(Connection& c) override {
    bool events = false;
    SentinelLink* l = link_of(c, events);
    if (l == nullptr || !events) return;
    const auto now = BootClock::now();
    (void)c.send(subscribe_, now + Millis{10'000}, *this, tag_of(*l, tag_subscribe), now);
  }
  // A command waits while no master is known: why none is.
  std::string waiting_reason() const override { return resolve_error_; }

  // Which sentinel and which of its connections `c` is; nullptr when none (closing).
  SentinelLink* link_of(const Connection& c, bool& events) {
    for (auto& l : links_) {
      if (l->question == &c || l->events == &c) {
        events = l->events == &c;
        return l.get();
      }
    }
    return nullptr;
  }
  std::uint32_t tag_of(const SentinelLink& l, std::uint32_t kind) const {
    for (std::size_t i = 0; i < links_.size(); ++i) {
      if (links_[i].get() == &l) return static_cast<std::uint32_t>(i) * tag_kinds + kind;
    }
    return kind;
  }

  // A round: every sentinel whose question connection is up is asked; the round ends when each
  // has answered or failed (each question has a deadline). On the poll timer, on +switch-master
  // and when a sentinel connects; one round at a time (another follows at once when asked for
  // meanwhile).
  void ask() {
    if (closing_) return;
    if (round_open_) {
      again_ = true;
      return;
    }
    timer_.start(static_cast<std::uint64_t>(poll_interval.count()));
    round_open_ = true;
    again_ = false;
    const auto now = BootClock::now();
    for (auto& l : links_) {
      l->answer.reset();
      l->failure.clear();
      l->ask_when_ready = !l->question->ready() && l->first_connect;
      l->asked = l->ask_when_ready || send_question(*l, now);
    }
    maybe_end_round(now);
  }

  bool send_question(SentinelLink& l, BootClock::time_point now) {
    const bool sent =
        l.question->ready() && l.question->send(ask_master_, now + options_.connect_timeout, *this,
                                                tag_of(l, tag_master), now);
    if (!sent) {
      l.failure = l.question->last_error().empty() ? "not connected" : l.question->last_error();
    }
    return sent;
  }

  void maybe_end_round(BootClock::time_point at) {
    if (!round_open_) return;
    for (const auto& l : links_) {
      if (l->asked) return;
    }
    round_open_ = false;
    end_round(at);
    if (again_) ask();
  }

  void end_round(BootClock::time_point at) {
    std::vector<detail::SentinelAnswer> answers;
    std::string silent;
    for (const auto& l : links_) {
      if (l->answer) {
        answers.push_back(*l->answer);
      } else {
        silent += (silent.empty() ? "" : "; ") + ("sentinel " + l->name + ": " + l->failure);
      }
    }
    if (answers.empty()) {
      // No sentinel to ask: the master they last named stays (a sentinel outage is not the
      // master's), as does any refusal.
      resolve_error_ = silent;
      host_.log(LogLevel::debug, name_ + ": " + resolve_error_);
      return;
    }
    auto verdict = detail::agree_on_master(answers);
    if (!verdict.master) {
      std::string why = verdict.why;
      if (answers.size() == 1 && links_.size() > 1)
        why = "sentinel " + answers[0].sentinel + ": " + why;
      refuse(answers.size() > 1 ? "no vote: " + why : why);
      return;
    }
    on_master(*verdict.master, at);
  }

  // The last round named no master that can be used: no vote until one does. The current master
  // stays connected (its answers are excluded) unless it is the one refused.
  void refuse(std::string why) {
    if (why != refusal_) host_.log(LogLevel::warning, name_ + ": " + why);
    refusal_ = std::move(why);
    resolve_error_ = refusal_;
    waiting_.release([](const PendingCommands::Command&) { return false; });
  }

  // Connection::Listener (the sentinel connections; DiscoveringNode sends their AUTH)
  void on_ready(Connection& c, const std::string&) override {
    bool events = false;
    SentinelLink* l = link_of(c, events);
    if (l == nullptr || events) return;
    l->first_connect = false;
    if (l->ask_when_ready) {
      l->ask_when_ready = false;
      l->asked = send_question(*l, BootClock::now());
      maybe_end_round(BootClock::now());
    } else {
      ask();
    }
  }
  void on_dropped(Connection& c, const std::string& why, bool) override {
    // Each connection reconnects by itself; a question that was out fails with it (on_result).
    // Until a sentinel has answered, the reason a command waits for is the sentinels' failures.
    bool events = false;
    SentinelLink* l = link_of(c, events);
    if (l == nullptr || events) return;
    l->first_connect = false;
    if (l->ask_when_ready) {  // this sentinel will not answer this round
      l->ask_when_ready = false;
      l->asked = false;
      l->failure = why;
      maybe_end_round(BootClock::now());
    }
    if (current() != nullptr || !refusal_.empty()) return;
    std::string all;
    for (const auto& other : links_) {
      const std::string& e = other.get() == l ? why : other->question->last_error();
      if (!e.empty()) all += (all.empty() ? "" : "; ") + ("sentinel " + other->name + ": " + e);
    }
    resolve_error_ = "no master known yet: " + all;
  }
  // Connection::PushHandler: "+switch-master" messages: "<name> <old ip> <old port> <new ip>
  // <new port>". Ours: ask at once.
  void on_push(const Reply& m) override {
    if (m.type != Reply::Type::array || m.elements.size() != 3) return;
    const auto& payload = m.elements[2].str;
    if (!payload.starts_with(address_.master_name + " ")) return;
    host_.log(LogLevel::info,
              name_ + ": Sentinel announced a failover: " + detail::server_text(payload));
    ask();
  }

  // Sink: the answers to SENTINEL MASTER (and the subscription's confirmation).
  void on_result(int, std::uint32_t tag, const Result& r) override {
    const std::size_t i = tag / tag_kinds;
    if (closing_ || i >= links_.size()) return;
    SentinelLink& l = *links_[i];
    if (tag % tag_kinds != tag_master || !l.asked) return;
    l.asked = false;
    if (r.kind != Result::Kind::reply) {
      l.failure =
          r.kind == Result::Kind::timeout ? "SENTINEL MASTER timed out" : std::string(r.error);
    } else {
      detail::SentinelAnswer a;
      a.sentinel = l.name;
      std::string error;
      a.master = detail::parse_sentinel_master(*r.reply, error);
      // "ERR No such master with that name", or an answer we cannot read: it names nobody.
      if (!a.master) a.error = r.reply->is_error() ? detail::server_text(r.reply->str) : error;
      l.answer = std::move(a);
    }
    maybe_end_round(r.at);
  }
  void on_done() override {}

  void on_master(const detail::SentinelMaster& m, BootClock::time_point at) {
    const std::string addr = host_port(m.ip, m.port);
    Master* cur = current();
    if (cur != nullptr && cur->address == addr && m.config_epoch == config_epoch_) {
      refusal_.clear();
      check_role(*cur);
      return;
    }
    const std::string old = cur != nullptr ? cur->address : std::string();
    const auto trusted = trust(m.ip, m.port);
    if (!trusted.trusted) {
      if (cur != nullptr) retire(*cur);
      refuse("master named by the sentinels: " + trusted.why_not);
      return;
    }
    refusal_.clear();
    config_epoch_ = m.config_epoch;
    if (cur != nullptr && cur->address == addr) {
      // A failover and back between two questions (the epoch moved): the same server, promoted
      // again. Its connection stays; the guard starts over.
      cur->role_reported_ms = m.role_reported_ms;
      cur->resolved_at = at;
      promoted(*cur, "Sentinel's configuration epoch changed (a failover): master " + addr);
      return;
    }
    if (cur != nullptr) {
      host_.log(LogLevel::warning, name_ + ": Sentinel failover: master is now " + addr + " (was " +
                                       old +
                                       "); its votes wait out the restart "
                                       "quarantine");
      retire(*cur);
    } else {
      host_.log(LogLevel::debug, name_ + ": master is " + addr);
    }
    Master& nm = adopt(std::make_unique<Master>(*this, addr));
    nm.resolved_at = at;
    nm.role_reported_ms = m.role_reported_ms;
    nm.switched = cur != nullptr;
    nm.node = master_node(nm, m.ip, m.port, trusted.verify_name);
    if (nm.switched) promoted(nm, "Sentinel failover to " + addr + " (was " + old + ")");
    nm.node->start();
    resubscribe_all();
    waiting_.release([&nm](const PendingCommands::Command& c) {
      return nm.node->send(c.req, c.deadline, *c.sink, c.tag, c.sent);
    });
    drop_closed_masters();
  }

  void on_replication(Master& m, std::optional<bool> promoted_since_start) {
    m.replication_read = true;
    m.not_master = !promoted_since_start.has_value();
    if (m.not_master) {
      host_.log(LogLevel::warning,
                name_ + ": " + m.address + ", named master by Sentinel, does not say role:master");
      return;  // asked again with the next answer from Sentinel (check_role())
    }
    if (*promoted_since_start && !m.switched) {
      promoted(m, "master " + m.address + " was promoted from replica (master_replid2), " +
                      std::to_string(m.role_reported_ms) + " ms before Sentinel named it");
    }
  }

  // A master whose role could not be confirmed (its INFO replication failed, or it said it is a
  // replica): ask again on the same connection, behind whatever is queued there.
  void check_role(Master& m) {
    if (!m.not_master) return;
    static const auto info = Request::make(Command::plain({"INFO", "replication"}));
    const auto now = BootClock::now();
    (void)m.node->send(info, now + options_.connect_timeout, m, 0, now);
  }

  // Sentinel switched to this master `role_reported_ms` before it answered, or later. Until a
  // client learns of the switch (at once from +switch-master, else at its next question: up to
  // two poll intervals) it may still take locks on the old master, whose writes are lost when it
  // is demoted: the quarantine counts from the end of that window, so a lock taken there has
  // expired before this master's votes count.
  void promoted(Master& m, std::string why) {
    guard_.promoted(detail::promoted_at_latest(m.resolved_at, m.role_reported_ms, follow_window),
                    std::move(why));
  }

  std::shared_ptr<const Request> ask_master_, subscribe_;
  std::vector<std::unique_ptr<SentinelLink>> links_;  // one per sentinel, in the address's order
  bool round_open_ = false;
  bool again_ = false;           // another round was asked for while one was open
  std::string refusal_;          // why the last round named no usable master; empty when it did
  long long config_epoch_ = -1;  // as last answered; -1: never
  std::string resolve_error_;
  detail::RestartGuard guard_;  // promotions only
};

}  // namespace

std::unique_ptr<Node> make_sentinel_node(uv_loop_t* loop, NodeHost& host, int index,
                                         TransportMaker transport, const NodeAddress& address,
                                         const Options& options, NodeMetrics* metrics) {
  return std::make_unique<SentinelNode>(loop, host, index, std::move(transport), address, options,
                                        metrics);
}

}  // namespace redlock::net
