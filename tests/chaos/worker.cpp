// chaos-worker: one client process of the safety harness (see README.md here).
//
// Loops until SIGTERM: pick a resource, try_acquire a fresh lock, and if enough validity is left
// for the planned critical section, enter it: read the oracle's counter, sleep, write counter+1
// (with the lock's fence when fencing is on), leave, then try_release. Every step is reported to
// the oracle over a unix socket and waits for its reply.
//
// With --fair 1 the locks are fair (FIFO; fair locks are unfenced, so --fence is ignored) and the
// GOT line carries the lock's ticket, which the oracle checks for FIFO order. Wake-ups stay on
// (the library's default): waiters are woken over pub/sub.
//
// The validity check uses the library's own deadline (CLOCK_BOOTTIME), right before ENTER. If the
// oracle answers RECHECK (the nemesis paused this process around the ENTER), the check is made
// again.
//
// With --election 1 it is a candidate instead (the election mix): it campaigns on the first
// resource's name with redlock::Election, and reports each leadership to the oracle as one
// interval on the oracle's clock (CLOCK_MONOTONIC, read here: one clock for every process on the
// machine): LEAD when campaign returned (its term and its validity deadline), VALID each time an
// extension moved the deadline on, UNLEAD when it resigns or notices the loss. The interval ends
// at the earlier of that moment and the last deadline it reported, which is as long as a
// candidate may act as leader. --election-ignore-validity 1 breaks that on purpose (it keeps
// leading for its planned time, lost or not): the checker must then see overlaps.
//
// Usage: chaos-worker --socket PATH --slot K --nodes CSV --resources a,b [options] (see parse()).

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <thread>

#include "common.hpp"
#include "redlock/redlock.hpp"

namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_term(int) { g_stop.store(true); }

struct Config {
  std::string socket_path;
  int slot = -1;
  std::string nodes;
  std::string tls_ca_file;  // --tls-ca: the CA of rediss:// nodes
  std::vector<std::string> resources;
  long ttl_ms = 1500;
  long cs_min_ms = 5;
  long cs_max_ms = 50;
  long margin_ms = 100;  // validity left must exceed planned + margin to enter
  long wait_ms = 750;    // AcquireOptions::wait
  long think_max_ms = 10;
  bool fence = true;
  bool fair = false;           // fair (FIFO) locks: unfenced, the ticket goes to the oracle
  long heartbeat_ttl_ms = -1;  // fair waiters' AcquireOptions::heartbeat_ttl; -1: library default
  bool durable = false;
  bool election = false;                  // a candidate of the election mix
  bool election_ignore_validity = false;  // broken on purpose: leads on after a loss
  long min_node_uptime_ms = 0;
  long restart_quarantine_ms = -1;  // -1: library default
  std::uint64_t seed = 1;
};

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "chaos-worker: %s\n", msg.c_str());
  std::exit(2);
}

Config parse(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (i + 1 >= argc) die("missing value for " + k);
    std::string v = argv[++i];
    auto num = [&] { return std::stol(v); };
    if (k == "--socket")
      c.socket_path = v;
    else if (k == "--slot")
      c.slot = static_cast<int>(num());
    else if (k == "--nodes")
      c.nodes = v;
    else if (k == "--resources")
      c.resources = chaos::split_csv(v);
    else if (k == "--ttl-ms")
      c.ttl_ms = num();
    else if (k == "--cs-min-ms")
      c.cs_min_ms = num();
    else if (k == "--cs-max-ms")
      c.cs_max_ms = num();
    else if (k == "--margin-ms")
      c.margin_ms = num();
    else if (k == "--wait-ms")
      c.wait_ms = num();
    else if (k == "--think-max-ms")
      c.think_max_ms = num();
    else if (k == "--fence")
      c.fence = num() != 0;
    else if (k == "--fair")
      c.fair = num() != 0;
    else if (k == "--heartbeat-ttl-ms")
      c.heartbeat_ttl_ms = num();
    else if (k == "--durable")
      c.durable = num() != 0;
    else if (k == "--election")
      c.election = num() != 0;
    else if (k == "--election-ignore-validity")
      c.election_ignore_validity = num() != 0;
    else if (k == "--min-node-uptime-ms")
      c.min_node_uptime_ms = num();
    else if (k == "--restart-quarantine-ms")
      c.restart_quarantine_ms = num();
    else if (k == "--seed")
      c.seed = std::stoull(v);
    else if (k == "--tls-ca")
      c.tls_ca_file = v;
    else
      die("unknown option " + k);
  }
  if (c.socket_path.empty() || c.slot < 0 || c.nodes.empty() || c.resources.empty()) {
    die("need --socket, --slot, --nodes and --resources");
  }
  return c;
}

int connect_unix(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket: " + std::string(std::strerror(errno)));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) die("socket path too long");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    die("connect " + path + ": " + std::strerror(errno));
  }
  return fd;
}

