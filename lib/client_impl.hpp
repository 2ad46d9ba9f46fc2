#pragma once
// The thread-safe client's private state: the Engine on a private loop run by one I/O thread.
// Calls from any thread are queued under a mutex and handed to the loop with one uv_async_t, so
// all threads' commands share the engine's one pipelined connection per node.
//
// Who runs the loop. The I/O thread does, except while a blocking call borrows it: when the loop
// is idle (the I/O thread waits for readiness outside it) and nothing on it could run the user's
// code (no operation in flight, no watchdog, no observer), a blocking call
// starts its operation and runs the loop on its own thread until its result is there. That saves
// the two thread hand-offs of a call (wake the I/O thread, then wake the caller): about 10-20 us
// each on a 2-CPU machine, on an operation of about 150 us. So the user's asynchronous callbacks,
// watchdog and observer callbacks and the logger still run on the I/O thread only (a message on
// a borrowing thread is posted there). While the loop is borrowed, other threads' blocking calls
// run on it as they would on the I/O thread; the first post that could run the user's code (an
// asynchronous call, a watchdog's start) makes the borrower hand the loop back and wait like any
// caller.
//
// While a borrow is possible, the I/O thread therefore does not sleep inside uv_run: it runs one
// non-blocking pass, then waits on the loop's backend descriptor (libuv's documented way to poll
// a loop from outside) with the loop's own timeout, holding nothing, so a borrower can take the
// loop without waking it. While operations are in flight (no borrow possible) it runs the loop
// as loop threads usually do.

#include <sys/epoll.h>
#include <unistd.h>
#include <uv.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/hold.hpp"
#include "engine/impl.hpp"
#include "redlock/client.hpp"
#include "redlock/engine.hpp"

namespace redlock {

class Client::Impl {
 public:
  explicit Impl(Options options) {
    // The user's logger runs on the I/O thread only (redlock.h says so): a message said on a
    // borrowing thread goes to the I/O thread as a post, which also ends the borrow. A blocking
    // call returns only once the messages posted before its result have been logged
    // (wait_for_posted_messages): a warning said while a call connected comes before its result,
    // as when the I/O thread runs the call.
    if (options.logger) {
      options.logger = [this, user = std::move(options.logger)](LogLevel level,
                                                                std::string_view message) {
        if (borrowing_here_ != this) {
          user(level, message);
          return;
        }
        const bool posted = post([this, user, level, text = std::string(message)] {
          user(level, text);
          messages_logged_.fetch_add(1);
          messages_logged_.notify_all();
        });
        if (posted) messages_posted_.fetch_add(1);
      };
    }
    uv_loop_init(&loop_);
    try {
      engine_ = std::make_unique<Engine>(&loop_, std::move(options));
    } catch (...) {
      // The engine validates before touching the loop, so the loop has no handles yet.
      uv_loop_close(&loop_);
      throw;
    }
    uv_async_init(&loop_, &async_, &Impl::on_async);
    async_.data = this;
    // Outside the loop the I/O thread waits on `outer_`, which holds the loop's descriptor; a
    // borrower takes it out while it runs the loop, so the replies it waits for do not wake the
    // I/O thread too.
    outer_ = epoll_create1(EPOLL_CLOEXEC);
    backend_fd_ = uv_backend_fd(&loop_);
    watch_loop_from_outside(true);
    thread_ = std::thread([this] { run_io_thread(); });
    io_thread_ = thread_.get_id();
  }

  // The Client's deleter (client.cpp): the last reference may be dropped on the I/O thread
  // itself, where ~Impl could not join it.
  static void destroy(Impl* impl) noexcept;

  ~Impl() {
    post([this] {
      stop_accepting();
      engine_->close([this] { uv_close(reinterpret_cast<uv_handle_t*>(&async_), nullptr); });
    });
    thread_.join();
    // Calls queued after the last wake-up: the engine is closed, so each fails at once with
    // Errc::shutdown and no caller is left waiting.
    for (auto& e : queue_) e.fn();
    queue_.clear();
    engine_.reset();  // fully closed: frees at once
    uv_loop_close(&loop_);
    ::close(outer_);
  }

