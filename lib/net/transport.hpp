#pragma once
// The transport seam: how a connection moves bytes over its connected, non-blocking socket.
// Plain TCP and unix sockets are here; TLS plugs in through the same interface (a handshake
// after connect, then reads and writes that may each need the other readiness).

#include <cstddef>
#include <memory>
#include <string>

namespace redlock::net {

class Transport {
 public:
  enum class Status {
    ok,      // done (handshake) or `bytes` moved (read, write)
    again,   // would block: wait for readability, or writability when wants_write()
    closed,  // the peer closed the stream
    failed,  // see error()
  };
  struct Io {
    Status status;
    std::size_t bytes;
  };

  virtual ~Transport() = default;
  // After the socket connected, before any read or write: the transport's own handshake.
  virtual Status handshake() { return Status::ok; }
  virtual Io read(char* buf, std::size_t len) = 0;
  virtual Io write(const char* buf, std::size_t len) = 0;
  // After `again`: true when the operation waits for writability (a write to a full socket
  // buffer; TLS may need to write to read, or to finish a handshake), false when it waits for
  // readability (a read; TLS may need to read to write).
  [[nodiscard]] virtual bool wants_write() const { return false; }
  // Bytes already read from the socket, not yet returned by read() (TLS: decrypted, or read
  // ahead and not yet decrypted): the socket will not signal them again, so the connection reads
  // on while this says so.
  [[nodiscard]] virtual bool has_buffered() const { return false; }
  // After the handshake: what was established, for logs ("TLSv1.3, session resumed"); empty for
  // plain sockets.
  [[nodiscard]] virtual std::string established() const { return {}; }
  // Why the last operation failed, for the per-node record. Never contains a secret.
  [[nodiscard]] virtual std::string error() const = 0;
  // After `failed`: true when the peer, or our check of it, refused the session (a TLS alert, a
  // certificate that did not verify, a server that hung up in the handshake), which no retry
  // changes; false when the socket itself failed. The tools' sync client reports the two apart.
  [[nodiscard]] virtual bool refused() const { return false; }
};

// Makes the transport for a freshly connected socket (it does not own the fd).
class TransportFactory {
 public:
  virtual ~TransportFactory() = default;
  [[nodiscard]] virtual std::unique_ptr<Transport> wrap(int fd) = 0;
  // "tcp", "unix", "tls": for messages.
  [[nodiscard]] virtual const char* kind() const = 0;
};

// Bytes straight to and from the socket.
[[nodiscard]] std::unique_ptr<TransportFactory> plain_transport(bool unix_socket);

}  // namespace redlock::net
