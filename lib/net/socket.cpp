#include "net/socket.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace redlock::net {

struct Resolver::Request {
  uv_getaddrinfo_t req;
  Done done;  // empty once cancelled
};

bool Resolver::start(uv_loop_t* loop, const Endpoint& e, Done done) {
  cancel();
  std::vector<SocketAddress> out;
  if (e.unix_socket) {
    SocketAddress a;
    auto* un = reinterpret_cast<sockaddr_un*>(&a.storage);
    un->sun_family = AF_UNIX;
    if (e.path.size() >= sizeof un->sun_path) {
      done({}, "unix socket path too long");
      return true;
    }
    std::memcpy(un->sun_path, e.path.c_str(), e.path.size() + 1);
    a.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + e.path.size() + 1);
    out.push_back(a);
    done(std::move(out), {});
    return true;
  }
  SocketAddress a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
  if (uv_ip4_addr(e.host.c_str(), e.port, v4) == 0) {
    a.length = sizeof(sockaddr_in);
  } else if (uv_ip6_addr(e.host.c_str(), e.port, v6) == 0) {
    a.length = sizeof(sockaddr_in6);
  }
  if (a.length != 0) {
    out.push_back(a);
    done(std::move(out), {});
    return true;
  }
  auto* r = new Request{{}, {}};
  r->req.data = r;
  // The request may finish after this Resolver is gone: its callback only looks at its own
  // Request, and `done` is emptied by cancel().
  // A failure names the host (not a secret): "2 down: cannot resolve host" alone leaves the user
  // to guess which of the addresses is wrong.
  r->done = [this, host = e.host, done = std::move(done)](std::vector<SocketAddress> a,
                                                          std::string err) mutable {
    pending_ = nullptr;
    if (!err.empty()) err = "cannot resolve host '" + host + "': " + err;
    done(std::move(a), std::move(err));
  };
  pending_ = r;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  const std::string port = std::to_string(e.port);
  const int rc = uv_getaddrinfo(
      loop, &r->req,
      [](uv_getaddrinfo_t* req, int status, addrinfo* res) {
        std::unique_ptr<Request> self(static_cast<Request*>(req->data));
        std::vector<SocketAddress> found;
        if (status == 0) {
          for (addrinfo* p = res; p != nullptr; p = p->ai_next) {
            if (p->ai_addrlen > sizeof(sockaddr_storage)) continue;
            SocketAddress s;
            std::memcpy(&s.storage, p->ai_addr, p->ai_addrlen);
            s.length = p->ai_addrlen;
            found.push_back(s);
          }
        }
        uv_freeaddrinfo(res);
        if (!self->done) return;  // cancelled
        auto done = std::move(self->done);
        if (status != 0) {
          done({}, uv_strerror(status));
        } else if (found.empty()) {
          done({}, "no address");
        } else {
          done(std::move(found), {});
        }
      },
      e.host.c_str(), port.c_str(), &hints);
  if (rc != 0) {
    auto d = std::move(r->done);
    delete r;
    d({}, uv_strerror(rc));
    return true;
  }
  return false;
}

void Resolver::cancel() {
  if (pending_ == nullptr) return;
  pending_->done = nullptr;
  // Queued but not started: libuv then runs the callback with UV_ECANCELED, which frees it.
  uv_cancel(reinterpret_cast<uv_req_t*>(&pending_->req));
  pending_ = nullptr;
}

struct Socket::Box {
  uv_poll_t poll;
  int fd;
  OnEvents on_events;
  int watching = 0;     // libuv stops the handle by itself on an error status
  bool closed = false;  // on_events lives on until the close callback: it may be running now
};

std::unique_ptr<Socket> Socket::connect(uv_loop_t* loop, const SocketAddress& addr,
                                        OnEvents on_events, std::string& error) {
  const int family = addr.get()->sa_family;
  const int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = std::string("socket: ") + std::strerror(errno);
    return nullptr;
  }
  if (family != AF_UNIX) {
    // Lock commands are small and latency-bound: never wait to coalesce them.
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  int rc;
  do {
    rc = ::connect(fd, addr.get(), addr.length);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno != EINPROGRESS && errno != EAGAIN) {
    error = std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  auto* box = new Box{{}, fd, std::move(on_events), 0, false};
  if (uv_poll_init_socket(loop, &box->poll, fd) != 0) {
    error = "cannot watch the socket";
    ::close(fd);
    delete box;
    return nullptr;
  }
  box->poll.data = box;
  return std::unique_ptr<Socket>(new Socket(box));
}

Socket::~Socket() {
  box_->closed = true;
  uv_close(reinterpret_cast<uv_handle_t*>(&box_->poll), [](uv_handle_t* h) {
    auto* b = static_cast<Box*>(h->data);
    ::close(b->fd);
    delete b;
  });
}

int Socket::fd() const { return box_->fd; }

void Socket::watch(int events) {
  if (events == box_->watching) return;
  box_->watching = events;
  if (events == 0) {
    uv_poll_stop(&box_->poll);
    return;
  }
  uv_poll_start(&box_->poll, events, [](uv_poll_t* h, int status, int ev) {
    auto* b = static_cast<Box*>(h->data);
    if (status < 0) b->watching = 0;
    if (!b->closed && b->on_events) b->on_events(status, ev);
  });
}

std::string Socket::connect_error() const {
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(box_->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  return err == 0 ? std::string() : std::string(std::strerror(err));
}

}  // namespace redlock::net
