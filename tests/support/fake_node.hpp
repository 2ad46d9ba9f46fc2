// Test support: a fake Redis node for faults a real redis-server cannot produce (never answering
// while connected, answering garbage, answering slowly, closing mid-reply).
//
// It is a tiny TCP server on 127.0.0.1 with its own thread (poll-based, non-blocking sockets). It
// parses RESP multibulk requests (what hiredis sends; inline commands are accepted too) and hands
// each command's argv to a Responder, which returns the raw RESP bytes to send back.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace redlock::test {

class FakeNode {
 public:
  // Called on the node's own thread, once per received command, in arrival order. Returns the raw
  // bytes to send (e.g. "+OK\r\n"), or std::nullopt to never answer that command (later replies
  // on the same connection are still sent). Any state it captures must be safe to touch from the
  // node thread. If it throws, the client gets "-ERR fake node responder threw".
  //
  // To close the connection, return close_after(bytes) or reset_after(bytes): the node sends
  // `bytes` (may be empty or half a reply), then closes (FIN) / resets (RST) the connection and
  // ignores anything else the client sent on it.
  using Responder = std::function<std::optional<std::string>(const std::vector<std::string>& argv)>;

  // Listens on host:port (0: a kernel-chosen free port; host an IPv4 literal, another loopback
  // address such as 127.0.0.2 for a server on an address the client was not given). Each reply is
  // sent `delay` after its request arrived, in order. Throws std::system_error if it cannot listen.
  // A fixed port (e.g. that of a killed RedisServer) lets a fake take over a real node's address.
  explicit FakeNode(Responder responder, std::chrono::milliseconds delay = {},
                    std::uint16_t port = 0, std::string host = "127.0.0.1");
  ~FakeNode();  // stops the thread, closes all sockets. Never throws.

  FakeNode(const FakeNode&) = delete;
  FakeNode& operator=(const FakeNode&) = delete;
  FakeNode(FakeNode&&) = delete;
  FakeNode& operator=(FakeNode&&) = delete;

  [[nodiscard]] std::uint16_t port() const { return port_; }
  [[nodiscard]] std::string address() const;  // "HOST:PORT"

  // All thread-safe.
  [[nodiscard]] std::size_t commands_seen() const;
  [[nodiscard]] std::vector<std::vector<std::string>> commands() const;  // copy, arrival order
  [[nodiscard]] std::size_t connections_accepted() const;
  void set_responder(Responder responder);  // applies to commands arriving from now on
  void set_delay(std::chrono::milliseconds delay);
  // Drop every client connection now (like a crash of the node); returns once done. The node
  // keeps listening.
  void close_connections();

  // Markers for a Responder's return value (see Responder).
  [[nodiscard]] static std::string close_after(const std::string& bytes);
  [[nodiscard]] static std::string reset_after(const std::string& bytes);

  // Accepts TCP, never answers.
  [[nodiscard]] static Responder silent();
  // Answers every command with "?!garbage\r\n" (not RESP: hiredis reports a protocol error).
  [[nodiscard]] static Responder garbage();
  // Minimal Redis: PING -> +PONG, SET -> +OK, GET -> nil, PTTL -> -2, EVAL/EVALSHA -> :1,
  // SCRIPT LOAD -> bulk SHA1 of the script (real SHA1), SCRIPT EXISTS -> all :1,
  // INFO -> "# Server\r\nredis_version:7.0.15\r\nrun_id:<40 hex, fixed per responder>\r\n
  // uptime_in_seconds:1000\r\n", CONFIG GET -> empty array, AUTH/SELECT/CLIENT/anything else ->
  // +OK.
  [[nodiscard]] static Responder redis_like();
  // Like redis_like(), but a SET gets half a reply ("+O") and then the connection is closed.
  [[nodiscard]] static Responder reset_mid_reply();

 private:
  struct Connection;
  void run();
  void handle_command(Connection& c, std::vector<std::string> argv,
                      std::chrono::steady_clock::time_point arrived);
  void wake();

  std::string host_;
  std::uint16_t port_ = 0;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  std::atomic<bool> stop_{false};

  mutable std::mutex mu_;  // guards everything below
  std::shared_ptr<const Responder> responder_;
  std::chrono::milliseconds delay_;
  std::vector<std::vector<std::string>> commands_;
  std::size_t connections_accepted_ = 0;
  std::uint64_t drop_requested_ = 0;  // generation counters for close_connections()
  std::uint64_t drop_done_ = 0;
  std::condition_variable drop_cv_;

  std::thread thread_;  // last: started after everything else is initialized
};

}  // namespace redlock::test
