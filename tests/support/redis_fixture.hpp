// Test support: start, fault and inspect real redis-server processes.
//
// Started through the tools' redis-server launcher and spoken to through their synchronous client
// (tools/nodes/), so the tree has one of each.
//
// Every RedisServer owns one child process (fork/exec of redis-server) and one temp dir. It only
// ever signals the pid it started, reaps it (no zombies) and removes its dir in the destructor.
//
// Threading: a RedisServer / RedisCluster object is not thread-safe for lifecycle calls (start,
// kill, stop, cont, restart, move). The const inspection calls (command, get, pttl, ...) open a
// fresh connection each time and may run concurrently from several threads while no lifecycle
// call runs.
//
// IMPORTANT: the child gets prctl(PR_SET_PDEATHSIG, SIGKILL), which Linux fires when the *thread*
// that forked it exits, not the process. Construct / start() servers on a thread that outlives
// them (normally the test's main thread), never on a short-lived helper thread.
//
// The child environment has LD_PRELOAD and FAKETIME* removed, so a test process that fakes its own
// clock with libfaketime still starts normal servers (jemalloc in Debian's redis breaks under it).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "nodes/client.hpp"

namespace redlock::test {

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read, close). Never returns
// the same port twice in one process. Thread-safe.
[[nodiscard]] std::uint16_t free_port();

// A TCP port on 127.0.0.1 in 10000-17999 that was free a moment ago: below Linux's ephemeral
// range (32768-60999), where the kernel picks the local ports of outgoing connections, and apart
// from every other range the tests pick ports from, so that tests running side by side cannot
// choose the same one:
//   10000-17999   free_low_port(): the C++ fixtures' servers, and node-launcher's
//   18000-19999   free_port_with_bus_twin()'s ports, their bus twins in 28000-29999
//   20000-22767   tests/cli/redisfix.py free_cluster_base(), bus twins in 30000-32767
//   22768-27999   tests/cli/redisfix.py free_base() (`redlock-cli cluster up`, `demo`)
//   20000-29999   tests/chaos/driver.cpp's nodes (the chaos tests run alone: is_parallel false)
// The two C++ pickers retry a port taken meanwhile; the Python ones reserve theirs across
// processes instead (redisfix.py), because `cluster up --base-port` cannot retry another.
// Never returns the same port twice in one process. Thread-safe.
[[nodiscard]] std::uint16_t free_low_port();

// True if a redis-server executable is found (env REDLOCK_TEST_REDIS_SERVER, else PATH).
[[nodiscard]] bool redis_server_available();

// A TLS listener beside (or instead of) the plaintext port: Debian's redis-server and Valkey are
// built with TLS. The files usually come from a TlsFixture (tls_fixture.hpp).
struct TlsServerOptions {
  std::string cert_file;     // --tls-cert-file
  std::string key_file;      // --tls-key-file
  std::string ca_cert_file;  // --tls-ca-cert-file (verifies clients, and peers when replicating)
  std::string auth_clients = "yes";  // --tls-auth-clients yes|no|optional
  // --tls-port. 0: free_port() (a new one if it was taken meanwhile). Ignored when tls_only.
  std::uint16_t port = 0;
  // --port 0: no plaintext TCP listener at all. port() is then the TLS port, and the fixture's
  // own commands (readiness PING, command(), get(), ...) go over TLS, without verifying the
  // server's certificate, presenting client_cert_file/client_key_file (when empty: cert_file /
  // key_file, which a TlsFixture makes usable as a client certificate too).
  bool tls_only = false;
  std::string client_cert_file;
  std::string client_key_file;
  bool replication = false;  // --tls-replication yes: a replica talks TLS to its master
  bool cluster = false;  // --tls-cluster yes: the cluster bus uses TLS (bus port: TLS port+10000)
};

struct ServerConfig {
  // true: --appendonly yes --appendfsync always (acknowledged writes survive kill -9).
  // false: --save "" --appendonly no (everything is lost on kill -9).
  bool aof_always = false;
  // Also listen on <dir>/redis.sock (see RedisServer::unix_path()).
  bool unix_socket = false;
  // Appended last to redis-server's command line, so they override the fixture's defaults,
  // e.g. {"--maxmemory", "10mb"}.
  std::vector<std::string> extra_args;
  // 0: free_port() (and a new port is tried if that one was taken meanwhile).
  // RedisCluster: server i gets port + i.
  std::uint16_t port = 0;
  // With port 0 (and for an automatic TLS port): free_low_port() instead of free_port(), so that
  // no outgoing connection can take the port while the server is down between kill() and start().
  bool low_ports = false;
  // How long the constructor / start() waits for the server to answer PING.
  std::chrono::milliseconds startup_timeout{5000};
  // Also listen with TLS (see TlsServerOptions, RedisServer::tls_port()).
  std::optional<TlsServerOptions> tls;
  // The server executable, e.g. valkey_server_path() (support_util.hpp). Empty: env
  // REDLOCK_TEST_REDIS_SERVER, else redis-server from PATH.
  std::string executable;
  // Passed as the first argument (redis-server CONF --port ...), before the fixture's options,
  // which therefore override the file's. Sentinels need one (it is rewritten by the server).
  std::string config_file;
};

