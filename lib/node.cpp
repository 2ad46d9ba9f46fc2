#include "node.hpp"

#include "uv_adapter.hpp"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace redlock::detail {
namespace {

// A connection whose oldest command has waited this long is dropped and reconnected, so a
// paused or silent server cannot make the pipeline (and memory) grow without bound.
Millis stall_limit(const Options& o) { return std::max(Millis{1000}, o.node_timeout * 10); }

std::chrono::microseconds since(BootClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(BootClock::now() - t);
}

void append_bulk(std::string& out, std::string_view a) {
  char num[24];
  auto [p, ec] = std::to_chars(num, num + sizeof num, a.size());
  (void)ec;
  out += '$';
  out.append(num, p);
  out += "\r\n";
  out.append(a);
  out += "\r\n";
}

void append_header(std::string& out, int argc) {
  char num[24];
  auto [p, ec] = std::to_chars(num, num + sizeof num, argc);
  (void)ec;
  out += '*';
  out.append(num, p);
  out += "\r\n";
}

// Handshake command tags.
enum : std::uint32_t { hs_auth, hs_select, hs_script_load, hs_info, hs_config, hs_appendonly, hs_appendfsync };

// No reply this client asks for has more elements than this (INFO is one bulk string).
constexpr int max_reply_elements = 1 << 16;

}  // namespace

// hiredis 0.14 trusts what the server sends. A reply that no command is waiting for trips an
// assert() in redisProcessCallbacks (the whole process aborts), and a multi-bulk header is
// calloc'ed at whatever count it claims (2^31 - 1 elements: 16 GB reserved, then seconds spent
// walking it when the half-read reply is freed). These reader hooks wrap hiredis's own object
// functions and refuse both before hiredis acts on them. A refusal is a reader error: hiredis
// drops the connection, every command pending on it is "down" with the reason below, and the
// node reconnects with backoff.
struct ReplyGuard {
  static inline redisReplyObjectFunctions* hiredis_functions = nullptr;
  static redisReplyObjectFunctions functions;

  static void install(redisAsyncContext* ac) {
    redisReader* reader = ac->c.reader;
    if (reader == nullptr) return;
    if (hiredis_functions == nullptr) hiredis_functions = reader->fn;  // the same static table each time
    if (reader->fn != hiredis_functions) return;  // not the table we know how to wrap
    reader->fn = &functions;
    reader->privdata = ac;
  }

  static Node* node(const redisReadTask* t) {
    return static_cast<Node*>(static_cast<redisAsyncContext*>(t->privdata)->data);
  }

  // A top-level reply while no callback is queued would reach hiredis's assert.
  static bool unsolicited(const redisReadTask* t) {
    if (t->parent != nullptr) return false;
    const auto* ac = static_cast<const redisAsyncContext*>(t->privdata);
    if (ac->replies.head != nullptr) return false;
    refuse(t, "protocol error: a reply no command was waiting for");
    return true;
  }

  static void refuse(const redisReadTask* t, std::string why) {
    Node* n = node(t);
    if (n == nullptr) return;
    n->last_error_ = why;
    n->refusal_ = std::move(why);
  }

  static void* create_string(const redisReadTask* t, char* s, std::size_t len) {
    return unsolicited(t) ? nullptr : hiredis_functions->createString(t, s, len);
  }
  static void* create_array(const redisReadTask* t, int elements) {
    if (unsolicited(t)) return nullptr;
    if (elements > max_reply_elements) {
      refuse(t, "protocol error: a reply of " + std::to_string(elements) +
                    " elements (more than " + std::to_string(max_reply_elements) + ")");
      return nullptr;
    }
    return hiredis_functions->createArray(t, elements);
  }
  static void* create_integer(const redisReadTask* t, long long v) {
    return unsolicited(t) ? nullptr : hiredis_functions->createInteger(t, v);
  }
  static void* create_nil(const redisReadTask* t) {
    return unsolicited(t) ? nullptr : hiredis_functions->createNil(t);
  }
  static void free_object(void* o) { hiredis_functions->freeObject(o); }
};

redisReplyObjectFunctions ReplyGuard::functions = {
    &ReplyGuard::create_string, &ReplyGuard::create_array, &ReplyGuard::create_integer,
    &ReplyGuard::create_nil, &ReplyGuard::free_object};