// Microseconds left before the lock's own deadline (negative once passed), on the library's clock.
long long remaining_us(const redlock::Lock& lock) {
  return std::chrono::duration_cast<std::chrono::microseconds>(lock.deadline() -
                                                               redlock::BootClock::now())
      .count();
}

class Worker {
 public:
  explicit Worker(Config cfg)
      : cfg_(std::move(cfg)), conn_(connect_unix(cfg_.socket_path)), rng_(cfg_.seed) {}

  int run() {
    redlock::Client client(client_options());
    ask("HELLO " + std::to_string(cfg_.slot) + " " + std::to_string(::getpid()));
    if (cfg_.election) return run_candidate(client);
    std::uniform_int_distribution<std::size_t> pick_res(0, cfg_.resources.size() - 1);
    std::uniform_int_distribution<long> pick_cs(cfg_.cs_min_ms * 1000, cfg_.cs_max_ms * 1000);
    std::uniform_int_distribution<long> pick_think(0, cfg_.think_max_ms * 1000);

    redlock::AcquireOptions ao;
    ao.ttl = redlock::Millis{cfg_.ttl_ms};
    ao.wait = redlock::Millis{cfg_.wait_ms};
    ao.fence = cfg_.fence && !cfg_.fair;  // fair locks exclude fencing
    ao.fair = cfg_.fair;
    if (cfg_.heartbeat_ttl_ms >= 0) ao.heartbeat_ttl = redlock::Millis{cfg_.heartbeat_ttl_ms};

    while (!g_stop.load()) {
      const std::string& res = cfg_.resources[pick_res(rng_)];
      ask("ACQ " + res + " " +
          std::to_string(static_cast<long long>(::time(nullptr))));  // wall clock
      const auto t0 = std::chrono::steady_clock::now();
      redlock::AcquireResult r = client.try_acquire({res}, ao);
      const auto lat = std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::steady_clock::now() - t0);
      if (!r) {
        std::string why = r.error.message();
        for (auto& ch : why) {
          if (ch == ' ') ch = '_';
        }
        ask("GOT " + res + " 0 " + std::to_string(lat.count()) + " " + why);
        sleep_us(pick_think(rng_));
        continue;
      }
      const redlock::Lock& lock = r.lock;
      const std::string fence = lock.fence() ? std::to_string(*lock.fence()) : "-";
      const std::string ticket = lock.ticket() ? std::to_string(*lock.ticket()) : "-";
      ask("GOT " + res + " 1 " + std::to_string(lat.count()) + " " + fence + " " + ticket);

      const long planned_us = pick_cs(rng_);
      const long long need_us = planned_us + cfg_.margin_ms * 1000;
      bool entered = false;
      for (;;) {
        const long long left = remaining_us(lock);
        if (left <= need_us) {
          ask("SKIP " + res + " " + std::to_string(left));
          break;
        }
        auto reply = ask("ENTER " + res + " " + fence + " " + std::to_string(left) + " " +
                         std::to_string(planned_us));
        if (reply == "OK") {
          entered = true;
          break;
        }
        // RECHECK: we may have been paused since the check above; look at the clock again.
      }
      if (entered) {
        auto val = ask("READ " + res + " " + fence);
        if (val.rfind("VAL ", 0) == 0) {
          const long long v = std::stoll(val.substr(4));
          sleep_us(planned_us);
          ask("WRITE " + res + " " + fence + " " + std::to_string(v + 1));
        }
        ask("LEAVE " + res + " " + std::to_string(remaining_us(lock)));
      }
      redlock::ReleaseResult rel = client.try_release(lock);
      ask("REL " + res + " " + std::to_string(rel.deleted));
      sleep_us(pick_think(rng_));
    }
    return 0;
  }

 private:
  // The election mix: campaign, lead for a planned while (the critical-section range), resign;
  // again until SIGTERM. See the comment at the top.
  int run_candidate(redlock::Client& client) {
    const std::string& name = cfg_.resources.front();
    redlock::Election election(client, name);
    const std::string id =
        "candidate-" + std::to_string(cfg_.slot) + "-" + std::to_string(::getpid());
    std::uniform_int_distribution<long> pick_lead(cfg_.cs_min_ms * 1000, cfg_.cs_max_ms * 1000);
    std::uniform_int_distribution<long> pick_think(0, cfg_.think_max_ms * 1000);
    // Set by on_lost (the library's I/O thread): when the loss was reported.
    std::atomic<std::int64_t> lost_ns{0};
    redlock::CampaignOptions co;
    co.ttl = redlock::Millis{cfg_.ttl_ms};
    co.wait = redlock::Millis{cfg_.wait_ms};
    co.hold.on_lost = [&lost_ns](const redlock::LossInfo&) {
      std::int64_t none = 0;
      lost_ns.compare_exchange_strong(none, chaos::mono_ns());
    };
    while (!g_stop.load()) {
      ask("ACQ " + name + " " + std::to_string(static_cast<long long>(::time(nullptr))));
      lost_ns.store(0);
      const auto t0 = std::chrono::steady_clock::now();
      auto [leadership, result] = election.try_campaign(id, co);
      const std::int64_t start_ns = chaos::mono_ns();
      const auto lat = std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::steady_clock::now() - t0);
      if (!leadership) {
        std::string why = result.error.message();
        for (auto& ch : why) {
          if (ch == ' ') ch = '_';
        }
        ask("GOT " + name + " 0 " + std::to_string(lat.count()) + " " + why);
        sleep_us(pick_think(rng_));
        continue;
      }
      // The deadline on the oracle's clock, taken at once (a pause before LEAD must not move
      // it): the lock's own deadline, signed (remaining() stops at 0), read before the clock, so
      // the sum is never earlier than the library's deadline (a longer leadership can only add
      // overlaps).
      auto deadline_ns = [&leadership] {
        const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              leadership.lock().deadline() - redlock::BootClock::now())
                              .count();
        return chaos::mono_ns() + static_cast<std::int64_t>(left);
      };
      // Broken on purpose: no deadline (an hour), so the leadership lasts until it resigns.
      std::int64_t valid_until =
          cfg_.election_ignore_validity ? start_ns + 3'600'000'000'000LL : deadline_ns();
      const std::string term = std::to_string(leadership.term());
      ask("GOT " + name + " 1 " + std::to_string(lat.count()) + " " + term + " -");
      ask("LEAD " + name + " " + term + " " + std::to_string(start_ns) + " " +
          std::to_string(valid_until));
      const std::int64_t planned_end = start_ns + pick_lead(rng_) * 1000LL;
      const char* how = "resigned";
      for (;;) {
        const std::int64_t d = deadline_ns();
        const bool leading = leadership.is_leader();
        const std::int64_t now = chaos::mono_ns();
        if (cfg_.election_ignore_validity) {
          // Broken on purpose: leads on until its planned end, whatever the library says.
          if (now >= planned_end) break;
        } else {
          if (!leading || lost_ns.load() != 0) {
            how = "lost";
            break;
          }
          if (d > valid_until) {
            valid_until = d;
            ask("VALID " + name + " " + std::to_string(valid_until));
          }
          if (now >= planned_end || g_stop.load()) break;
        }
        sleep_us(5000);
      }
      // It led until now, or until the loss was reported if that was earlier (the oracle caps it
      // at the last deadline reported).
      std::int64_t end_ns = chaos::mono_ns();
      if (const std::int64_t l = lost_ns.load(); l != 0 && !cfg_.election_ignore_validity)
        end_ns = std::min(end_ns, l);
      ask("UNLEAD " + name + " " + std::to_string(end_ns) + " " + how);
      redlock::ReleaseResult rel = leadership.resign();
      ask("REL " + name + " " + std::to_string(rel.deleted));
      sleep_us(pick_think(rng_));
    }
    return 0;
  }

  redlock::Options client_options() const {
    std::string err;
    auto nodes = redlock::parse_node_list(cfg_.nodes, err);
    if (!nodes) die("bad --nodes: " + err);
    redlock::Options o;
    o.nodes = std::move(*nodes);
    o.node_timeout = redlock::Millis{50};
    o.connect_timeout = redlock::Millis{100};
    o.reconnect_min = redlock::Millis{10};
    o.reconnect_max = redlock::Millis{200};
    o.retry_delay = redlock::Millis{20};
    o.retry_jitter = redlock::Millis{10};
    o.durable_nodes = cfg_.durable;
    o.tls.ca_file = cfg_.tls_ca_file;  // used by rediss:// nodes only
    o.min_node_uptime = redlock::Millis{cfg_.min_node_uptime_ms};
    if (cfg_.restart_quarantine_ms >= 0)
      o.restart_quarantine = redlock::Millis{cfg_.restart_quarantine_ms};
    if (std::getenv("CHAOS_WORKER_LOG") != nullptr) {
      const int slot = cfg_.slot;
      o.logger = [slot](redlock::LogLevel, std::string_view m) {
        std::fprintf(stderr, "[worker %d] %.*s\n", slot, static_cast<int>(m.size()), m.data());
      };
    }
    return o;
  }

  // Sends one message and waits for the oracle's reply; exits when the oracle is gone.
  std::string ask(const std::string& line) {
    if (!conn_.write_line(line)) std::exit(3);
    auto reply = conn_.read_line();
    if (!reply) std::exit(3);
    return *reply;
  }

  static void sleep_us(long us) {
    if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
  }

  Config cfg_;
  chaos::LineConn conn_;
  std::mt19937_64 rng_;
};

}  // namespace

int main(int argc, char** argv) {
  struct sigaction sa {};
  sa.sa_handler = on_term;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  Config cfg = parse(argc, argv);
  try {
    return Worker(std::move(cfg)).run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chaos-worker: %s\n", e.what());
    return 1;
  }
}
