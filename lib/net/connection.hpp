#pragma once
// One connection to one server: a long-lived handle in libuv's sense. It owns its socket (a
// uv_poll_t on an fd of its own: see connection.cpp for why not uv_tcp_t), writes RESP it encodes
// itself, reads into one reused buffer, and parses with net::Reader. It resolves names off the
// loop, connects without blocking (to every address of a name in turn, Happy Eyeballs style),
// reconnects with capped, jittered backoff, and gives every command a deadline.
//
// Reconnect backoff: a failed connection waits reconnect_min, doubling up to reconnect_max, each
// wait drawn from [half, all] of it so that clients that lost a server together do not come back
// together. It starts again from reconnect_min only after a good handshake: the server answered
// every command the listener queued in on_connecting() and the listener kept the connection (it
// drops it, Failure::refused, when an answer refuses us). A refusal (that, or a server that
// answers a handshake command with an error and hangs up: maxclients) waits reconnect_max at once:
// retrying sooner cannot help, and every attempt costs the server a connection and an AUTH.
//
// Listener and sink callbacks may call close() (or drop()) on this connection from inside them;
// the connection checks its state after every callback it makes.
//
// Callback contract (as hiredis's): for every command send() accepted, the sink's on_result()
// runs exactly once (a reply, a timeout, or "down" when the connection is lost), and then
// on_done() runs exactly once when the connection drops its reference to the sink (which can be
// later than on_result(): a timed-out command keeps its place until the server answers or the
// connection ends). If send() returns false, neither runs. A reply lives only during on_result().

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "core/command.hpp"
#include "core/reply.hpp"
#include "net/reader.hpp"
#include "net/resp.hpp"
#include "net/socket.hpp"
#include "net/transport.hpp"
#include "net/uv.hpp"
#include "redlock/lock.hpp"
#include "redlock/metrics.hpp"

namespace redlock::net {

struct Result {
  // down: not connected, or the connection was lost; refused: the server refused this
  // connection's credentials or database (the listener dropped it with Failure::refused).
  enum class Kind { reply, timeout, down, refused };
  Kind kind = Kind::down;
  const detail::Reply* reply = nullptr;  // Kind::reply only; valid during on_result() only
  std::string_view error;                // Kind::down: why
  std::chrono::microseconds latency{0};
  BootClock::time_point at{};  // when the answer (or the timeout, or the loss) was seen
  // Kind::reply from a node that answers through several servers (a Redis Cluster vote): why the
  // server that answered must not give a vote now (restart guard, promotion), else empty.
  std::string_view exclusion;
};

class Sink {
 public:
  virtual void on_result(int node, std::uint32_t tag, const Result& result) = 0;
  virtual void on_done() = 0;

 protected:
  ~Sink() = default;
};

struct ConnectionSettings {
  // Resolve + connect + transport handshake. A name with several addresses gets them all within
  // it: the next address's attempt starts when the previous one has failed, or after a quarter of
  // this (at most 250 ms, RFC 8305's Connection Attempt Delay) without giving up on it; the first
  // to connect is used. An address that did not connect in time goes last the next time.
  Millis connect_timeout{250};
  Millis reconnect_min{50};    // backoff after a failure, doubling ...
  Millis reconnect_max{2000};  // ... up to this
  Millis stall_limit{1000};    // no answer to the oldest command for this long: reconnect
  Millis drain_limit{100};     // close(): how long queued commands may still be answered
  // Which form a release or extend with native forms goes out in (Options::commands), and the
  // server's display address for the records that say why one cannot run.
  Options::Commands commands = Options::Commands::automatic;
  std::string name;
};

class Connection {
 public:
  class Listener {
   public:
    // A new connection is starting: queue what must run before every other command (AUTH, ...).
    // These commands are the handshake (see the backoff above): drop the connection with
    // Failure::refused when one of their answers means this server will not serve us.
    virtual void on_connecting(Connection& c) = 0;
    // Connected, and the transport's handshake is done (`established`: what the transport says
    // of it, e.g. "TLSv1.3, session resumed"; empty for plain sockets).
    virtual void on_ready(Connection& c, const std::string& established) = 0;
    // The connection failed (`was_ready` false) or was lost; it reconnects on its own (after
    // backoff). Its commands have been failed already. The listener may close() it here.
    virtual void on_dropped(Connection& c, const std::string& why, bool was_ready) = 0;
    // close() has finished.
    virtual void on_closed(Connection& c) = 0;
    // The server answered a native command (Request::form) with `reply`, which says it does not
    // run it (detail::refuses_native): the command did not run, and the script call it stands for
    // has been sent instead. The listener stops picking that form for this connection.
    virtual void on_native_refused(Connection& c, detail::NativeForm form,
                                   const detail::Reply& reply) {
      (void)c;
      (void)form;
      (void)reply;
    }

