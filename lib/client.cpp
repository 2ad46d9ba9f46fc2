// The thread-safe client: the Engine on a private loop run by one I/O thread. Calls from any
// thread are queued under a mutex and handed to the loop with one uv_async_t, so all threads'
// commands share the engine's one pipelined connection per node.

#include "redlock/client.hpp"

#include <uv.h>

#include <future>
#include <mutex>
#include <thread>

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
    thread_ = std::thread([this] {
      uv_run(&loop_, UV_RUN_DEFAULT);
    });
    io_thread_ = thread_.get_id();
  }

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
};

namespace {

template <class R>
R blocked_from_io_thread() {
  R r;
  r.error = make_error_code(Errc::invalid_argument);
  r.message = "blocking redlock::Client call made on the client's own I/O thread (from a callback)";
  return r;
}

template <class R>
R shut_down() {
  R r;
  r.error = make_error_code(Errc::shutdown);
  r.message = "client is shutting down";
  return r;
}

}  // namespace

Client::Client(Options options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Client::~Client() = default;

void Client::acquire_async(std::vector<std::string> resources, AcquireOptions options, Engine::AcquireCallback cb) {
  auto shared_cb = std::make_shared<Engine::AcquireCallback>(std::move(cb));
  if (!impl_->post([this, resources = std::move(resources), options, shared_cb]() mutable {
        impl_->engine().acquire(std::move(resources), options, std::move(*shared_cb));
      })) {
    (*shared_cb)(shut_down<AcquireResult>());
  }
}

void Client::extend_async(Lock lock, Millis ttl, Engine::ExtendCallback cb) {
  auto shared_cb = std::make_shared<Engine::ExtendCallback>(std::move(cb));
  if (!impl_->post([this, lock = std::move(lock), ttl, shared_cb]() mutable {
        impl_->engine().extend(lock, ttl, std::move(*shared_cb));
      })) {
    (*shared_cb)(shut_down<ExtendResult>());
  }
}

void Client::release_async(Lock lock, Engine::ReleaseCallback cb) {
  auto shared_cb = std::make_shared<Engine::ReleaseCallback>(std::move(cb));
  if (!impl_->post([this, lock = std::move(lock), shared_cb]() mutable {
        impl_->engine().release(lock, std::move(*shared_cb));
      })) {
    (*shared_cb)(shut_down<ReleaseResult>());
  }
}

AcquireResult Client::try_acquire(std::vector<std::string> resources, const AcquireOptions& options) {
  if (impl_->on_io_thread()) return blocked_from_io_thread<AcquireResult>();
  std::promise<AcquireResult> p;
  auto f = p.get_future();
  acquire_async(std::move(resources), options, [&p](AcquireResult r) { p.set_value(std::move(r)); });
  return f.get();
}

ExtendResult Client::try_extend(const Lock& lock, Millis ttl) {
  if (impl_->on_io_thread()) return blocked_from_io_thread<ExtendResult>();
  std::promise<ExtendResult> p;
  auto f = p.get_future();
  extend_async(lock, ttl, [&p](ExtendResult r) { p.set_value(std::move(r)); });
  return f.get();
}

ReleaseResult Client::try_release(const Lock& lock) {
  if (impl_->on_io_thread()) return blocked_from_io_thread<ReleaseResult>();
  std::promise<ReleaseResult> p;
  auto f = p.get_future();
  release_async(lock, [&p](ReleaseResult r) { p.set_value(std::move(r)); });
  return f.get();
}

StatusResult Client::status(std::string_view resource) {
  if (impl_->on_io_thread()) return {};
  std::promise<StatusResult> p;
  auto f = p.get_future();
  if (!impl_->post([this, r = std::string(resource), &p]() mutable {
        impl_->engine().status(std::move(r), [&p](StatusResult s) { p.set_value(std::move(s)); });
      })) {
    return {};
  }
  return f.get();
}

Lock Client::acquire(std::string_view resource, const AcquireOptions& options) {
  auto r = try_acquire({std::string(resource)}, options);
  if (r.error) throw Error(r.error, r.message, std::move(r.nodes));
  return std::move(r.lock);
}

Lock Client::acquire(std::string_view resource, const AcquireOptions& options, std::error_code& ec) {
  auto r = try_acquire({std::string(resource)}, options);
  ec = r.error;
  return r.error ? Lock{} : std::move(r.lock);
}

void Client::extend(Lock& lock, Millis ttl) {
  auto r = try_extend(lock, ttl);
  if (r.error) throw Error(r.error, r.message, std::move(r.nodes));
  lock = std::move(r.lock);
}

void Client::extend(Lock& lock, Millis ttl, std::error_code& ec) {
  auto r = try_extend(lock, ttl);
  ec = r.error;
  if (!r.error) lock = std::move(r.lock);
}

void Client::release(const Lock& lock) {
  auto r = try_release(lock);
  if (r.error) throw Error(r.error, r.message, std::move(r.nodes));
}

void Client::release(const Lock& lock, std::error_code& ec) noexcept {
  try {
    ec = try_release(lock).error;
  } catch (...) {
    ec = make_error_code(Errc::shutdown);  // only std::bad_alloc / std::system_error from threads
  }
}

int Client::quorum() const noexcept { return impl_->engine().quorum(); }

const Options& Client::options() const noexcept { return impl_->engine().options(); }

}  // namespace redlock
