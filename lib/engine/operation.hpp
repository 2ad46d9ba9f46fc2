#pragma once
// What every operation (acquire, extend, release, status, rollback) shares: its lifetime, and
// how it sends to the nodes and turns a node's non-answer into a per-node record.
//
// Lifetimes: an operation is reference-counted by the commands it has in flight (every command
// sent reports back exactly once, see net/connection.hpp) plus one reference it holds until it
// has finished. Its user callback always goes through Engine::Impl::defer(), so it never runs
// inside a network callback nor inside the call that started the operation.

#include <memory>
#include <string>

#include "core/command.hpp"
#include "core/kinds.hpp"
#include "engine/impl.hpp"
#include "net/connection.hpp"

namespace redlock {

class Operation : public net::Sink {
 public:
  explicit Operation(Engine::Impl& e) : e_(e) {
    next_ = e_.ops_;
    if (next_ != nullptr) next_->prev_ = this;
    e_.ops_ = this;
  }
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;
  // The engine is closing: finish now with Errc::shutdown.
  virtual void shutdown() = 0;
  void on_done() final { unref(); }
  // Runs the user's callback with the result (Engine::Impl::defer(Operation*)).
  virtual void deliver() {}
  // The deferred delivery's reference.
  void hold() { ref(); }
  void release() { unref(); }

  Operation* next_ = nullptr;  // the engine's list of unfinished operations
  Operation* prev_ = nullptr;

 protected:
  virtual ~Operation() = default;
  void ref() { ++refs_; }
  void unref() {
    if (--refs_ == 0) delete this;
  }
  // Finished: leaves the engine's registry and drops its own reference. Commands still in
  // flight keep it alive until they report back.
  void finished() {
    if (prev_ != nullptr)
      prev_->next_ = next_;
    else if (e_.ops_ == this)
      e_.ops_ = next_;
    if (next_ != nullptr) next_->prev_ = prev_;
    prev_ = next_ = nullptr;
    unref();
  }
  // Reads the boot clock once for the round about to be sent: every command of the round gets the
  // one deadline sent_ + node_timeout, and its latency is counted from sent_. (The loop's cached
  // time is brought up to date too, for the timers the round starts.)
  void stamp();
  // Sends `req` to node `i` with the round's deadline. False (and nothing will report) when the
  // node cannot take it (not connected; or the command cannot run there: not_sent() says why).
  // stamp() first.
  bool send(int i, const std::shared_ptr<const net::Request>& req, std::uint32_t tag);
  // The record of a node that could not even be sent to.
  [[nodiscard]] NodeOutcome not_sent(int i) const;
  // The record of a reply: the kind's verdict, with a grant turned into `excluded` when the
  // restart guard (or a duplicate server) says it must not count. `outcomes` as in
  // Engine::Impl::vote_exclusion().
  [[nodiscard]] NodeOutcome outcome(int i, const net::Result& r, const detail::Verdict& v,
                                    const std::vector<NodeOutcome>* outcomes) const;
  // The record of a timeout or a lost connection; nullopt for a reply.
  [[nodiscard]] std::optional<NodeOutcome> failure(int i, const net::Result& r) const;

  Engine::Impl& e_;
  BootClock::time_point sent_{};  // stamp()

 private:
  int refs_ = 1;
  mutable std::string cannot_run_;  // why the last send() could not go out, for not_sent()
};

// Sends one command to every node and forgets the answers: the rollback of a failed attempt
// (nodes that timed out or have not answered may still have run its SET, and on each connection
// the delete is pipelined behind it, so it runs after it), a waiter leaving a queue. Nodes
// marked in `skip` (indexed by node) are left out.
void broadcast(Engine::Impl& e, detail::Command cmd, const std::vector<bool>& skip = {});

// The operations' entry points (Engine's public functions call these; the watchdog extends
// through start_extend). Each callback runs exactly once, deferred; bad arguments fail it with
// Errc::invalid_argument before anything is sent.
void start_extend(Engine::Impl& e, Lock lock, Millis ttl, Engine::ExtendCallback cb);
void start_release(Engine::Impl& e, const Lock& lock, Engine::ReleaseCallback cb);
void start_status(Engine::Impl& e, std::string resource, Engine::StatusCallback cb);

}  // namespace redlock