Command& Command::arg(std::string_view a) {
  append_bulk(body_, a);
  ++argc_;
  return *this;
}

Command& Command::arg(long long v) {
  char num[24];
  auto [p, ec] = std::to_chars(num, num + sizeof num, v);
  (void)ec;
  return arg(std::string_view(num, static_cast<std::size_t>(p - num)));
}

class Node::HandshakeSink final : public Sink {
 public:
  explicit HandshakeSink(Node& n) : node_(n) {}
  void on_result(int, std::uint32_t tag, const NodeResult& r) override {
    node_.on_handshake_reply(tag, r);
  }
  void on_done() override {}

 private:
  Node& node_;
};

Node::Node(uv_loop_t* loop, NodeHost& host, int index, NodeAddress address, const Options& options)
    : loop_(loop),
      host_(host),
      index_(index),
      address_(std::move(address)),
      name_(address_.to_string()),
      options_(options),
      backoff_(options.reconnect_min),
      handshake_sink_(std::make_unique<HandshakeSink>(*this)) {
  uv_timer_init(loop_, &deadline_timer_);
  uv_timer_init(loop_, &retry_timer_);
  deadline_timer_.data = this;
  retry_timer_.data = this;
  open_handles_ = 2;
}

Node::~Node() = default;

void Node::start() {
  if (state_ == State::idle) connect();
}

void Node::connect() {
  redisAsyncContext* ac = address_.transport == NodeAddress::Transport::unix_socket
                              ? redisAsyncConnectUnix(address_.path.c_str())
                              : redisAsyncConnect(address_.host.c_str(), address_.port);
  if (ac == nullptr) {
    last_error_ = "out of memory";
    schedule_reconnect();
    return;
  }
  if (ac->err) {
    last_error_ = ac->errstr;
    redisAsyncFree(ac);
    schedule_reconnect();
    return;
  }
  if (!attach_to_loop(ac, loop_)) {
    last_error_ = "cannot attach to the event loop";
    redisAsyncFree(ac);
    schedule_reconnect();
    return;
  }
  ac->data = this;
  ReplyGuard::install(ac);
  redisAsyncSetConnectCallback(ac, &Node::on_connect);
  redisAsyncSetDisconnectCallback(ac, &Node::on_disconnect);
  ctx_ = ac;
  state_ = State::connecting;
  uv_timer_start(&retry_timer_, &Node::on_retry_timer,
                 static_cast<std::uint64_t>(options_.connect_timeout.count()), 0);
  send_handshake();
}

void Node::send_handshake() {
  Command c;
  if (!address_.password.empty()) {
    c.arg("AUTH");
    if (!address_.user.empty()) c.arg(address_.user);
    c.arg(address_.password);
    send(c, options_.connect_timeout, *handshake_sink_, hs_auth);
    c.clear();
  }
  if (address_.db != 0) {
    send(c.arg("SELECT").arg(static_cast<long long>(address_.db)), options_.connect_timeout,
         *handshake_sink_, hs_select);
    c.clear();
  }
  for (std::size_t i = 0; i < script_count(); ++i) {
    send(c.arg("SCRIPT").arg("LOAD").arg(script(static_cast<ScriptId>(i)).body),
         options_.connect_timeout, *handshake_sink_, hs_script_load);
    c.clear();
  }
  send(c.arg("INFO").arg("server"), options_.connect_timeout, *handshake_sink_, hs_info);
  c.clear();
  send(c.arg("CONFIG").arg("GET").arg("maxmemory-policy"), options_.connect_timeout,
       *handshake_sink_, hs_config);
  // Whether fence counters survive a crash (see Node::fence_durability_problem). One parameter
  // per CONFIG GET: Redis before 7 takes only one.
  appendonly_.clear();
  appendfsync_.clear();
  c.clear();
  send(c.arg("CONFIG").arg("GET").arg("appendonly"), options_.connect_timeout, *handshake_sink_,
       hs_appendonly);
  c.clear();
  send(c.arg("CONFIG").arg("GET").arg("appendfsync"), options_.connect_timeout, *handshake_sink_,
       hs_appendfsync);
}