// A copy of one reply: the tools' synchronous client's (tools/nodes/client.hpp), which the fixture
// uses for every command.
using Reply = nodes::Reply;

// Thrown when a command could not be sent or no reply came back (connection refused, reset,
// timeout). A Redis error *reply* is not an exception: it is a Reply of Type::error.
class RedisIoError : public std::runtime_error {
 public:
  RedisIoError(const std::string& what, nodes::Failure failure)
      : std::runtime_error(what), failure_(failure) {}
  [[nodiscard]] nodes::Failure failure() const noexcept { return failure_; }
  [[nodiscard]] bool timed_out() const noexcept { return failure_ == nodes::Failure::timeout; }

 private:
  nodes::Failure failure_;
};

inline constexpr std::chrono::milliseconds kDefaultCommandTimeout{2000};

// Send one command over a fresh blocking connection to 127.0.0.1:port, over TLS with `tls`.
// Binary-safe. Throws RedisIoError on connect/IO failure or timeout, and on a TLS failure
// (failure() handshake: the message says why, e.g. "certificate verify failed: ..."; config: a
// client file of `tls` cannot be used, the message names it).
[[nodiscard]] Reply command_at(std::uint16_t port, const std::vector<std::string>& argv,
                               std::chrono::milliseconds timeout = kDefaultCommandTimeout,
                               const std::optional<nodes::Tls>& tls = std::nullopt);

// A process-wide default for servers whose ServerConfig has no `tls`: the integration suite runs
// once more over TLS by setting this at start-up (tests/integration/common.hpp). Not thread-safe:
// set it before starting servers.
void set_default_server_tls(std::optional<TlsServerOptions> tls);
[[nodiscard]] const std::optional<TlsServerOptions>& default_server_tls();

class RedisCluster;

class RedisServer {
 public:
  // Creates a temp dir, starts redis-server and waits until it answers PING (and INFO shows our
  // pid, so a foreign server on a recycled port is never mistaken for ours). Throws
  // std::runtime_error with the log tail if it does not come up within cfg.startup_timeout.
  explicit RedisServer(ServerConfig cfg = {});
  ~RedisServer();  // SIGKILL + reap (also when stopped), remove temp dir. Never throws.

  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;
  RedisServer(RedisServer&& other) noexcept;
  RedisServer& operator=(RedisServer&& other) noexcept;

  [[nodiscard]] std::uint16_t port() const { return port_; }
  [[nodiscard]] std::string address() const;    // "127.0.0.1:PORT"
  [[nodiscard]] std::string unix_path() const;  // "" unless cfg.unix_socket
  [[nodiscard]] std::string dir() const { return dir_; }
  [[nodiscard]] std::string log_path() const;  // <dir>/redis.log
  [[nodiscard]] std::string log_tail(std::size_t max_bytes = 2000) const;
  [[nodiscard]] pid_t pid() const;     // -1 when not running
  [[nodiscard]] bool running() const;  // reaps the child if it died on its own
  [[nodiscard]] bool stopped() const { return running() && stopped_; }  // SIGSTOPped by us
  [[nodiscard]] const ServerConfig& config() const { return cfg_; }
  // TLS (cfg.tls): the TLS port (== port() when tls_only), 0 without cfg.tls.
  [[nodiscard]] std::uint16_t tls_port() const;
  [[nodiscard]] std::string tls_address() const;  // "127.0.0.1:TLS_PORT", "" without cfg.tls
  [[nodiscard]] bool tls_only() const { return cfg_.tls && cfg_.tls->tls_only; }

  // --- faults -----------------------------------------------------------------------------
  void kill();  // SIGKILL our pid + waitpid. No-op if not running.
  // SIGSTOP and wait until the kernel reports the process stopped (so a command sent afterwards
  // is certain not to be served). Clients' TCP connects still succeed (kernel backlog), their
  // commands get no answer. No-op if already stopped.
  void stop();
  void cont();  // SIGCONT. No-op if not stopped.
  // Start a killed server again on the same port and dir, wait for PING. Throws std::logic_error
  // if it is running. With aof_always the data written before kill() is back.
  void start();
  // kill(), sleep `down_for`, start(). New run_id; data lost unless aof_always.
  void restart(std::chrono::milliseconds down_for = std::chrono::milliseconds{0});