   protected:
    ~Listener() = default;
  };

  // Pub/sub: messages the server pushes on a subscribed connection (["message", channel,
  // payload]) answer no command, so they go here instead of to a sink.
  class PushHandler {
   public:
    virtual void on_push(const detail::Reply& message) = 0;

   protected:
    ~PushHandler() = default;
  };

  Connection(uv_loop_t* loop, Listener& listener, int node, Endpoint endpoint,
             std::unique_ptr<TransportFactory> transport, ConnectionSettings settings);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  void start();
  // Lets what is already queued reach the server and be answered (bounded by drain_limit), then
  // fails whatever is left with "shutting down" and calls listener.on_closed(). Idempotent.
  void close();
  // Fails every pending command with "down" (or "refused") and reason `why`, and reconnects after
  // backoff.
  enum class Failure { down, refused };
  void drop(std::string why, Failure failure = Failure::down);

  // Queues `req` (a script call goes out as EVALSHA; on NOSCRIPT once more as EVAL, which is safe:
  // the script did not run, unless that would put it behind a later command on its keys: see
  // handle_reply). A native form (Request::form) goes out as itself, its reply is delivered as
  // the script's would be (detail::to_script_reply), and when the server refuses it, the script
  // call goes out instead (listener.on_native_refused()). `deadline` is when its caller is told
  // "timeout" (BootClock, absolute: set once where the command was stamped); a command queued
  // while connecting is given the connect on top (core/timing.hpp). `sent` is the caller's clock
  // reading for latencies. False when not connected or connecting.
  bool send(const std::shared_ptr<const Request>& req, BootClock::time_point deadline, Sink& sink,
            std::uint32_t tag, BootClock::time_point sent);
  [[nodiscard]] bool ready() const noexcept { return state_ == State::ready; }
  [[nodiscard]] const std::string& last_error() const noexcept { return last_error_; }
  // The kind of the last failure (a refused login until a later connect gets further).
  [[nodiscard]] Failure last_failure() const noexcept { return last_failure_; }
  // Whether the last drop lost a connection that was ready (else: a connect that failed). Set
  // before the commands are failed, so their sinks can read it.
  [[nodiscard]] bool last_drop_was_ready() const noexcept { return last_drop_was_ready_; }
  void set_metrics(NodeMetrics* m) noexcept { metrics_ = m; }
  // What the server can run, as the listener's probe found at this connect (each start() forgets
  // it: a failover or an upgrade changes the server behind the address). Until it is set, every
  // command goes out in its script form.
  void set_capabilities(const detail::Capabilities& caps) noexcept { caps_ = caps; }
  [[nodiscard]] const detail::Capabilities& capabilities() const noexcept { return caps_; }
  void set_push_handler(PushHandler* h) noexcept { push_ = h; }

 private:
  enum class State { idle, resolving, connecting, handshaking, ready, backoff, draining, closed };

  struct InFlight {
    Sink* sink;
    std::uint32_t tag;
    BootClock::time_point sent;
    BootClock::time_point deadline;
    // Script calls: kept for the EVAL retry; native forms: for the script call they stand for.
    std::shared_ptr<const Request> script;
    bool delivered = false;  // its caller was told (reply, timeout or down)
    bool retried = false;    // the EVAL retry after NOSCRIPT
    bool timed_out = false;  // told "timeout"; the answer is still awaited
    bool handshake = false;  // queued by the listener's on_connecting()
  };

  // One connect in progress to one of the name's addresses (Happy Eyeballs: several at once).
  struct Attempt {
    std::unique_ptr<Socket> socket;
    std::uint64_t id;
    std::size_t address;  // index into addrs_
  };

