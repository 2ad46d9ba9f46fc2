#pragma once
// Configuration types: node addresses, durations, engine options.
// Everything here is plain data; no I/O happens in this header.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "redlock/export.hpp"

namespace redlock {

using Millis = std::chrono::milliseconds;

// One vote: an independent Redis master, or a master that Sentinel manages.
// Accepted forms (see the man page, "Addresses"): `redis://[[user]:password@]host[:port][/db]`,
// `rediss://...` (the same over TLS, with optional `?sni=NAME&cacert=FILE&cert=FILE&key=FILE&
// insecure` for this node only), `unix:///path/to/socket[?db=N]`, `host:port`, `host`, and IPv6 as
// `redis://[::1]:7001`. In a user or password, '/', '@', '?' and ':' (user) are written %2F, %40,
// %3F, %3A.
// A Sentinel-managed master: `redis+sentinel://[[user]:password@]host[:port]/master-name` (port
// 26379 by default; `redis-sentinel://` is the same), more sentinels as `?sentinel=host:port`
// repeated, a database as `?db=N`, `rediss+sentinel://` for TLS to the sentinels and the master.
// The credentials are the master's; the sentinels are asked without AUTH.
// A Redis Cluster as one vote: `redis+cluster://[[user]:password@]host[:port]` (one seed; more as
// `?seed=host:port` repeated), `rediss+cluster://` for TLS to every node of the cluster. The
// credentials are every node's; a cluster has database 0 only.
struct REDLOCK_API NodeAddress {
  enum class Transport { tcp, unix_socket };
  enum class Kind {
    server,    // host/port (or path) is the master itself
    sentinel,  // host/port and more_sentinels are sentinels that name the master `master_name`
    cluster,   // host/port and more_seeds are nodes of a Redis Cluster, which votes as one
  };
  struct Host {
    std::string host;
    std::uint16_t port = 0;
    friend bool operator==(const Host&, const Host&) = default;
  };

  // What a rediss:// address sets for its node only; empty fields fall back to Options::tls.
  struct TlsOverride {
    std::string server_name;  // sni=: SNI and the name checked in the certificate
    std::string ca_file;      // cacert=
    std::string cert_file;    // cert=
    std::string key_file;     // key=
    bool insecure = false;    // insecure: no verification of this server's certificate
    friend bool operator==(const TlsOverride&, const TlsOverride&) = default;
  };

  Transport transport = Transport::tcp;
  std::string host = "127.0.0.1";  // tcp: name or literal address (IPv6 without brackets)
  std::uint16_t port = 6379;       // tcp
  std::string path;                // unix socket path
  std::string user;                // ACL user name; empty: AUTH with the password only
  std::string password;            // empty: no AUTH
  int db = 0;                      // SELECTed on connect when not 0
  bool tls = false;                // rediss://: TLS to this node (Options::tls can ask it for all)
  TlsOverride tls_override;        // rediss:// query parameters
  Kind kind = Kind::server;
  std::string master_name;           // sentinel: the name the sentinels monitor the master by
  std::vector<Host> more_sentinels;  // sentinel: ?sentinel=host:port, after host/port
  std::vector<Host> more_seeds;      // cluster: ?seed=host:port, after host/port

  // Display form for logs and reports; never contains the password.
  [[nodiscard]] std::string to_string() const;

  // Parses one address. On failure returns nullopt and sets `error` to a message that
  // names the bad value.
  [[nodiscard]] static std::optional<NodeAddress> parse(std::string_view text, std::string& error);

