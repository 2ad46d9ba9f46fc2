#include "net/subscriber.hpp"

#include "core/keys.hpp"
#include "core/scripts.hpp"
#include "core/secret.hpp"
#include "core/server_text.hpp"

namespace redlock::net {
namespace {

using detail::Command;
using detail::Reply;

enum : std::uint32_t { tag_auth, tag_subscription };

// A subscribe/unsubscribe confirmation or a message: [kind, channel, payload-or-count].
bool is_triple(const Reply& r, std::string_view kind) {
  return r.type == Reply::Type::array && r.elements.size() == 3 &&
         r.elements[0].type == Reply::Type::string && r.elements[0].str == kind &&
         r.elements[1].type == Reply::Type::string;
}

}  // namespace

Subscriber::Subscriber(uv_loop_t* loop, WakeHandler& handler, int node, Endpoint endpoint,
                       std::unique_ptr<TransportFactory> transport, ConnectionSettings settings,
                       std::shared_ptr<const Request> auth, std::string password, int db,
                       std::string name)
    : handler_(handler),
      auth_(std::move(auth)),
      password_(std::move(password)),
      db_(db),
      name_(std::move(name)),
      conn_(loop, *this, node, std::move(endpoint), std::move(transport), settings) {
  conn_.set_push_handler(this);
}

Subscriber::~Subscriber() { detail::wipe(password_); }

void Subscriber::subscribe(const std::string& lock_key) {
  if (closed_) return;
  Key& k = keys_[lock_key];
  if (k.users++ > 0) return;
  k.wake_channel = detail::keys::wake(lock_key);
  k.keyspace_channel = "__keyspace@" + std::to_string(db_) + "__:" + lock_key;
  by_channel_[k.wake_channel] = lock_key;
  by_channel_[k.keyspace_channel] = lock_key;
  if (!started_) {
    started_ = true;
    conn_.start();  // on_connecting() subscribes to every key, this one included
    return;
  }
  send_subscription("SUBSCRIBE", k);  // refused while not connected: the next connect does it
}

void Subscriber::unsubscribe(const std::string& lock_key) {
  auto it = keys_.find(lock_key);
  if (it == keys_.end() || --it->second.users > 0) return;
  if (!closed_) send_subscription("UNSUBSCRIBE", it->second);
  by_channel_.erase(it->second.wake_channel);
  by_channel_.erase(it->second.keyspace_channel);
  keys_.erase(it);
}

void Subscriber::close() {
  if (closed_) return;
  closed_ = true;
  conn_.close();
}

// One channel per command: each gets exactly one confirmation, the connection's one reply.
void Subscriber::send_subscription(const char* verb, const Key& k) {
  const auto now = BootClock::now();
  const auto deadline = now + Millis{10'000};  // a confirmation only; nothing waits on it
  for (const auto* channel : {&k.wake_channel, &k.keyspace_channel}) {
    auto req = Request::make(Command::plain({verb, *channel}));
    if (!conn_.send(req, deadline, *this, tag_subscription, now)) return;
  }
}

void Subscriber::on_connecting(Connection& c) {
  if (auth_) {
    const auto now = BootClock::now();
    c.send(auth_, now + Millis{10'000}, *this, tag_auth, now);
  }
  for (const auto& [key, k] : keys_) send_subscription("SUBSCRIBE", k);
}

void Subscriber::on_ready(Connection&, const std::string&) {}

void Subscriber::on_dropped(Connection&, const std::string& why, bool was_ready) {
  if (was_ready) {
    handler_.log(LogLevel::debug,
                 name_ + ": wake-up connection lost (" + why + "); waiters poll meanwhile");
  }
}

void Subscriber::on_closed(Connection&) { handler_.on_subscriber_closed(); }

void Subscriber::on_result(int, std::uint32_t tag, const Result& r) {
  if (r.kind != Result::Kind::reply) return;
  const Reply& rep = *r.reply;
  if (rep.is_error()) {
    if (tag == tag_auth) {
      conn_.drop("AUTH failed: " + detail::auth_error_text(rep.str, password_),
                 Connection::Failure::refused);
    } else {
      handler_.log(LogLevel::debug, name_ + ": wake-ups: " + detail::server_text(rep.str));
    }
    return;
  }
  // Listening from now on: whatever happened before is unknown, so the waiters try once.
  if (is_triple(rep, "subscribe")) {
    auto it = by_channel_.find(rep.elements[1].str);
    if (it != by_channel_.end() && keys_.at(it->second).wake_channel == it->first) {
      const std::string key = it->second;  // the handler may unsubscribe it
      handler_.on_wake(key, Wake{Wake::Why::listening, {}, {}});
    }
  }
}

void Subscriber::on_push(const Reply& m) {
  if (!is_triple(m, "message") || m.elements[2].type != Reply::Type::string) return;
  auto it = by_channel_.find(m.elements[1].str);
  if (it == by_channel_.end()) return;  // unsubscribed meanwhile
  const std::string key = it->second;
  const auto& payload = m.elements[2].str;
  if (keys_.at(key).wake_channel == it->first) {
    const auto name = detail::parse_wake_message(payload);
    handler_.on_wake(key, Wake{Wake::Why::released, name.waiter, name.release});
  } else if (payload == "del") {
    handler_.on_wake(key, Wake{Wake::Why::key_gone, {}, {}});
  } else if (payload == "expired" || payload == "evicted") {
    handler_.on_wake(key, Wake{Wake::Why::expired, {}, {}});
  }
}

}  // namespace redlock::net
