#include "bench_handoff.hpp"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <stop_token>
#include <thread>

#include "bench_phases.hpp"
#include "json.hpp"
#include "nodes/client.hpp"
#include "output.hpp"
#include "redlock/client.hpp"

namespace redlock::cli {
namespace {

using namespace bench;

// How the next client learns that the lock is free: by polling or wake-ups through Redis (plain
// and fair locks), or told in-process (signalled), the floor the others are compared with.
enum class Kind { plain, fair, signalled };

const char* name_of(Kind k) {
  switch (k) {
    case Kind::plain:
      return "plain";
    case Kind::fair:
      return "fair";
    case Kind::signalled:
      return "signalled";
  }
  return "?";
}

struct Handoff {
  int waiters = 0;
  Kind kind = Kind::plain;
  bool wake_ups = false;
  double per_s = 0;  // acquisitions per second, all clients together
  Stats gap;         // release -> next acquisition (us), whoever took it
  Stats gap_other;   // the same, only where another client took it
  long errors = 0;
  std::string first_error;
  double server_commands = 0;  // per acquisition, all nodes together
  double server_cpu_us = 0;    // the same, server CPU time
};

// What one slice of a row saw; a row adds up its slices.
struct Slice {
  std::size_t acquisitions = 0;
  std::vector<double> gaps, gaps_other;
  long errors = 0;
  std::string first_error;
  ServerWork work;  // what the nodes did while the clock ran
};

// The nodes' work from `before` until now, into `h`.
void add_work_since(const ServerWork& before, const Options& o, Slice& h) {
  const ServerWork after = server_work(o.nodes, o.tls);
  h.work.commands += after.commands - before.commands;
  h.work.cpu_us += after.cpu_us - before.cpu_us;
}

struct Event {
  Clock::time_point acquired, released;  // released: when the holder started its release
  int client;
};

// One client per waiter, each connected (a lock of its own taken and given back) before the
// clock starts.
std::vector<std::unique_ptr<Client>> connected_clients(const Options& o,
                                                       const std::string& resource, int waiters) {
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < waiters; ++i) {
    clients.push_back(std::make_unique<Client>(o));
    AcquireOptions warm;
    warm.ttl = Millis{1000};
    if (auto r = clients.back()->try_acquire({resource + ":warm" + std::to_string(i)}, warm))
      (void)clients.back()->try_release(r.lock);
  }
  return clients;
}

// Each acquisition's gap from the release before it (in time order), and the same only where the
// lock went to another client.
void gaps_of(std::vector<Event> events, Slice& h) {
  std::sort(events.begin(), events.end(),
            [](const Event& a, const Event& b) { return a.acquired < b.acquired; });
  for (std::size_t i = 1; i < events.size(); ++i) {
    const double us = us_between(events[i - 1].released, events[i].acquired);
    h.gaps.push_back(us);
    if (events[i].client != events[i - 1].client) h.gaps_other.push_back(us);
  }
  h.acquisitions = events.size();
}

Slice measure(Options base, const std::string& resource, int waiters, bool fair, bool wake,
              double seconds) {
  base.wake_ups = wake;
  auto clients = connected_clients(base, resource, waiters);
  Slice h;
  const ServerWork before = server_work(base.nodes, base.tls);
  std::mutex mu;
  std::vector<Event> events;
  std::stop_source stop;
  const auto start = Clock::now();
  const auto end = start + seconds_of(seconds);
  std::vector<std::jthread> threads;
  for (int i = 0; i < waiters; ++i) {
    threads.emplace_back([&, i] {
      Client& c = *clients[static_cast<std::size_t>(i)];
      while (!stop.stop_requested() && Clock::now() < end) {
        AcquireOptions o;
        o.ttl = Millis{10'000};
        o.wait = Millis{10'000};
        o.fair = fair;
        o.stop = stop.get_token();
        auto r = c.try_acquire({resource}, o);
        const auto acquired = Clock::now();
        if (!r) {
          if (r.error == Errc::cancelled) break;
          std::lock_guard<std::mutex> g(mu);
          if (h.errors++ == 0) h.first_error = r.message;
          continue;
        }
        const auto released = Clock::now();
        (void)c.try_release(r.lock);
        std::lock_guard<std::mutex> g(mu);
        events.push_back({acquired, released, i});
      }
    });
  }
  std::this_thread::sleep_until(end);
  stop.request_stop();
  threads.clear();  // joins
  add_work_since(before, base, h);
  gaps_of(std::move(events), h);
  return h;
}

// A client's turn in the signalled floor: a flag and a condition variable of its own (one shared
// by all would wake every thread for each handoff).
class Turn {
 public:
  void give() {
    {
      std::lock_guard<std::mutex> g(mu_);
      mine_ = true;
    }
    cv_.notify_one();
  }
  // False once the end has come without the turn.
  bool take(Clock::time_point end) {
    std::unique_lock<std::mutex> l(mu_);
    if (!cv_.wait_until(l, end, [this] { return mine_; })) return false;
    mine_ = false;
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool mine_ = false;
};

// The floor: the same clients take the lock in a fixed turn, each told by the one before it (in
// this process) the moment that one's release returned, and then acquiring a free plain lock.
// Its gap is a release round, a thread wake-up and an acquire round with nobody competing: what a
// handoff costs on these nodes when the news of the release costs nothing.
Slice measure_signalled(const Options& base, const std::string& resource, int waiters,
                        double seconds) {
  auto clients = connected_clients(base, resource, waiters);
  std::vector<Turn> turns(static_cast<std::size_t>(waiters));
  Slice h;
  const ServerWork before = server_work(base.nodes, base.tls);
  std::mutex mu;
  std::vector<Event> events;
  const auto end = Clock::now() + seconds_of(seconds);
  std::vector<std::jthread> threads;
  for (int i = 0; i < waiters; ++i) {
    threads.emplace_back([&, i] {
      Client& c = *clients[static_cast<std::size_t>(i)];
      Turn& next = turns[static_cast<std::size_t>((i + 1) % waiters)];
      while (turns[static_cast<std::size_t>(i)].take(end)) {
        AcquireOptions o;
        o.ttl = Millis{10'000};
        o.wait = Millis{10'000};
        auto r = c.try_acquire({resource}, o);
        const auto acquired = Clock::now();
        if (!r) {
          std::lock_guard<std::mutex> g(mu);
          if (h.errors++ == 0) h.first_error = r.message;
          next.give();
          continue;
        }
        const auto released = Clock::now();
        (void)c.try_release(r.lock);
        {
          std::lock_guard<std::mutex> g(mu);
          events.push_back({acquired, released, i});
        }
        next.give();
      }
    });
  }
  turns.front().give();
  threads.clear();  // joins: each gives up once its turn has not come by the end
  add_work_since(before, base, h);
  gaps_of(std::move(events), h);
  return h;
}

// The floor: `samples` PING round trips to the first node over a raw connection.
std::vector<double> rtt_us(const Options& o, int samples) {
  const auto& a = o.nodes.front();
  const auto endpoint = a.transport == NodeAddress::Transport::unix_socket
                            ? nodes::Endpoint::unix_socket(a.path)
                            : nodes::Endpoint::tcp(a.host, a.port);
  nodes::SyncClient conn(endpoint, {.user = a.user, .password = a.password, .db = a.db});
  std::vector<double> us;
  for (int i = 0; i < samples && conn.ok(); ++i) {
    const auto t0 = Clock::now();
    if (!conn.command({"PING"})) break;
    us.push_back(us_between(t0, Clock::now()));
  }
  return us;
}

// The share of handoffs (in %) where the lock went to another client; the rest were taken back
// by the client that had just released it (a plain lock's releaser often wins the race).
double to_other_pct(const Handoff& h) {
  if (h.gap.count == 0) return 0;
  return 100.0 * static_cast<double>(h.gap_other.count) / static_cast<double>(h.gap.count);
}

}  // namespace

int run_handoff(const std::vector<int>& waiters, double seconds, const Globals& g) {
  for (int w : waiters) {
    if (w < 1 || w > 256)
      throw UsageError("--handoff: waiters must be in 1..256, got " + std::to_string(w));
  }
  if (!(seconds > 0 && seconds <= 3600)) throw UsageError("--seconds: must be in (0, 3600]");
  const Options base = make_options(g);
  const std::string prefix = random_prefix();
  // A row's seconds are cut into slices of about a second, and the five rows of one waiter count
  // (plain and fair, wake-ups off and on, and the signalled floor) take their slices in turn: on a
  // shared machine the load drifts over seconds, and rows measured one after the other would
  // compare different loads.
  const int slices = std::clamp(static_cast<int>(std::lround(seconds)), 1, 5);
  const double slice_seconds = seconds / slices;
  std::vector<Handoff> rows;
  // The units a gap is counted in, a PING and one round of the algorithm without the library (a
  // SET to every node, decided at a quorum: what an acquisition costs at the least), sampled after
  // every slice: measured once, apart from the rows, they caught whatever the machine did at that
  // moment (2026-11-27: a PING p50 of 297 us, 15 times the usual, made the gaps look 3 rtt long).
  std::vector<double> rtt_samples;
  std::vector<double> round_samples;
  const auto sample_units = [&] {
    for (double us : rtt_us(base, 25)) rtt_samples.push_back(us);
    for (double us : fanout_quorum_us(base, prefix + "round", 25)) round_samples.push_back(us);
  };
  for (int w : waiters) {
    std::vector<Handoff> group;
    std::vector<Slice> sums;
    for (Kind kind : {Kind::plain, Kind::fair, Kind::signalled}) {
      for (bool wake : {false, true}) {
        if (kind == Kind::signalled && wake) continue;
        Handoff h;
        h.waiters = w;
        h.kind = kind;
        h.wake_ups = wake;
        group.push_back(std::move(h));
        sums.emplace_back();
      }
    }
    for (int s = 0; s < slices; ++s) {
      for (std::size_t i = 0; i < group.size(); ++i) {
        const Handoff& h = group[i];
        const std::string res = prefix + "handoff:" + std::to_string(w) + ":" + name_of(h.kind) +
                                (h.wake_ups ? ":wake" : ":poll");
        Slice one = h.kind == Kind::signalled
                        ? measure_signalled(base, res, w, slice_seconds)
                        : measure(base, res, w, h.kind == Kind::fair, h.wake_ups, slice_seconds);
        Slice& sum = sums[i];
        sum.acquisitions += one.acquisitions;
        sum.gaps.insert(sum.gaps.end(), one.gaps.begin(), one.gaps.end());
        sum.gaps_other.insert(sum.gaps_other.end(), one.gaps_other.begin(), one.gaps_other.end());
        if (sum.errors == 0 && one.errors > 0) sum.first_error = one.first_error;
        sum.work.commands += one.work.commands;
        sum.work.cpu_us += one.work.cpu_us;
        sum.errors += one.errors;
      }
      sample_units();
    }
    for (std::size_t i = 0; i < group.size(); ++i) {
      Handoff& h = group[i];
      Slice& sum = sums[i];
      h.per_s = static_cast<double>(sum.acquisitions) / seconds;
      h.gap = stats_of(std::move(sum.gaps));
      h.gap_other = stats_of(std::move(sum.gaps_other));
      h.errors = sum.errors;
      h.first_error = std::move(sum.first_error);
      if (sum.acquisitions > 0) {
        const auto n = static_cast<double>(sum.acquisitions);
        h.server_commands = sum.work.commands / n;
        h.server_cpu_us = sum.work.cpu_us / n;
      }
      rows.push_back(std::move(h));
    }
  }
  const double rtt = stats_of(std::move(rtt_samples)).p50;
  const double round = stats_of(std::move(round_samples)).p50;
  // What the runs leave (waiting marks and fair queues expire by themselves within seconds) goes
  // now; counted, not a failure.
  const Sweep swept = sweep(base.nodes, base.tls, prefix);
  if (g.json) {
    Json list = Json::array();
    for (const auto& h : rows) {
      list.push_back({{"waiters", h.waiters},
                      {"kind", name_of(h.kind)},
                      {"wake_ups", h.wake_ups},
                      {"handoffs_per_s", std::round(h.per_s * 10) / 10},
                      {"gap_us_p50", std::round(h.gap.p50)},
                      {"gap_us_p99", std::round(h.gap.p99)},
                      {"gap_other_us_p50", std::round(h.gap_other.p50)},
                      {"gap_other_us_p99", std::round(h.gap_other.p99)},
                      {"handoffs_to_other", h.gap_other.count},
                      {"to_other_pct", std::round(to_other_pct(h) * 10) / 10},
                      {"server_commands", std::round(h.server_commands * 10) / 10},
                      {"server_cpu_us", std::round(h.server_cpu_us)},
                      {"errors", h.errors}});
    }
    print_json({{"mode", "handoff"},
                {"nodes", base.nodes.size()},
                {"seconds", seconds},
                {"slices", slices},
                {"rtt_us_p50", std::round(rtt)},
                {"round_us_p50", std::round(round)},
                {"keys_swept", swept.keys_left},
                {"runs", std::move(list)}});
    return exit_ok;
  }
  std::cout << "one hot lock, empty critical section, " << base.nodes.size() << " nodes, "
            << fmt(seconds) << " s per row (in " << slices
            << " slices, the rows of one waiter count taking turns); rtt p50 " << fmt(rtt)
            << " us (PING to node 1); round p50 " << fmt(round)
            << " us (a SET to every node, until a quorum answered)\n";
  std::cout << std::left << std::setw(8) << "waiters" << std::setw(11) << "kind" << std::setw(7)
            << "wake" << std::right << std::setw(12) << "handoffs/s" << std::setw(14)
            << "gap p50 us" << std::setw(14) << "gap p99 us" << std::setw(16) << "other p50 us"
            << std::setw(16) << "other p99 us" << std::setw(10) << "to other" << std::setw(8)
            << "cmds" << std::setw(10) << "srv us" << std::setw(8) << "errors"
            << "\n";
  for (const auto& h : rows) {
    const char* wake = h.kind == Kind::signalled ? "-" : h.wake_ups ? "on" : "off";
    std::cout << std::left << std::setw(8) << h.waiters << std::setw(11) << name_of(h.kind)
              << std::setw(7) << wake << std::right << std::setw(12) << fmt(h.per_s)
              << std::setw(14) << fmt(h.gap.p50) << std::setw(14) << fmt(h.gap.p99) << std::setw(16)
              << fmt(h.gap_other.p50) << std::setw(16) << fmt(h.gap_other.p99) << std::setw(9)
              << fmt(to_other_pct(h)) << "%" << std::setw(8) << fmt(h.server_commands)
              << std::setw(10) << fmt(h.server_cpu_us) << std::setw(8) << h.errors << "\n";
    if (!h.first_error.empty()) std::cout << "    first error: " << h.first_error << "\n";
  }
  std::cout << "gap: from the holder starting its release to the next acquisition; other: only "
               "where another client took it; to other: the share of handoffs that went to another "
               "client (the rest: the releasing client took it back); cmds, srv us: commands the "
               "nodes processed and their CPU time, all nodes "
               "together, per handoff; signalled: each client told "
               "in this process when the "
               "release before it returned, then taking the free lock (the floor). Figures only: a "
               "benchmark never fails on speed.\n"
            << "keys swept at the end (waiting marks, fair queues): " << swept.keys_left << "\n";
  return exit_ok;
}

}  // namespace redlock::cli
