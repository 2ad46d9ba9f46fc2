// Why a uv_poll_t on a socket of our own and not a uv_tcp_t stream: the connection writes and
// reads through a Transport (plain or TLS) that needs the raw fd and readiness, not libuv's
// buffers; the same code then serves TCP and unix sockets (uv_tcp_t and uv_pipe_t otherwise);
// writes go straight from our buffer with no uv_write_t request per write; and the poll handle's
// interest only changes when a write blocks (libuv 1.44 re-registers the fd with epoll on every
// uv_poll_start, so toggling write interest per command cost four epoll_ctl calls each).

#include "net/connection.hpp"

#include <algorithm>
#include <span>

#include "core/timing.hpp"
#include "net/resp.hpp"

namespace redlock::net {
namespace {

std::chrono::microseconds latency(BootClock::time_point sent, BootClock::time_point at) {
  return std::chrono::duration_cast<std::chrono::microseconds>(at - sent);
}

std::uint64_t ms(Millis d) { return static_cast<std::uint64_t>(d.count()); }

// The indices of `addrs` in the order to try them: from `first` on (wrapping), the address
// families interleaved, the first one's family first (RFC 8305, section 4), so that a family that
// drops packets costs one attempt delay per address, not a whole connect deadline.
std::vector<std::size_t> connect_order(const std::vector<SocketAddress>& addrs, std::size_t first) {
  const std::size_t n = addrs.size();
  std::vector<std::size_t> same, other;
  const auto family = addrs[first % n].get()->sa_family;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = (first + k) % n;
    (addrs[i].get()->sa_family == family ? same : other).push_back(i);
  }
  std::vector<std::size_t> order;
  for (std::size_t k = 0; k < std::max(same.size(), other.size()); ++k) {
    if (k < same.size()) order.push_back(same[k]);
    if (k < other.size()) order.push_back(other[k]);
  }
  return order;
}

}  // namespace

Connection::Connection(uv_loop_t* loop, Listener& listener, int node, Endpoint endpoint,
                       std::unique_ptr<TransportFactory> transport, ConnectionSettings settings)
    : loop_(loop),
      listener_(listener),
      node_(node),
      endpoint_(std::move(endpoint)),
      factory_(std::move(transport)),
      settings_(settings),
      deadline_timer_(loop, [this] { expire_commands(); }),
      retry_timer_(loop, [this] { on_retry_timer(); }),
      attempt_timer_(loop, [this] { start_attempt(); }),
      flusher_(loop, [this] { flush(); }),
      flush_due_(loop),
      backoff_(settings.reconnect_min),
      jitter_(std::random_device{}()) {}

Connection::~Connection() {
  resolver_.cancel();
  transport_.reset();
  socket_.reset();
  attempts_.clear();
}

void Connection::start() {
  if (state_ != State::idle && state_ != State::backoff) return;
  state_ = State::resolving;
  retry_timer_.start(ms(settings_.connect_timeout));
  handshake_left_ = 0;
  handshake_done_ = false;
  handshake_error_ = false;
  caps_ = {};
  // What the listener queues now goes out first on the new connection: its handshake.
  in_on_connecting_ = true;
  listener_.on_connecting(*this);
  in_on_connecting_ = false;
  if (state_ != State::resolving) return;
  resolver_.start(loop_, endpoint_, [this](std::vector<SocketAddress> a, std::string err) {
    on_resolved(std::move(a), std::move(err));
  });
}

void Connection::on_resolved(std::vector<SocketAddress> addrs, std::string error) {
  if (state_ != State::resolving) return;
  if (!error.empty()) {
    drop(error);
    return;
  }
  addrs_.clear();
  resolved_order_ = connect_order(addrs, first_addr_);
  for (std::size_t i : resolved_order_) addrs_.push_back(addrs[i]);
  next_addr_ = 0;
  connect_errors_.clear();
  state_ = State::connecting;
  start_attempt();
}