void Node::on_connect(const redisAsyncContext* ac, int status) {
  auto* self = static_cast<Node*>(ac->data);
  if (self->ctx_ != ac) return;
  if (status != REDIS_OK) {
    // hiredis frees the context after this callback.
    self->last_error_ = ac->errstr[0] ? ac->errstr : "connect failed";
    self->ctx_ = nullptr;
    self->host_.log(LogLevel::debug, self->name_ + ": connect failed: " + self->last_error_);
    self->schedule_reconnect();
    return;
  }
  self->state_ = State::connected;
  uv_timer_stop(&self->retry_timer_);
}

void Node::on_disconnect(const redisAsyncContext* ac, int status) {
  auto* self = static_cast<Node*>(ac->data);
  if (self->ctx_ != ac) return;  // we freed it ourselves and already moved on
  self->ctx_ = nullptr;
  if (!self->refusal_.empty()) {
    self->last_error_ = std::move(self->refusal_);  // hiredis's own text would say "Out of memory"
    self->refusal_.clear();
  } else {
    self->last_error_ = status == REDIS_OK ? "disconnected" : (ac->errstr[0] ? ac->errstr : "disconnected");
  }
  self->host_.log(LogLevel::warning, self->name_ + ": connection lost: " + self->last_error_);
  if (self->state_ == State::draining) {
    self->finish_close();
  } else if (self->state_ != State::closing) {
    self->schedule_reconnect();
  }
}

void Node::drop(const std::string& why) {
  last_error_ = why;
  redisAsyncContext* ac = ctx_;
  ctx_ = nullptr;
  schedule_reconnect();  // before freeing: commands sent from the callbacks below must fail
  if (ac != nullptr) redisAsyncFree(ac);
}

void Node::schedule_reconnect() {
  if (state_ == State::closing || state_ == State::closed) return;
  state_ = State::backoff;
  uv_timer_start(&retry_timer_, &Node::on_retry_timer, static_cast<std::uint64_t>(backoff_.count()),
                 0);
  backoff_ = std::min(backoff_ * 2, options_.reconnect_max);
}

void Node::on_retry_timer(uv_timer_t* t) {
  auto* self = static_cast<Node*>(t->data);
  if (self->state_ == State::connecting) {
    self->host_.log(LogLevel::debug, self->name_ + ": connect timeout");
    self->drop("connect timeout after " + std::to_string(self->options_.connect_timeout.count()) +
               " ms");
  } else if (self->state_ == State::backoff) {
    self->connect();
  } else if (self->state_ == State::draining) {
    self->finish_close();
  }
}

std::uint64_t Node::deadline_after(Millis timeout) {
  uv_update_time(loop_);
  std::uint64_t budget = static_cast<std::uint64_t>(timeout.count());
  // A command queued while the connection is being set up also waits for the connect: give it
  // the connect deadline on top, so a fresh client's first call is not a guaranteed timeout.
  if (state_ == State::connecting) budget += static_cast<std::uint64_t>(options_.connect_timeout.count());
  return uv_now(loop_) + budget;
}

bool Node::send(const Command& cmd, Millis timeout, Sink& sink, std::uint32_t tag) {
  scratch_.clear();
  append_header(scratch_, cmd.argc());
  scratch_ += cmd.body();
  auto now = BootClock::now();
  return write(scratch_, sink, tag, -1, {}, 0, timeout, false, false, now, deadline_after(timeout));
}

bool Node::send_script(ScriptId id, int numkeys, const Command& keys_and_args, Millis timeout,
                       Sink& sink, std::uint32_t tag) {
  std::string tail;
  tail.reserve(keys_and_args.body().size() + 16);
  char num[24];
  auto [p, ec] = std::to_chars(num, num + sizeof num, numkeys);
  (void)ec;
  append_bulk(tail, std::string_view(num, static_cast<std::size_t>(p - num)));
  tail += keys_and_args.body();
  const int tail_argc = keys_and_args.argc() + 1;
  scratch_.clear();
  append_header(scratch_, tail_argc + 2);
  append_bulk(scratch_, "EVALSHA");
  append_bulk(scratch_, script(id).sha);
  scratch_ += tail;
  auto now = BootClock::now();
  return write(scratch_, sink, tag, static_cast<int>(id), std::move(tail), tail_argc, timeout,
               false, false, now, deadline_after(timeout));
}

