#pragma once
// Sockets under a connection: name resolution that never blocks the loop, a non-blocking
// connect, and the fd with its poll handle.

#include <sys/socket.h>
#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace redlock::net {

struct Endpoint {
  bool unix_socket = false;
  std::string host;  // tcp: a name or a literal address (IPv6 without brackets)
  std::uint16_t port = 0;
  std::string path;  // unix
};

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  [[nodiscard]] const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

// Resolves an endpoint into the addresses to try, in order. A unix path or a literal IP address
// is answered at once; a host name goes to libuv's thread pool (uv_getaddrinfo), so a slow
// resolver never holds up the loop. `done` runs on the loop, once, unless cancel() came first.
class Resolver {
 public:
  using Done = std::function<void(std::vector<SocketAddress>, std::string error)>;
  Resolver() = default;
  Resolver(const Resolver&) = delete;
  Resolver& operator=(const Resolver&) = delete;
  ~Resolver() { cancel(); }

  // Returns true when the answer is known already (then `done` has run).
  bool start(uv_loop_t* loop, const Endpoint& e, Done done);
  // Forgets a resolution in progress: `done` will not run (the thread pool's request may still
  // finish in the background; its memory is freed then).
  void cancel();

 private:
  struct Request;
  Request* pending_ = nullptr;
};

// A socket being connected or connected, and its poll handle. Closing it stops the handle and
// closes the fd after libuv has let go of it.
class Socket {
 public:
  // status 0 or a libuv error (the socket failed); events: UV_READABLE | UV_WRITABLE
  using OnEvents = std::function<void(int status, int events)>;

  // Starts a non-blocking connect. On failure returns nullptr and sets `error`.
  static std::unique_ptr<Socket> connect(uv_loop_t* loop, const SocketAddress& addr,
                                         OnEvents on_events, std::string& error);
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();

  [[nodiscard]] int fd() const;
  // Watch for these events (0: none). Only real changes reach epoll.
  void watch(int events);
  // The outcome of a connect once the socket is writable: empty on success, else why.
  [[nodiscard]] std::string connect_error() const;

 private:
  struct Box;
  explicit Socket(Box* b) : box_(b) {}
  Box* box_;
};

}  // namespace redlock::net