// The next address's connect, beside those still in progress (Happy Eyeballs, RFC 8305): when the
// attempt delay has passed, or at once when an attempt has failed.
void Connection::start_attempt() {
  if (state_ != State::connecting) return;
  while (next_addr_ < addrs_.size()) {
    std::string err;
    const std::uint64_t id = ++attempt_ids_;
    auto socket = Socket::connect(
        loop_, addrs_[next_addr_++],
        [this, id](int status, int events) { on_attempt(id, status, events); }, err);
    if (socket) {
      socket->watch(UV_WRITABLE);  // a non-blocking connect completes on writability
      attempts_.push_back({std::move(socket), id, next_addr_ - 1});
      if (next_addr_ < addrs_.size())
        attempt_timer_.start(ms(detail::connection_attempt_delay(settings_.connect_timeout)));
      return;
    }
    connect_errors_ += (connect_errors_.empty() ? "" : "; ") + err;
  }
  if (attempts_.empty()) {
    drop(connect_errors_.empty() ? std::string("connect failed") : connect_errors_);
  }
}

void Connection::on_attempt(std::uint64_t id, int status, int events) {
  if (state_ != State::connecting) {
    // The winner's socket: its events are the connection's from now on.
    if (socket_) on_socket(status, events);
    return;
  }
  const auto it = std::find_if(attempts_.begin(), attempts_.end(),
                               [id](const Attempt& a) { return a.id == id; });
  if (it == attempts_.end()) return;
  std::string err = it->socket->connect_error();
  if (err.empty() && status < 0) err = uv_strerror(status);
  if (!err.empty()) {
    connect_errors_ += (connect_errors_.empty() ? "" : "; ") + err;
    attempts_.erase(it);
    attempt_timer_.stop();
    start_attempt();  // the next address at once (or the drop, when none is left)
    return;
  }
  if ((events & UV_WRITABLE) == 0) return;
  // Connected: the others are given up, and the next connect tries this address first.
  first_addr_ = resolved_order_[it->address];
  socket_ = std::move(it->socket);
  attempts_.clear();
  attempt_timer_.stop();
  transport_ = factory_->wrap(socket_->fd());
  state_ = State::handshaking;
  continue_handshake();
}

void Connection::on_socket(int status, int events) {
  switch (state_) {
    case State::handshaking:
      continue_handshake();
      return;
    case State::ready:
    case State::draining: {
      // On an error status libuv has stopped watching: a read or write now meets the socket's
      // error (and drops the connection with its text).
      // A TLS transport may need to write to read on, or read to write on: whichever way the
      // socket became ready, both directions get their turn (a blocked write is tried again
      // after every read: it may have been waiting for what the read took in).
      const auto gen = generation_;
      if (status < 0 || (events & UV_READABLE) || read_waits_writable_) on_readable();
      if (gen != generation_) return;
      if (status < 0 || (events & UV_WRITABLE) || write_blocked_) flush();
      if (gen != generation_) return;
      if (status < 0) drop(std::string("socket error: ") + uv_strerror(status));
      return;
    }
    default:
      return;
  }
}

void Connection::continue_handshake() {
  switch (transport_->handshake()) {
    case Transport::Status::ok:
      become_ready();
      return;
    case Transport::Status::again:
      socket_->watch(UV_READABLE | (transport_->wants_write() ? UV_WRITABLE : 0));
      return;
    case Transport::Status::closed:
      drop("connection closed during the " + std::string(factory_->kind()) + " handshake");
      return;
    case Transport::Status::failed:
      drop(transport_->error());
      return;
  }
}

void Connection::become_ready() {
  state_ = State::ready;
  last_failure_ = Failure::down;
  retry_timer_.stop();
  write_blocked_ = false;
  read_waits_writable_ = false;
  update_watch();
  const auto gen = generation_;
  listener_.on_ready(*this, transport_->established());
  if (gen != generation_) return;
  flush();  // what was queued while connecting (the listener's handshake first)
  if (gen != generation_) return;
  // TLS reads ahead: bytes that came with the handshake's last flight are not signalled again.
  if (state_ == State::ready && transport_ && transport_->has_buffered()) on_readable();
}

// Writability is watched only while something waits for it: a write that met a full socket
// buffer, or a TLS read that must write first. A TLS write that must read first (a renegotiation,
// a key update) waits for readability: watching writability then, as a full buffer would, woke the
// loop on every turn (the socket is writable) to try the same write again: a busy spin.
void Connection::update_watch() {
  if (!socket_) return;
  const bool want_write = (write_blocked_ && write_waits_writable_) || read_waits_writable_;
  socket_->watch(UV_READABLE | (want_write ? UV_WRITABLE : 0));
}