bool Node::write(std::string_view resp, Sink& sink, std::uint32_t tag, int script_id,
                 std::string tail, int tail_argc, Millis timeout, bool delivered, bool retried,
                 BootClock::time_point sent, std::uint64_t deadline_ms) {
  (void)timeout;
  const bool open = state_ == State::connecting || state_ == State::connected ||
                    (state_ == State::draining && retried);  // a NOSCRIPT retry may still go out
  if (ctx_ == nullptr || !open) return false;
  if (redisAsyncFormattedCommand(ctx_, &Node::on_reply, this, resp.data(), resp.size()) !=
      REDIS_OK) {
    return false;
  }
  // A node whose oldest command already timed out is stalled (paused, partitioned, overloaded):
  // this command still goes out (a delete must reach it if it ever resumes), but its caller is
  // told "timeout" on the next loop turn instead of waiting node_timeout once more.
  if (!delivered && !inflight_.empty() && inflight_.front().timed_out) deadline_ms = uv_now(loop_);
  inflight_.push_back(InFlight{&sink, tag, delivered, retried, script_id, sent, deadline_ms,
                               std::move(tail), tail_argc});
  // Re-arm when this deadline is earlier than what the timer waits for (e.g. a stall check).
  if (!delivered && (!uv_is_active(reinterpret_cast<uv_handle_t*>(&deadline_timer_)) ||
                     deadline_ms < timer_due_)) {
    arm_timer();
  }
  return true;
}

void Node::on_reply(redisAsyncContext* ac, void* reply, void* privdata) {
  (void)ac;
  static_cast<Node*>(privdata)->handle_reply(static_cast<redisReply*>(reply));
}

void Node::handle_reply(const redisReply* reply) {
  // hiredis answers callbacks in the order the commands were sent: the front is ours.
  InFlight f = std::move(inflight_.front());
  inflight_.pop_front();
  if (settled_ > 0) --settled_;
  if (reply == nullptr) {
    deliver(f, NodeResult{NodeResult::Kind::down, nullptr,
                          last_error_.empty() ? std::string_view("connection lost") : last_error_,
                          since(f.sent)});
  } else {
    backoff_ = options_.reconnect_min;  // the server answers: reconnect quickly next time
    if (f.script >= 0 && !f.retried && reply->type == REDIS_REPLY_ERROR &&
        std::string_view(reply->str, reply->len).starts_with("NOSCRIPT")) {
      // The script cache was flushed (SCRIPT FLUSH, restart): the script did not run, so sending
      // the same call with EVAL is safe. Keep the original deadline and delivery state.
      const Script& s = script(static_cast<ScriptId>(f.script));
      std::string resp;
      append_header(resp, f.tail_argc + 2);
      append_bulk(resp, "EVAL");
      append_bulk(resp, s.body);
      resp += f.tail;
      if (write(resp, *f.sink, f.tag, f.script, {}, 0, Millis{0}, f.delivered, true, f.sent,
                f.deadline_ms)) {
        return;  // the sink keeps its slot: still exactly one on_result()/on_done()
      }
    }
    deliver(f, NodeResult{NodeResult::Kind::reply, reply, {}, since(f.sent)});
  }
  f.sink->on_done();
  if (state_ == State::draining && inflight_.empty()) {
    // Inside a hiredis callback: hiredis defers the free until the callback returns.
    finish_close();
  }
}

void Node::deliver(InFlight& f, const NodeResult& r) {
  if (f.delivered) return;
  f.delivered = true;
  if (metrics_ != nullptr) {
    switch (r.kind) {
      case NodeResult::Kind::timeout: ++metrics_->timeouts; break;
      case NodeResult::Kind::down: ++metrics_->down; break;
      case NodeResult::Kind::reply:
        ++(r.reply->type == REDIS_REPLY_ERROR ? metrics_->errors : metrics_->ok);
        metrics_->latency.observe(std::chrono::duration<double>(r.latency).count());
        break;
    }
  }
  f.sink->on_result(index_, f.tag, r);
}

std::size_t Node::first_unsettled() {
  while (settled_ < inflight_.size() && inflight_[settled_].delivered) ++settled_;
  return settled_;
}