  friend bool operator==(const NodeAddress&, const NodeAddress&) = default;
};

// Parses a comma-separated list of addresses ("a:1,b:2"). Empty items are errors.
// Duplicates (the same address twice) are refused: they would count twice towards a quorum. One
// server under two names is found by the engine once both connections have named it (equal
// run_id): its vote never counts twice, and every operation after that fails with
// Errc::invalid_argument.
[[nodiscard]] REDLOCK_API std::optional<std::vector<NodeAddress>> parse_node_list(
    std::string_view text, std::string& error);

// Parses `250ms`, `1.5s`, `10s`, `2m`, `1h`, `7d`, or a bare number meaning milliseconds: digits,
// optionally a fraction, and a unit (ms, s, m, h, d). The result must be a whole number of
// milliseconds. Rejects negative values, unknown units, overflow and empty text with a message
// naming the value.
[[nodiscard]] REDLOCK_API std::optional<Millis> parse_duration(std::string_view text,
                                                               std::string& error);

enum class LogLevel { debug, info, warning, error };

// Called on the engine's loop thread. Must not block and must not call back into the engine.
using Logger = std::function<void(LogLevel, std::string_view message)>;

// The longest ttl accepted (365 days). Keeps every time computation far from overflow.
inline constexpr Millis max_ttl{365LL * 24 * 3600 * 1000};

// TLS to the nodes (redis-cli's options). Verification is on unless turned off by name.
struct TlsOptions {
  bool enabled = false;     // TLS to every tcp node (a rediss:// address asks it for itself)
  std::string ca_file;      // PEM file of the CAs to trust; with ca_dir empty too: the system's
  std::string ca_dir;       // directory of CA certificates (hashed names, as c_rehash makes)
  std::string cert_file;    // client certificate (PEM), for servers that ask for one
  std::string key_file;     // its private key (PEM)
  std::string server_name;  // SNI and the name the certificate must carry; empty: each node's host
  // Accept any server certificate: the connection is encrypted but not authenticated, so anyone
  // on the path can impersonate the nodes. For tests against self-signed servers only.
  bool insecure_skip_verify = false;
};

struct Options {
  std::vector<NodeAddress> nodes;  // N independent masters; quorum is N/2+1
  TlsOptions tls;

  Millis node_timeout{50};      // per-command deadline on each node; keep it << ttl
  Millis connect_timeout{250};  // deadline for a TCP/unix connect
  Millis reconnect_min{50};     // reconnect backoff: first delay ...
  Millis reconnect_max{2000};   // ... doubling up to this

  double drift_factor = 0.01;  // drift = ttl * drift_factor + 2 ms
  Millis min_validity{0};      // success needs validity > min_validity

  int retry_count = 3;       // extra attempts after the first (when no wait deadline is given)
  Millis retry_delay{200};   // sleep between attempts ...
  Millis retry_jitter{100};  // ... plus a uniform value in [-jitter, +jitter]
  // Wake-ups: an acquisition that sleeps between attempts listens, on every node, for releases of
  // its resource (one pub/sub connection per node for the whole client) and tries again as soon
  // as a quorum of nodes has seen one, instead of at the end of its sleep; a fair waiter only
  // when it is next in line. Polling stays, for releases by other clients and expiries. Off:
  // poll only, and no pub/sub connections.
  bool wake_ups = true;

  std::string key_prefix;  // prepended to every resource to form the key; default none

  // Restart guard (algorithm.md, hazard 6). A node whose Redis uptime is below
  // `min_node_uptime`, or whose run_id changed while this client knew it, gives no vote until
  // the quarantine has passed. `durable_nodes` turns the guard off (nodes run
  // appendonly yes + appendfsync always).
  // A node whose INFO cannot be read (an ACL user without +info) gives no vote while the guard is
  // on (quarantine or min_node_uptime above 0, nodes not durable): the guard fails closed, and
  // the per-node record says what is missing.
  Millis min_node_uptime{0};
  // The longest ttl any client of these nodes uses: a deployment setting, the same for every
  // client. A restarted node's votes then wait max_ttl + drift, and an acquire or extend with a
  // longer ttl is refused (Errc::invalid_argument, naming both). Unset, the quarantine is the
  // longest ttl this client has used so far, and at least 30 s (the default ttl) plus drift: a
  // fresh process does not know the ttls other clients of the nodes use, and 30 s covers every
  // client that keeps the default. Clients with longer ttls need max_ttl (or restart_quarantine).
  std::optional<Millis> max_ttl;
  // How long a restarted node gives no vote, overriding what max_ttl gives (0 turns the guard off).
  std::optional<Millis> restart_quarantine;
  bool durable_nodes = false;

