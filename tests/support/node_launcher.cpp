// node-launcher: the C++ fixture's RedisServer (redis_fixture.hpp) as a program, so that the tests
// written in Python and C start their servers the same way as the C++ ones: the binary from
// $REDLOCK_TEST_REDIS_SERVER (else redis-server on PATH), a free port in 10000-17999 (another one
// when it was taken meanwhile; free_low_port() says why that range), a temp dir, the fixture's
// arguments, TLS, and ready only once our own process answers PING. It also checks that the server
// is the one the run names (REDLOCK_TEST_SERVER_NAME, REDLOCK_TEST_SERVER_VERSION), as
// tests/integration/main.cpp does for the C++ suites.
//
//   node-launcher [OPTIONS] [-- SERVER-ARGS...]
//     --port P               this port (retried when taken) instead of a free one
//     --startup-timeout MS   how long to wait for PING (default 10000)
//     --aof                  --appendonly yes --appendfsync always instead of no persistence
//     --tls-cert F --tls-key F --tls-ca F   a TLS listener on a free port beside the plaintext one
//     --tls-auth-clients yes|no|optional    (default yes)
//     --tls-only             the TLS listener only (--port 0): PORT below is the TLS port
//     SERVER-ARGS            appended last to the server's command line (they override the above)
//
// Once the server answers it prints one line, `PORT PID TLS_PORT DIR` (TLS_PORT 0 without a
// separate TLS listener), and then serves one command per line on stdin, answering one line:
//   kill     SIGKILL the server and reap it                      -> ok
//   start    start it again on the same port, wait for PING      -> ok PID
//   stop     SIGSTOP it and wait until it is stopped             -> ok
//   cont     SIGCONT it                                          -> ok
//   running  whether it runs (stopped counts as running)         -> yes | no
//   quit     kill it, reap it, remove its dir, exit 0            -> ok
// A failed command answers `error WHY`. End of input (the test ended, however it ended) and
// SIGTERM/SIGINT/SIGHUP act as quit. The server is this program's child and dies with it
// (PR_SET_PDEATHSIG), so a test that is killed leaves no server behind; the test itself never
// signals the server: the pid is printed for INFO checks and messages only.
//
// A start that fails prints `error WHY` on stdout (the whole story, log tail included, on stderr)
// and exits 1.

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "redis_fixture.hpp"

namespace {

using redlock::test::RedisServer;
using redlock::test::ServerConfig;
using redlock::test::TlsServerOptions;

volatile sig_atomic_t g_quit = 0;

void on_signal(int) { g_quit = 1; }

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "node-launcher: %s\n", why.c_str());
  std::fprintf(stderr,
               "usage: node-launcher [--port P] [--startup-timeout MS] [--aof] [--tls-cert F "
               "--tls-key F --tls-ca F [--tls-auth-clients yes|no|optional] [--tls-only]] "
               "[-- SERVER-ARGS...]\n");
  std::exit(2);
}

long number(std::string_view flag, std::string_view text, long lo, long hi) {
  long v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) {
    usage(std::string(flag) + ": not a number in " + std::to_string(lo) + ".." +
          std::to_string(hi) + ": " + std::string(text));
  }
  return v;
}

ServerConfig parse(int argc, char** argv) {
  ServerConfig cfg;
  cfg.startup_timeout = std::chrono::milliseconds(10000);
  // The Python tests' ports: no outgoing connection takes one while its server is down.
  cfg.low_ports = true;
  TlsServerOptions tls;
  bool want_tls = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(std::string(a) + " needs a value");
      return argv[++i];
    };
    if (a == "--") {
      cfg.extra_args.assign(argv + i + 1, argv + argc);
      break;
    } else if (a == "--port") {
      cfg.port = static_cast<std::uint16_t>(number(a, value(), 1, 65535));
    } else if (a == "--startup-timeout") {
      cfg.startup_timeout = std::chrono::milliseconds(number(a, value(), 1, 600000));
    } else if (a == "--aof") {
      cfg.aof_always = true;
    } else if (a == "--tls-cert") {
      tls.cert_file = value(), want_tls = true;
    } else if (a == "--tls-key") {
      tls.key_file = value(), want_tls = true;
    } else if (a == "--tls-ca") {
      tls.ca_cert_file = value(), want_tls = true;
    } else if (a == "--tls-auth-clients") {
      tls.auth_clients = value(), want_tls = true;
    } else if (a == "--tls-only") {
      tls.tls_only = true, want_tls = true;
    } else {
      usage("unknown option " + std::string(a) + " (server arguments go after --)");
    }
  }
  if (want_tls) {
    if (tls.cert_file.empty() || tls.key_file.empty() || tls.ca_cert_file.empty()) {
      usage("TLS needs --tls-cert, --tls-key and --tls-ca");
    }
    cfg.tls = tls;
  }
  return cfg;
}