void Node::arm_timer() {
  std::uint64_t earliest = UINT64_MAX;
  for (std::size_t i = first_unsettled(); i < inflight_.size(); ++i) {
    if (!inflight_[i].delivered) earliest = std::min(earliest, inflight_[i].deadline_ms);
  }
  if (!inflight_.empty()) {
    // Also wake up to notice a stalled connection.
    std::uint64_t stall = static_cast<std::uint64_t>(stall_limit(options_).count());
    auto front_age_ms = static_cast<std::uint64_t>(
        std::chrono::duration_cast<Millis>(BootClock::now() - inflight_.front().sent).count());
    std::uint64_t stall_at = uv_now(loop_) + (stall > front_age_ms ? stall - front_age_ms : 0);
    earliest = std::min(earliest, stall_at);
  }
  if (earliest == UINT64_MAX) return;
  std::uint64_t now = uv_now(loop_);
  timer_due_ = std::max(earliest, now);
  uv_timer_start(&deadline_timer_, &Node::on_timer, timer_due_ - now, 0);
}

void Node::on_timer(uv_timer_t* t) { static_cast<Node*>(t->data)->expire_commands(); }

bool Node::due(std::uint64_t now) {
  for (std::size_t i = first_unsettled(); i < inflight_.size(); ++i) {
    if (!inflight_[i].delivered && inflight_[i].deadline_ms <= now) return true;
  }
  return false;
}

void Node::expire_commands() {
  const std::uint64_t now = uv_now(loop_);
  // libuv runs timers before it polls for I/O: after the loop was held up (a burst of work, a
  // descheduled thread) answers that arrived in time may still sit unread in the socket. Read
  // them first, so that only commands the server has really not answered time out; otherwise
  // any stall longer than node_timeout fails healthy nodes and, with them, the quorum.
  if (state_ == State::connected && ctx_ != nullptr && due(now)) redisAsyncHandleRead(ctx_);
  // Deliver timeouts. A sink may send more commands from on_result(): they are appended at the
  // back, so iterate by index over a size fixed up front.
  const std::size_t n = inflight_.size();
  for (std::size_t i = first_unsettled(); i < n && i < inflight_.size(); ++i) {
    InFlight& f = inflight_[i];
    if (!f.delivered && f.deadline_ms <= now) {
      f.timed_out = true;
      deliver(f, NodeResult{NodeResult::Kind::timeout, nullptr, {}, since(f.sent)});
    }
  }
  if (!inflight_.empty() && since(inflight_.front().sent) >= stall_limit(options_)) {
    host_.log(LogLevel::warning,
              name_ + ": no answer for " + std::to_string(stall_limit(options_).count()) +
                  " ms; reconnecting");
    drop("no answer for " + std::to_string(stall_limit(options_).count()) + " ms");
    return;
  }
  arm_timer();
}