  void on_resolved(std::vector<SocketAddress> addrs, std::string error);
  void start_attempt();
  void on_attempt(std::uint64_t id, int status, int events);
  void on_socket(int status, int events);
  void continue_handshake();
  void become_ready();
  void on_readable();
  void flush();
  void update_watch();
  void fail_all(std::string_view why, Result::Kind kind = Result::Kind::down);
  void schedule_reconnect(bool refused);
  void on_retry_timer();
  void finish_close();

  void queue(const std::shared_ptr<const Request>& req, Sink& sink, std::uint32_t tag,
             BootClock::time_point sent, BootClock::time_point deadline, bool delivered,
             bool retried, bool handshake);
  void handle_reply(const detail::Reply& reply, BootClock::time_point at);
  [[nodiscard]] std::shared_ptr<const Request> form_of(
      const std::shared_ptr<const Request>& req) const;
  bool resend_instead(InFlight& f, const std::shared_ptr<const Request>& req);
  bool handle_form_reply(InFlight& f, const detail::Reply& reply, BootClock::time_point at);
  void deliver_reply(InFlight& f, const detail::Reply& reply, BootClock::time_point at);
  [[nodiscard]] bool retry_keeps_order(const InFlight& f) const;
  void deliver(InFlight& f, const Result& r);
  [[nodiscard]] std::size_t first_unsettled();
  [[nodiscard]] bool due(BootClock::time_point now);
  void arm_deadline_timer();
  void expire_commands();

  uv_loop_t* loop_;
  Listener& listener_;
  int node_;
  Endpoint endpoint_;
  std::unique_ptr<TransportFactory> factory_;
  ConnectionSettings settings_;

  State state_ = State::idle;
  Resolver resolver_;
  std::vector<SocketAddress> addrs_;         // of this connect, in the order they are tried
  std::vector<std::size_t> resolved_order_;  // their places in the resolver's answer
  std::size_t next_addr_ = 0;                // the next one to start an attempt on
  std::vector<Attempt> attempts_;            // connects in progress
  std::uint64_t attempt_ids_ = 0;
  // Where in the resolver's list the next connect starts: the address that connected last time,
  // or past the one that failed (a blackholed first address must not eat every connect_timeout).
  std::size_t first_addr_ = 0;
  std::string connect_errors_;  // of the addresses tried so far
  std::unique_ptr<Socket> socket_;
  std::unique_ptr<Transport> transport_;
  // Grows with every drop and close: a callback can tell the connection went away under it.
  std::uint64_t generation_ = 0;

  Reader reader_;
  std::string out_;                    // encoded, not yet written
  std::size_t out_sent_ = 0;           // bytes of out_ already written
  bool write_blocked_ = false;         // the last write could not finish ...
  bool write_waits_writable_ = false;  // ... until the socket is writable (else: readable, TLS)
  bool read_waits_writable_ = false;   // the last read waits for writability (TLS)
  char in_[16 * 1024];

  // The handshake of this connection (see the top of this file).
  bool in_on_connecting_ = false;   // what is sent now is the handshake
  std::size_t handshake_left_ = 0;  // its commands not answered yet
  bool handshake_done_ = false;     // all answered, the connection kept: the backoff starts over
  bool handshake_error_ = false;    // one was answered with an error

  std::deque<InFlight> inflight_;
  // inflight_[0, settled_) have had on_result(): on a stalled server (thousands of timed-out
  // commands awaiting an answer) deadline scans skip them instead of walking the whole queue.
  std::size_t settled_ = 0;
  BootClock::time_point timer_due_{};  // the earliest deadline the deadline timer is armed for

  Timer deadline_timer_;  // per-command deadlines
  Timer retry_timer_;     // connect deadline, reconnect backoff, drain limit
  Timer attempt_timer_;   // the next address's connect attempt
  Prepare flusher_;       // writes once per loop turn
  // Active while a flush is scheduled, so the loop does not block before its prepare phase ran:
  // a loop driven in non-blocking passes (the Client's I/O thread, client_impl.hpp) polls again
  // instead of waiting with writes still queued. A loop run by uv_run alone never notices (the
  // prepare phase stops it before the poll).
  Idle flush_due_;
  Millis backoff_;  // the next reconnect waits up to this
  std::minstd_rand jitter_;
  std::string last_error_;
  Failure last_failure_ = Failure::down;
  bool last_drop_was_ready_ = false;
  NodeMetrics* metrics_ = nullptr;
  PushHandler* push_ = nullptr;
  detail::Capabilities caps_;
};

}  // namespace redlock::net
