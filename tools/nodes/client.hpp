#pragma once
// The one synchronous Redis client of the tools and the test fixtures: a blocking connection, one
// command at a time, each waited for with a deadline. For checks, set-up and measurements beside
// the library (which has its own asynchronous engine), never for locking.
//
// Its own blocking loop over a socket (TCP or a unix socket, every wait a poll() with a deadline);
// everything on the wire is the library's (lib/net, linked as the redlock_wire archive): the RESP
// encoder, the bounded reader of replies into the library's own Reply, and the transports, TLS
// included, with the library's context set-up and verification (net/tls.hpp). Never raises
// SIGPIPE: a server that went away is a failed command.
//
// Not thread-safe: one SyncClient per thread. Movable, not copyable.

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/reply.hpp"
#include "net/tls.hpp"

namespace redlock::nodes {

// TLS to a server, with redis-cli's settings. The server's certificate is verified unless
// `verify` is false: it must chain to the CAs given (the system's when none) and name the host
// (or `server_name`).
struct Tls {
  std::string ca_file = {};      // PEM file of CAs to trust
  std::string ca_dir = {};       // directory of CA certificates (hashed names, as c_rehash makes)
  std::string cert_file = {};    // client certificate (PEM), for servers that ask for one ...
  std::string key_file = {};     // ... and its private key
  std::string server_name = {};  // SNI and the name checked; empty: the endpoint's host
  bool verify = true;
};

// Where a server listens.
struct Endpoint {
  enum class Kind { tcp, unix_socket };
  Kind kind = Kind::tcp;
  std::string host = "127.0.0.1";  // tcp: name or literal address (IPv6 without brackets)
  std::uint16_t port = 6379;       // tcp
  std::string path;                // unix socket path
  std::optional<Tls> tls;          // tcp: TLS over the connection

  [[nodiscard]] static Endpoint tcp(std::string host, std::uint16_t port);
  [[nodiscard]] static Endpoint local(std::uint16_t port) { return tcp("127.0.0.1", port); }
  [[nodiscard]] static Endpoint unix_socket(std::string path);
  // "127.0.0.1:7001", "[::1]:7001" or "unix:///path", for messages.
  [[nodiscard]] std::string to_string() const;
};

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{1000};
  // Deadline of each read and write of a command; a server that does not answer in time (paused,
  // overloaded) fails the command instead of hanging the caller.
  std::chrono::milliseconds command_timeout{1000};
  std::string user = {};      // ACL user for AUTH; empty: AUTH with the password only
  std::string password = {};  // empty: no AUTH
  int db = 0;                 // SELECTed after connecting when not 0
};

// One reply, owned: the library's own type (core/reply.hpp), so the library's parsers (INFO,
// CLUSTER SLOTS, SENTINEL MASTER) take what this client reads as it is.
using Reply = detail::Reply;

// The whole of a reply, bulk strings included, for the messages of tests and tools, e.g.
// `(error) READONLY ...`, `(integer) 1`, `["a", (nil)]`. (Reply::describe() never shows a bulk
// string, which may be a token; this is for replies whose content is the point.)
[[nodiscard]] std::string reply_text(const Reply& r);

// What a TLS connection agreed on, for checks of the server's set-up (redlock-cli doctor).
using TlsSession = net::TlsPeer;

// Why a connection is unusable.
enum class Failure {
  none,
  io,         // connect refused, reset, broken pipe ...
  timeout,    // connect or command deadline passed
  eof,        // the server closed the connection
  protocol,   // the server sent something that is not RESP
  handshake,  // the TLS handshake failed (the message says why), or AUTH or SELECT was refused
  config,     // our own TLS files cannot be used (the message names the file); nothing was sent
  oom,
  other,
};

class SyncClient {
 public:
  // Connects (and AUTHs / SELECTs as asked). Never throws for a server that cannot be reached:
  // ok() is false then and error() says why.
  explicit SyncClient(const Endpoint& endpoint, const ClientOptions& options = {});
  ~SyncClient();
  SyncClient(SyncClient&&) noexcept;
  SyncClient& operator=(SyncClient&&) noexcept;
  SyncClient(const SyncClient&) = delete;
  SyncClient& operator=(const SyncClient&) = delete;

  [[nodiscard]] bool ok() const;
  [[nodiscard]] Failure failure() const;
  // Why the connection is unusable ("Connection refused", "AUTH failed", ...); empty while ok().
  [[nodiscard]] std::string error() const;
  [[nodiscard]] const Endpoint& endpoint() const;
  // The TLS session of a connection that completed its handshake; nullopt without TLS.
  [[nodiscard]] std::optional<TlsSession> tls_session() const;

  // Sends one command and waits for its reply. Binary-safe. nullopt when the connection failed
  // (I/O error, timeout, closed): it is unusable afterwards and failure()/error() say why. A Redis
  // error reply is not a failure: it is a Reply of Type::error.
  [[nodiscard]] std::optional<Reply> command(std::span<const std::string_view> argv);
  [[nodiscard]] std::optional<Reply> command(std::initializer_list<std::string_view> argv);
  [[nodiscard]] std::optional<Reply> command(const std::vector<std::string>& argv);

  // Pipelined use, for measuring a fan-out without waiting on each server in turn: send() writes
  // a command without waiting for its reply, fd() is what to poll for POLLIN, and read_reply()
  // reads what has arrived. read_reply() reads everything the socket has (TLS included), so after
  // `partial` nothing is buffered and polling fd() is right; after `reply`, call it again before
  // polling when more replies are due. Do not mix with command() while replies are outstanding.
  [[nodiscard]] bool send(std::span<const std::string_view> argv);
  [[nodiscard]] int fd() const;
  enum class Read {
    reply,    // a whole reply arrived (stored in *out when out is not null)
    partial,  // part of one: poll again
    failed,   // the connection failed (failure() says why)
  };
  [[nodiscard]] Read read_reply(Reply* out = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// True when the server at `endpoint` answers PING within `timeout`, and, when `pid` is given,
// INFO says it is that process (so a foreign server on a recycled port is not taken for ours).
[[nodiscard]] bool answers_ping(const Endpoint& endpoint, std::chrono::milliseconds timeout,
                                std::optional<long long> pid = std::nullopt);

// The value of `field` in an INFO reply ("uptime_in_seconds", "run_id" ...), if present.
[[nodiscard]] std::optional<std::string> info_field(std::string_view info, std::string_view field);

}  // namespace redlock::nodes