void Node::on_handshake_reply(std::uint32_t tag, const NodeResult& r) {
  if (r.kind != NodeResult::Kind::reply) return;
  const redisReply* rep = r.reply;
  if (rep->type == REDIS_REPLY_ERROR) {
    std::string err(rep->str, rep->len);
    if (tag == hs_auth) {
      // Commands pipelined behind a failed AUTH would run as the default user: drop the
      // connection so none of them counts, and say why in every per-node record.
      host_.log(LogLevel::error, name_ + ": AUTH failed: " + err);
      drop("AUTH failed: " + err);
    } else if (tag == hs_select) {
      host_.log(LogLevel::error, name_ + ": SELECT failed: " + err);
      drop("SELECT failed: " + err);  // the wrong database must not take votes
    } else if (tag != hs_config && tag != hs_appendonly && tag != hs_appendfsync) {
      // CONFIG may be disabled or renamed: say nothing
      host_.log(LogLevel::debug, name_ + ": handshake: " + err);
    }
    return;
  }
  if (tag == hs_config && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
      rep->element[1]->type == REDIS_REPLY_STRING) {
    std::string_view policy(rep->element[1]->str, rep->element[1]->len);
    if (policy != "noeviction") {
      host_.log(LogLevel::warning, name_ + ": maxmemory-policy is " + std::string(policy) +
                                       ": Redis may evict lock keys under memory pressure; "
                                       "use noeviction on lock nodes");
    }
  }
  if ((tag == hs_appendonly || tag == hs_appendfsync) && rep->type == REDIS_REPLY_ARRAY &&
      rep->elements == 2 && rep->element[1]->type == REDIS_REPLY_STRING) {
    (tag == hs_appendonly ? appendonly_ : appendfsync_)
        .assign(rep->element[1]->str, rep->element[1]->len);
  }
  if (tag == hs_info && (rep->type == REDIS_REPLY_STRING)) {
    std::string_view info(rep->str, rep->len);
    auto field = [&](std::string_view name) -> std::string_view {
      auto pos = info.find(name);
      if (pos == std::string_view::npos) return {};
      pos += name.size();
      auto end = info.find_first_of("\r\n", pos);
      return info.substr(pos, end == std::string_view::npos ? info.npos : end - pos);
    };
    std::string run_id(field("\nrun_id:"));
    if (run_id.empty()) run_id = std::string(field("run_id:"));
    long long uptime = 0;
    auto up = field("uptime_in_seconds:");
    std::from_chars(up.data(), up.data() + up.size(), uptime);
    const auto now = BootClock::now();
    // uptime is rounded down: the server came back at most `uptime` seconds ago.
    came_up_ = now - std::chrono::seconds(uptime);
    if (!options_.durable_nodes) {
      if (!run_id_.empty() && run_id != run_id_) {
        auto until = came_up_ + host_.restart_quarantine();
        if (!quarantine_until_ || until > *quarantine_until_) {
          quarantine_until_ = until;
          quarantine_reason_ = "restart guard: server restarted (run_id changed)";
        }
        host_.log(LogLevel::warning, name_ + ": server restarted (run_id changed); its votes are "
                                             "excluded until one max ttl has passed");
      }
      if (options_.min_node_uptime > Millis{0}) {
        auto until = came_up_ + options_.min_node_uptime;
        if (until > now && (!quarantine_until_ || until > *quarantine_until_)) {
          quarantine_until_ = until;
          quarantine_reason_ = "restart guard: uptime " + std::to_string(uptime) +
                               " s is below the minimum uptime";
        }
      }
    }
    run_id_ = std::move(run_id);
  }
}

std::optional<std::string> Node::vote_exclusion(BootClock::time_point now) const {
  if (options_.durable_nodes || !quarantine_until_ || now >= *quarantine_until_) return std::nullopt;
  auto left = std::chrono::duration_cast<Millis>(*quarantine_until_ - now).count();
  return quarantine_reason_ + " (" + std::to_string(left) + " ms left)";
}

void Node::close() {
  if (state_ == State::closing || state_ == State::closed || state_ == State::draining) return;
  if (ctx_ != nullptr && state_ == State::connected && !inflight_.empty()) {
    // Let what is already queued reach the server (a rollback or release written just before
    // close must not be lost, or its key would stay until the ttl), bounded by a deadline.
    state_ = State::draining;
    uv_timer_stop(&deadline_timer_);
    uv_timer_start(&retry_timer_, &Node::on_retry_timer,
                   static_cast<std::uint64_t>((options_.node_timeout * 2).count()), 0);
    return;
  }
  finish_close();
}

void Node::finish_close() {
  state_ = State::closing;
  redisAsyncContext* ac = ctx_;
  ctx_ = nullptr;
  last_error_ = "shutting down";
  if (ac != nullptr) redisAsyncFree(ac);
  uv_close(reinterpret_cast<uv_handle_t*>(&deadline_timer_), &Node::on_handle_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&retry_timer_), &Node::on_handle_closed);
}

void Node::on_handle_closed(uv_handle_t* h) {
  auto* self = static_cast<Node*>(h->data);
  if (--self->open_handles_ == 0) {
    self->state_ = State::closed;
    self->host_.on_node_closed(self->index_);
  }
}

std::optional<std::string> Node::fence_durability_problem() const {
  if (appendonly_.empty() || appendfsync_.empty()) return std::nullopt;  // unknown: say nothing
  if (appendonly_ != "yes") return "appendonly " + appendonly_;
  if (appendfsync_ != "always") return "appendfsync " + appendfsync_;
  return std::nullopt;
}

}  // namespace redlock::detail
