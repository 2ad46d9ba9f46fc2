#pragma once
// Commands that a node accepted before it knows where to send them (a Sentinel vote before the
// sentinels named the master, a Redis Cluster vote before the first slot map): they wait here,
// within their own deadline, and either go out once the node knows (release()) or are answered
// "down" with the node's reason when their deadline passes first (or the node closes).

#include <uv.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/connection.hpp"
#include "net/uv.hpp"

namespace redlock::net {

class PendingCommands {
 public:
  struct Command {
    std::shared_ptr<const Request> req;
    BootClock::time_point deadline;
    Sink* sink;
    std::uint32_t tag;
    BootClock::time_point sent;
  };
  // Sends one waiting command (with its own deadline); false if it could not go.
  using Sender = std::function<bool(const Command& c)>;

  // `index` is the node's, for the results; `why` says why a command is down when it expires.
  PendingCommands(uv_loop_t* loop, int index, std::function<std::string()> why);

  void push(const std::shared_ptr<const Request>& req, BootClock::time_point deadline, Sink& sink,
            std::uint32_t tag, BootClock::time_point sent);
  // Every waiting command goes to `send`; those it refuses or whose deadline passed are down.
  void release(const Sender& send);
  // Answers every waiting command "down" now and stops the timer (the node closes).
  void close();
  [[nodiscard]] bool empty() const { return waiting_.empty(); }

 private:
  void expire(bool all);

  int index_;
  std::function<std::string()> why_;
  std::vector<Command> waiting_;
  BootClock::time_point next_expiry_{};
  Timer timer_;
};

}  // namespace redlock::net
