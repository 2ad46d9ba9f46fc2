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
// `redis://[::1]:7001`. In a user or password, '/', '@', '?', ',' and ':' (user) are written %2F,
// %40, %3F, %2C, %3A; any byte may be written %XX. `redis://user:@host` names a user and leaves
// the password to the caller (redlock-cli: --password-file): an Options with such a node is
// refused by check_options until a password is filled in.
// A Sentinel-managed master: `redis+sentinel://[[user]:password@]host[:port]/master-name` (port
// 26379 by default; `redis-sentinel://` is the same), more sentinels as `?sentinel=host:port`
// repeated, a database as `?db=N`, `rediss+sentinel://` for TLS to the sentinels and the master.
// The credentials in the userinfo are the master's; the sentinels get their own with
// `?sentinel_user=NAME&sentinel_password=SECRET` (percent-encoded like the master's, never
// printed), else they are asked without AUTH. Every sentinel listed is asked; a master counts only
// when a majority of the sentinels that answered name it (with one sentinel listed, its answer
// suffices). Sentinels that disagree: no vote, and the reason names what each one said.
// A Redis Cluster as one vote: `redis+cluster://[[user]:password@]host[:port]` (one seed; more as
// `?seed=host:port` repeated), `rediss+cluster://` for TLS to every node of the cluster. The
// credentials are every node's; a cluster has database 0 only. Once the slot map is known, every
// master in it is also asked for the next one (after the user's seeds), so the vote outlives its
// seeds.
// Discovered servers (the master a sentinel names; every CLUSTER SLOTS endpoint, MOVED and ASK
// target) are not trusted for what the discovery source says: a sentinel that lies, or anyone on
// the path of a plaintext link to it, could name its own server and collect the password or hand
// out votes. Such a server gets the credentials and counts as a vote only when
// - its host is one this address names (the seeds, the sentinels; 127.0.0.1, ::1 and localhost
//   are one host), or matches an `?allow=ENTRY` (repeated; ENTRY is a host name or IP as the
//   discovery source writes it, `*.example.com`, a network such as `10.0.0.0/8`, or `*` for any),
//   or
// - the link is TLS with verification on: then its certificate must carry `?verify_name=NAME`,
//   else the address's `sni=` (or TlsOptions::server_name), else the host this address names
//   first (the seed, the first sentinel): never a name the discovery source supplied, unless the
//   host is allowed as above (then its own name is checked). A managed cluster whose nodes all
//   present one certificate (a wildcard, or a fixed service name) works with the seed's name or
//   `verify_name=`.
// Any other discovered server is never contacted: no vote, and the per-node reason names it.
// (redis-cli sends its AUTH to every redirection and verifies no host name; Lettuce and go-redis
// send the credentials to every discovered node and, with verification, check the discovered
// address itself, which managed offerings defeat, so users turn it off; redis-py, go-redis and
// Lettuce take the first sentinel that answers.)
// Any of these forms (unix:// too) may add `?min_replicas=N` (0-100): replicated votes for this
// vote only (see Options::min_replicas).
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
  std::string sentinel_user;         // sentinel: ?sentinel_user=, the sentinels' ACL user
  std::string sentinel_password;     // sentinel: ?sentinel_password=; empty: no AUTH to them
  std::vector<std::string> allow;    // sentinel, cluster: ?allow= entries (see above)
  std::string verify_name;           // sentinel, cluster over TLS: ?verify_name= (see above)

  // Replicated votes of this vote (?min_replicas=N, 0-100), in place of Options::min_replicas:
  // a Cluster or Sentinel vote whose masters have replicas beside standalone masters without any
  // (0 turns them off for this vote). nullopt: Options::min_replicas. Not part of to_string().
  std::optional<int> min_replicas;

  // Display form for logs and reports; never contains the password.
  [[nodiscard]] std::string to_string() const;

  // Parses one address. On failure returns nullopt and sets `error` to a message that
  // names the bad value.
  [[nodiscard]] static std::optional<NodeAddress> parse(std::string_view text, std::string& error);

  friend bool operator==(const NodeAddress&, const NodeAddress&) = default;
};

// Parses a comma-separated list of addresses ("a:1,b:2"). Empty items are errors; so is a raw ','
// in a user name or password (write %2C), with an error that shows no part of either.
// Duplicates (the same address twice) are refused: they would count twice towards a quorum. One
// server under two names is found by the engine once both connections have named it (equal
// run_id): its vote never counts twice, and every operation after that fails with
// Errc::invalid_argument.
[[nodiscard]] REDLOCK_API std::optional<std::vector<NodeAddress>> parse_node_list(
    std::string_view text, std::string& error);

// What parse_duration makes of a number without a unit.
enum class BareNumbers {
  milliseconds,  // "1500" is 1500 ms: the default
  // Refused with a message that suggests a unit ("a duration needs a unit, e.g. 30s or 30ms"):
  // for text that people write, who may count in seconds (flock -w, redis-cli EX). A lone "0"
  // is still zero, the same in every unit. What redlock-cli does with every duration.
  refused,
};

