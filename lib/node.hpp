#pragma once
// One connection to one Redis master: a long-lived handle in libuv's sense.
//
// It owns one hiredis async context attached to the loop through hiredis's libuv adapter, a
// timer for connect deadlines / reconnect backoff, and a timer for per-command deadlines
// (hiredis 0.14 has no async timeouts). Commands are pipelined on the one connection.
//
// Callback contract (same as hiredis): for every command `send()` accepted, the sink's
// on_result() runs exactly once (a reply, a timeout, or "down" when the connection is lost),
// and then on_done() runs exactly once when the node drops its reference to the sink (which
// can be later than on_result(): a timed-out command still owns its slot until Redis answers or
// the connection is freed). If send() returns false, neither runs.

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redlock/lock.hpp"
#include "redlock/metrics.hpp"
#include "redlock/options.hpp"
#include "scripts.hpp"

struct redisAsyncContext;
struct redisReply;

namespace redlock::detail {

struct NodeResult {
  enum class Kind { reply, timeout, down };
  Kind kind = Kind::down;
  const redisReply* reply = nullptr;  // Kind::reply only; valid during the on_result() call only
  std::string_view error;             // Kind::down: why
  std::chrono::microseconds latency{0};
};

class Sink {
 public:
  virtual void on_result(int node, std::uint32_t tag, const NodeResult& result) = 0;
  virtual void on_done() = 0;

 protected:
  ~Sink() = default;
};

// What the engine tells its nodes (implemented by the engine).
class NodeHost {
 public:
  virtual void log(LogLevel level, const std::string& message) = 0;
  virtual void on_node_closed(int index) = 0;
  virtual Millis restart_quarantine() const = 0;

 protected:
  ~NodeHost() = default;
};

// A reusable argument list: the RESP encoding is built once per command without per-argument
// allocations.
class Command {
 public:
  Command& arg(std::string_view a);
  Command& arg(long long v);
  void clear() { argc_ = 0; body_.clear(); }
  [[nodiscard]] int argc() const { return argc_; }
  [[nodiscard]] const std::string& body() const { return body_; }  // the arguments, RESP-encoded

 private:
  int argc_ = 0;
  std::string body_;
};

class Node {
 public:
  Node(uv_loop_t* loop, NodeHost& host, int index, NodeAddress address, const Options& options);
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();

  void start();
  // Frees the connection (pending commands see "down") and closes the timers; then calls
  // host.on_node_closed(index). Idempotent.
  void close();

  // Sends a plain command. `timeout` is this command's deadline.
  bool send(const Command& cmd, Millis timeout, Sink& sink, std::uint32_t tag);
  // Sends EVALSHA for `id` with `keys` then `args`; on NOSCRIPT the node retries once with EVAL.
  bool send_script(ScriptId id, int numkeys, const Command& keys_and_args, Millis timeout,
                   Sink& sink, std::uint32_t tag);

  [[nodiscard]] const std::string& name() const { return name_; }
  // Where to count what this connection sees (owned by the engine, outlives the node).
  void set_metrics(NodeMetrics* m) { metrics_ = m; }
  [[nodiscard]] bool connected() const { return state_ == State::connected; }
  [[nodiscard]] const std::string& last_error() const { return last_error_; }
  [[nodiscard]] const std::string& run_id() const { return run_id_; }

  // Why this server's fence counters may not survive a crash or restart ("appendonly no",
  // "appendfsync everysec"), as CONFIG said at the last connect; nullopt when durable or unknown.
  [[nodiscard]] std::optional<std::string> fence_durability_problem() const;
  // Set once the engine has warned about fencing on this node (one warning per node).
  bool fence_warned = false;

  // Restart guard: why a vote from this node must not count now, or nullopt.
  [[nodiscard]] std::optional<std::string> vote_exclusion(BootClock::time_point now) const;

 private:
  enum class State { idle, connecting, connected, backoff, draining, closing, closed };

  struct InFlight {
    Sink* sink;
    std::uint32_t tag;
    bool delivered;
    bool retried;  // the EVAL retry after NOSCRIPT
    int script;    // ScriptId or -1
    BootClock::time_point sent;
    std::uint64_t deadline_ms;  // uv loop time
    std::string tail;           // scripts only: numkeys + keys + args, RESP-encoded
    int tail_argc;
    bool timed_out = false;  // its caller was told "timeout"; the answer is still awaited
  };

  static void on_connect(const redisAsyncContext* ac, int status);
  static void on_disconnect(const redisAsyncContext* ac, int status);
  static void on_reply(redisAsyncContext* ac, void* reply, void* privdata);
  static void on_timer(uv_timer_t* t);
  static void on_retry_timer(uv_timer_t* t);
  static void on_handle_closed(uv_handle_t* h);

  void connect();
  void finish_close();
  void drop(const std::string& why);  // free the context, schedule a reconnect
  void schedule_reconnect();
  bool write(std::string_view resp, Sink& sink, std::uint32_t tag, int script, std::string tail,
             int tail_argc, Millis timeout, bool delivered, bool retried, BootClock::time_point sent,
             std::uint64_t deadline_ms);
  void handle_reply(const redisReply* reply);
  void deliver(InFlight& f, const NodeResult& r);
  void arm_timer();
  // Index of the first command whose caller has not been told yet; everything before it only
  // waits for the server's answer (or the connection's end) and needs no deadline.
  std::size_t first_unsettled();
  bool due(std::uint64_t now);  // some command's deadline has passed
  std::uint64_t deadline_after(Millis timeout);
  void expire_commands();
  void send_handshake();
  void on_handshake_reply(std::uint32_t tag, const NodeResult& r);

  class HandshakeSink;
  friend class HandshakeSink;
  friend struct ReplyGuard;  // lib/node.cpp: refuses replies hiredis 0.14 would mishandle

  // Set by ReplyGuard when it refused a reply; the reason the connection was dropped.
  std::string refusal_;

  uv_loop_t* loop_;
  NodeHost& host_;
  int index_;
  NodeAddress address_;
  std::string name_;
  const Options& options_;

  State state_ = State::idle;
  redisAsyncContext* ctx_ = nullptr;
  uv_timer_t deadline_timer_;  // per-command deadlines
  uv_timer_t retry_timer_;     // connect deadline and reconnect backoff
  int open_handles_ = 0;
  std::uint64_t timer_due_ = 0;  // loop time the deadline timer fires at
  std::deque<InFlight> inflight_;
  // inflight_[0, settled_) have had on_result(): on a stalled node (thousands of timed-out
  // commands awaiting an answer) deadline scans skip them instead of walking the whole queue.
  std::size_t settled_ = 0;
  Millis backoff_;
  std::string last_error_;
  std::string appendonly_, appendfsync_;  // CONFIG GET at the last connect; empty if unknown
  std::string scratch_;  // reused RESP buffer

  // What INFO said at the last connect (restart guard).
  std::string run_id_;
  BootClock::time_point came_up_{};  // local estimate of when the server (re)started
  std::optional<BootClock::time_point> quarantine_until_;
  std::string quarantine_reason_;

  std::unique_ptr<HandshakeSink> handshake_sink_;
  NodeMetrics* metrics_ = nullptr;
};

}  // namespace redlock::detail
