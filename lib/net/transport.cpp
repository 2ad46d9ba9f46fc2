#include "net/transport.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace redlock::net {
namespace {

class PlainTransport final : public Transport {
 public:
  explicit PlainTransport(int fd) : fd_(fd) {}

  Io read(char* buf, std::size_t len) override {
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, len, 0);
      if (n > 0) return {Status::ok, static_cast<std::size_t>(n)};
      if (n == 0) return {Status::closed, 0};
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        wants_write_ = false;
        return {Status::again, 0};
      }
      errno_ = errno;
      return {Status::failed, 0};
    }
  }

  Io write(const char* buf, std::size_t len) override {
    for (;;) {
      // MSG_NOSIGNAL: a peer that went away is an error here, not a SIGPIPE for the process.
      const ssize_t n = ::send(fd_, buf, len, MSG_NOSIGNAL);
      if (n >= 0) return {Status::ok, static_cast<std::size_t>(n)};
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        wants_write_ = true;  // the socket buffer is full
        return {Status::again, 0};
      }
      errno_ = errno;
      return {Status::failed, 0};
    }
  }

  bool wants_write() const override { return wants_write_; }
  std::string error() const override { return std::strerror(errno_); }

 private:
  int fd_;
  int errno_ = 0;
  bool wants_write_ = false;
};

class PlainFactory final : public TransportFactory {
 public:
  explicit PlainFactory(bool unix_socket) : unix_(unix_socket) {}
  std::unique_ptr<Transport> wrap(int fd) override { return std::make_unique<PlainTransport>(fd); }
  const char* kind() const override { return unix_ ? "unix" : "tcp"; }

 private:
  bool unix_;
};

}  // namespace

std::unique_ptr<TransportFactory> plain_transport(bool unix_socket) {
  return std::make_unique<PlainFactory>(unix_socket);
}

}  // namespace redlock::net