// Parses `250ms`, `1.5s`, `10s`, `2m`, `1h`, `7d`, or a bare number (`bare` says what it means):
// digits, optionally a fraction, and a unit (ms, s, m, h, d). The result must be a whole number of
// milliseconds. Rejects negative values, unknown units, overflow and empty text with a message
// naming the value.
[[nodiscard]] REDLOCK_API std::optional<Millis> parse_duration(
    std::string_view text, std::string& error, BareNumbers bare = BareNumbers::milliseconds);

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

  Millis node_timeout{50};  // per-command deadline on each node; keep it << ttl
  // Deadline for resolving, connecting and the TLS handshake. A name with several addresses
  // gets them all within it: the next address is tried beside the previous one after a quarter
  // of it (at most 250 ms; RFC 8305, Happy Eyeballs), and one that did not connect goes last the
  // next time.
  Millis connect_timeout{250};
  // Reconnect backoff: the first wait after a failure, doubling up to reconnect_max; each wait is
  // drawn from [half, all] of it. It starts over only after a handshake the server answered
  // (AUTH, SELECT, ...). A server that refuses the connection (wrong password, ACL, SELECT,
  // maxclients) is asked again only after reconnect_max.
  Millis reconnect_min{50};
  Millis reconnect_max{2000};

  double drift_factor = 0.01;  // drift = ttl * drift_factor + 2 ms
  Millis min_validity{0};      // success needs validity > min_validity

  int retry_count = 3;       // extra attempts after the first (when no wait deadline is given)
  Millis retry_delay{200};   // sleep between attempts ...
  Millis retry_jitter{100};  // ... plus a uniform value in [-jitter, +jitter]
  // Wake-ups: an acquisition that sleeps between attempts listens, on every node, for releases of
  // its resource (one pub/sub connection per node for the whole client) and tries again as soon
  // as a quorum of nodes has seen one, instead of at the end of its sleep; a fair waiter only
  // when it is next in line. Polling stays, for releases by other clients and expiries. Off:
  // poll only, and no pub/sub connections. A wake-up only ever starts an attempt (a lock is held
  // on the replies to it, never on a message, which anyone who may PUBLISH can forge), and only
  // after an attempt that found the lock held elsewhere: one that failed for want of a quorum
  // (nodes down, votes excluded) waits retry_delay with its jitter whatever it hears.
  bool wake_ups = true;

  // How a plain lock's release and extend reach each node. Every node is asked at each connect
  // what it can run (COMMAND INFO, COMMAND DOCS SET; never its version string):
  //   automatic  DELIFEQ (Valkey >= 9.0) or DELEX key IFEQ (Redis >= 8.4) to release and
  //              SET key token IFEQ token PX ttl (Valkey >= 8.1, Redis >= 8.4) to extend where the
  //              node has them, the Lua scripts elsewhere, node by node;
  //   scripts    the Lua scripts everywhere (as before the probe existed);
  //   native     the native commands everywhere: a node without them gives no vote, and its
  //              record says so (refused by configuration).
  // A release that also wakes waiters keeps its script where the node runs scripts (it names one
  // waiter and takes it off the waiting mark in the same step). Lock kinds that need a script
  // (fencing, fair, read-write, several resources) keep it always; on a node that refuses scripts
  // they fail at once, naming the node. A node that claims a native command and then refuses it
  // gets the script instead (said once in the log).
  enum class Commands { automatic, scripts, native };
  Commands commands = Commands::automatic;

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
  // see docs/topologies.md, "Failover checks"). replica_timeout must be below node_timeout
  // (default: half of it). Such a vote's deadline is node_timeout + replica_timeout + 100 ms: the
  // server answers a WAIT that timed out on its next cron tick (every 100 ms at Redis's default hz
  // 10), and a node without enough replicas then says so (NOREPLICAS) instead of timing out.
  // 0: off. A vote's address may set its own (NodeAddress::min_replicas).
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
  leader,     // an election's leader (redlock/election.hpp): the plain lock key, and beside it a
              // record of the holder's `identity` and term that lives and dies with it; fenced
              // (the fence is the term). One resource, not fair; AcquireOptions::identity needed
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
  // Read-write locks (see docs/design.md, "Key layout"): read and write take one resource.
  LockMode mode = LockMode::exclusive;
  // Fair (FIFO) lock: waiters are served in the order of a ticket taken from the quorum, also
  // across processes. Waiting polls with a short backoff (5 ms doubling to 100 ms) and keeps a
  // heartbeat, so a waiter that dies loses its place after `heartbeat_ttl`. Without `wait`,
  // a fair acquire waits retry_count * retry_delay. Exclusive mode, one resource.
  bool fair = false;
  Millis heartbeat_ttl{2000};
  // LockMode::leader: who campaigns (a host name, a pod name, an address: 1 to 256 bytes, no
  // control characters; readable by every client of the nodes, so never a secret). Empty for
  // every other mode.
  std::string identity;
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
// The same check, for callers that report a bad setting under their own name for it (the CLI
// names its flag): the Options member at fault ("node_timeout", "max_ttl", ...; "nodes" for the
// node list or one of its addresses) and what is wrong with it, with the value. check_options()
// is "<field>: <reason>" of this.
struct OptionsProblem {
  std::string field;
  std::string reason;
};
[[nodiscard]] REDLOCK_API std::optional<OptionsProblem> find_options_problem(
    const Options& options);
// Resources (non-empty, distinct, at most 1 MiB each, none whose key has the form of the library's
// own keys: redlock/keys.hpp) and how the lock kinds combine: fencing, read/write and fair locks
// take one resource; fair locks are exclusive and unfenced; fencing is for exclusive locks.
// `client` gives the settings of the client that bear on it: its drift_factor (a ttl the drift
// alone uses up is refused), key_prefix, and declared max_ttl (a longer ttl is refused). What the
// Engine checks.
[[nodiscard]] REDLOCK_API std::optional<std::string> check_acquire(
    const std::vector<std::string>& resources, const AcquireOptions& options,
    const Options& client = {});

}  // namespace redlock
