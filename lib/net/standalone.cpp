// A standalone Redis master as a node: one connection, and what it learns in its handshake
// (the restart guard's INFO, the eviction policy, whether fence counters are durable).
// Also the master of a Sentinel vote (sentinel.cpp), which then watches INFO replication too.

#include <algorithm>
#include <array>

#include "core/capabilities.hpp"
#include "core/info.hpp"
#include "core/restart_guard.hpp"
#include "core/secret.hpp"
#include "core/server_text.hpp"
#include "core/timing.hpp"
#include "net/node.hpp"
#include "net/replicated.hpp"

namespace redlock::net {
namespace {

using detail::Command;
using detail::Reply;

// Handshake command tags.
enum : std::uint32_t {
  hs_auth,
  hs_select,
  hs_script_load,
  hs_info,
  hs_config,
  hs_appendonly,
  hs_appendfsync,
  hs_replication,
  hs_probe,  // + the probe command's place (core/capabilities.hpp)
};

std::shared_ptr<const Request> shared(Command c) { return Request::make(std::move(c)); }

// The handshake commands that are the same for every connection, built once.
struct CommonHandshake {
  std::vector<std::shared_ptr<const Request>> script_loads;
  std::shared_ptr<const Request> info = shared(Command::plain({"INFO", "server"}));
  std::shared_ptr<const Request> eviction =
      shared(Command::plain({"CONFIG", "GET", "maxmemory-policy"}));
  // One parameter per CONFIG GET: Redis before 7 takes only one.
  std::shared_ptr<const Request> appendonly =
      shared(Command::plain({"CONFIG", "GET", "appendonly"}));
  std::shared_ptr<const Request> appendfsync =
      shared(Command::plain({"CONFIG", "GET", "appendfsync"}));
  std::shared_ptr<const Request> replication = shared(Command::plain({"INFO", "replication"}));
  std::vector<std::shared_ptr<const Request>> probe;
  CommonHandshake() {
    for (const auto& argv : detail::capability_probe_commands()) {
      Command c;
      c.args = argv;
      probe.push_back(shared(std::move(c)));
    }
    for (std::size_t i = 0; i < detail::script_count(); ++i) {
      script_loads.push_back(shared(Command::plain(
          {"SCRIPT", "LOAD", detail::script_body(static_cast<detail::ScriptId>(i))})));
    }
  }
};

const CommonHandshake& common() {
  static const CommonHandshake c;
  return c;
}

// `CONFIG GET name` answers [name, value].
std::optional<std::string> config_value(const Reply& r) {
  if (r.type == Reply::Type::array && r.elements.size() == 2 &&
      r.elements[1].type == Reply::Type::string) {
    return r.elements[1].str;
  }
  return std::nullopt;
}

ConnectionSettings settings_for(const Options& o, const std::string& name = {}) {
  ConnectionSettings s;
  s.commands = o.commands;
  s.name = name;
  s.connect_timeout = o.connect_timeout;
  s.reconnect_min = o.reconnect_min;
  s.reconnect_max = o.reconnect_max;
  s.stall_limit = detail::command_stall_limit(o);  // (core/timing.hpp says why each)
  s.drain_limit = detail::drain_limit(o);
  return s;
}

Endpoint endpoint_for(const NodeAddress& a) {
  Endpoint e;
  e.unix_socket = a.transport == NodeAddress::Transport::unix_socket;
  e.host = a.host;
  e.port = a.port;
  e.path = a.path;
  return e;
}

class StandaloneNode final : public Node, Connection::Listener, Sink, WakeHandler {
 public:
  StandaloneNode(uv_loop_t* loop, NodeHost& host, int index, TransportMaker transport,
                 const NodeAddress& address, const Options& options, NodeMetrics* metrics,
                 MasterWatcher* watcher)
      : loop_(loop),
        transport_(std::move(transport)),
        watcher_(watcher),
        host_(host),
        index_(index),
        address_(address),
        name_(address.to_string()),
        tls_(address.transport == NodeAddress::Transport::tcp &&
             (address.tls || options.tls.enabled)),
        options_(options),
        replicas_(detail::replica_wait(options, address)),
        conn_(loop, *this, index, endpoint_for(address), transport_(address.host),
              settings_for(options, name_)) {
    conn_.set_metrics(metrics);
    auth_ = auth_request(address_);
    if (address_.db != 0)
      select_ = shared(Command::plain({"SELECT"}).arg(static_cast<long long>(address_.db)));
  }

