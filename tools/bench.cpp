// redlock-cli bench [--seconds S] [--concurrency C] [--ttl DUR]
// redlock-cli bench --hold N [--soak S] [--ttl DUR]
//
// A benchmark, not a test (docs: testing.md, "Benchmarks, not timed tests"): it prints figures
// and the limit they are compared with, measured in the same run, and never fails on speed.
//
// Phases (each bounded by --seconds):
//   sequential  try_acquire + try_release through redlock::Client, one after the other. Each
//               cycle is paired with two raw probes over synchronous hiredis connections, so
//               floor and cycle share the load of this (shared, noisy) machine:
//                 rtt      one plain SET to the first node: the round trip no cycle can beat;
//                 fan-out  one SET written to every node at once, timed to the quorum-th and to
//                          the last answer: what the machine itself allows for N nodes;
//   C=...       `C` locks in flight on distinct resources, each slot chaining acquire_async ->
//               release_async -> acquire_async ... from the callbacks.
// --hold N keeps N locks with auto-extension for --soak seconds and samples the RSS instead.
//
// Every key is named "<random prefix>:..." so runs on shared nodes do not collide, and at the end
// every reachable node is swept for that prefix: what was still there is reported as keys_left
// (should be 0: every cycle releases what it took) and deleted.

#include <hiredis/hiredis.h>
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
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "cli.hpp"
#include "output.hpp"
#include "redlock/client.hpp"

namespace redlock::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchArgs {
  double seconds = 3.0;
  std::optional<int> concurrency;
  std::string ttl = "10s";
  std::optional<int> hold;
  double soak = 60.0;
};

double us_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

Clock::duration seconds_of(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// Latency distribution of one phase (microseconds).
struct Stats {
  std::size_t count = 0;
  double p50 = 0, p99 = 0, p999 = 0, max = 0, mean = 0;
};

// Nearest-rank percentiles: every figure is a latency that was actually observed.
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

// Process CPU time (all threads: the caller and the client's I/O thread).
double cpu_us() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto us = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec);
  };
  return us(ru.ru_utime) + us(ru.ru_stime);
}

// Resident set size from /proc/self/status, in kB (0 if unreadable).
long rss_kb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return 0;
}

// Bytes the allocator has handed out and not yet got back (all arenas). Beside the RSS it tells
// live memory that grows (a leak, a container that keeps growing) from pages the allocator keeps.
long heap_kb() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 mi = mallinfo2();
  return static_cast<long>((mi.uordblks + mi.hblkhd) / 1024);
#else
  return -1;
#endif
}

