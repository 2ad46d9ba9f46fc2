#pragma once
// The oracle: never faulted, runs inside chaos-driver. It listens on a unix socket, one thread
// per worker connection, and stamps every event with one clock (CLOCK_MONOTONIC, taken under
// its one mutex, so the order of stamps is the order in which it handled the events).
//
// It records each critical section (enter .. leave) and keeps, per resource, the counter the
// holders increment (read, sleep, write) and, with fencing, the highest fence it has accepted
// (a read or write with a lower fence is rejected, as a fenced resource would). With fair locks
// it also follows the tickets of successive holders of each resource (in the order of their GOT
// messages, which is the order in which they got the lock: a holder reports GOT before it
// releases), so the checker can tell whether they were served in ticket (FIFO) order.
//
// It also lets the nemesis catch a worker at the right moment: arm(slot, at_acquire) tells it
// when that worker sends ACQ (and from then on answers RECHECK to its ENTER until end_pause(), so
// a worker paused outside its critical section re-checks its validity after the pause);
// arm(slot, at_enter) tells it right after that worker entered a critical section.

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace chaos {

struct Interval {
  enum class End { leave, died, mix_end };
  int resource = 0;
  int slot = 0;
  pid_t pid = 0;
  std::int64_t enter_ns = 0;
  std::int64_t leave_ns = 0;
  std::optional<std::uint64_t> fence;
  long long remaining_at_enter_us = 0;
  long long remaining_at_leave_us = 0;  // as the worker measured it (negative: after its deadline)
  End end = End::leave;
  bool paused_inside = false;  // the nemesis SIGSTOPped it during this interval
  // The election mix: a leadership (LEAD .. UNLEAD), `fence` is its term, enter_ns the worker's
  // own stamp of campaign's return, and it never lasts past the last validity deadline the
  // candidate reported (valid_until_ns), whether it ends by UNLEAD, death or the mix's end.
  bool leadership = false;
  std::int64_t valid_until_ns = 0;
};

struct ResourceState {
  long long value = 0;
  std::uint64_t highest_fence = 0;  // highest fence accepted by a read or write
  std::optional<std::uint64_t> highest_enter_fence;
  long long accepted_writes = 0;
  long long rejected_reads = 0;     // stale fence
  long long rejected_writes = 0;    // stale fence
  long long clobbered_writes = 0;   // accepted, but based on a value someone else had replaced
  long long fence_regressions = 0;  // an ENTER whose fence is not above every earlier ENTER's
  // Fair locks: the ticket of the latest holder, holders whose ticket was below it (served out of
  // FIFO order), and holders whose ticket equalled it (two waiters whose ticket rounds overlapped
  // may get the same ticket, and are then served in waiter-id order: README, "Safety").
  std::optional<std::uint64_t> last_ticket;
  long long fifo_violations = 0;
  long long ticket_ties = 0;
};

struct AcquireStats {
  long long attempts = 0;  // try_acquire calls
  long long acquired = 0;
  long long skipped = 0;  // acquired, but too little validity left to enter
  long long entered = 0;
  long long rechecks = 0;
  std::vector<long long> latency_us;  // of successful calls
  std::map<std::string, long long> errors;
  long long max_wall_skew_s =
      0;  // largest |worker's wall clock - oracle's| seen (libfaketime at work)
};

struct OracleRecord {
  std::vector<Interval> intervals;
  std::vector<ResourceState> resources;
  AcquireStats acq;
  std::vector<std::string> protocol_errors;  // malformed messages, ENTER while inside, ...
  std::vector<std::string> stale_writes;     // the first few stale writes accepted, described
  std::vector<std::string> fifo_breaks;      // the first few holders served out of ticket order
};

class Oracle {
 public:
  // at_acquire: on ACQ (the worker is about to call try_acquire); at_acquired: on a successful
  // GOT (it holds a lock and is about to check its validity). Both make its ENTER answer RECHECK
  // until end_pause(). at_enter: right after it entered a critical section.
  enum class Trigger { none, at_acquire, at_acquired, at_enter };

  Oracle(std::string socket_path, int resources, bool fencing);
  ~Oracle();
  Oracle(const Oracle&) = delete;
  Oracle& operator=(const Oracle&) = delete;

  [[nodiscard]] const std::string& socket_path() const { return path_; }

  // --- nemesis hooks --------------------------------------------------------------------------
  // Arms a one-shot trigger on `slot` (-1: any slot). Replaces an armed one.
  void arm(int slot, Trigger t);
  // Waits until the armed trigger fired (returns the slot and pid it fired for) or `timeout_ms`
  // passed (disarms, returns nullopt).
  std::optional<std::pair<int, pid_t>> wait_trigger(int timeout_ms);
  // Makes ENTER of `slot` answer RECHECK until end_pause(slot) (arm(at_acquire) does this too).
  void begin_pause(int slot);
  void end_pause(int slot);
  // True if `slot` is inside a critical section now; marks that interval as paused inside.
  bool mark_paused_inside(int slot);
  [[nodiscard]] bool inside(int slot);
  [[nodiscard]] std::size_t connected();

  // Closes every open interval (End::mix_end) and returns everything recorded. Call after the
  // workers are gone.
  OracleRecord finish();

 private:
  struct Conn;
  void accept_loop();
  void serve(Conn* c);
  std::string handle(Conn& c, const std::vector<std::string>& w, std::unique_lock<std::mutex>& lk);
  void close_open(Conn& c, Interval::End end, std::int64_t now);
  // The election mix's LEAD, VALID and UNLEAD (common.hpp).
  std::string handle_leadership(Conn& c, const std::vector<std::string>& w, int ri,
                                std::unique_lock<std::mutex>& lk);
  int res_index(const std::string& name);
  bool fence_ok(ResourceState& r, const std::string& fence);
  void note_ticket(const Conn& c, int ri, ResourceState& r, std::uint64_t ticket);

  std::string path_;
  int listen_fd_ = -1;
  bool fencing_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread acceptor_;
  std::vector<std::unique_ptr<Conn>> conns_;

  OracleRecord rec_;
  std::map<const Conn*, std::size_t> open_;  // connection -> index of its open interval
  std::map<int, bool> pausing_;
  int armed_slot_ = -2;
  Trigger armed_ = Trigger::none;
  std::optional<std::pair<int, pid_t>> fired_;
};

}  // namespace chaos