  ~StandaloneNode() override { detail::wipe(address_.password); }

  void start() override { conn_.start(); }
  void close() override {
    closing_ = true;
    conn_.close();
    if (sub_) sub_->close();
  }
  void subscribe(const std::string& lock_key) override {
    if (closing_) return;
    if (!sub_) {
      if (!options_.wake_ups) return;
      sub_.emplace(loop_, static_cast<WakeHandler&>(*this), index_, endpoint_for(address_),
                   transport_(address_.host), settings_for(options_), auth_, address_.password,
                   address_.db, name_);
    }
    sub_->subscribe(lock_key);
  }
  void unsubscribe(const std::string& lock_key) override {
    if (sub_) sub_->unsubscribe(lock_key);
  }
  bool send(const std::shared_ptr<const Request>& req, BootClock::time_point deadline, Sink& sink,
            std::uint32_t tag, BootClock::time_point sent) override {
    ask_info_again(sent);
    probe_again(sent);
    if (!req->gives_vote) return conn_.send(req, deadline, sink, tag, sent);
    return send_replicated(conn_, req, deadline, sink, tag, sent, replicas_);
  }
  const std::string& name() const override { return name_; }
  std::string last_error() const override { return conn_.last_error() + hint_; }
  bool refused() const override { return conn_.last_failure() == Connection::Failure::refused; }
  const std::string& server_id() const override { return guard_.run_id(); }
  std::optional<std::string> vote_exclusion(BootClock::time_point now) const override {
    return guard_.exclusion(now, options_.durable_nodes, host_.restart_quarantine(),
                            options_.min_node_uptime);
  }
  std::string failure_detail(std::string_view error) const override {
    // The commands the connection failed when it dropped carry the drop's reason. (They are
    // failed before on_dropped() runs: the hint is worked out here too.)
    return error == conn_.last_error()
               ? std::string(error) + tls_hint(conn_.last_error(), conn_.last_drop_was_ready())
               : std::string(error);
  }
  detail::Capabilities capabilities() const override { return conn_.capabilities(); }
  std::optional<std::string> cannot_run(const Request& req) const override {
    return detail::cannot_run(req.command, req.native_kind, conn_.capabilities(), options_.commands,
                              name_);
  }
  std::optional<std::string> fence_durability_problem() const override {
    if (appendonly_.empty() || appendfsync_.empty()) return std::nullopt;  // unknown: say nothing
    if (appendonly_ != "yes") return "appendonly " + appendonly_;
    if (appendfsync_ != "always") return "appendfsync " + appendfsync_;
    return std::nullopt;
  }

 private:
  // A plaintext connection that the server hangs up on before answering anything is, most of
  // the time, a TLS port: say so in the per-node records (last_error, failure_detail) and the log.
  std::string tls_hint(std::string_view why, bool was_ready) const {
    const bool hung_up = why.find("reset") != std::string_view::npos ||
                         why.find("closed by the server") != std::string_view::npos;
    return !tls_ && !answered_ && was_ready && hung_up
               ? " (the server hung up before answering: does it expect TLS? use rediss:// or "
                 "--tls)"
               : "";
  }