  // Runs `fn` on the loop. False when the client is shutting down (fn is dropped).
  // `borrowable`: fn runs no code of the user's (a blocking call's start), so a thread that
  // borrows the loop may run it; otherwise it waits for the I/O thread.
  bool post(std::function<void()> fn, bool borrowable = false) {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (stopping_) return false;
      queue_.push_back(Entry{std::move(fn), borrowable});
    }
    uv_async_send(&async_);
    return true;
  }

  // Returns once every message a borrowing thread posted to the logger so far has been logged
  // (the constructor's logger). A blocking call's result may come from a borrower that posted a
  // message just before it; its caller waits here, so the message is not logged after the call
  // returned. Two atomic loads when nothing is pending.
  void wait_for_posted_messages() const {
    const auto posted = messages_posted_.load();
    for (auto logged = messages_logged_.load(); logged < posted; logged = messages_logged_.load())
      messages_logged_.wait(logged);
  }

  // The I/O thread, or a thread borrowing the loop (whose own blocking call is under way).
  bool on_io_thread() const {
    return std::this_thread::get_id() == io_thread_ || borrowing_here_ == this;
  }

  // Whether a blocking call may run the loop now: the engine is quiet (no operation, watchdog
  // or observer, no callback waiting), so nothing on the loop can run the user's code. Read by
  // the loop's owner, or with mu_ held while nobody owns it.
  [[nodiscard]] bool lendable() { return EngineAccess::impl(*engine_).quiet(); }
  // A blocking call: takes the loop if it is idle and nothing on it could run the user's code.
  // Then the caller starts its operation and calls run_borrowed() until it has its result or
  // run_borrowed() says to hand back, and always ends with end_borrow().
  [[nodiscard]] bool try_borrow() {
    std::lock_guard<std::mutex> g(mu_);
    if (running_ || borrowed_ || stopping_ || !queue_.empty()) return false;
    // Nobody runs the loop (running_ and borrowed_ are false, and only a holder of mu_ sets
    // them), so the engine's state can be read here.
    if (!lendable()) return false;
    borrowed_ = true;
    hand_back_ = false;
    borrowing_here_ = this;
    watch_loop_from_outside(false);
    // The loop's clock is the time of its last pass, which may be long ago: the operation's
    // timers (a node's deadline) count from it.
    uv_update_time(&loop_);
    return true;
  }
  // One pass of the loop on the borrowing thread (blocking for I/O). False: hand the loop back.
  [[nodiscard]] bool run_borrowed() {
    uv_run(&loop_, UV_RUN_ONCE);
    return !hand_back_;
  }
  void end_borrow() {
    // Still the loop's owner: when the loop is next due (a timer the borrow set, say).
    const int timeout = uv_backend_timeout(&loop_);
    const auto due = timeout < 0 ? Steady::time_point::max()
                                 : Steady::now() + std::chrono::milliseconds(timeout);
    borrowing_here_ = nullptr;
    // Back in the I/O thread's wait: what arrived meanwhile (a straggler's reply) wakes it now.
    watch_loop_from_outside(true);
    bool parked = false, wake = false;
    {
      std::lock_guard<std::mutex> g(mu_);
      borrowed_ = false;
      parked = io_parked_;
      // Posts left for the I/O thread need their wake-up again (the borrower's pass consumed
      // it). A parked I/O thread computes its wait afresh; one waiting outside the loop waits
      // until io_wait_until_, which may be later than what the borrow left due: woken, it
      // computes its wait again.
      wake = !queue_.empty() || (!parked && due < io_wait_until_);
    }
    if (wake) uv_async_send(&async_);
    if (parked) cv_.notify_one();
  }

  // Reentrant holds by (owner, resources). Weak: a hold that ended is simply gone.
  std::mutex holds_mu_;
  std::map<std::string, std::weak_ptr<Guard::State>> reentrant_;

  Engine& engine() { return *engine_; }