void Connection::flush() {
  flush_due_.stop();
  if ((state_ != State::ready && state_ != State::draining) || !transport_) return;
  while (out_sent_ < out_.size()) {
    const auto io = transport_->write(out_.data() + out_sent_, out_.size() - out_sent_);
    switch (io.status) {
      case Transport::Status::ok:
        out_sent_ += io.bytes;
        break;
      case Transport::Status::again:
        // The socket buffer is full (wait for writability), or TLS must read first.
        write_blocked_ = true;
        write_waits_writable_ = transport_->wants_write();
        update_watch();
        return;
      case Transport::Status::closed:
        drop("connection closed by the server");
        return;
      case Transport::Status::failed:
        drop(transport_->error());
        return;
    }
  }
  out_.clear();
  out_sent_ = 0;
  // A stalled server can make the buffer grow large once: do not keep that much forever.
  if (out_.capacity() > (1u << 20)) out_.shrink_to_fit();
  if (write_blocked_) {
    write_blocked_ = false;
    update_watch();
  }
}

void Connection::on_readable() {
  if (!transport_) return;
  const auto gen = generation_;
  // A few buffers per wake-up, so one busy connection cannot starve the others on the loop.
  // (A TLS transport may hold decrypted bytes the socket will not signal again: read those too.)
  for (int chunk = 0; chunk < 4 || transport_->has_buffered(); ++chunk) {
    const auto io = transport_->read(in_, sizeof in_);
    switch (io.status) {
      case Transport::Status::again:
        read_waits_writable_ = transport_->wants_write();  // TLS may have to write first
        update_watch();
        return;
      case Transport::Status::closed:
        drop("connection closed by the server");
        return;
      case Transport::Status::failed:
        drop(transport_->error());
        return;
      case Transport::Status::ok:
        break;
    }
    // One clock reading for every reply of this read: they arrived together.
    const auto at = BootClock::now();
    if (!reader_.feed(in_, io.bytes)) {
      drop(reader_.error());
      return;
    }
    for (;;) {
      const auto next = reader_.next();
      if (next == Reader::Next::more) break;
      if (next == Reader::Next::error) {
        drop(reader_.error());
        return;
      }
      handle_reply(reader_.reply(), at);
      if (gen != generation_ || state_ == State::closed) return;
      reader_.release_reply();
    }
    if (io.bytes < sizeof in_ && !transport_->has_buffered()) return;  // most likely drained
  }
}

bool Connection::send(const std::shared_ptr<const Request>& req, BootClock::time_point deadline,
                      Sink& sink, std::uint32_t tag, BootClock::time_point sent) {
  if (state_ != State::resolving && state_ != State::connecting && state_ != State::handshaking &&
      state_ != State::ready) {
    return false;
  }
  // A command queued while the connection is being set up also waits for the connect.
  if (state_ != State::ready)
    deadline += detail::allowance_while_connecting(settings_.connect_timeout);
  // A server whose oldest command already timed out is stalled (paused, partitioned, overloaded):
  // this command still goes out (a delete must reach it if it ever resumes), but its caller is
  // told "timeout" on the next loop turn instead of waiting once more.
  if (!inflight_.empty() && inflight_.front().timed_out) deadline = BootClock::now();
  const auto form = form_of(req);
  out_ += form->wire;  // encoded once for every node of the round
  queue(form, sink, tag, sent, deadline, false, false, in_on_connecting_);
  return true;
}

void Connection::queue(const std::shared_ptr<const Request>& req, Sink& sink, std::uint32_t tag,
                       BootClock::time_point sent, BootClock::time_point deadline, bool delivered,
                       bool retried, bool handshake) {
  InFlight f{&sink, tag, sent, deadline, req->command.script || req->form ? req : nullptr};
  f.delivered = delivered;
  f.retried = retried;
  f.handshake = handshake;
  if (handshake) ++handshake_left_;
  inflight_.push_back(std::move(f));
  if (state_ == State::ready || state_ == State::draining) {
    flusher_.schedule();
    flush_due_.start();
  }
  // Re-arm when this deadline is earlier than what the timer waits for.
  if (!delivered && (!deadline_timer_.active() || deadline < timer_due_)) arm_deadline_timer();
}

