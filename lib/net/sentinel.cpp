// A Sentinel-managed master as a node. It asks a sentinel `SENTINEL MASTER <name>` (at start, every
// second, at once when the sentinel publishes +switch-master for the name, and after a failed
// question on the next sentinel), and talks to the master it names through a standalone node
// (standalone.cpp) that it replaces when the master changes.
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
#include "net/node.hpp"
#include "net/pending.hpp"
#include "net/uv.hpp"

namespace redlock::net {
namespace {

using detail::Command;
using detail::Reply;

constexpr Millis poll_interval{1000};  // SENTINEL MASTER, between +switch-master messages
// How long after Sentinel's switch another client of the same sentinels may still use the old
// master: its question every poll interval, and one more if that one failed.
constexpr Millis follow_window = 2 * poll_interval;

enum : std::uint32_t { tag_master, tag_subscribe };

std::string host_port(const std::string& host, int port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

class SentinelNode final : public Node, Connection::Listener, Sink, Connection::PushHandler {
 public:
  SentinelNode(uv_loop_t* loop, NodeHost& host, int index, TransportMaker transport,
               const NodeAddress& address, const Options& options, NodeMetrics* metrics)
      : loop_(loop),
        host_(host),
        index_(index),
        transport_(std::move(transport)),
        address_(address),
        name_(address.to_string()),
        options_(options),
        metrics_(metrics),
        ask_master_(Request::make(Command::plain({"SENTINEL", "MASTER", address.master_name}))),
        subscribe_(Request::make(Command::plain({"SUBSCRIBE", "+switch-master"}))),
        poll_(loop, [this] { ask(/*timer=*/true); }),
        waiting_(loop, index, [this] { return resolve_error_; }) {
    sentinels_.push_back({address.host, address.port});
    for (const auto& s : address.more_sentinels) sentinels_.push_back(s);
    resolve_error_ = "no master known yet: asking the sentinels";
  }

  ~SentinelNode() override = default;

  void start() override {
    poll_.unref();
    connect_sentinel();
    poll_.start(static_cast<std::uint64_t>(poll_interval.count()));
  }

  void close() override {
    if (closing_) return;
    closing_ = true;
    poll_.close();
    waiting_.close();
    for (auto& c : sentinel_links_) c.conn->close();
    for (auto& m : masters_) m->node->close();
    finish_if_closed();
  }

  // Before the first master is known (a fresh process: the sentinel is being asked), commands
  // wait here, within their deadline, and go to the master once Sentinel has named it.
  bool send(const std::shared_ptr<const Request>& req, Millis timeout, Sink& sink,
            std::uint32_t tag, BootClock::time_point sent) override {
    if (Master* m = current()) return m->node->send(req, timeout, sink, tag, sent);
    if (closing_) return false;
    waiting_.push(req, timeout, sink, tag, sent);
    return true;
  }

  const std::string& name() const override { return name_; }
  std::string last_error() const override {
    const Master* m = current();
    if (m == nullptr) return resolve_error_;
    return "master " + m->address + ": " + m->node->last_error();
  }
  bool refused() const override {
    const Master* m = current();
    return m != nullptr && m->node->refused();
  }
  std::string server_id() const override {
    const Master* m = current();
    return m != nullptr ? m->node->server_id() : std::string();
  }
  std::optional<std::string> vote_exclusion(BootClock::time_point now) const override {
    const Master* m = current();
    if (m == nullptr) return "no master known";
    if (!m->replication_read) {
      return "master " + m->address + ": its INFO replication was not read yet";
    }
    if (m->not_master) return "master " + m->address + " does not say role:master";
    if (auto why = guard_.exclusion(now, options_.durable_nodes, host_.restart_quarantine())) {
      return why;
    }
    return m->node->vote_exclusion(now);
  }
  void subscribe(const std::string& lock_key) override {
    if (++subscriptions_[lock_key] == 1) {
      if (Master* m = current()) m->node->subscribe(lock_key);
    }
  }
  void unsubscribe(const std::string& lock_key) override {
    auto it = subscriptions_.find(lock_key);
    if (it == subscriptions_.end()) return;
    if (--it->second == 0) {
      subscriptions_.erase(it);
      if (Master* m = current()) m->node->unsubscribe(lock_key);
    }
  }
  std::string key_owner(const std::string&) const override {
    const Master* m = current();
    return m != nullptr ? "master " + m->address : std::string();
  }
  std::optional<std::string> fence_durability_problem() const override {
    const Master* m = current();
    return m != nullptr ? m->node->fence_durability_problem() : std::nullopt;
  }

 private:
  // One master this node has talked to. The current one is masters_.back() (unless retired);
  // retired ones close and are dropped once closed.
  struct Master final : NodeHost, MasterWatcher, Sink {
    SentinelNode& owner;
    std::string address;  // "ip:port" as Sentinel named it
    BootClock::time_point resolved_at;
    long long role_reported_ms = 0;  // what Sentinel said when this master was named
    bool switched = false;           // this node saw the switch to it: promoted then (or later)
    bool retired = false;
    bool closed = false;
    bool replication_read = false;
    bool not_master = false;
    std::unique_ptr<Node> node;

    explicit Master(SentinelNode& o) : owner(o) {}

    // NodeHost: the standalone node's host is this vote's host, except for closing.
    void log(LogLevel level, const std::string& message) override {
      owner.host_.log(level, owner.name_ + ": " + message);
    }
    void on_node_closed(int) override {
      closed = true;
      owner.finish_if_closed();
    }
    void on_server_identified(int index) override {
      if (!retired) owner.host_.on_server_identified(index);
    }
    Millis restart_quarantine() const override { return owner.host_.restart_quarantine(); }
    void on_wake(int index, const std::string& lock_key, const Wake& wake) override {
      if (!retired) owner.host_.on_wake(index, lock_key, wake);
    }
    // MasterWatcher
    void on_replication(std::optional<bool> promoted) override {
      if (retired) return;
      owner.on_replication(*this, promoted);
    }
    // Sink: INFO replication asked again (check_role()).
    void on_result(int, std::uint32_t, const Result& r) override {
      on_replication(r.kind == Result::Kind::reply && r.reply->type == Reply::Type::string
                         ? detail::parse_promoted(r.reply->str)
                         : std::nullopt);
    }
    void on_done() override {}
  };

  struct SentinelLink {
    std::unique_ptr<Connection> conn;
    bool events = false;  // the +switch-master subscription (else questions)
    bool closed = false;
  };

  Master* current() {
    return masters_.empty() || masters_.back()->retired ? nullptr : masters_.back().get();
  }
  const Master* current() const {
    return masters_.empty() || masters_.back()->retired ? nullptr : masters_.back().get();
  }

  // Two connections to the sentinel in use: questions, and the +switch-master subscription.
  void connect_sentinel() {
    std::erase_if(sentinel_links_, [](const SentinelLink& l) { return l.closed; });
    const auto& s = sentinels_[sentinel_ % sentinels_.size()];
    Endpoint e;
    e.host = s.host;
    e.port = s.port;
    std::array<Connection*, 2> made{};
    for (bool events : {false, true}) {
      SentinelLink link;
      link.events = events;
      link.conn =
          std::make_unique<Connection>(loop_, static_cast<Connection::Listener&>(*this), index_, e,
                                       transport_(s.host), discovery_settings(options_));
      if (events) link.conn->set_push_handler(this);
      made[events ? 1 : 0] = link.conn.get();
      sentinel_links_.push_back(std::move(link));
    }
    question_ = made[0];  // before start(): on_connecting() tells the two apart by it
    for (auto* c : made) c->start();
    asked_ = false;
  }

  // The sentinel in use failed: the next one (both connections), at most one round of them per
  // poll interval (when every sentinel is down, each connection's own backoff does the waiting).
  void next_sentinel(const std::string& why) {
    if (closing_) return;
    const auto& s = sentinels_[sentinel_ % sentinels_.size()];
    resolve_error_ = "sentinel " + host_port(s.host, s.port) + ": " + why;
    host_.log(LogLevel::debug, name_ + ": " + resolve_error_);
    if (switches_this_interval_ >= sentinels_.size()) return;
    ++switches_this_interval_;
    for (auto& l : sentinel_links_) {
      if (!l.closed) l.conn->close();
    }
    ++sentinel_;
    question_ = nullptr;
    connect_sentinel();
  }

  // On the poll timer, on +switch-master, and when the question connection is ready.
  void ask(bool timer = false) {
    if (closing_) return;
    if (timer) {
      switches_this_interval_ = 0;
      poll_.start(static_cast<std::uint64_t>(poll_interval.count()));
      if (question_ != nullptr && !question_->ready() && !asked_) {
        next_sentinel(question_->last_error().empty() ? "not connected" : question_->last_error());
        return;
      }
    }
    if (question_ == nullptr || asked_ || !question_->ready()) return;
    asked_ =
        question_->send(ask_master_, options_.connect_timeout, *this, tag_master, BootClock::now());
  }

  // Connection::Listener (the sentinel connections)
  void on_connecting(Connection& c) override {
    if (&c != question_) {
      (void)c.send(subscribe_, Millis{10'000}, *this, tag_subscribe, BootClock::now());
    }
  }
  void on_ready(Connection& c, const std::string&) override {
    if (&c == question_) ask();
  }
  void on_dropped(Connection& c, const std::string& why, bool) override {
    if (&c != question_) return;  // the subscription reconnects by itself
    asked_ = false;               // its question failed with it
    next_sentinel(why);
  }
  void on_closed(Connection& c) override {
    for (auto& l : sentinel_links_) {
      if (l.conn.get() == &c) l.closed = true;
    }
    finish_if_closed();
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
    if (tag != tag_master) return;
    asked_ = false;
    if (closing_) return;
    if (r.kind != Result::Kind::reply) {
      next_sentinel(r.kind == Result::Kind::timeout ? "SENTINEL MASTER timed out"
                                                    : std::string(r.error));
      return;
    }
    std::string error;
    auto master = detail::parse_sentinel_master(*r.reply, error);
    if (!master) {
      // "ERR No such master with that name", or an answer we cannot read: another sentinel may
      // know better.
      next_sentinel(r.reply->is_error() ? detail::server_text(r.reply->str) : error);
      return;
    }
    on_master(*master, r.at);
  }
  void on_done() override {}

  void on_master(const detail::SentinelMaster& m, BootClock::time_point at) {
    const std::string addr = host_port(m.ip, m.port);
    Master* cur = current();
    if (cur != nullptr && cur->address == addr && m.config_epoch == config_epoch_) {
      check_role(*cur);
      return;
    }
    const std::string old = cur != nullptr ? cur->address : std::string();
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
    auto next = std::make_unique<Master>(*this);
    next->address = addr;
    next->resolved_at = at;
    next->role_reported_ms = m.role_reported_ms;
    next->switched = cur != nullptr;
    NodeAddress a = address_;
    a.kind = NodeAddress::Kind::server;
    a.host = m.ip;
    a.port = m.port;
    a.more_sentinels.clear();
    a.master_name.clear();
    next->node =
        make_standalone_node(loop_, *next, index_, transport_, a, options_, metrics_, next.get());
    masters_.push_back(std::move(next));
    Master& nm = *masters_.back();
    if (nm.switched) promoted(nm, "Sentinel failover to " + addr + " (was " + old + ")");
    nm.node->start();
    for (const auto& [key, users] : subscriptions_) nm.node->subscribe(key);
    waiting_.release([&nm](const PendingCommands::Command& c, Millis left) {
      return nm.node->send(c.req, left, *c.sink, c.tag, c.sent);
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
    (void)m.node->send(info, options_.connect_timeout, m, 0, BootClock::now());
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

  void retire(Master& m) {
    m.retired = true;
    for (const auto& [key, users] : subscriptions_) m.node->unsubscribe(key);
    m.node->close();
  }

  void drop_closed_masters() {
    std::erase_if(masters_, [](const std::unique_ptr<Master>& m) { return m->closed; });
  }

  void finish_if_closed() {
    if (!closing_ || finished_) return;
    for (const auto& l : sentinel_links_) {
      if (!l.closed) return;
    }
    for (const auto& m : masters_) {
      if (!m->closed) return;
    }
    finished_ = true;
    host_.on_node_closed(index_);
  }

  uv_loop_t* loop_;
  NodeHost& host_;
  int index_;
  TransportMaker transport_;
  NodeAddress address_;
  std::string name_;
  const Options& options_;
  NodeMetrics* metrics_;
  std::shared_ptr<const Request> ask_master_, subscribe_;
  std::vector<NodeAddress::Host> sentinels_;
  std::size_t sentinel_ = 0;        // the one in use (modulo the count)
  Connection* question_ = nullptr;  // its question connection
  bool asked_ = false;              // a SENTINEL MASTER is out
  std::size_t switches_this_interval_ = 0;
  long long config_epoch_ = -1;  // as last answered; -1: never
  std::string resolve_error_;
  detail::RestartGuard guard_;  // promotions only
  std::map<std::string, int> subscriptions_;
  bool closing_ = false;
  bool finished_ = false;
  std::vector<SentinelLink> sentinel_links_;      // closed ones stay until the node goes
  std::vector<std::unique_ptr<Master>> masters_;  // the current one last
  Timer poll_;
  PendingCommands waiting_;  // commands sent before the first master was known
};

}  // namespace

std::unique_ptr<Node> make_sentinel_node(uv_loop_t* loop, NodeHost& host, int index,
                                         TransportMaker transport, const NodeAddress& address,
                                         const Options& options, NodeMetrics* metrics) {
  return std::make_unique<SentinelNode>(loop, host, index, std::move(transport), address, options,
                                        metrics);
}

}  // namespace redlock::net