  // Connection::Listener
  void on_connecting(Connection& c) override {
    appendonly_.clear();
    appendfsync_.clear();
    answered_ = false;
    const auto now = BootClock::now();
    const auto t = now + options_.connect_timeout;  // the handshake's deadline
    info_asked_ = now;
    if (auth_) c.send(auth_, t, *this, hs_auth, now);
    if (select_) c.send(select_, t, *this, hs_select, now);
    // The probe before anything else of ours, so that every command sent after its answer goes
    // out in the form this server runs. The scripts are loaded right behind it, not after its
    // answer: a fresh client's first script call goes out before the probe is answered, and found
    // no script in the cache (NOSCRIPT, a second round trip, or no vote where the EVAL retry would
    // reorder commands to one key). A node without scripts answers each SCRIPT LOAD with an error
    // that is then not worth a word (on_result: the probe's answer comes first).
    send_probe(c, now);
    for (const auto& load : common().script_loads) c.send(load, t, *this, hs_script_load, now);
    c.send(common().info, t, *this, hs_info, now);
    c.send(common().eviction, t, *this, hs_config, now);
    c.send(common().appendonly, t, *this, hs_appendonly, now);
    c.send(common().appendfsync, t, *this, hs_appendfsync, now);
    if (watcher_) c.send(common().replication, t, *this, hs_replication, now);
  }
  void on_ready(Connection&, const std::string& established) override {
    if (!established.empty()) host_.log(LogLevel::debug, name_ + ": connected over " + established);
  }
  // A node's changes of state are logged once each (issue 41 item 4): up -> down with the reason
  // at warning (error when the server refused our credentials or database), down -> up at info;
  // while it stays down, each reconnect says nothing unless the reason changes (debug). A service
  // logging at info then learns of an expired certificate once, and is not flooded by retries.
  void on_dropped(Connection&, const std::string& why, bool was_ready) override {
    hint_ = tls_hint(why, was_ready);
    const std::string reason = why + hint_;
    if (health_ != Health::down) {
      health_ = Health::down;
      const bool refused = conn_.last_failure() == Connection::Failure::refused;
      host_.log(refused ? LogLevel::error : LogLevel::warning,
                name_ + (was_ready ? ": connection lost: " : ": connect failed: ") + reason);
    } else if (reason != down_reason_) {
      host_.log(LogLevel::debug, name_ + ": still down: " + reason);
    }
    down_reason_ = reason;
  }
  // The server answered a command after AUTH and SELECT: the node is up.
  void mark_up() {
    if (health_ == Health::down) {
      host_.log(LogLevel::info, name_ + ": up again (it was down: " + down_reason_ + ")");
    } else if (health_ == Health::unknown) {
      host_.log(LogLevel::debug, name_ + ": up");
    }
    health_ = Health::up;
    hint_.clear();
  }
  // The restart guard cannot read INFO: ask again (before the next vote's command, so the vote is
  // judged with the answer) at most once a second, so that a permission granted meanwhile counts
  // without a reconnect.
  void ask_info_again(BootClock::time_point now) {
    if (guard_.readable() || !conn_.ready() || now - info_asked_ < std::chrono::seconds(1)) return;
    info_asked_ = now;
    conn_.send(common().info, now + options_.connect_timeout, *this, hs_info, now);
  }
  void send_probe(Connection& c, BootClock::time_point now) {
    probe_replies_.clear();
    probe_timed_out_ = false;
    probe_asked_ = now;
    for (std::size_t i = 0; i < common().probe.size(); ++i) {
      c.send(common().probe[i], now + options_.connect_timeout, *this,
             hs_probe + static_cast<std::uint32_t>(i), now);
    }
  }
  // A probe not answered in time (a loaded server, a slow link) leaves the node on scripts: ask
  // again, as the restart guard's INFO is, at most once a second, before the next command.
  void probe_again(BootClock::time_point now) {
    if (!probe_timed_out_ || !conn_.ready() || now - probe_asked_ < std::chrono::seconds(1)) return;
    send_probe(conn_, now);
  }
  void on_closed(Connection&) override {
    conn_closed_ = true;
    if (!sub_ || sub_closed_) host_.on_node_closed(index_);
  }