void Connection::handle_reply(const detail::Reply& reply, BootClock::time_point at) {
  if (push_ != nullptr && reply.type == detail::Reply::Type::array && reply.elements.size() == 3 &&
      reply.elements[0].type == detail::Reply::Type::string && reply.elements[0].str == "message") {
    push_->on_push(reply);
    return;
  }
  if (inflight_.empty()) {
    drop("protocol error: a reply no command was waiting for");
    return;
  }
  // Replies come in the order the commands were sent: the front is this one's.
  InFlight f = std::move(inflight_.front());
  inflight_.pop_front();
  if (settled_ > 0) --settled_;
  if (f.script && handle_form_reply(f, reply, at)) return;
  if (f.script && f.script->command.script && !f.retried && reply.is_error() &&
      reply.str.starts_with("NOSCRIPT") && retry_keeps_order(f)) {
    // The script cache was flushed (SCRIPT FLUSH, restart): the script did not run, so the same
    // call with EVAL is safe. It keeps its deadline, delivery state and sink (still exactly one
    // on_result() and one on_done()).
    resp::append_command(out_, f.script->command, resp::ScriptForm::eval);
    queue(f.script, *f.sink, f.tag, f.sent, f.deadline, f.delivered, true, f.handshake);
    if (f.handshake) --handshake_left_;  // counted again for the retry
    return;
  }
  deliver_reply(f, reply, at);
}

void Connection::deliver_reply(InFlight& f, const detail::Reply& reply, BootClock::time_point at) {
  if (f.handshake) {
    --handshake_left_;
    handshake_error_ = handshake_error_ || reply.is_error();
  }
  const auto gen = generation_;
  deliver(f, Result{Result::Kind::reply, &reply, {}, latency(f.sent, at), at, {}});
  f.sink->on_done();
  if (gen != generation_) return;  // dropped or closed from the callback
  if (state_ == State::ready && handshake_left_ == 0 && !handshake_done_) {
    // A good handshake (with none, the first answer): the next reconnect may be quick again.
    handshake_done_ = true;
    backoff_ = settings_.reconnect_min;
  }
  if (state_ == State::draining && inflight_.empty()) finish_close();
}

// After NOSCRIPT, the EVAL retry goes out behind every command sent after the call, and the
// server runs those first. That is harmless unless one of them touches the call's keys: a
// rollback sent behind its own acquire (the round was decided before this node answered) would
// run first and find nothing (another client's EVAL of the same script can have reloaded the
// rollback's script into the shared cache while the acquire's was still missing), and the
// acquire's retry would then set a key that nobody releases before its ttl. Holding back every
// command to a key behind an unanswered script call would keep the order too, but a rollback held
// behind an acquire to a paused server would then never leave the client (sent at once, it waits
// in the server's socket and runs right after the acquire when the server resumes). So the retry
// is made only where it keeps the order that matters: no command sent after the call touches its
// keys, or the call is one that may run late (core/scripts.hpp: it acts only where its own token
// is, and no later command re-creates a token). Otherwise the NOSCRIPT stands as the call's
// answer: the script did not run (no vote, nothing to undo), and the commands after it saw the
// state their senders expected. (Plain commands carry no key list; none of them undoes a script
// call but the ZREM that takes a waiter off its mark, whose retried mark_waiting then lives out
// its ttl.)
bool Connection::retry_keeps_order(const InFlight& f) const {
  const detail::Command& call = f.script->command;
  if (detail::safe_to_run_late(*call.script)) return true;
  const auto keys_of = [](const detail::Command& c) {
    return std::span(c.args.data(),
                     static_cast<std::size_t>(std::clamp<int>(c.numkeys, 0, int(c.args.size()))));
  };
  const auto mine = keys_of(call);
  for (const InFlight& later : inflight_) {
    if (!later.script) continue;
    // A native form (DELIFEQ, DELEX IFEQ, SET IFEQ) is a plain command line without a key list:
    // its keys are those of the script call it stands for. Missed, a native release sent behind
    // an acquire whose script the server had lost ran first, found nothing, and the acquire's
    // EVAL retry then set a key nobody released before its ttl (Valkey 9.1; the fencing test
    // under stress, tests/integration/test_native.cpp).
    const Request& touches =
        later.script->script_form != nullptr ? *later.script->script_form : *later.script;
    for (const auto& key : keys_of(touches.command)) {
      if (std::find(mine.begin(), mine.end(), key) != mine.end()) return false;
    }
  }
  return true;
}