// INFO server's field `key`, or nullopt.
std::optional<std::string> info_field(const std::string& info, std::string_view key) {
  const std::string text = "\n" + info;
  const std::string prefix = "\n" + std::string(key) + ":";
  auto at = text.find(prefix);
  if (at == std::string::npos) return std::nullopt;
  at += prefix.size();
  return text.substr(at, text.find_first_of("\r\n", at) - at);
}

// The run's servers must be the one it names, or it would quietly test another server.
void check_identity(const RedisServer& server) {
  const char* want = std::getenv("REDLOCK_TEST_SERVER_NAME");
  if (want == nullptr || *want == '\0') return;
  const std::string info = server.command({"INFO", "server"}).str;
  const std::string name = info_field(info, "server_name").value_or("redis");  // Redis has none
  // Valkey reports redis_version 7.2.4 for compatibility, and its own as valkey_version.
  const std::string version =
      info_field(info, "valkey_version").value_or(info_field(info, "redis_version").value_or(""));
  const char* want_version = std::getenv("REDLOCK_TEST_SERVER_VERSION");
  if (name != want) {
    throw std::runtime_error("the server on port " + std::to_string(server.port()) + " is " + name +
                             ", not " + want + " (REDLOCK_TEST_SERVER_NAME)");
  }
  if (want_version != nullptr && *want_version != '\0' && !version.starts_with(want_version)) {
    throw std::runtime_error("the server on port " + std::to_string(server.port()) + " is " + name +
                             " " + version + ", not " + want_version +
                             " (REDLOCK_TEST_SERVER_VERSION)");
  }
}

// One line of stdout, flushed; false when nobody reads any more.
bool say(const std::string& line) {
  const std::string out = line + "\n";
  return std::fwrite(out.data(), 1, out.size(), stdout) == out.size() && std::fflush(stdout) == 0;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// One line of stdin without stdio's buffering (a signal must end the wait); nullopt at end of
// input, on an error, or once a signal asked to quit.
std::optional<std::string> read_line() {
  std::string line;
  for (;;) {
    if (g_quit) return std::nullopt;
    char c = 0;
    const ssize_t n = ::read(0, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    if (c == '\n') return line;
    line += c;
  }
}

std::string run(RedisServer& server, std::string_view cmd) {
  if (cmd == "kill") {
    server.kill();
    return "ok";
  }
  if (cmd == "start") {
    server.start();
    return "ok " + std::to_string(server.pid());
  }
  if (cmd == "stop") {
    server.stop();
    return "ok";
  }
  if (cmd == "cont") {
    server.cont();
    return "ok";
  }
  if (cmd == "running") return server.running() ? "yes" : "no";
  throw std::invalid_argument("unknown command '" + std::string(cmd) + "'");
}

}  // namespace

int main(int argc, char** argv) {
  const ServerConfig cfg = parse(argc, argv);
  struct sigaction sa {};
  sa.sa_handler = on_signal;  // no SA_RESTART: a blocked read returns EINTR
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::optional<RedisServer> server;
  try {
    server.emplace(cfg);
    check_identity(*server);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "node-launcher: %s\n", e.what());
    say("error " + first_line(e.what()));
    return 1;  // ~RedisServer kills the server and removes its dir
  }
  const std::uint16_t tls_port = server->tls_only() ? 0 : server->tls_port();
  if (!say(std::to_string(server->port()) + " " + std::to_string(server->pid()) + " " +
           std::to_string(tls_port) + " " + server->dir())) {
    return 0;
  }
  while (auto line = read_line()) {
    if (*line == "quit") break;
    std::string answer;
    try {
      answer = run(*server, *line);
    } catch (const std::exception& e) {
      answer = "error " + first_line(e.what());
    }
    if (!say(answer)) return 0;
  }
  server.reset();  // kill, reap, remove the dir
  say("ok");
  return 0;
}