  // WakeHandler
  void on_wake(const std::string& lock_key, const Wake& wake) override {
    host_.on_wake(index_, lock_key, wake);
  }
  void on_subscriber_closed() override {
    sub_closed_ = true;
    if (conn_closed_) host_.on_node_closed(index_);
  }
  void log(LogLevel level, const std::string& message) override { host_.log(level, message); }

  // Sink: the handshake's answers.
  void on_result(int, std::uint32_t tag, const Result& r) override {
    if (r.kind == Result::Kind::reply) answered_ = true;
    if (tag >= hs_probe) {
      on_probe(r);
      return;
    }
    if (tag == hs_info && r.kind == Result::Kind::timeout) {
      guard_.unreadable("restart guard: INFO server was not answered within connect_timeout");
    }
    if (tag == hs_replication && watcher_) {
      watcher_->on_replication(r.kind == Result::Kind::reply && r.reply->type == Reply::Type::string
                                   ? detail::parse_promoted(r.reply->str)
                                   : std::nullopt);
      return;
    }
    if (r.kind != Result::Kind::reply) return;
    const Reply& rep = *r.reply;
    if (rep.is_error()) {
      if (tag == hs_auth) {
        // Commands pipelined behind a failed AUTH would run as the default user: drop the
        // connection so none of them counts, and say why in every per-node record (and once in
        // the log: on_dropped).
        const auto why = "AUTH failed: " + detail::auth_error_text(rep.str, address_.password);
        conn_.drop(why, Connection::Failure::refused);
      } else if (tag == hs_select) {
        // the wrong database must not take votes
        conn_.drop("SELECT failed: " + detail::server_text(rep.str), Connection::Failure::refused);
      } else if (tag == hs_info) {
        // Without INFO the restart guard cannot see a restart: it fails closed (restart_guard.hpp).
        mark_up();
        // The missing permission first: a one-line summary cuts long server text.
        guard_.unreadable(std::string("restart guard: cannot read INFO server") +
                          (rep.starts_with("NOPERM") ? " (the user needs +info)" : "") + ": " +
                          detail::server_text(rep.str));
      } else if (tag == hs_script_load) {
        // One per script per connect: said once per node. Without it every script still runs
        // (EVALSHA's NOSCRIPT is retried as EVAL, which caches it), one round trip later the
        // first time.
        if (!script_load_noted_ && conn_.capabilities().scripts) {
          script_load_noted_ = true;
          host_.log(LogLevel::info,
                    name_ + ": SCRIPT LOAD refused (" + detail::server_text(rep.str) +
                        "): scripts are sent whole on first use" +
                        (rep.starts_with("NOPERM") ? " (the user needs +script|load)" : ""));
        }
      } else if (tag != hs_config && tag != hs_appendonly && tag != hs_appendfsync) {
        // CONFIG may be disabled or renamed: say nothing
        host_.log(LogLevel::debug, name_ + ": handshake: " + detail::server_text(rep.str));
      }
      return;
    }
    switch (tag) {
      case hs_config:
        if (auto policy = config_value(rep); policy && *policy != "noeviction") {
          host_.log(LogLevel::warning, name_ + ": maxmemory-policy is " +
                                           detail::server_text(*policy, 40) +
                                           ": Redis may evict lock keys under memory pressure; "
                                           "use noeviction on lock nodes");
        }
        break;
      // (Shown in fence_durability_problem(): as server text.)
      case hs_appendonly:
        appendonly_ = detail::server_text(config_value(rep).value_or(""), 40);
        break;
      case hs_appendfsync:
        appendfsync_ = detail::server_text(config_value(rep).value_or(""), 40);
        break;
      case hs_info:
        mark_up();
        if (rep.type != Reply::Type::string || !detail::parse_server_info(rep.str)) {
          guard_.unreadable(
              "restart guard: cannot read INFO server (no run_id and uptime in "
              "its answer)");
        }
        if (rep.type == Reply::Type::string) {
          if (auto info = detail::parse_server_info(rep.str)) {
            detail::RestartGuard::Policy p{host_.restart_quarantine(), options_.min_node_uptime,
                                           options_.durable_nodes};
            const std::string before = guard_.run_id();
            auto warning = guard_.observe(*info, BootClock::now(), p);
            if (guard_.run_id() != before) host_.on_server_identified(index_);
            if (warning) host_.log(LogLevel::warning, name_ + ": " + *warning);
          }
        }
        break;
      default:
        break;
    }
  }
  void on_done() override {}

