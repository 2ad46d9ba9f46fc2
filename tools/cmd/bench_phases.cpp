// The measuring half of `redlock-cli bench` (bench_phases.hpp): raw probes for the floors, the
// sequential and concurrent lock cycles, and the final sweep. The probes talk to the nodes over
// the tools' synchronous client (nodes/client.hpp): nothing of the library is on their path, so
// they show what one round trip costs on this machine.

#include "bench_phases.hpp"

#include <malloc.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>

#include "core/server_text.hpp"
#include "core/slots.hpp"
#include "nodes/client.hpp"
#include "output.hpp"
#include "redlock/client.hpp"
#include "redlock/keys.hpp"
#include "server_access.hpp"

namespace redlock::cli::bench {

using nodes::Reply;

double us_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

Clock::duration seconds_of(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

Stats stats_of(std::vector<double> v) {
  Stats s;
  s.count = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) {
    auto i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::clamp<std::size_t>(i, 1, v.size()) - 1];
  };
  s.p50 = rank(0.50);
  s.p99 = rank(0.99);
  s.p999 = rank(0.999);
  s.max = v.back();
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  return s;
}

double cpu_us() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto us = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec);
  };
  return us(ru.ru_utime) + us(ru.ru_stime);
}

long rss_kb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return 0;
}

long heap_kb() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 mi = mallinfo2();
  return static_cast<long>((mi.uordblks + mi.hblkhd) / 1024);
#else
  return -1;
#endif
}

std::string fmt(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string random_prefix() {
  std::random_device rd;
  std::ostringstream s;
  s << "rlbench-" << std::hex << rd() << rd() << ":";
  return s.str();
}

Progress::Progress(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO) == 1) {}

