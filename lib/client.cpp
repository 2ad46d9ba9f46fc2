// The thread-safe client: the Engine on a private loop run by one I/O thread. Calls from any
// thread are queued under a mutex and handed to the loop with one uv_async_t, so all threads'
// commands share the engine's one pipelined connection per node.

#include "redlock/client.hpp"

#include <uv.h>

#include <future>
#include <map>
#include <mutex>
#include <sstream>
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

Client::Client(Options options) : impl_(std::make_shared<Impl>(std::move(options))) {}

Client::~Client() {
  // Guards may still hold a weak reference: the I/O thread stops here, whoever else holds on.
  impl_.reset();
}

void Client::acquire_async(std::vector<std::string> resources, AcquireOptions options, Engine::AcquireCallback cb) {
  if (impl_->on_io_thread()) {  // chained from a callback: no queue, no wake-up needed
    impl_->engine().acquire(std::move(resources), options, std::move(cb));
    return;
  }
  auto shared_cb = std::make_shared<Engine::AcquireCallback>(std::move(cb));
  if (!impl_->post([impl = impl_.get(), resources = std::move(resources), options, shared_cb]() mutable {
        impl->engine().acquire(std::move(resources), options, std::move(*shared_cb));
      })) {
    (*shared_cb)(shut_down<AcquireResult>());
  }
}

void Client::extend_async(Lock lock, Millis ttl, Engine::ExtendCallback cb) {
  if (impl_->on_io_thread()) {
    impl_->engine().extend(lock, ttl, std::move(cb));
    return;
  }
  auto shared_cb = std::make_shared<Engine::ExtendCallback>(std::move(cb));
  if (!impl_->post([impl = impl_.get(), lock = std::move(lock), ttl, shared_cb]() mutable {
        impl->engine().extend(lock, ttl, std::move(*shared_cb));
      })) {
    (*shared_cb)(shut_down<ExtendResult>());
  }
}

