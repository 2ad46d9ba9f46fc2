// The thread-safe client (client.hpp): blocking and asynchronous calls from any thread, handed
// to the engine on the client's I/O thread (client_impl.hpp).

#include <future>
#include <sstream>
#include <thread>

#include "client_impl.hpp"
#include "guard_state.hpp"

namespace redlock {

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

// A blocking call: the operation starts with the caller's own arguments, by reference. The
// caller waits for the callback, so they outlive the start. When the loop is idle and nothing on
// it runs the user's code, the caller runs the loop itself (client_impl.hpp: no hand-off to the
// I/O thread and back); else, or when it must hand the loop back, it posts or waits like any
// caller: one pointer (a std::function within its small buffer: no allocation), with no copy of
// the Lock, no shared callback. Shutting down: the result is Errc::shutdown, as from the engine.
template <class R, class Impl, class Start>
R run_blocking(Impl& impl, const Start& start) {
  struct Call {
    const Start& start;
    std::promise<R> p;
    bool delivered = false;  // set on the thread running the loop, read by a borrower only
  } call{start, {}};
  auto f = call.p.get_future();
  auto deliver = [c = &call](R r) {
    c->delivered = true;
    c->p.set_value(std::move(r));
  };
  if (impl.try_borrow()) {
    call.start(deliver);
    while (!call.delivered && impl.run_borrowed()) {
    }
    impl.end_borrow();
  } else if (!impl.post([c = &call, deliver] { c->start(deliver); }, true)) {
    return shut_down<R>();
  }
  R r = f.get();  // delivered, or on its way from the I/O thread
  impl.wait_for_posted_messages();
  return r;
}

}  // namespace

// Why a reaper thread, and not a detached I/O thread that frees itself: the loop, the engine and
// the call queue live inside the Impl, and work already queued on the loop points at it, so the
// Impl must outlive the loop either way. The reaper runs the one destruction path there is
// (close the engine, join the I/O thread, fail what is still queued, free), in the same order,
// from a thread that can join: it only moves which thread runs it, in a case that is rare (the
// last reference dropped inside a callback) and cheap (one short-lived thread).
void Client::Impl::destroy(Impl* impl) noexcept {
  if (!impl->on_io_thread()) {
    delete impl;
    return;
  }
  // On the I/O thread: a Guard released (or a callback that owned the Client destroyed) inside a
  // callback while the Client went away on another thread. ~Impl would join this very thread
  // (std::terminate). The reaper waits for this callback to return and the loop to close.
  try {
    std::thread([impl] { delete impl; }).detach();
  } catch (...) {
    impl->abandon();
  }
}

Client::Client(Options options) : impl_(new Impl(std::move(options)), &Impl::destroy) {}

Client::~Client() {
  // Guards may still hold a weak reference: the I/O thread stops here, whoever else holds on
  // (unless the last reference is then dropped on the I/O thread: Impl::destroy).
  impl_.reset();
}

void Client::acquire_async(std::vector<std::string> resources, AcquireOptions options,
                           Engine::AcquireCallback cb) {
  if (impl_->on_io_thread()) {  // chained from a callback: no queue, no wake-up needed
    impl_->engine().acquire(std::move(resources), options, std::move(cb));
    return;
  }
  auto shared_cb = std::make_shared<Engine::AcquireCallback>(std::move(cb));
  if (!impl_->post(
          [impl = impl_.get(), resources = std::move(resources), options, shared_cb]() mutable {
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

AcquireResult Client::try_acquire(std::vector<std::string> resources,
                                  const AcquireOptions& options) {
  if (impl_->on_io_thread()) return blocked_from_io_thread<AcquireResult>();
  return run_blocking<AcquireResult>(*impl_, [&](Engine::AcquireCallback cb) {
    impl_->engine().acquire(std::move(resources), options, std::move(cb));
  });
}

ExtendResult Client::try_extend(const Lock& lock, Millis ttl) {
  if (impl_->on_io_thread()) return blocked_from_io_thread<ExtendResult>();
  return run_blocking<ExtendResult>(
      *impl_, [&](Engine::ExtendCallback cb) { impl_->engine().extend(lock, ttl, std::move(cb)); });
}

ReleaseResult Client::try_release(const Lock& lock) {
  if (impl_->on_io_thread()) return blocked_from_io_thread<ReleaseResult>();
  return run_blocking<ReleaseResult>(
      *impl_, [&](Engine::ReleaseCallback cb) { impl_->engine().release(lock, std::move(cb)); });
}

StatusResult Client::status(std::string_view resource) {
  if (impl_->on_io_thread()) return {};
  std::promise<StatusResult> p;
  auto f = p.get_future();
  if (!impl_->post(
          [impl = impl_.get(), r = std::string(resource), &p]() mutable {
            impl->engine().status(std::move(r),
                                  [&p](StatusResult s) { p.set_value(std::move(s)); });
          },
          true)) {
    return {};
  }
  return f.get();
}

Lock Client::acquire(std::vector<std::string> resources, const AcquireOptions& options) {
  auto r = try_acquire(std::move(resources), options);
  if (r.error) throw Error(r.error, r.message, std::move(r.nodes));
  return std::move(r.lock);
}

void Client::extend(Lock& lock, Millis ttl) {
  auto r = try_extend(lock, ttl);
  if (r.error) throw Error(r.error, r.message, std::move(r.nodes));
  lock = std::move(r.lock);
}

void Client::release(const Lock& lock) {
  auto r = try_release(lock);
  if (r.error) throw Error(r.error, r.message, std::move(r.nodes));
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

std::pair<Guard, AcquireResult> Client::try_lock(std::vector<std::string> resources,
                                                 const LockOptions& options) {
  if (auto why =
          options.hold.auto_extend ? check_hold(options.acquire.ttl, options.hold) : std::nullopt) {
    AcquireResult r;
    r.error = make_error_code(Errc::invalid_argument);
    r.message = std::move(*why);
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
        return {Guard(st), std::move(r)};  // no network I/O: no per-node record
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
  if (options.hold.auto_extend) st->start_watchdog(st, options.hold);
  return {Guard(st), std::move(r)};
}

Guard Client::lock(std::vector<std::string> resources, const LockOptions& options) {
  auto [guard, r] = try_lock(std::move(resources), options);
  if (r.error) throw Error(r.error, r.message, std::move(r.nodes));
  return std::move(guard);
}

Metrics Client::metrics() const {
  if (impl_->on_io_thread()) return impl_->engine().metrics();
  std::promise<Metrics> p;
  auto f = p.get_future();
  if (!impl_->post([impl = impl_.get(), &p] { p.set_value(impl->engine().metrics()); }, true))
    return {};
  return f.get();
}

int Client::quorum() const noexcept { return impl_->engine().quorum(); }

const Options& Client::options() const noexcept { return impl_->engine().options(); }

}  // namespace redlock