std::string fmt(double v, int decimals = 1) {
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

// One line on stderr, rewritten in place, only when stderr is a terminal: scripts and pipes
// capturing stderr get no carriage-return noise.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO) == 1) {}
  ~Progress() { clear(); }
  void show(const std::string& text) {
    if (!enabled_) return;
    auto now = Clock::now();
    if (shown_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    shown_ = true;
    std::fprintf(stderr, "\r\033[K%s", text.c_str());
    std::fflush(stderr);
  }
  void clear() {
    if (!enabled_ || !shown_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  bool enabled_;
  bool shown_ = false;
  Clock::time_point last_{};
};

// A raw synchronous hiredis connection: the floor measurement and the final key sweep. Nothing
// of the library is on this path, so it shows what one round trip costs on this machine.
class RawConnection {
 public:
  RawConnection(const NodeAddress& a, Millis timeout) {
    timeval tv{static_cast<time_t>(timeout.count() / 1000),
               static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    c_ = a.transport == NodeAddress::Transport::unix_socket
             ? redisConnectUnixWithTimeout(a.path.c_str(), tv)
             : redisConnectWithTimeout(a.host.c_str(), a.port, tv);
    if (c_ == nullptr) {
      error_ = "out of memory";
      return;
    }
    if (c_->err) {
      error_ = c_->errstr;
      return;
    }
    redisSetTimeout(c_, tv);  // a paused node must not hang the benchmark
    if (!a.password.empty()) {
      auto r =
          a.user.empty() ? command({"AUTH", a.password}) : command({"AUTH", a.user, a.password});
      if (!r || r->type == REDIS_REPLY_ERROR) {
        error_ = "AUTH failed";
        return;
      }
    }
    if (a.db != 0) {
      auto r = command({"SELECT", std::to_string(a.db)});
      if (!r || r->type == REDIS_REPLY_ERROR) {
        error_ = "SELECT failed";
        return;
      }
    }
  }
  ~RawConnection() {
    if (c_ != nullptr) redisFree(c_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  [[nodiscard]] bool ok() const { return c_ != nullptr && c_->err == 0 && error_.empty(); }
  [[nodiscard]] redisContext* context() const { return c_; }
  [[nodiscard]] std::string error() const {
    if (!error_.empty()) return error_;
    return c_ != nullptr && c_->err ? c_->errstr : "";
  }

  struct FreeReply {
    void operator()(redisReply* r) const { freeReplyObject(r); }
  };
  using Reply = std::unique_ptr<redisReply, FreeReply>;

  Reply command(std::initializer_list<std::string_view> args) {
    if (c_ == nullptr || c_->err) return nullptr;
    const char* argv[8];
    std::size_t len[8];
    int n = 0;
    for (auto a : args) {
      if (n == 8) return nullptr;
      argv[n] = a.data();
      len[n++] = a.size();
    }
    return Reply(static_cast<redisReply*>(redisCommandArgv(c_, n, argv, len)));
  }

 private:
  redisContext* c_ = nullptr;
  std::string error_;
};

struct PhaseResult {
  std::string name;
  Stats cycle;
  Stats acquire;  // sequential phase only
  Stats release;  // sequential phase only
  double elapsed_s = 0;
  double per_s = 0;
  double cpu_us_per_op = 0;
  int concurrency = 0;
  long errors = 0;
  std::string first_error;
};

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

// The floor: one plain SET to one node over the raw connection, waiting for each answer.
class RttProbe {
 public:
  RttProbe(const NodeAddress& node, std::string key, Millis ttl)
      : node_(node.to_string()),
        conn_(node, Millis{1000}),
        key_(std::move(key)),
        value_(40, 'x'),  // the size of a token: the same shape as the lock's SET, without NX
        px_(std::to_string(ttl.count())) {
    if (!conn_.ok()) note_error(conn_.error());
  }
  ~RttProbe() {
    if (conn_.ok()) conn_.command({"DEL", key_});
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
    if (r && r->type == REDIS_REPLY_STATUS) {
      us_.push_back(us_between(t0, t1));
      return true;
    }
    note_error(r ? std::string(r->str, r->len) : conn_.error());
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
    if (errors_++ == 0) first_error_ = node_ + ": " + e;
    if (!conn_.ok()) broken_ = true;
  }
  std::string node_;
  RawConnection conn_;
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
  FanoutProbe(const std::vector<NodeAddress>& nodes, const std::string& key, Millis ttl,
              Millis timeout)
      : nodes_(nodes.size()),
        quorum_(static_cast<int>(nodes.size()) / 2 + 1),
        timeout_(timeout),
        key_(key),
        value_(40, 'x'),
        px_(std::to_string(ttl.count())) {
    for (const auto& n : nodes) {
      auto c = std::make_unique<RawConnection>(n, Millis{1000});
      if (c->ok()) {
        conns_.push_back(std::move(c));
      } else if (errors_++ == 0) {
        first_error_ = n.to_string() + ": " + c->error();
      }
    }
  }
  ~FanoutProbe() {
    for (auto& c : conns_) c->command({"DEL", key_});
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
    const char* argv[] = {"SET", key_.c_str(), value_.c_str(), "PX", px_.c_str()};
    const std::size_t len[] = {3, key_.size(), value_.size(), 2, px_.size()};
    std::vector<bool> dead(conns_.size(), false);
    for (std::size_t i = 0; i < conns_.size(); ++i) {
      redisContext* c = conns_[i]->context();
      int done = 0;
      if (redisAppendCommandArgv(c, 5, argv, len) != REDIS_OK) dead[i] = true;
      while (!dead[i] && !done) {
        if (redisBufferWrite(c, &done) != REDIS_OK) dead[i] = true;
      }
    }
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
          fds.push_back({conns_[i]->context()->fd, POLLIN, 0});
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
        redisContext* c = conns_[i]->context();
        void* reply = nullptr;
        if (redisBufferRead(c) != REDIS_OK || redisGetReplyFromReader(c, &reply) != REDIS_OK) {
          dead[i] = true;
          --waiting;
          continue;
        }
        if (reply == nullptr) continue;  // a partial reply: wait for the rest
        freeReplyObject(reply);
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

  void clear() {
    quorum_us_.clear();
    all_us_.clear();
    cpu_us_ = 0;
  }
  [[nodiscard]] const std::vector<double>& quorum_samples() const { return quorum_us_; }
  [[nodiscard]] const std::vector<double>& all_samples() const { return all_us_; }
  [[nodiscard]] double cpu_us_spent() const { return cpu_us_; }
  [[nodiscard]] long errors() const { return errors_; }
  [[nodiscard]] const std::string& first_error() const { return first_error_; }

 private:
  std::size_t nodes_;  // configured; "all" samples need every one of them
  int quorum_;
  Millis timeout_;
  std::string key_, value_, px_;
  std::vector<std::unique_ptr<RawConnection>> conns_;
  std::vector<double> quorum_us_, all_us_;
  double cpu_us_ = 0;
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

struct Sweep {
  long keys_left = 0;
  int unchecked = 0;  // nodes that could not be asked (down, paused)
};

// Counts and deletes what is left under our prefix on every node. Runs after the Client is gone,
// so rollbacks and releases it still had queued have reached the nodes.
Sweep sweep(const std::vector<NodeAddress>& nodes, const std::string& prefix) {
  Sweep s;
  const std::string pattern = prefix + "*";
  for (const auto& n : nodes) {
    RawConnection conn(n, Millis{500});
    bool ok = conn.ok();
    std::string cursor = "0";
    while (ok) {
      auto r = conn.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
      if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        ok = false;
        break;
      }
      cursor.assign(r->element[0]->str, r->element[0]->len);
      const redisReply* keys = r->element[1];
      for (std::size_t i = 0; i < keys->elements; ++i) {
        ++s.keys_left;
        conn.command({"DEL", std::string_view(keys->element[i]->str, keys->element[i]->len)});
      }
      if (cursor == "0") break;
    }
    if (!ok) ++s.unchecked;
  }
  return s;
}

std::string json_stats(const std::string& name, const Stats& s) {
  return "\"" + name + "_us_p50\":" + fmt(s.p50) + ",\"" + name + "_us_p99\":" + fmt(s.p99) +
         ",\"" + name + "_us_p999\":" + fmt(s.p999);
}

void print_table(std::ostream& out, const std::vector<PhaseResult>& phases) {
  char line[256];
  std::snprintf(line, sizeof line, "%-24s %9s %9s %9s %9s %11s %12s %7s\n", "phase", "ops",
                "p50 us", "p99 us", "p99.9 us", "ops/s", "cpu us/op", "errors");
  out << line;
  for (const auto& p : phases) {
    // A negative figure is one that does not apply to the phase.
    const std::string per_s = p.per_s < 0 ? "-" : fmt(p.per_s, 0);
    const std::string cpu = p.cpu_us_per_op < 0 ? "-" : fmt(p.cpu_us_per_op);
    std::snprintf(line, sizeof line, "%-24s %9zu %9.1f %9.1f %9.1f %11s %12s %7ld\n",
                  p.name.c_str(), p.cycle.count, p.cycle.p50, p.cycle.p99, p.cycle.p999,
                  per_s.c_str(), cpu.c_str(), p.errors);
    out << line;
    if (p.acquire.count) {
      std::snprintf(line, sizeof line, "%-24s %9s %9.1f %9.1f %9.1f\n", "  acquire", "",
                    p.acquire.p50, p.acquire.p99, p.acquire.p999);
      out << line;
      std::snprintf(line, sizeof line, "%-24s %9s %9.1f %9.1f %9.1f\n", "  release", "",
                    p.release.p50, p.release.p99, p.release.p999);
      out << line;
    }
  }
}

Millis ttl_arg(const std::string& text) {
  Millis ttl = duration_arg("--ttl", text);
  if (ttl.count() <= 0) throw UsageError("--ttl: must be positive, got '" + text + "'");
  if (ttl > max_ttl) throw UsageError("--ttl: '" + text + "' is longer than 365 days");
  return ttl;
}

int run_cycles(const BenchArgs& a, const Globals& g) {
  if (!(a.seconds > 0 && a.seconds <= 3600)) throw UsageError("--seconds: must be in (0, 3600]");
  if (a.concurrency && (*a.concurrency < 1 || *a.concurrency > 100000)) {
    throw UsageError("--concurrency: must be in 1..100000, got " + std::to_string(*a.concurrency));
  }
  const Millis ttl = ttl_arg(a.ttl);
  Options options = make_options(g);
  const auto nodes = options.nodes;
  const std::string prefix = random_prefix();
  const std::vector<int> levels =
      a.concurrency ? std::vector<int>{*a.concurrency} : std::vector<int>{1, 16, 64, 256};
  Progress progress(!g.quiet);

  std::vector<PhaseResult> phases;

  AcquireOptions opts;
  opts.ttl = ttl;
  opts.retry_count = 0;  // a retry sleeps retry_delay: it would measure the sleep, not the engine
  int quorum = 0;
  {
    // Destroyed before the sweep: the probe deletes its key, the client flushes what it queued.
    RttProbe probe(nodes.front(), prefix + "rtt", ttl);
    FanoutProbe fanout(nodes, prefix + "fanout", ttl, options.node_timeout * 2);
    Client client(std::move(options));
    quorum = client.quorum();
    // Not measured: the first call also waits for the connections and the script loads.
    if (auto w = client.try_acquire({prefix + "warmup"}, opts)) (void)client.try_release(w.lock);
    // Warm the probe's connection too, then pair its samples with the cycles.
    for (int i = 0; i < 10; ++i) {
      probe.sample();
      fanout.sample();
    }
    probe.clear();
    fanout.clear();
    PhaseResult seq =
        measure_sequential(client, probe, fanout, prefix + "seq", opts, a.seconds, progress);
    phases.push_back(rtt_result(probe));
    phases.push_back(fanout_result(fanout, false, nodes.size()));
    phases.push_back(fanout_result(fanout, true, nodes.size()));
    phases.push_back(std::move(seq));
    for (int c : levels) {
      Load load(client, prefix, c, opts);
      phases.push_back(load.run(a.seconds, progress));
    }
  }
  progress.clear();
  const Sweep left = sweep(nodes, prefix);

  // phases: rtt, fan-out quorum, fan-out all, sequential, then one per concurrency level.
  constexpr std::size_t first_level = 4;
  const PhaseResult& rtt = phases[0];
  const PhaseResult& fan_q = phases[1];
  const PhaseResult& fan_all = phases[2];
  const PhaseResult& seq = phases[3];
  const PhaseResult& top = phases.back();
  long errors = 0;
  for (std::size_t i = 3; i < phases.size(); ++i) errors += phases[i].errors;

  if (g.json) {
    std::string s = "{";
    s += "\"nodes\":" + std::to_string(nodes.size());
    s += ",\"quorum\":" + std::to_string(quorum);
    s += ",\"seconds\":" + fmt(a.seconds, 3);
    s += ",\"ttl_ms\":" + std::to_string(ttl.count());
    s += ",\"prefix\":" + json_string(prefix);
    s += ",\"rtt_node\":" + json_string(nodes.front().to_string());
    s += "," + json_stats("rtt", rtt.cycle);
    s += ",\"rtt_samples\":" + std::to_string(rtt.cycle.count);
    s += "," + json_stats("fanout_quorum", fan_q.cycle);
    s += "," + json_stats("fanout_all", fan_all.cycle);
    s += ",\"fanout_samples\":" + std::to_string(fan_q.cycle.count);
    s += "," + json_stats("cycle", seq.cycle);
    s += ",\"cycles\":" + std::to_string(seq.cycle.count);
    s += ",\"cycle_us_mean\":" + fmt(seq.cycle.mean);
    s += ",\"cycle_us_max\":" + fmt(seq.cycle.max);
    s += "," + json_stats("acquire", seq.acquire);
    s += "," + json_stats("release", seq.release);
    s += ",\"sequential_cycles_per_s\":" + fmt(seq.per_s);
    s += ",\"sequential_cpu_us_per_cycle\":" + fmt(seq.cpu_us_per_op);
    s += ",\"sequential_errors\":" + std::to_string(seq.errors);
    s += ",\"cycle_to_rtt\":" + fmt(rtt.cycle.p50 > 0 ? seq.cycle.p50 / rtt.cycle.p50 : 0, 2);
    // An acquire can decide at the quorum, a release waits for every node: the fan-out floor of
    // one cycle is the sum of the two.
    const double fan_floor = fan_q.cycle.p50 + fan_all.cycle.p50;
    s += ",\"cycle_to_fanout\":" + fmt(fan_floor > 0 ? seq.cycle.p50 / fan_floor : 0, 2);
    // The top-level pair is the highest concurrency run; every level is in "throughput".
    s += ",\"concurrency\":" + std::to_string(top.concurrency);
    s += ",\"cycles_per_s\":" + fmt(top.per_s);
    s += ",\"cpu_us_per_cycle\":" + fmt(top.cpu_us_per_op);
    s += ",\"throughput\":[";
    for (std::size_t i = first_level; i < phases.size(); ++i) {
      const auto& p = phases[i];
      if (i > first_level) s += ",";
      s += "{\"concurrency\":" + std::to_string(p.concurrency) +
           ",\"cycles_per_s\":" + fmt(p.per_s) + ",\"cycles\":" + std::to_string(p.cycle.count) +
           "," + json_stats("cycle", p.cycle) + ",\"cpu_us_per_cycle\":" + fmt(p.cpu_us_per_op) +
           ",\"errors\":" + std::to_string(p.errors) + "}";
    }
    s += "]";
    s += ",\"errors\":" + std::to_string(errors);
    std::string first;
    for (const auto& p : phases) {
      if (!p.first_error.empty()) {
        first = p.name + ": " + p.first_error;
        break;
      }
    }
    if (!first.empty()) s += ",\"first_error\":" + json_string(first);
    s += ",\"keys_left\":" + std::to_string(left.keys_left);
    s += ",\"unchecked_nodes\":" + std::to_string(left.unchecked);
    s += "}";
    std::cout << s << "\n";
  } else if (!g.quiet) {
    std::cout << "redlock-cli bench: " << nodes.size() << " nodes (quorum " << quorum << "), "
              << fmt(a.seconds) << " s per phase, ttl " << ttl.count() << " ms, rtt to "
              << nodes.front().to_string() << "\n";
    print_table(std::cout, phases);
    if (rtt.cycle.p50 > 0 && seq.cycle.count) {
      std::cout << "sequential cycle p50 = " << fmt(seq.cycle.p50 / rtt.cycle.p50, 2)
                << " x rtt p50";
      if (fan_q.cycle.count && fan_all.cycle.count) {
        std::cout << " = " << fmt(seq.cycle.p50 / (fan_q.cycle.p50 + fan_all.cycle.p50), 2)
                  << " x fan-out floor (quorum + all)";
      }
      std::cout << "\n";
    }
    std::cout << "keys left: " << left.keys_left;
    if (left.unchecked)
      std::cout << " (" << left.unchecked << " node(s) not reachable, not checked)";
    std::cout << "\n";
  }
  for (const auto& p : phases) {
    if (!p.first_error.empty() && !g.quiet) {
      std::cerr << "redlock-cli: bench: " << p.name << ": " << p.errors
                << " error(s), first: " << p.first_error << "\n";
    }
  }
  if (seq.cycle.count == 0) {
    if (!g.quiet) std::cerr << "redlock-cli: bench: no cycle succeeded\n";
    return exit_no_quorum;
  }
  return exit_ok;
}

// Holds N locks with auto-extension for the soak and samples the RSS: the memory cost of a held
// lock, and whether the watchdog leaks while it keeps extending.
int run_hold(const BenchArgs& a, const Globals& g) {
  const int count = *a.hold;
  if (count < 1 || count > 1000000)
    throw UsageError("--hold: must be in 1..1000000, got " + std::to_string(count));
  if (!(a.soak >= 0 && a.soak <= 86400)) throw UsageError("--soak: must be in [0, 86400] seconds");
  const Millis ttl = ttl_arg(a.ttl);
  Options options = make_options(g);
  const auto nodes = options.nodes;
  const std::string prefix = random_prefix();
  Progress progress(!g.quiet);
  auto mb = [](long kb) { return static_cast<double>(kb) / 1024.0; };

  struct Sample {
    double t_s;
    long kb;
    long heap_kb;
  };
  std::vector<Sample> samples;
  long kb_start = 0, kb_locked = 0, kb_trimmed = 0, failed = 0, extensions = 0, lost = 0;
  std::string first_error;
  double take_s = 0, release_s = 0;
  {
    Client client(std::move(options));
    LockOptions lo;
    lo.acquire.ttl = ttl;
    lo.acquire.retry_count = 1;
    lo.hold.auto_extend = true;
    std::vector<Guard> guards;
    guards.reserve(static_cast<std::size_t>(count));
    // Connect first (not measured), so the start figure is a client ready to work.
    if (auto w = client.try_acquire({prefix + "warmup"}, lo.acquire))
      (void)client.try_release(w.lock);
    kb_start = rss_kb();
    const auto t0 = Clock::now();
    for (int i = 0; i < count; ++i) {
      std::error_code ec;
      Guard gd = client.lock({prefix + "h:" + std::to_string(i)}, lo, ec);
      if (ec) {
        if (failed++ == 0) first_error = error_name(ec) + ": " + ec.message();
      } else {
        guards.push_back(std::move(gd));
      }
      progress.show("bench: taking locks  " + std::to_string(i + 1) + "/" + std::to_string(count));
    }
    const auto t1 = Clock::now();
    take_s = std::chrono::duration<double>(t1 - t0).count();
    kb_locked = rss_kb();
    samples.push_back({0.0, kb_locked, heap_kb()});
    const auto end = t1 + seconds_of(a.soak);
    auto next_sample = t1 + std::chrono::seconds(10);
    for (auto now = Clock::now(); now < end; now = Clock::now()) {
      std::this_thread::sleep_for(
          std::min<Clock::duration>(std::chrono::milliseconds(200), end - now));
      now = Clock::now();
      if (now >= next_sample || now >= end) {
        samples.push_back({std::chrono::duration<double>(now - t1).count(), rss_kb(), heap_kb()});
        next_sample += std::chrono::seconds(10);
      }
      progress.show("bench: holding " + std::to_string(guards.size()) + " locks  " +
                    fmt(std::chrono::duration<double>(now - t1).count()) + "/" + fmt(a.soak) +
                    " s  rss " + fmt(mb(samples.back().kb)) + " MB");
    }
    // What the allocator could give back: RSS growth with a flat heap is free memory it keeps,
    // which malloc_trim returns (glibc also releases free pages in the middle of its arenas).
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
    kb_trimmed = rss_kb();
    for (const auto& gd : guards) {
      extensions += gd.extensions();
      if (!gd.owns()) ++lost;
    }
    const auto t2 = Clock::now();
    guards.clear();  // each Guard releases its lock on the nodes
    release_s = std::chrono::duration<double>(Clock::now() - t2).count();
  }
  progress.clear();
  const Sweep left = sweep(nodes, prefix);
  const long kb_end = samples.back().kb;
  long kb_peak = 0;
  for (const auto& s : samples) kb_peak = std::max(kb_peak, s.kb);
  const double per_lock_b = count > failed ? static_cast<double>(kb_locked - kb_start) * 1024.0 /
                                                 static_cast<double>(count - failed)
                                           : 0;

  if (g.json) {
    std::string s = "{\"mode\":\"hold\"";
    s += ",\"nodes\":" + std::to_string(nodes.size());
    s += ",\"locks\":" + std::to_string(count - failed);
    s += ",\"failed\":" + std::to_string(failed);
    s += ",\"ttl_ms\":" + std::to_string(ttl.count());
    s += ",\"soak_s\":" + fmt(a.soak, 3);
    s += ",\"take_s\":" + fmt(take_s, 3);
    s += ",\"release_s\":" + fmt(release_s, 3);
    s += ",\"rss_mb_start\":" + fmt(mb(kb_start), 2);
    s += ",\"rss_mb_locked\":" + fmt(mb(kb_locked), 2);
    s += ",\"rss_mb_end\":" + fmt(mb(kb_end), 2);
    s += ",\"rss_mb_peak\":" + fmt(mb(kb_peak), 2);
    s += ",\"rss_growth_mb\":" + fmt(mb(kb_end - kb_locked), 2);
    s += ",\"rss_mb_end_trimmed\":" + fmt(mb(kb_trimmed), 2);
    s += ",\"heap_mb_locked\":" + fmt(mb(samples.front().heap_kb), 2);
    s += ",\"heap_mb_end\":" + fmt(mb(samples.back().heap_kb), 2);
    s += ",\"bytes_per_lock\":" + fmt(per_lock_b, 0);
    s += ",\"extensions\":" + std::to_string(extensions);
    s += ",\"lost\":" + std::to_string(lost);
    s += ",\"samples\":[";
    for (std::size_t i = 0; i < samples.size(); ++i) {
      if (i) s += ",";
      s += "{\"t_s\":" + fmt(samples[i].t_s) + ",\"rss_mb\":" + fmt(mb(samples[i].kb), 2) +
           ",\"heap_mb\":" + fmt(mb(samples[i].heap_kb), 2) + "}";
    }
    s += "]";
    if (!first_error.empty()) s += ",\"first_error\":" + json_string(first_error);
    s += ",\"keys_left\":" + std::to_string(left.keys_left);
    s += ",\"unchecked_nodes\":" + std::to_string(left.unchecked);
    s += "}";
    std::cout << s << "\n";
  } else if (!g.quiet) {
    std::cout << "redlock-cli bench --hold: " << (count - failed) << " locks held (ttl "
              << ttl.count() << " ms, auto-extend) on " << nodes.size() << " nodes for "
              << fmt(a.soak) << " s\n";
    std::cout << "taken in " << fmt(take_s, 2) << " s, released in " << fmt(release_s, 2) << " s, "
              << extensions << " extensions, " << lost << " lost, " << failed << " failed\n";
    std::cout << "rss at start " << fmt(mb(kb_start)) << " MB, with the locks "
              << fmt(mb(kb_locked)) << " MB (" << fmt(per_lock_b, 0) << " B/lock), end "
              << fmt(mb(kb_end)) << " MB, growth " << fmt(mb(kb_end - kb_locked), 2) << " MB, "
              << fmt(mb(kb_trimmed)) << " MB after malloc_trim\n";
    std::cout << "t (s)    rss (MB)   heap in use (MB)\n";
    for (const auto& smp : samples) {
      char line[64];
      std::snprintf(line, sizeof line, "%6.1f %10.2f %18.2f\n", smp.t_s, mb(smp.kb),
                    mb(smp.heap_kb));
      std::cout << line;
    }
    std::cout << "keys left: " << left.keys_left << "\n";
  }
  if (!first_error.empty() && !g.quiet) {
    std::cerr << "redlock-cli: bench: " << failed << " lock(s) not taken, first: " << first_error
              << "\n";
  }
  return failed == count ? exit_no_quorum : exit_ok;
}

}  // namespace

void setup_bench(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<BenchArgs>();
  auto* sub = app.add_subcommand(
      "bench",
      "Measure lock cycle latency and throughput against the nodes, with the raw SET round trip "
      "as the floor (or, with --hold, the memory of many held locks)");
  sub->add_option("--seconds", a->seconds, "Length of each phase in seconds (default 3)")
      ->type_name("S");
  sub->add_option("--concurrency", a->concurrency,
                  "Locks in flight on distinct resources (default: runs 1, 16, 64 and 256)")
      ->type_name("C");
  sub->add_option("--ttl", a->ttl, "ttl of the benchmark's locks (default 10s)")->type_name("DUR");
  auto* hold = sub->add_option("--hold", a->hold,
                               "Instead: hold N locks with auto-extension and sample the RSS")
                   ->type_name("N");
  sub->add_option("--soak", a->soak, "With --hold: how long to hold them, in seconds (default 60)")
      ->type_name("S")
      ->needs(hold);
  hold->excludes("--concurrency");
  sub->footer(
      "Figures only: a benchmark never fails on speed. Keys use a random prefix and are released "
      "(what is left is reported as keys_left, then deleted). Progress goes to stderr when it is a "
      "terminal.");
  sub->callback([a, &ctx] {
    ctx.action = [a, &ctx] {
      return a->hold ? run_hold(*a, ctx.globals) : run_cycles(*a, ctx.globals);
    };
  });
}

}  // namespace redlock::cli
