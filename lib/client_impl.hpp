#pragma once
// The thread-safe client's private state: the Engine on a private loop run by one I/O thread.
// Calls from any thread are queued under a mutex and handed to the loop with one uv_async_t, so
// all threads' commands share the engine's one pipelined connection per node.

#include <uv.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "redlock/client.hpp"
#include "redlock/engine.hpp"

namespace redlock {

class Client::Impl {
 public:
  explicit Impl(Options options) {
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
    thread_ = std::thread([this] { uv_run(&loop_, UV_RUN_DEFAULT); });
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
    for (auto& fn : queue_) fn();
    queue_.clear();
    engine_.reset();  // fully closed: frees at once
    uv_loop_close(&loop_);
  }

  // Runs `fn` on the I/O thread. False when the client is shutting down (fn is dropped).
  bool post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (stopping_) return false;
      queue_.push_back(std::move(fn));
    }
    uv_async_send(&async_);
    return true;
  }

  bool on_io_thread() const { return std::this_thread::get_id() == io_thread_; }

  // Reentrant holds by (owner, resources). Weak: a hold that ended is simply gone.
  std::mutex holds_mu_;
  std::map<std::string, std::weak_ptr<Guard::State>> reentrant_;

  Engine& engine() { return *engine_; }

 private:
  static void on_async(uv_async_t* h) {
    auto* self = static_cast<Impl*>(h->data);
    std::vector<std::function<void()>> batch;
    {
      std::lock_guard<std::mutex> g(self->mu_);
      batch.swap(self->queue_);
    }
    for (auto& fn : batch) fn();
  }

  uv_loop_t loop_;
  uv_async_t async_;
  std::unique_ptr<Engine> engine_;
  std::thread thread_;
  std::thread::id io_thread_;
  std::mutex mu_;
  std::vector<std::function<void()>> queue_;
  bool stopping_ = false;

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