  // One of the probe's answers (in order; a timeout or a lost connection counts as an error
  // reply: the node then stays on scripts). After the last one: the connection picks its forms
  // by them.
  void on_probe(const Result& r) {
    if (r.kind == Result::Kind::timeout) probe_timed_out_ = true;
    probe_replies_.push_back(
        r.kind == Result::Kind::reply ? *r.reply : Reply{Reply::Type::error, 0, "no answer", {}});
    if (probe_replies_.size() < common().probe.size()) return;
    const auto caps = detail::parse_capabilities(probe_replies_);
    probe_replies_.clear();
    if (r.kind == Result::Kind::down) return;  // the connection is gone with its commands
    // (An answer that came too late is asked again: probe_again(). Meanwhile what did come is
    // used, unless it is nothing.)
    if (probe_timed_out_ && !caps.probed) return;
    conn_.set_capabilities(caps);
    if (caps != logged_caps_) {
      host_.log(LogLevel::debug, name_ + ": capabilities: " + detail::describe(caps));
      logged_caps_ = caps;
    }
  }
  void on_native_refused(Connection&, detail::NativeForm form, const Reply& reply) override {
    // Said once per node and form: a proxy that keeps refusing would otherwise fill the log.
    const auto bit = 1u << static_cast<unsigned>(form);
    if ((native_refusals_noted_ & bit) != 0) return;
    native_refusals_noted_ |= bit;
    host_.log(LogLevel::info, name_ + ": claims " + std::string(detail::name(form)) +
                                  " but refused it (" + detail::server_text(reply.str) +
                                  "): the script instead on this connection");
  }

  enum class Health { unknown, up, down };

  uv_loop_t* loop_;
  TransportMaker transport_;
  MasterWatcher* watcher_;
  Health health_ = Health::unknown;
  std::string down_reason_;  // the last drop's, as logged
  bool answered_ = false;    // a reply came on the current connection
  std::string hint_;         // appended to the drop's reason in the per-node records
  bool script_load_noted_ = false;
  std::vector<Reply> probe_replies_;  // the probe's answers so far, at this connect
  bool probe_timed_out_ = false;      // ... and one of them came too late: ask again
  BootClock::time_point probe_asked_{};
  detail::Capabilities logged_caps_;  // the last capabilities logged
  unsigned native_refusals_noted_ = 0;
  BootClock::time_point info_asked_{};
  bool closing_ = false;
  bool conn_closed_ = false;
  bool sub_closed_ = false;
  NodeHost& host_;
  int index_;
  NodeAddress address_;
  std::string name_;
  bool tls_;  // as transport_for() decides
  const Options& options_;
  ReplicaPolicy replicas_;
  std::shared_ptr<const Request> auth_, select_;
  std::string appendonly_, appendfsync_;  // CONFIG GET at the last connect; empty if unknown
  detail::RestartGuard guard_;
  Connection conn_;                // destroyed before the rest, while it is still there
  std::optional<Subscriber> sub_;  // made with the first subscribe()
};

}  // namespace

std::unique_ptr<Node> make_standalone_node(uv_loop_t* loop, NodeHost& host, int index,
                                           TransportMaker transport, const NodeAddress& address,
                                           const Options& options, NodeMetrics* metrics,
                                           MasterWatcher* watcher) {
  return std::make_unique<StandaloneNode>(loop, host, index, std::move(transport), address, options,
                                          metrics, watcher);
}

}  // namespace redlock::net