 private:
  // Whether the loop's descriptor is in the I/O thread's outer wait (`outer_`): it is, except
  // while a borrower runs the loop.
  void watch_loop_from_outside(bool on) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = backend_fd_;
    epoll_ctl(outer_, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, backend_fd_, &ev);
  }

  struct Entry {
    std::function<void()> fn;
    bool borrowable;
  };

  void run_io_thread() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      while (borrowed_) {
        io_parked_ = true;
        cv_.wait(l);
      }
      io_parked_ = false;
      running_ = true;
      l.unlock();
      if (!lendable()) {
        // Operations in flight, a watchdog or an observer: no blocking call may borrow the loop,
        // so the I/O thread waits inside it, as a loop thread usually does (a post wakes it).
        const int alive = uv_run(&loop_, UV_RUN_ONCE);
        l.lock();
        running_ = false;
        if (!alive) return;
        continue;
      }
      const int alive = uv_run(&loop_, UV_RUN_NOWAIT);
      const int timeout = alive ? uv_backend_timeout(&loop_) : 0;
      l.lock();
      running_ = false;
      if (!alive) return;  // every handle closed: the engine is gone
      if (timeout == 0 || borrowed_) continue;
      io_wait_until_ = timeout < 0 ? Steady::time_point::max()
                                   : Steady::now() + std::chrono::milliseconds(timeout);
      l.unlock();
      epoll_event event;
      (void)epoll_wait(outer_, &event, 1, timeout);
      l.lock();
    }
  }

  using Steady = std::chrono::steady_clock;

  static void on_async(uv_async_t* h) {
    auto* self = static_cast<Impl*>(h->data);
    std::vector<Entry> batch;
    {
      std::lock_guard<std::mutex> g(self->mu_);
      if (!self->borrowed_) {
        batch.swap(self->queue_);
      } else {
        // On a borrowing thread: the leading entries it may run, in order; the rest stays, in
        // order, for the I/O thread, and the borrower hands the loop back after this pass.
        std::size_t k = 0;
        while (k < self->queue_.size() && self->queue_[k].borrowable) ++k;
        batch.assign(
            std::make_move_iterator(self->queue_.begin()),
            std::make_move_iterator(self->queue_.begin() + static_cast<std::ptrdiff_t>(k)));
        self->queue_.erase(self->queue_.begin(),
                           self->queue_.begin() + static_cast<std::ptrdiff_t>(k));
        if (!self->queue_.empty()) self->hand_back_ = true;
      }
    }
    for (auto& e : batch) e.fn();
  }

  uv_loop_t loop_;
  uv_async_t async_;
  int backend_fd_ = -1;
  int outer_ = -1;
  // Until when the I/O thread waits outside the loop (guarded by mu_).
  std::chrono::steady_clock::time_point io_wait_until_ =
      std::chrono::steady_clock::time_point::max();
  // Messages a borrowing thread handed to the I/O thread's logger, and how many of them it has
  // logged (wait_for_posted_messages).
  std::atomic<std::uint64_t> messages_posted_{0};
  std::atomic<std::uint64_t> messages_logged_{0};
  // The Impl whose loop this thread is borrowing, if any.
  static inline thread_local const Impl* borrowing_here_ = nullptr;
  std::unique_ptr<Engine> engine_;
  std::thread thread_;
  std::thread::id io_thread_;
  std::mutex mu_;
  std::vector<Entry> queue_;
  bool stopping_ = false;
  // Who runs the loop (guarded by mu_): the I/O thread (running_), a blocking caller
  // (borrowed_), or nobody (the I/O thread waits for readiness outside the loop, or is parked on
  // cv_ until a borrow ends: io_parked_).
  bool running_ = false;
  bool borrowed_ = false;
  bool io_parked_ = false;
  std::condition_variable cv_;
  bool hand_back_ = false;  // the borrowing thread's alone: set by on_async on it

 public:
  void stop_accepting() {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
  }

  // On the I/O thread, when no thread can be made to destroy this: closes the engine and lets
  // the loop end by itself, without waiting for it. This object is never freed (a leak, in a
  // process that cannot start a thread).
  void abandon() noexcept {
    stop_accepting();
    engine_->close([this] { uv_close(reinterpret_cast<uv_handle_t*>(&async_), nullptr); });
    thread_.detach();
  }
};

}  // namespace redlock