void Client::release_async(Lock lock, Engine::ReleaseCallback cb) {
  if (impl_->on_io_thread()) {
    impl_->engine().release(lock, std::move(cb));
    return;
  }
  auto shared_cb = std::make_shared<Engine::ReleaseCallback>(std::move(cb));
  if (!impl_->post([impl = impl_.get(), lock = std::move(lock), shared_cb]() mutable {
        impl->engine().release(lock, std::move(*shared_cb));
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
  if (!impl_->post([impl = impl_.get(), r = std::string(resource), &p]() mutable {
        impl->engine().status(std::move(r), [&p](StatusResult s) { p.set_value(std::move(s)); });
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

// ---------------------------------------------------------------------------------------------
// Guard

class Guard::State {
 public:
  State(std::weak_ptr<Client::Impl> client, Lock lock, HoldOptions options, std::string key)
      : client_(std::move(client)), lock_(std::move(lock)), options_(std::move(options)), key_(std::move(key)) {}

  bool owns() const {
    std::lock_guard<std::mutex> g(mu_);
    return !released_ && !loss_ && !lock_.empty() && lock_.remaining() > Millis{0};
  }
  Millis remaining() const {
    std::lock_guard<std::mutex> g(mu_);
    return released_ || loss_ ? Millis{0} : lock_.remaining();
  }
  Lock lock() const {
    std::lock_guard<std::mutex> g(mu_);
    return lock_;
  }
  std::optional<LossInfo> lost() const {
    std::lock_guard<std::mutex> g(mu_);
    return loss_;
  }
  int extensions() const {
    std::lock_guard<std::mutex> g(mu_);
    return extensions_;
  }
  int holders() const {
    std::lock_guard<std::mutex> g(mu_);
    return holders_;
  }
  // Reentrancy: why a request with `o` cannot share this hold, or nullopt. Handing the held lock
  // to a request for something else would give it less than it asked for: a read lock to a
  // writer, a lock without a fence to a fenced request, an unextended lock to one that counts on
  // auto-extension. (Upgrades are not offered: refusing beats waiting on our own reader.)
  std::optional<std::string> mismatch(const LockOptions& o) const {
    std::lock_guard<std::mutex> g(mu_);
    if (released_ || loss_ || lock_.remaining() <= Millis{0}) return std::nullopt;  // not shared: taken anew
    static constexpr const char* mode_names[] = {"an exclusive", "a read", "a write"};
    if (o.acquire.mode != lock_.mode()) {
      return std::string("held by this owner as ") + mode_names[static_cast<int>(lock_.mode())] +
             " lock; a reentrant request for " + mode_names[static_cast<int>(o.acquire.mode)] +
             " lock cannot share it";
    }
    if (o.acquire.fence && !lock_.fence()) {
      return "held by this owner without a fence; a reentrant fenced request cannot share it";
    }
    if (o.hold.auto_extend && !options_.auto_extend) {
      return "held by this owner without auto-extension; a reentrant request for it cannot share it";
    }
    return std::nullopt;
  }

  // Reentrancy: one more holder, if still held.
  bool add_holder() {
    std::lock_guard<std::mutex> g(mu_);
    if (released_ || loss_ || lock_.remaining() <= Millis{0}) return false;
    ++holders_;
    return true;
  }

  // Starts the watchdog on the I/O thread (the hold id lives there only).
  void start_watchdog(const std::shared_ptr<State>& self) {
    auto client = client_.lock();
    if (!client) return;
    std::weak_ptr<State> weak = self;
    client->post([client_raw = client.get(), weak] {
      auto st = weak.lock();
      if (!st) return;
      st->hold_id_ = client_raw->engine().hold(
          st->lock(), st->options_,
          [weak](const Lock& l) {
            if (auto s = weak.lock()) {
              std::lock_guard<std::mutex> g(s->mu_);
              s->lock_ = l;
              ++s->extensions_;
            }
          },
          [weak](const LossInfo& info) {
            auto s = weak.lock();
            if (!s) return;
            std::function<void(const LossInfo&)> cb;
            {
              std::lock_guard<std::mutex> g(s->mu_);
              if (s->released_) return;
              s->loss_ = info;
              cb = s->options_.on_lost;
            }
            if (cb) cb(info);
          });
    });
  }

  // One holder lets go; the last one stops the watchdog and releases on the nodes.
  ReleaseResult release_one(const std::shared_ptr<State>& self) noexcept {
    try {
      {
        std::lock_guard<std::mutex> g(mu_);
        if (released_) return {};
        if (--holders_ > 0) return {};
        released_ = true;
      }
      auto client = client_.lock();
      if (!client) {
        ReleaseResult r;
        r.error = make_error_code(Errc::shutdown);
        r.message = "the Client was destroyed first; the lock expires after its ttl";
        return r;
      }
      if (!key_.empty()) {
        std::lock_guard<std::mutex> g(client->holds_mu_);
        auto it = client->reentrant_.find(key_);
        if (it != client->reentrant_.end() && it->second.lock() == self) client->reentrant_.erase(it);
      }
      Lock snapshot = lock();
      if (client->on_io_thread()) {
        // From a callback: cannot wait for the answer, but the release still goes out.
        client->engine().stop_hold(hold_id_);
        client->engine().release(snapshot, [](ReleaseResult) {});
        return {};
      }
      auto p = std::make_shared<std::promise<ReleaseResult>>();
      auto f = p->get_future();
      Client::Impl* raw = client.get();
      if (!client->post([raw, self, snapshot, p] {
            raw->engine().stop_hold(self->hold_id_);
            raw->engine().release(snapshot, [p](ReleaseResult r) { p->set_value(std::move(r)); });
          })) {
        ReleaseResult r;
        r.error = make_error_code(Errc::shutdown);
        r.message = "client is shutting down";
        return r;
      }
      return f.get();
    } catch (...) {
      ReleaseResult r;
      r.error = make_error_code(Errc::shutdown);
      r.message = "release failed inside the client";
      return r;
    }
  }

 private:
  std::weak_ptr<Client::Impl> client_;
  mutable std::mutex mu_;
  Lock lock_;
  HoldOptions options_;
  std::string key_;  // reentrancy key, empty when not reentrant
  std::optional<LossInfo> loss_;
  int extensions_ = 0;
  int holders_ = 1;
  bool released_ = false;
  Engine::HoldId hold_id_ = 0;  // I/O thread only
};

Guard::Guard() noexcept = default;
Guard::Guard(std::shared_ptr<State> state) noexcept : state_(std::move(state)) {}
Guard::Guard(Guard&&) noexcept = default;
Guard& Guard::operator=(Guard&& other) noexcept {
  if (this != &other) {
    release();
    state_ = std::move(other.state_);
  }
  return *this;
}
Guard::~Guard() { release(); }

bool Guard::owns() const noexcept { return state_ && state_->owns(); }
Millis Guard::remaining() const noexcept { return state_ ? state_->remaining() : Millis{0}; }
Lock Guard::lock() const { return state_ ? state_->lock() : Lock{}; }
std::optional<LossInfo> Guard::lost() const { return state_ ? state_->lost() : std::nullopt; }
int Guard::extensions() const noexcept { return state_ ? state_->extensions() : 0; }
int Guard::hold_count() const noexcept { return state_ ? state_->holders() : 0; }

ReleaseResult Guard::release() noexcept {
  if (!state_) return {};
  auto st = std::move(state_);
  return st->release_one(st);
}

namespace {

std::string owner_key(const HoldOptions& o, const std::vector<std::string>& resources) {
  std::string key;
  if (o.owner) {
    key = "o:" + *o.owner;
  } else {
    std::ostringstream id;
    id << std::this_thread::get_id();
    key = "t:" + id.str();
  }
  // Length-prefixed, so no choice of bytes in names can make two different lists collide.
  for (const auto& r : resources) key += "|" + std::to_string(r.size()) + ":" + r;
  return key;
}

}  // namespace

std::pair<Guard, AcquireResult> Client::try_lock(std::vector<std::string> resources, const LockOptions& options) {
  if (options.hold.auto_extend && options.hold.extend_every &&
      (*options.hold.extend_every <= Millis{0} || *options.hold.extend_every >= options.acquire.ttl)) {
    AcquireResult r;
    r.error = make_error_code(Errc::invalid_argument);
    r.message = "extend_every must be positive and below the ttl";
    return {Guard(), std::move(r)};
  }
  std::string key;
  if (options.hold.reentrant) {
    key = owner_key(options.hold, resources);
    std::lock_guard<std::mutex> g(impl_->holds_mu_);
    auto it = impl_->reentrant_.find(key);
    if (it != impl_->reentrant_.end()) {
      auto st = it->second.lock();
      if (auto why = st ? st->mismatch(options) : std::nullopt) {
        AcquireResult r;
        r.error = make_error_code(Errc::invalid_argument);
        r.message = "resource '" + resources.front() + "' is " + *why;
        return {Guard(), std::move(r)};
      }
      if (st && st->add_holder()) {
        AcquireResult r;
        r.lock = st->lock();
        r.nodes = r.lock.nodes();
        return {Guard(st), std::move(r)};  // no network I/O
      }
      impl_->reentrant_.erase(it);
    }
  }
  AcquireResult r = try_acquire(std::move(resources), options.acquire);
  if (!r) return {Guard(), std::move(r)};
  auto st = std::make_shared<Guard::State>(impl_, r.lock, options.hold, key);
  if (!key.empty()) {
    std::lock_guard<std::mutex> g(impl_->holds_mu_);
    impl_->reentrant_[key] = st;
  }
  if (options.hold.auto_extend) st->start_watchdog(st);
  return {Guard(st), std::move(r)};
}

Guard Client::lock(std::vector<std::string> resources, const LockOptions& options) {
  auto [guard, r] = try_lock(std::move(resources), options);
  if (r.error) throw Error(r.error, r.message, std::move(r.nodes));
  return std::move(guard);
}

Guard Client::lock(std::vector<std::string> resources, const LockOptions& options, std::error_code& ec) {
  auto [guard, r] = try_lock(std::move(resources), options);
  ec = r.error;
  return std::move(guard);
}

Metrics Client::metrics() const {
  if (impl_->on_io_thread()) return impl_->engine().metrics();
  std::promise<Metrics> p;
  auto f = p.get_future();
  if (!impl_->post([impl = impl_.get(), &p] { p.set_value(impl->engine().metrics()); })) return {};
  return f.get();
}

int Client::quorum() const noexcept { return impl_->engine().quorum(); }

const Options& Client::options() const noexcept { return impl_->engine().options(); }

}  // namespace redlock
