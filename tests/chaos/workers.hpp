#pragma once
// The client processes of one mix: starts chaos-worker processes, one per slot, and faults them.
// Only ever signals pids it forked itself; reaps every child. Not thread-safe: use it from the
// driver's main thread (the nemesis runs there).

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace chaos {

struct WorkerSettings {
  std::string exe;  // path of chaos-worker
  std::string socket_path;
  std::string nodes_csv;
  std::string tls_ca_file;  // non-empty: the workers trust this CA (rediss:// nodes)
  std::vector<std::string> resources;
  long ttl_ms = 1500;
  long cs_min_ms = 5;
  long cs_max_ms = 50;
  long margin_ms = 100;
  long wait_ms = 750;
  bool fence = true;
  bool fence_even_slots_only = false;  // odd slots take plain (unfenced) locks
  bool fair = false;                   // fair (FIFO) locks, unfenced
  long heartbeat_ttl_ms = -1;          // fair waiters' heartbeat ttl; -1: library default
  bool durable = false;
  bool election = false;                  // candidates of one election (worker.cpp)
  bool election_ignore_validity = false;  // ... that lead on after a loss (a broken variant)
  long min_node_uptime_ms = 0;
  long restart_quarantine_ms = -1;  // -1: library default
  std::string faketime_lib;         // non-empty: run under libfaketime with this preload
  std::string faketime_file;        // FAKETIME_TIMESTAMP_FILE
  std::string log_path;             // the workers' stderr goes here (appended)
  long run_as_uid_base = -1;        // >= 0: slot K runs as uid/gid base+K (partition mix, root)
  std::uint64_t seed = 1;
};

class WorkerPool {
 public:
  WorkerPool(WorkerSettings s, int count);
  ~WorkerPool();  // SIGKILL + reap whatever is left
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  [[nodiscard]] int size() const { return static_cast<int>(slots_.size()); }
  [[nodiscard]] pid_t pid(int slot) const { return slots_[slot].pid; }
  [[nodiscard]] bool stopped(int slot) const { return slots_[slot].stopped; }

  void kill_and_respawn(int slot);  // SIGKILL, reap, start a new process in the slot
  void stop(int slot);              // SIGSTOP and wait until the kernel reports it stopped
  void cont(int slot);
  // Reaps workers that exited by themselves (a crash: counted, stderr in the log) and respawns
  // them.
  void check_unexpected_exits();
  // SIGCONT all, SIGTERM all (a worker ends its current iteration and exits 0), wait up to
  // `grace_ms`, then SIGKILL the rest.
  void terminate_all(int grace_ms);

  [[nodiscard]] const std::vector<std::string>& crashes() const { return crashes_; }
  [[nodiscard]] long long spawned() const { return spawned_; }

 private:
  struct Slot {
    pid_t pid = -1;
    bool stopped = false;
    int generation = 0;
  };
  void spawn(int slot);

  WorkerSettings s_;
  std::vector<Slot> slots_;
  std::vector<std::string> crashes_;
  long long spawned_ = 0;
};

}  // namespace chaos