  // --- commands (each opens a fresh connection; throw RedisIoError on IO failure/timeout) ------
  [[nodiscard]] Reply command(const std::vector<std::string>& argv) const;
  [[nodiscard]] Reply command(const std::vector<std::string>& argv,
                              std::chrono::milliseconds timeout) const;
  [[nodiscard]] std::optional<std::string> get(
      const std::string& key) const;  // throws on WRONGTYPE
  void set(const std::string& key, const std::string& value) const;
  [[nodiscard]] long long pttl(const std::string& key) const;  // -2 missing, -1 no expiry
  [[nodiscard]] bool exists(const std::string& key) const;
  void del(const std::string& key) const;
  void flushall() const;
  void script_flush() const;
  // REPLICAOF 127.0.0.1 <master port>: from now on writes answer "-READONLY ...".
  // (The replica also drops its data and syncs from the master.)
  void replica_of(const RedisServer& master) const;
  void make_master() const;  // REPLICAOF NO ONE
  // Waits until `replicas` online replicas have received every write this master had when called
  // (its master_repl_offset then); false after `timeout`. WAIT does this only for the writes of
  // the connection it is sent on, and command() opens a new connection each time: a WAIT sent
  // with it waits for nothing. (A master learns a replica's offset from its acknowledgement,
  // sent about once a second: this takes up to a second even when the replica is up to date.)
  [[nodiscard]] bool wait_replicated(int replicas, std::chrono::milliseconds timeout) const;
  // CONFIG SET maxmemory-policy noeviction + maxmemory 1: writes answer "-OOM ...".
  void make_oom() const;
  void clear_oom() const;  // CONFIG SET maxmemory 0
  // Replace `key` with a list, so GET / SET-based scripts on it hit WRONGTYPE (or overwrite it).
  void set_wrong_type(const std::string& key) const;
  void config_set(const std::string& name, const std::string& value) const;
  [[nodiscard]] std::string run_id() const;  // INFO server -> run_id (changes on every start)

 private:
  friend class RedisCluster;
  struct DeferReady {};
  RedisServer(ServerConfig cfg, DeferReady);
  void spawn();          // fork/exec only
  void wait_ready();     // PING + pid check, respawn on port conflicts; throws on timeout
  void reap_blocking();  // waitpid(pid_) until it is gone
  [[nodiscard]] std::uint16_t pick_port() const;  // free_port() or free_low_port()
  void destroy() noexcept;
  [[nodiscard]] std::string failure_message(const std::string& why) const;
  // TLS parts (redis_fixture_tls.cpp).
  void init_tls();                                          // picks tls_port_
  void repick_auto_tls_port();                              // after "Address already in use"
  [[nodiscard]] std::vector<std::string> tls_args() const;  // --tls-port ... for spawn()
  [[nodiscard]] bool tls_answers_as(pid_t pid) const;       // PING + INFO pid over TLS
  [[nodiscard]] Reply tls_command(const std::vector<std::string>& argv,
                                  std::chrono::milliseconds timeout) const;

  ServerConfig cfg_;
  bool auto_port_ = false;
  std::uint16_t port_ = 0;
  std::string dir_;
  std::uintmax_t log_offset_ = 0;  // size of redis.log when the current process was spawned
  mutable pid_t pid_ = -1;
  mutable bool stopped_ = false;
  std::uint16_t tls_port_ = 0;  // with cfg_.tls and not tls_only
};

// N independent masters.
class RedisCluster {
 public:
  // Forks all servers first (from the calling thread), then waits until each answers PING.
  explicit RedisCluster(int n, ServerConfig cfg = {});
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;
  RedisCluster(RedisCluster&&) noexcept = default;
  RedisCluster& operator=(RedisCluster&&) noexcept = default;
  ~RedisCluster() = default;

  // References stay valid for the cluster's lifetime (servers are heap-allocated).
  [[nodiscard]] RedisServer& operator[](std::size_t i) { return *servers_.at(i); }
  [[nodiscard]] const RedisServer& operator[](std::size_t i) const { return *servers_.at(i); }
  [[nodiscard]] std::size_t size() const { return servers_.size(); }

  [[nodiscard]] std::string nodes_csv() const;  // "127.0.0.1:p1,127.0.0.1:p2,..."
  [[nodiscard]] std::vector<std::string> addresses() const;
  // How many running, not stopped nodes have `key`.
  [[nodiscard]] int count_with_key(const std::string& key) const;
  // cont() every stopped node and start() every killed one.
  void heal();

 private:
  std::vector<std::unique_ptr<RedisServer>> servers_;
};

}  // namespace redlock::test