  // Replicated votes (opt-in): every write that gives a vote (acquire, extend) is followed on its
  // node by `WAIT min_replicas replica_timeout`, and the vote counts only when that many replicas
  // acknowledged the write. A failover (Sentinel, Cluster) then promotes a replica that has the
  // key, where the replica with the highest offset is preferred (a preference, not a guarantee:
  // see the README, "Failover"). WAIT holds the node's connection until it answers, so
  // replica_timeout must be below node_timeout (default: half of it). 0: off.
  int min_replicas = 0;
  std::optional<Millis> replica_timeout;

  Logger logger;  // silent when empty
};

// What kind of lock to take on a resource.
enum class LockMode {
  exclusive,  // the plain Redlock: one holder (interoperable with other Redlock clients)
  read,       // shared with other readers; not while a writer or a plain lock holds the key
              // (a plain lock does not look at readers: take `write` where readers may be)
  write,      // one writer, no readers; a waiting writer stops new readers from entering
};

// Per-call settings of an acquisition.
struct AcquireOptions {
  Millis ttl{30000};
  // When set, attempts keep being started until this much time has passed (retry_count is then
  // ignored). It never shortens the ttl of an attempt.
  std::optional<Millis> wait;
  std::optional<int> retry_count;  // overrides Options::retry_count
  // Fencing (see fencing.hpp): the lock gets a fence() that grows strictly with every successful
  // acquisition of the resource. Costs one more round trip. One resource per lock.
  bool fence = false;
  // Read-write locks (see README, "Key layout"): read and write take one resource.
  LockMode mode = LockMode::exclusive;
  // Fair (FIFO) lock: waiters are served in the order of a ticket taken from the quorum, also
  // across processes. Waiting polls with a short backoff (5 ms doubling to 100 ms) and keeps a
  // heartbeat, so a waiter that dies loses its place after `heartbeat_ttl`. Without `wait`,
  // a fair acquire waits retry_count * retry_delay. Exclusive mode, one resource.
  bool fair = false;
  Millis heartbeat_ttl{2000};
  // Cancellation: request a stop on the source of this token, from any thread (also from a
  // callback on the engine's loop), and the acquisition ends with Errc::cancelled: no further
  // attempt starts, the attempt in flight is rolled back on every node, a fair waiter leaves the
  // queue. A stop that comes after the outcome was decided changes nothing: the callback then gets
  // the lock, which the caller must release. Already requested when the call is made: nothing is
  // sent.
  std::stop_token stop;
};

// The checks the Engine makes, for callers that want to refuse bad settings before connecting
// (the CLI turns them into usage errors). Each returns why the value cannot be used, naming it,
// or nullopt. The Engine refuses exactly the same things (std::invalid_argument from its
// constructor, Errc::invalid_argument from acquire), so the two can never disagree.
[[nodiscard]] REDLOCK_API std::optional<std::string> check_options(const Options& options);
// Resources (non-empty, distinct, at most 1 MiB each, none whose key has the form of the library's
// own keys: redlock/keys.hpp) and how the lock kinds combine: fencing, read/write and fair locks
// take one resource; fair locks are exclusive and unfenced; fencing is for exclusive locks.
// `drift_factor` and `key_prefix` are the client's (a ttl the drift alone uses up is refused).
[[nodiscard]] REDLOCK_API std::optional<std::string> check_acquire(
    const std::vector<std::string>& resources, const AcquireOptions& options,
    double drift_factor = 0.01, std::string_view key_prefix = {});
// The same with every setting of the client that bears on it: its drift_factor and key_prefix,
// and its declared max_ttl (a longer ttl is refused). What the Engine checks.
[[nodiscard]] REDLOCK_API std::optional<std::string> check_acquire(
    const std::vector<std::string>& resources, const AcquireOptions& options,
    const Options& client);

}  // namespace redlock
