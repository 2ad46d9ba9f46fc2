#pragma once
// The pub/sub side of a node: one connection of its own (RESP2: a subscribed connection takes no
// other command), shared by every waiter of the client. It listens, for each lock key some waiter
// waits on, to the key's wake channel (what our releases publish on) and to the key's keyspace
// channel (`__keyspace@<db>__:<key>`: deletions, expiries and evictions, where the server has
// keyspace notifications on; nothing arrives where it has not, and nothing is required).
//
// A wake-up is only a hint to try now: waiters poll anyway, so a lost connection, a missed
// message or a server without notifications costs time, never a handoff. Nor is a message ever
// a vote: anyone who may PUBLISH on a channel can write what arrives here (algorithm.md, hazard
// 10), so the most a message can do is start an attempt, whose replies decide. After every
// (re)connect the subscriber subscribes again and reports each key as `listening`, since
// whatever happened while it was not listening is unknown.

#include <uv.h>

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "net/connection.hpp"
#include "redlock/options.hpp"

namespace redlock::net {

struct Wake {
  enum class Why {
    released,   // our release script published: `waiter` is the waiter it names (with
                // `release`, the hash of the token it released), or "#<n>" (n clients listen)
    key_gone,   // keyspace notification: the key was deleted (by anyone)
    expired,    // keyspace notification: the key expired or was evicted
    listening,  // (re)subscribed: anything may have happened meanwhile
  };
  Why why;
  std::string_view waiter;
  std::string_view release;  // empty unless a release named `waiter`
};

class WakeHandler {
 public:
  virtual void on_wake(const std::string& lock_key, const Wake& wake) = 0;
  virtual void on_subscriber_closed() = 0;
  virtual void log(LogLevel level, const std::string& message) = 0;

 protected:
  ~WakeHandler() = default;
};

class Subscriber final : Connection::Listener, Sink, Connection::PushHandler {
 public:
  // `auth` is the node's AUTH command (nullptr without a password) and `password` what it
  // sends, kept only to hide it in what a refused AUTH's error says; `db` its database (the
  // keyspace channel names it).
  Subscriber(uv_loop_t* loop, WakeHandler& handler, int node, Endpoint endpoint,
             std::unique_ptr<TransportFactory> transport, ConnectionSettings settings,
             std::shared_ptr<const Request> auth, std::string password, int db, std::string name);
  ~Subscriber();  // wipes its copy of the password
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // Counted: the channels of `lock_key` are listened to while more subscribe() than
  // unsubscribe() calls were made for it. The connection starts with the first.
  void subscribe(const std::string& lock_key);
  void unsubscribe(const std::string& lock_key);
  // Closes the connection (then handler.on_subscriber_closed()). Idempotent.
  void close();
  [[nodiscard]] bool closed() const { return closed_; }

 private:
  struct Key {
    int users = 0;
    std::string wake_channel, keyspace_channel;
  };
  void send_subscription(const char* verb, const Key& k);
  void on_connecting(Connection& c) override;
  void on_ready(Connection& c, const std::string& established) override;
  void on_dropped(Connection& c, const std::string& why, bool was_ready) override;
  void on_closed(Connection& c) override;
  void on_result(int node, std::uint32_t tag, const Result& result) override;
  void on_done() override {}
  void on_push(const detail::Reply& message) override;

  WakeHandler& handler_;
  std::shared_ptr<const Request> auth_;
  std::string password_;
  int db_;
  std::string name_;
  std::map<std::string, Key> keys_;                             // lock key -> its channels
  std::map<std::string, std::string, std::less<>> by_channel_;  // channel -> lock key
  bool started_ = false;
  bool closed_ = false;
  Connection conn_;  // last: destroyed first
};

}  // namespace redlock::net