void Connection::deliver(InFlight& f, const Result& r) {
  if (f.delivered) return;
  f.delivered = true;
  if (metrics_ != nullptr) {
    switch (r.kind) {
      case Result::Kind::timeout:
        ++metrics_->timeouts;
        break;
      case Result::Kind::down:
      case Result::Kind::refused:
        ++metrics_->down;
        break;
      case Result::Kind::reply:
        ++(r.reply->is_error() ? metrics_->errors : metrics_->ok);
        metrics_->latency.observe(std::chrono::duration<double>(r.latency).count());
        break;
    }
  }
  f.sink->on_result(node_, f.tag, r);
}

std::size_t Connection::first_unsettled() {
  while (settled_ < inflight_.size() && inflight_[settled_].delivered) ++settled_;
  return settled_;
}

bool Connection::due(BootClock::time_point now) {
  for (std::size_t i = first_unsettled(); i < inflight_.size(); ++i) {
    if (!inflight_[i].delivered && inflight_[i].deadline <= now) return true;
  }
  return false;
}

// The timer wakes the loop at the earliest deadline (BootClock, the one clock of deadlines); it
// may fire a little early (the loop's time is cached), and then expire_commands() finds nothing
// due yet and arms it again for what is left.
void Connection::arm_deadline_timer() {
  auto earliest = BootClock::time_point::max();
  for (std::size_t i = first_unsettled(); i < inflight_.size(); ++i) {
    if (!inflight_[i].delivered) earliest = std::min(earliest, inflight_[i].deadline);
  }
  // Also wake up to notice a stalled connection.
  if (!inflight_.empty())
    earliest = std::min(earliest, inflight_.front().sent + settings_.stall_limit);
  if (earliest == BootClock::time_point::max()) return;
  const auto now = BootClock::now();
  timer_due_ = std::max(earliest, now);
  deadline_timer_.start(ms(std::chrono::ceil<Millis>(timer_due_ - now)));
}

void Connection::expire_commands() {
  const auto at = BootClock::now();
  // libuv runs timers before it polls for I/O: after the loop was held up (a burst of work, a
  // descheduled thread) answers that arrived in time may still sit unread in the socket. Read
  // them first, so that only commands the server has really not answered time out; otherwise
  // any stall longer than node_timeout fails healthy nodes and, with them, the quorum.
  if (state_ == State::ready && due(at)) {
    const auto gen = generation_;
    on_readable();
    if (gen != generation_) return;
  }
  // A sink may send more commands from on_result(): they are appended at the back, so iterate
  // by index over a size fixed up front.
  const std::size_t n = inflight_.size();
  for (std::size_t i = first_unsettled(); i < n && i < inflight_.size(); ++i) {
    InFlight& f = inflight_[i];
    if (!f.delivered && f.deadline <= at) {
      f.timed_out = true;
      deliver(f, Result{Result::Kind::timeout, nullptr, {}, latency(f.sent, at), at, {}});
    }
  }
  if (!inflight_.empty() && at - inflight_.front().sent >= settings_.stall_limit) {
    drop("no answer for " + std::to_string(settings_.stall_limit.count()) + " ms; reconnecting");
    return;
  }
  arm_deadline_timer();
}

void Connection::fail_all(std::string_view why_view, Result::Kind kind) {
  const std::string why(why_view);
  const auto at = BootClock::now();
  std::deque<InFlight> failed;
  failed.swap(inflight_);
  settled_ = 0;
  deadline_timer_.stop();
  for (auto& f : failed) {
    deliver(f, Result{kind, nullptr, why, latency(f.sent, at), at, {}});
    f.sink->on_done();
  }
}

