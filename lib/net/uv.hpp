#pragma once
// Small RAII owners of libuv handles (uvw's idea, in a few lines). libuv may touch a handle's
// memory until its close callback has run, so each handle lives in a heap box that the close
// callback frees: the owning object can go away at once, and its callback never runs after that.

#include <uv.h>

#include <cstdint>
#include <functional>
#include <utility>

namespace redlock::net {

template <class H>
class UvHandle {
 public:
  UvHandle(const UvHandle&) = delete;
  UvHandle& operator=(const UvHandle&) = delete;
  ~UvHandle() { close(); }

  [[nodiscard]] bool active() const { return box_ != nullptr && uv_is_active(handle()) != 0; }
  // Does not keep the loop alive by itself.
  void unref() {
    if (box_ != nullptr) uv_unref(handle());
  }
  // Closes now (idempotent); the callback will not run again. `then`, if given, runs once
  // libuv has closed the handle: from the loop's close phase, on a clean stack. Safe from inside
  // the handle's own callback (the callback object lives until the close callback).
  void close(std::function<void()> then = {}) {
    if (box_ == nullptr) return;
    box_->closed = true;
    box_->then = std::move(then);
    uv_close(handle(), [](uv_handle_t* h) {
      auto* b = static_cast<Box*>(h->data);
      auto then_fn = std::move(b->then);
      delete b;
      if (then_fn) then_fn();
    });
    box_ = nullptr;
  }

 protected:
  template <class Fn>
  explicit UvHandle(Fn fn) : box_(new Box{{}, std::move(fn), {}, false}) {
    box_->h.data = box_;
  }
  struct Box {
    H h;
    std::function<void()> fn;
    std::function<void()> then;
    bool closed;
  };
  uv_handle_t* handle() const { return reinterpret_cast<uv_handle_t*>(&box_->h); }
  static void fire(H* h) {
    auto* b = static_cast<Box*>(h->data);
    if (!b->closed && b->fn) b->fn();
  }
  Box* box_;
};

// A one-shot timer on loop time (milliseconds).
class Timer : public UvHandle<uv_timer_t> {
 public:
  Timer(uv_loop_t* loop, std::function<void()> on_fire) : UvHandle(std::move(on_fire)) {
    uv_timer_init(loop, &box_->h);
  }
  void start(std::uint64_t ms) {
    if (box_ != nullptr)
      uv_timer_start(
          &box_->h, [](uv_timer_t* t) { fire(t); }, ms, 0);
  }
  void stop() {
    if (box_ != nullptr) uv_timer_stop(&box_->h);
  }
};

// Runs once just before the loop next polls for I/O (then stops): batches work of one loop turn.
class Prepare : public UvHandle<uv_prepare_t> {
 public:
  Prepare(uv_loop_t* loop, std::function<void()> on_run) : UvHandle(std::move(on_run)) {
    uv_prepare_init(loop, &box_->h);
  }
  void schedule() {
    if (box_ == nullptr) return;
    uv_prepare_start(&box_->h, [](uv_prepare_t* p) {
      uv_prepare_stop(p);
      fire(p);
    });
  }
};

// Runs after the loop polled for I/O, every turn while active (the engine runs deferred
// callbacks there).
class Check : public UvHandle<uv_check_t> {
 public:
  Check(uv_loop_t* loop, std::function<void()> on_run) : UvHandle(std::move(on_run)) {
    uv_check_init(loop, &box_->h);
  }
  void start() {
    if (box_ != nullptr) uv_check_start(&box_->h, [](uv_check_t* c) { fire(c); });
  }
};

// While active, the loop polls without blocking (so a Check runs soon).
class Idle : public UvHandle<uv_idle_t> {
 public:
  explicit Idle(uv_loop_t* loop) : UvHandle(std::function<void()>{}) {
    uv_idle_init(loop, &box_->h);
  }
  void start() {
    if (box_ != nullptr) uv_idle_start(&box_->h, [](uv_idle_t*) {});
  }
  void stop() {
    if (box_ != nullptr) uv_idle_stop(&box_->h);
  }
};

// Wakes the loop from any thread: send() is thread-safe, the callback runs on the loop.
class Async : public UvHandle<uv_async_t> {
 public:
  Async(uv_loop_t* loop, std::function<void()> on_wake) : UvHandle(std::move(on_wake)) {
    uv_async_init(loop, &box_->h, [](uv_async_t* a) { fire(a); });
  }
  void send() {
    if (box_ != nullptr) uv_async_send(&box_->h);
  }
};

}  // namespace redlock::net