void Progress::show(const std::string& text) {
  if (!enabled_) return;
  auto now = Clock::now();
  if (shown_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  shown_ = true;
  write_stderr("\r\033[K" + text);
}

void Progress::clear() {
  if (!enabled_ || !shown_) return;
  write_stderr("\r\033[K");
  shown_ = false;
}
namespace {

// A cluster vote's slot map, from the first seed that answers CLUSTER SLOTS, read by the
// library's own parser (core/slots.hpp: range-checked, the empty host the seed's). Empty when no
// seed answers with a map.
struct SlotMap {
  struct Range {
    unsigned first = 0, last = 0;
    NodeAddress master;
  };
  std::vector<Range> ranges;
};

SlotMap slot_map(const NodeAddress& vote, const TlsOptions& tls, Millis timeout) {
  std::vector<NodeAddress::Host> seeds{{vote.host, vote.port}};
  seeds.insert(seeds.end(), vote.more_seeds.begin(), vote.more_seeds.end());
  for (const auto& seed : seeds) {
    nodes::SyncClient c(endpoint_of(cluster_member(vote, seed.host, seed.port), tls),
                        {.connect_timeout = timeout,
                         .command_timeout = timeout,
                         .user = vote.user,
                         .password = vote.password});
    auto r = c.command({"CLUSTER", "SLOTS"});
    if (!r) continue;
    std::string error;
    auto ranges = detail::parse_cluster_slots(*r, error);
    if (!ranges || ranges->empty()) continue;
    SlotMap map;
    for (const auto& range : *ranges) {
      const std::string host = range.master.host.empty() ? seed.host : range.master.host;
      map.ranges.push_back({static_cast<unsigned>(range.first), static_cast<unsigned>(range.last),
                            cluster_member(vote, host, range.master.port)});
    }
    return map;
  }
  return {};
}

// Every master of a cluster vote (each once); the vote itself for any other kind, or when its
// slot map cannot be had (so that the connection fails as before).
std::vector<NodeAddress> masters_of(const NodeAddress& vote, const TlsOptions& tls,
                                    Millis timeout) {
  if (vote.kind != NodeAddress::Kind::cluster) return {vote};
  std::vector<NodeAddress> out;
  for (const auto& range : slot_map(vote, tls, timeout).ranges) {
    if (std::find(out.begin(), out.end(), range.master) == out.end()) out.push_back(range.master);
  }
  if (out.empty()) out.push_back(vote);
  return out;
}

// The server behind a vote for `key`: itself; for a Sentinel vote the master a sentinel names now
// (the first that answers); for a cluster vote the master of the key's slot. Unchanged when
// nobody answers, so that the connection fails as before.
NodeAddress server_of(const NodeAddress& a, const TlsOptions& tls, Millis timeout,
                      const std::string& key) {
  if (a.kind == NodeAddress::Kind::cluster) {
    const unsigned slot = hash_slot(key);  // the slot the library routes the key to
    for (const auto& range : slot_map(a, tls, timeout).ranges) {
      if (slot >= range.first && slot <= range.last) return range.master;
    }
    return a;
  }
  if (a.kind != NodeAddress::Kind::sentinel) return a;
  std::vector<NodeAddress::Host> sentinels{{a.host, a.port}};
  sentinels.insert(sentinels.end(), a.more_sentinels.begin(), a.more_sentinels.end());
  for (const auto& s : sentinels) {
    NodeAddress at = a;  // the sentinel itself: no AUTH, no SELECT
    at.kind = NodeAddress::Kind::server;
    at.host = s.host;
    at.port = s.port;
    at.user.clear();
    at.password.clear();
    at.db = 0;
    nodes::SyncClient c(endpoint_of(at, tls),
                        {.connect_timeout = timeout, .command_timeout = timeout});
    auto r = c.command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", a.master_name});
    if (!r || r->type != Reply::Type::array || r->elements.size() != 2) continue;
    NodeAddress m = a;
    m.kind = NodeAddress::Kind::server;
    m.master_name.clear();
    m.more_sentinels.clear();
    m.host = r->elements[0].str;
    try {
      m.port = static_cast<std::uint16_t>(std::stoi(r->elements[1].str));
    } catch (const std::exception&) {
      continue;
    }
    return m;
  }
  return a;
}

// A raw connection to the server of a vote that serves `key` (server_of), with its AUTH and
// SELECT; a paused node must not hang the benchmark, hence the deadline on every command.
nodes::SyncClient connect(const NodeAddress& vote, const TlsOptions& tls, Millis timeout,
                          const std::string& key) {
  const NodeAddress a = server_of(vote, tls, timeout, key);
  return nodes::SyncClient(endpoint_of(a, tls), {.connect_timeout = timeout,
                                                 .command_timeout = timeout,
                                                 .user = a.user,
                                                 .password = a.password,
                                                 .db = a.db});
}

void finish_phase(PhaseResult& p, const std::vector<double>& us, Clock::time_point start,
                  Clock::time_point end, double cpu_before) {
  p.cycle = stats_of(us);
  p.elapsed_s = std::chrono::duration<double>(end - start).count();
  p.per_s = p.elapsed_s > 0 ? static_cast<double>(p.cycle.count) / p.elapsed_s : 0;
  p.cpu_us_per_op =
      p.cycle.count ? (cpu_us() - cpu_before) / static_cast<double>(p.cycle.count) : 0;
}

double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

// The floor: one plain SET to one node over a raw connection, waiting for each answer.
class RttProbe {
 public:
  RttProbe(const NodeAddress& node, const TlsOptions& tls, std::string key, Millis ttl)
      : node_(node.to_string()),
        conn_(connect(node, tls, Millis{1000}, key)),
        key_(std::move(key)),
        value_(40, 'x'),  // the size of a token: the same shape as the lock's SET, without NX
        px_(std::to_string(ttl.count())) {
    if (!conn_.ok()) note_error(conn_.error());
  }
  ~RttProbe() {
    if (conn_.ok()) (void)conn_.command({"DEL", key_});
  }
  RttProbe(const RttProbe&) = delete;
  RttProbe& operator=(const RttProbe&) = delete;

  // One sample; false once the connection is unusable.
  bool sample() {
    if (broken_) return false;
    const double cpu0 = thread_cpu_us();
    const auto t0 = Clock::now();
    auto r = conn_.command({"SET", key_, value_, "PX", px_});
    const auto t1 = Clock::now();
    cpu_us_ += thread_cpu_us() - cpu0;
    if (r && r->type == Reply::Type::status) {
      us_.push_back(us_between(t0, t1));
      return true;
    }
    note_error(r ? r->str : conn_.error());
    if (!r) broken_ = true;
    return !broken_;
  }

  // Forgets the samples so far (the warm-up).
  void clear() {
    us_.clear();
    cpu_us_ = 0;
  }
  [[nodiscard]] const std::vector<double>& samples() const { return us_; }
  [[nodiscard]] double cpu_us_spent() const { return cpu_us_; }  // this thread's, in sample()
  [[nodiscard]] long errors() const { return errors_; }
  [[nodiscard]] const std::string& first_error() const { return first_error_; }

 private:
  void note_error(const std::string& e) {
    if (errors_++ == 0) first_error_ = node_ + ": " + detail::server_text(e);
    if (!conn_.ok()) broken_ = true;
  }
  std::string node_;
  nodes::SyncClient conn_;
  std::string key_, value_, px_;
  std::vector<double> us_;
  double cpu_us_ = 0;
  long errors_ = 0;
  std::string first_error_;
  bool broken_ = false;
};

// The floor of a fan-out on this machine: one SET written to every node at once over raw
// connections, timed until a quorum has answered and until all have. The lock's acquire can
// decide at the quorum; its release waits for every node. With fewer cores than nodes the
// servers cannot answer in parallel, and this is where it shows, without the library.
class FanoutProbe {
 public:
  FanoutProbe(const std::vector<NodeAddress>& nodes, const TlsOptions& tls, const std::string& key,
              Millis ttl, Millis timeout)
      : nodes_(nodes.size()),
        quorum_(static_cast<int>(nodes.size()) / 2 + 1),
        timeout_(timeout),
        key_(key),
        value_(40, 'x'),
        px_(std::to_string(ttl.count())),
        cycle_key_("{" + key + "}:cycle") {
    for (const auto& n : nodes) {
      auto c = std::make_unique<nodes::SyncClient>(connect(n, tls, Millis{1000}, key));
      if (c->ok()) {
        conns_.push_back(std::move(c));
      } else if (errors_++ == 0) {
        first_error_ = n.to_string() + ": " + c->error();
      }
    }
  }
  ~FanoutProbe() {
    for (auto& c : conns_) (void)c->command({"DEL", key_, cycle_key_});
  }
  FanoutProbe(const FanoutProbe&) = delete;
  FanoutProbe& operator=(const FanoutProbe&) = delete;

  // One sample. A node that does not answer within the timeout is dropped from later samples
  // (its pipeline is stuck); a sample counts for the quorum when a quorum of the configured nodes
  // answered, and for "all" only when every configured node did.
  bool sample() {
    if (static_cast<int>(conns_.size()) < quorum_) return false;
    const double cpu0 = thread_cpu_us();
    const auto t0 = Clock::now();
    const std::string_view argv[] = {"SET", key_, value_, "PX", px_};
    std::vector<bool> dead(conns_.size(), false);
    for (std::size_t i = 0; i < conns_.size(); ++i) dead[i] = !conns_[i]->send(argv);
    std::vector<bool> answered(conns_.size(), false);
    int got = 0, waiting = 0;
    for (std::size_t i = 0; i < conns_.size(); ++i) waiting += !dead[i];
    std::optional<Clock::time_point> t_quorum;
    std::vector<pollfd> fds;
    std::vector<std::size_t> which;
    while (waiting > 0) {
      fds.clear();
      which.clear();
      for (std::size_t i = 0; i < conns_.size(); ++i) {
        if (!dead[i] && !answered[i]) {
          fds.push_back({conns_[i]->fd(), POLLIN, 0});
          which.push_back(i);
        }
      }
      int ready = poll(fds.data(), fds.size(), static_cast<int>(timeout_.count()));
      if (ready <= 0) {
        for (auto i : which) dead[i] = true;  // silent: a paused node, or an overloaded one
        break;
      }
      for (std::size_t k = 0; k < fds.size(); ++k) {
        if (fds[k].revents == 0) continue;
        const std::size_t i = which[k];
        const auto read = conns_[i]->read_reply();
        if (read == nodes::SyncClient::Read::failed) {
          dead[i] = true;
          --waiting;
          continue;
        }
        if (read == nodes::SyncClient::Read::partial) continue;  // wait for the rest
        answered[i] = true;
        --waiting;
        if (++got == quorum_) t_quorum = Clock::now();
      }
    }
    const auto t_all = Clock::now();
    cpu_us_ += thread_cpu_us() - cpu0;
    bool all = conns_.size() == nodes_;
    for (std::size_t i = conns_.size(); i-- > 0;) {
      if (!dead[i]) continue;
      all = false;
      if (errors_++ == 0)
        first_error_ = "a node did not answer within " + std::to_string(timeout_.count()) + " ms";
      conns_.erase(conns_.begin() + static_cast<std::ptrdiff_t>(i));
    }
    if (t_quorum) quorum_us_.push_back(us_between(t0, *t_quorum));
    if (all) all_us_.push_back(us_between(t0, t_all));
    return t_quorum.has_value();
  }

  // One cycle of the algorithm over the same raw connections, as a client with no overhead of
  // its own would run it: `SET key token NX PX ttl` to every node at once and, the moment a
  // quorum has answered, the documented compare-and-delete to every node (pipelined behind the
  // SET on the nodes that have not answered yet), timed until every node has answered both.
  // Beside the two fan-outs measured apart (quorum + all), it also pays what they leave out:
  // the release on the slower nodes waits for their SET, and on 2 CPUs shared by five servers
  // the second fan-out starts while the first is still being served.
  bool sample_cycle() {
    if (!script_loaded_) load_release_script();
    if (static_cast<int>(conns_.size()) < quorum_ || release_sha_.empty()) return false;
    const double cpu0 = thread_cpu_us();
    const std::string token = next_token();
    const auto t0 = Clock::now();
    const std::string_view set[] = {"SET", cycle_key_, token, "NX", "PX", px_};
    const std::string_view release[] = {"EVALSHA", release_sha_, "1", cycle_key_, token};
    const std::size_t n = conns_.size();
    std::vector<bool> dead(n, false);
    std::vector<int> due(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      dead[i] = !conns_[i]->send(set);
      due[i] = dead[i] ? 0 : 1;
    }
    int set_answers = 0;
    bool released = false, refused = false;
    std::optional<Clock::time_point> t_quorum;
    std::vector<pollfd> fds;
    std::vector<std::size_t> which;
    for (;;) {
      fds.clear();
      which.clear();
      for (std::size_t i = 0; i < n; ++i) {
        if (!dead[i] && due[i] > 0) {
          fds.push_back({conns_[i]->fd(), POLLIN, 0});
          which.push_back(i);
        }
      }
      if (fds.empty()) break;
      if (poll(fds.data(), fds.size(), static_cast<int>(timeout_.count())) <= 0) {
        for (auto i : which) dead[i] = true;
        break;
      }
      for (std::size_t k = 0; k < fds.size(); ++k) {
        if (fds[k].revents == 0) continue;
        const std::size_t i = which[k];
        // Every reply that has arrived: a node may have answered both commands in one read.
        for (;;) {
          Reply r;
          const auto read = conns_[i]->read_reply(&r);
          if (read == nodes::SyncClient::Read::failed) {
            dead[i] = true;
            break;
          }
          if (read == nodes::SyncClient::Read::partial) break;
          // An error (NOSCRIPT after a restart, a node that refuses) is still this command's
          // answer, but the sample is no floor: raw cycles stop there, the fan-outs go on.
          if (r.type == Reply::Type::error && !refused) {
            refused = true;
            if (cycle_errors_++ == 0) cycle_first_error_ = detail::server_text(r.str);
          }
          --due[i];
          if (!released && ++set_answers == quorum_) {
            t_quorum = Clock::now();
            released = true;
            for (std::size_t j = 0; j < n; ++j) {
              if (dead[j]) continue;
              if (conns_[j]->send(release)) {
                ++due[j];
              } else {
                dead[j] = true;
              }
            }
          }
          if (due[i] == 0) break;
        }
      }
    }
    const auto t_all = Clock::now();
    const double cpu = thread_cpu_us() - cpu0;
    cpu_us_ += cpu;
    if (refused) release_sha_.clear();
    bool all = released && !refused && n == nodes_;
    for (std::size_t i = n; i-- > 0;) {
      if (!dead[i]) continue;
      all = false;
      if (errors_++ == 0)
        first_error_ = "a node did not answer within " + std::to_string(timeout_.count()) + " ms";
      conns_.erase(conns_.begin() + static_cast<std::ptrdiff_t>(i));
    }
    if (all) {
      cycle_us_.push_back(us_between(t0, t_all));
      cycle_cpu_us_ += cpu;
    }
    return t_quorum.has_value();
  }

  void clear() {
    quorum_us_.clear();
    all_us_.clear();
    cycle_us_.clear();
    cpu_us_ = 0;
    cycle_cpu_us_ = 0;
  }
  [[nodiscard]] const std::vector<double>& quorum_samples() const { return quorum_us_; }
  [[nodiscard]] const std::vector<double>& all_samples() const { return all_us_; }
  [[nodiscard]] const std::vector<double>& cycle_samples() const { return cycle_us_; }
  // The CPU time of the raw cycles counted in cycle_samples() (this thread's; all samples are in
  // cpu_us_spent()).
  [[nodiscard]] double cycle_cpu_us() const { return cycle_cpu_us_; }
  // Why raw cycles stopped (a node that refused the script or answered an error, e.g. a cluster
  // seed's MOVED): the fan-outs go on without them.
  [[nodiscard]] long cycle_errors() const { return cycle_errors_; }
  [[nodiscard]] const std::string& cycle_first_error() const { return cycle_first_error_; }
  [[nodiscard]] double cpu_us_spent() const { return cpu_us_; }
  [[nodiscard]] long errors() const { return errors_; }
  [[nodiscard]] const std::string& first_error() const { return first_error_; }

 private:
  // The release of the Redis documentation (algorithm.md), as every Redlock client sends it.
  static constexpr std::string_view kReleaseScript =
      R"(if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end)";

  // The raw cycle's release on every node, before its first sample (SCRIPT LOAD answers the same
  // SHA-1 everywhere); tried once. A node that refuses leaves the raw cycle unmeasured.
  void load_release_script() {
    script_loaded_ = true;
    for (auto& c : conns_) {
      auto r = c->command({"SCRIPT", "LOAD", kReleaseScript});
      if (!r || r->type != Reply::Type::string) {
        release_sha_.clear();
        ++cycle_errors_;
        cycle_first_error_ = "SCRIPT LOAD: " + detail::server_text(r ? r->str : c->error());
        return;
      }
      release_sha_ = r->str;
    }
  }

  // A fresh 40-character value per raw cycle, as a lock's token is (no randomness needed here).
  std::string next_token() {
    char buf[41];
    std::snprintf(buf, sizeof buf, "%040llx", static_cast<unsigned long long>(++cycles_));
    return buf;
  }

  std::size_t nodes_;  // configured; "all" samples need every one of them
  int quorum_;
  Millis timeout_;
  std::string key_, value_, px_;
  // The raw cycle's lock (SET NX): not the fan-out's key, which stays set; in its slot (a cluster
  // vote's seed answers both).
  std::string cycle_key_;
  std::vector<std::unique_ptr<nodes::SyncClient>> conns_;
  std::vector<double> quorum_us_, all_us_, cycle_us_;
  std::string release_sha_;
  bool script_loaded_ = false;  // tried: the fan-out's other users never need the script
  unsigned long long cycles_ = 0;
  double cpu_us_ = 0;
  double cycle_cpu_us_ = 0;
  long cycle_errors_ = 0;
  std::string cycle_first_error_;
  long errors_ = 0;
  std::string first_error_;
};

// One acquire + release after the other, through the blocking Client calls. Each cycle is
// paired with one sample of each probe, so the floors and the cycle are measured under the same
// load of this (shared, noisy) machine and their ratios are fair. The probes' time and CPU are
// left out of the cycles' rate and CPU figures.
PhaseResult measure_sequential(Client& client, RttProbe& probe, FanoutProbe& fanout,
                               const std::string& resource, const AcquireOptions& opts,
                               double seconds, Progress& progress) {
  PhaseResult p;
  p.name = "cycle sequential";
  p.concurrency = 1;
  std::vector<double> cycle, acq, rel;
  cycle.reserve(1 << 15);
  acq.reserve(1 << 15);
  rel.reserve(1 << 15);
  const double cpu0 = cpu_us();
  const double probe_cpu0 = probe.cpu_us_spent() + fanout.cpu_us_spent();
  const auto start = Clock::now();
  const auto deadline = start + seconds_of(seconds);
  double probe_us = 0;  // wall time spent in the probe, not part of the cycles' throughput
  for (auto now = start; now < deadline; now = Clock::now()) {
    const auto p0 = Clock::now();
    probe.sample();
    fanout.sample();
    fanout.sample_cycle();
    const auto t0 = Clock::now();
    probe_us += us_between(p0, t0);
    auto a = client.try_acquire({resource}, opts);
    const auto t1 = Clock::now();
    if (!a) {
      if (p.errors++ == 0) p.first_error = "acquire: " + error_name(a.error) + ": " + a.message;
      continue;
    }
    auto r = client.try_release(a.lock);
    const auto t2 = Clock::now();
    if (!r) {
      if (p.errors++ == 0) p.first_error = "release: " + error_name(r.error) + ": " + r.message;
    } else {
      cycle.push_back(us_between(t0, t2));
      acq.push_back(us_between(t0, t1));
      rel.push_back(us_between(t1, t2));
    }
    progress.show("bench: " + p.name + "  " + fmt(us_between(start, t2) / 1e6) + "/" +
                  fmt(seconds) + " s  " + std::to_string(cycle.size()) + " cycles");
  }
  const auto end = Clock::now();
  p.cycle = stats_of(cycle);
  p.acquire = stats_of(std::move(acq));
  p.release = stats_of(std::move(rel));
  p.elapsed_s = (us_between(start, end) - probe_us) / 1e6;
  p.per_s = p.elapsed_s > 0 ? static_cast<double>(p.cycle.count) / p.elapsed_s : 0;
  const double cpu = cpu_us() - cpu0 - (probe.cpu_us_spent() + fanout.cpu_us_spent() - probe_cpu0);
  p.cpu_us_per_op = p.cycle.count ? cpu / static_cast<double>(p.cycle.count) : 0;
  return p;
}

PhaseResult fanout_result(const FanoutProbe& probe, bool all, std::size_t nodes) {
  PhaseResult p;
  p.name =
      std::string("SET fan-out, ") + (all ? "all " : "quorum ") + "(" + std::to_string(nodes) + ")";
  p.concurrency = 1;
  p.cycle = stats_of(all ? probe.all_samples() : probe.quorum_samples());
  p.per_s = -1;
  p.cpu_us_per_op = -1;
  p.errors = all ? probe.errors() : 0;
  p.first_error = all ? probe.first_error() : "";
  return p;
}

PhaseResult rtt_result(const RttProbe& probe) {
  PhaseResult p;
  p.name = "SET rtt (1 node)";
  p.concurrency = 1;
  p.cycle = stats_of(probe.samples());
  p.per_s = -1;  // interleaved with the cycles: a rate would mean nothing
  p.cpu_us_per_op = probe.samples().empty()
                        ? -1
                        : probe.cpu_us_spent() / static_cast<double>(probe.samples().size());
  p.errors = probe.errors();
  p.first_error = probe.first_error();
  return p;
}

// `C` slots, each chaining acquire_async -> release_async -> acquire_async ... from the client's
// callbacks (on its I/O thread) until the deadline. Everything but `completed` and the end
// signal is touched by the I/O thread only while the phase runs.
class Load {
 public:
  Load(Client& client, const std::string& prefix, int concurrency, const AcquireOptions& opts)
      : client_(client), opts_(opts) {
    resources_.reserve(static_cast<std::size_t>(concurrency));
    for (int i = 0; i < concurrency; ++i) {
      resources_.push_back(prefix + "c" + std::to_string(concurrency) + ":" + std::to_string(i));
    }
    us_.reserve(1 << 17);
  }

  PhaseResult run(double seconds, Progress& progress) {
    PhaseResult p;
    p.concurrency = static_cast<int>(resources_.size());
    p.name = "cycle C=" + std::to_string(p.concurrency);
    const double cpu0 = cpu_us();
    start_ = Clock::now();
    deadline_ = start_ + seconds_of(seconds);
    active_ = p.concurrency;
    for (int i = 0; i < p.concurrency; ++i) start_cycle(i);
    {
      std::unique_lock<std::mutex> g(mu_);
      while (active_ > 0) {
        cv_.wait_for(g, std::chrono::milliseconds(100));
        if (active_ > 0) {
          progress.show("bench: " + p.name + "  " + fmt(us_between(start_, Clock::now()) / 1e6) +
                        "/" + fmt(seconds) + " s  " + std::to_string(completed_.load()) +
                        " cycles");
        }
      }
    }
    finish_phase(p, us_, start_, end_, cpu0);
    p.errors = errors_;
    p.first_error = first_error_;
    return p;
  }

 private:
  void start_cycle(int slot) {
    const auto t0 = Clock::now();
    client_.acquire_async(
        {resources_[static_cast<std::size_t>(slot)]}, opts_, [this, slot, t0](AcquireResult a) {
          if (!a) {
            note_error("acquire: " + error_name(a.error) + ": " + a.message);
            next(slot);
            return;
          }
          client_.release_async(std::move(a.lock), [this, slot, t0](ReleaseResult r) {
            if (r) {
              us_.push_back(us_between(t0, Clock::now()));
              completed_.fetch_add(1, std::memory_order_relaxed);
            } else {
              note_error("release: " + error_name(r.error) + ": " + r.message);
            }
            next(slot);
          });
        });
  }

  void next(int slot) {
    auto now = Clock::now();
    if (now < deadline_) {
      start_cycle(slot);
      return;
    }
    std::lock_guard<std::mutex> g(mu_);
    if (--active_ == 0) {
      end_ = now;
      cv_.notify_all();
    }
  }

  void note_error(std::string what) {
    if (errors_++ == 0) first_error_ = std::move(what);
  }

  Client& client_;
  AcquireOptions opts_;
  std::vector<std::string> resources_;
  Clock::time_point start_{}, deadline_{}, end_{};
  std::vector<double> us_;  // I/O thread while running
  long errors_ = 0;         // I/O thread while running
  std::string first_error_;
  std::atomic<long> completed_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  int active_ = 0;  // guarded by mu_
};

}  // namespace

CycleRun measure_cycles(Options options, const std::string& prefix, const AcquireOptions& opts,
                        double seconds, const std::vector<int>& levels, Progress& progress) {
  CycleRun run;
  const auto nodes = options.nodes;
  const TlsOptions tls = options.tls;
  const Millis ttl = opts.ttl;
  const Millis fanout_timeout = options.node_timeout * 2;
  // First: its checks (a TLS file that cannot be used, ...) come before anything is sent.
  Client client(std::move(options));
  // Destroyed before the caller's sweep: the probe deletes its key, the client flushes what it
  // queued.
  RttProbe probe(nodes.front(), tls, prefix + "rtt", ttl);
  FanoutProbe fanout(nodes, tls, prefix + "fanout", ttl, fanout_timeout);
  run.quorum = client.quorum();
  // Not measured: the first call also waits for the connections and the script loads.
  if (auto w = client.try_acquire({prefix + "warmup"}, opts)) (void)client.try_release(w.lock);
  // Warm the probe's connection too, then pair its samples with the cycles.
  for (int i = 0; i < 10; ++i) {
    probe.sample();
    fanout.sample();
    fanout.sample_cycle();
  }
  probe.clear();
  fanout.clear();
  PhaseResult seq =
      measure_sequential(client, probe, fanout, prefix + "seq", opts, seconds, progress);
  run.phases.push_back(rtt_result(probe));
  run.phases.push_back(fanout_result(fanout, false, nodes.size()));
  run.phases.push_back(fanout_result(fanout, true, nodes.size()));
  run.phases.push_back(std::move(seq));
  run.raw_cycle.name = "raw cycle (" + std::to_string(nodes.size()) + ")";
  run.raw_cycle.concurrency = 1;
  run.raw_cycle.cycle = stats_of(fanout.cycle_samples());
  run.raw_cycle.per_s = -1;
  run.raw_cycle.cpu_us_per_op =
      fanout.cycle_samples().empty()
          ? -1
          : fanout.cycle_cpu_us() / static_cast<double>(fanout.cycle_samples().size());
  run.raw_cycle.errors = fanout.cycle_errors();
  run.raw_cycle.first_error = fanout.cycle_first_error();
  for (int c : levels) {
    Load load(client, prefix, c, opts);
    run.phases.push_back(load.run(seconds, progress));
  }
  return run;
}

std::vector<double> fanout_quorum_us(const Options& options, const std::string& key, int samples) {
  FanoutProbe fanout(options.nodes, options.tls, key, Millis{10'000}, options.node_timeout * 2);
  for (int i = 0; i < 10; ++i) fanout.sample();  // connections and the key warmed first
  fanout.clear();
  for (int i = 0; i < samples && fanout.sample(); ++i) {
  }
  return fanout.quorum_samples();
}

ServerWork server_work(const std::vector<NodeAddress>& nodes, const TlsOptions& tls) {
  ServerWork w;
  const auto number = [](const std::string& info, std::string_view field) {
    const auto v = nodes::info_field(info, field);
    return v ? std::strtod(v->c_str(), nullptr) : 0.0;
  };
  for (const auto& vote : nodes) {
    for (const auto& m : masters_of(vote, tls, Millis{500})) {
      nodes::SyncClient conn = connect(m, tls, Millis{500}, {});
      if (!conn.ok()) continue;
      const auto r = conn.command({"INFO"});
      if (!r || r->type != Reply::Type::string) continue;
      w.commands += number(r->str, "total_commands_processed");
      w.cpu_us += 1e6 * (number(r->str, "used_cpu_user") + number(r->str, "used_cpu_sys"));
    }
  }
  return w;
}

Sweep sweep(const std::vector<NodeAddress>& nodes, const TlsOptions& tls,
            const std::string& prefix) {
  Sweep s;
  std::vector<NodeAddress> servers;  // a cluster vote's keys are spread over its masters
  for (const auto& vote : nodes) {
    for (auto& m : masters_of(vote, tls, Millis{500})) servers.push_back(std::move(m));
  }
  for (const auto& n : servers) {
    nodes::SyncClient conn = connect(n, tls, Millis{500}, {});
    bool ok = conn.ok();
    // The lock keys, and the keys derived from them ({<lock key>}:redlock:...).
    for (const std::string& pattern : {prefix + "*", "{" + prefix + "*"}) {
      std::string cursor = "0";
      while (ok) {
        auto r = conn.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
        if (!r || r->type != Reply::Type::array || r->elements.size() != 2) {
          ok = false;
          break;
        }
        cursor = r->elements[0].str;
        for (const Reply& key : r->elements[1].elements) {
          ++s.keys_left;
          (void)conn.command({"DEL", key.str});
        }
        if (cursor == "0") break;
      }
    }
    if (!ok) ++s.unchecked;
  }
  return s;
}

}  // namespace redlock::cli::bench