// Every state change happens before any callback, and after each callback the connection looks
// at its state again: a listener may close() it from on_dropped() (a sentinel or cluster node
// whose discovery connection failed moves to the next server), a sink from on_result(). Calling
// on_dropped() first and setting the state afterwards used to undo such a close(): the state
// became `backoff` again and the reconnect timer restarted, so the connection reconnected forever
// with nobody to close it, one more per failed question until the process ran out of fds.
void Connection::drop(std::string why, Failure failure) {
  // Nothing to drop when not started, closed, or dropped already and waiting to reconnect.
  if (state_ == State::closed || state_ == State::idle || state_ == State::backoff) return;
  ++generation_;
  last_error_ = why;
  last_failure_ = failure;
  const bool closing = state_ == State::draining;
  const bool was_ready = state_ == State::ready || closing;
  last_drop_was_ready_ = was_ready;
  const bool connect_failed = state_ == State::connecting;
  // Refused: by the listener's word (AUTH, SELECT), or a server that answered the handshake with
  // an error and hung up before the rest (maxclients).
  const bool refused = failure == Failure::refused || (!handshake_done_ && handshake_error_);
  resolver_.cancel();
  attempts_.clear();
  attempt_timer_.stop();
  transport_.reset();
  socket_.reset();
  reader_.reset();
  out_.clear();
  out_sent_ = 0;
  write_blocked_ = false;
  read_waits_writable_ = false;
  if (closing) {
    finish_close();
    listener_.on_dropped(*this, why, was_ready);
    return;
  }
  // An address that did not connect goes last the next time.
  if (connect_failed) first_addr_ = resolved_order_.front() + 1;
  // Before failing the commands: those their callbacks send now must be refused, not queued on a
  // connection that is gone.
  state_ = State::backoff;
  schedule_reconnect(refused);
  const auto gen = generation_;
  fail_all(why, failure == Failure::refused ? Result::Kind::refused : Result::Kind::down);
  if (gen != generation_) return;  // closed by a sink
  listener_.on_dropped(*this, why, was_ready);
}

// Waits `backoff_` (reconnect_max after a refusal), drawn from [half, all] of it, and doubles it
// for the next time (up to reconnect_max): a good handshake sets it back to reconnect_min.
void Connection::schedule_reconnect(bool refused) {
  const Millis wait = refused ? settings_.reconnect_max : backoff_;
  const auto half = static_cast<std::uint64_t>(wait.count()) / 2;
  std::uniform_int_distribution<std::uint64_t> jitter(0, half);
  retry_timer_.start(static_cast<std::uint64_t>(wait.count()) - jitter(jitter_));
  backoff_ = std::min(wait * 2, settings_.reconnect_max);
}

void Connection::on_retry_timer() {
  switch (state_) {
    case State::resolving:
    case State::connecting:
    case State::handshaking: {
      // A TLS handshake that never ends is what a plaintext server makes of a ClientHello.
      const std::string phase = state_ == State::resolving ? "resolving the host"
                                : state_ == State::connecting
                                    ? "connecting"
                                    : std::string("in the ") + factory_->kind() +
                                          " handshake: does the server speak " + factory_->kind() +
                                          " on this port?";
      drop("connect timeout after " + std::to_string(settings_.connect_timeout.count()) + " ms (" +
           phase + ")");
      return;
    }
    case State::backoff:
      start();
      return;
    case State::draining:
      finish_close();
      return;
    default:
      return;
  }
}

void Connection::close() {
  if (state_ == State::closed || state_ == State::draining) return;
  if (state_ == State::ready && !inflight_.empty()) {
    // Let what is already queued reach the server (a rollback or release written just before
    // close must not be lost, or its key would stay until the ttl), bounded by the drain limit.
    state_ = State::draining;
    deadline_timer_.stop();
    retry_timer_.start(ms(settings_.drain_limit));
    return;
  }
  finish_close();
}

void Connection::finish_close() {
  if (state_ == State::closed) return;
  state_ = State::closed;
  last_error_ = "shutting down";
  ++generation_;
  resolver_.cancel();
  attempts_.clear();
  transport_.reset();
  socket_.reset();
  fail_all(last_error_);
  deadline_timer_.close();
  attempt_timer_.close();
  flusher_.close();
  flush_due_.close();
  // Told from libuv's close phase, on a clean stack: the listener may free everything then.
  retry_timer_.close([this] { listener_.on_closed(*this); });
}

}  // namespace redlock::net
