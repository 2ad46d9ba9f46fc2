// The C API's locks: acquire, extend, release and the lock accessors (redlock.h).

#include "capi/handles.hpp"

using namespace redlock::capi;

namespace {

int acquire_impl(redlock_client* client_h, std::vector<std::string> resources,
                 const AcquireOptionsObj& ao, redlock_lock** out, redlock_result* detail) {
  if (out) *out = nullptr;
  std::shared_ptr<ResultObj> res;
  if (!resolve_detail(detail, res)) return REDLOCK_E_INVALID;
  if (!out) return finish(res.get(), REDLOCK_E_INVALID, "out is NULL");
  if (in_loss_callback) return finish(res.get(), REDLOCK_E_INVALID, from_callback);
  auto client = find<redlock::Client>(client_h);
  if (!client) return finish(res.get(), REDLOCK_E_INVALID, bad_client);

  redlock::LockOptions lo;
  lo.acquire = ao.acquire;
  lo.hold = hold_options(ao);
  auto [guard, r] = client->try_lock(std::move(resources), lo);
  const int code = code_of(r.error);
  if (code != REDLOCK_OK)
    return finish(res.get(), code, std::move(r.message), std::move(r.nodes), r.attempts);

  auto obj = std::make_shared<LockObj>();
  obj->client = client;
  obj->auto_extend = ao.auto_extend;
  obj->resources = r.lock.resources();
  obj->token = r.lock.token();
  obj->fence = r.lock.fence();
  obj->current = r.lock;
  obj->guard = std::move(guard);  // from here on, dropping `obj` releases the lock
  *out = publish<LockObj, redlock_lock>(obj);
  return finish(res.get(), REDLOCK_OK, std::move(r.message), std::move(r.nodes), r.attempts);
}

}  // namespace

extern "C" {

// ---- locks ----------------------------------------------------------------------------------

int redlock_acquire(redlock_client* client, const char* resource, size_t len, uint64_t ttl_ms,
                    redlock_lock** out, redlock_result* detail) {
  return guarded([&] {
    if (out) *out = nullptr;
    std::shared_ptr<ResultObj> res;
    if (!resolve_detail(detail, res)) return REDLOCK_E_INVALID;
    if (!resource && len) return finish(res.get(), REDLOCK_E_INVALID, "resource is NULL");
    AcquireOptionsObj ao;
    if (!to_millis(ttl_ms, ao.acquire.ttl))
      return finish(res.get(), REDLOCK_E_INVALID, "ttl out of range");
    std::vector<std::string> resources;
    resources.emplace_back(resource ? resource : "", len);
    return acquire_impl(client, std::move(resources), ao, out, detail);
  });
}

int redlock_acquire_ex(redlock_client* client, const char* const* resources, const size_t* lens,
                       size_t count, const redlock_acquire_options* options, redlock_lock** out,
                       redlock_result* detail) {
  return guarded([&] {
    if (out) *out = nullptr;
    std::shared_ptr<ResultObj> res;
    if (!resolve_detail(detail, res)) return REDLOCK_E_INVALID;
    if (count && (!resources || !lens))
      return finish(res.get(), REDLOCK_E_INVALID, "resources or lens is NULL");
    AcquireOptionsObj ao;
    if (options) {
      auto o = find<AcquireOptionsObj>(options);
      if (!o)
        return finish(res.get(), REDLOCK_E_INVALID,
                      "invalid acquire options handle (freed, or not acquire options)");
      ao = *o;
    }
    std::vector<std::string> names;
    names.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      if (!resources[i] && lens[i]) {
        return finish(res.get(), REDLOCK_E_INVALID, "resource " + std::to_string(i) + " is NULL");
      }
      names.emplace_back(resources[i] ? resources[i] : "", lens[i]);
    }
    return acquire_impl(client, std::move(names), ao, out, detail);
  });
}

int redlock_extend(redlock_lock* lock, uint64_t ttl_ms, redlock_result* detail) {
  return guarded([&] {
    std::shared_ptr<ResultObj> res;
    if (!resolve_detail(detail, res)) return REDLOCK_E_INVALID;
    if (in_loss_callback) return finish(res.get(), REDLOCK_E_INVALID, from_callback);
    auto l = find<LockObj>(lock);
    if (!l) return finish(res.get(), REDLOCK_E_INVALID, bad_lock);
    Millis ttl;
    if (!to_millis(ttl_ms, ttl)) return finish(res.get(), REDLOCK_E_INVALID, "ttl out of range");
    redlock::Lock snapshot;
    {
      std::lock_guard<std::mutex> g(l->mu);
      if (l->auto_extend) {
        return finish(res.get(), REDLOCK_E_INVALID,
                      "the lock is extended automatically; its watchdog extends it");
      }
      if (l->released) return finish(res.get(), REDLOCK_E_NOT_HELD, "the lock was released");
      snapshot = l->current;
    }
    auto client = l->client.lock();
    if (!client) return finish(res.get(), REDLOCK_E_SHUTDOWN, "the client was freed");
    redlock::ExtendResult r = client->try_extend(snapshot, ttl);
    client.reset();
    const int code = code_of(r.error);
    {
      std::lock_guard<std::mutex> g(l->mu);
      if (code == REDLOCK_OK && !l->released) {
        l->current = r.lock;
        ++l->extensions;
      } else if (code == REDLOCK_E_NOT_HELD && !l->released) {
        l->loss = LossRecord{code, r.message, r.nodes};
      }
    }
    return finish(res.get(), code, std::move(r.message), std::move(r.nodes));
  });
}

int redlock_release(redlock_lock* lock, redlock_result* detail) {
  return guarded([&] {
    std::shared_ptr<ResultObj> res;
    if (!resolve_detail(detail, res)) return REDLOCK_E_INVALID;
    auto l = find<LockObj>(lock);
    if (!l) return finish(res.get(), REDLOCK_E_INVALID, bad_lock);
    redlock::Guard g;
    {
      std::lock_guard<std::mutex> lk(l->mu);
      if (l->released) return finish(res.get(), REDLOCK_OK, "already released; nothing sent");
      l->refresh();
      l->released = true;
      g = std::move(l->guard);
    }
    // Outside `mu`: this waits for the I/O thread (see LockObj::mu).
    redlock::ReleaseResult r = g.release();
    return finish(res.get(), code_of(r.error), std::move(r.message), std::move(r.nodes));
  });
}

int redlock_lock_free(redlock_lock* lock) {
  return guarded([&] {
    auto l = registry().remove<LockObj>(lock);
    if (!l) return REDLOCK_E_INVALID;
    redlock::Guard g;
    {
      std::lock_guard<std::mutex> lk(l->mu);
      l->released = true;
      g = std::move(l->guard);
    }
    // Release here, not whenever the last reference goes (an accessor on another thread may
    // hold one): after this returns the loss callback must not run any more.
    (void)g.release();
    return REDLOCK_OK;
  });
}

int redlock_lock_check(const redlock_lock* lock, redlock_result* detail) {
  return guarded([&] {
    std::shared_ptr<ResultObj> res;
    if (!resolve_detail(detail, res)) return REDLOCK_E_INVALID;
    auto l = find<LockObj>(lock);
    if (!l) return finish(res.get(), REDLOCK_E_INVALID, bad_lock);
    std::lock_guard<std::mutex> g(l->mu);
    if (l->released) return finish(res.get(), REDLOCK_E_NOT_HELD, "the lock was released");
    if (l->auto_extend) {
      if (auto loss = l->guard.lost()) {
        return finish(res.get(), code_of(loss->reason), loss->message, loss->nodes);
      }
      if (!l->guard.owns())
        return finish(res.get(), REDLOCK_E_EXPIRED, "the local deadline passed");
      return finish(res.get(), REDLOCK_OK);
    }
    if (l->loss) return finish(res.get(), l->loss->code, l->loss->message, l->loss->nodes);
    if (l->current.remaining() <= Millis{0})
      return finish(res.get(), REDLOCK_E_EXPIRED, "the local deadline passed");
    return finish(res.get(), REDLOCK_OK);
  });
}

int redlock_lock_token(const redlock_lock* lock, const char** data, size_t* len) {
  return guarded([&] {
    auto l = find<LockObj>(lock);
    if (!l || !data || !len) return REDLOCK_E_INVALID;
    *data = l->token.data();
    *len = l->token.size();
    return REDLOCK_OK;
  });
}

int redlock_lock_resource_count(const redlock_lock* lock, size_t* out) {
  return guarded([&] {
    auto l = find<LockObj>(lock);
    if (!l || !out) return REDLOCK_E_INVALID;
    *out = l->resources.size();
    return REDLOCK_OK;
  });
}

int redlock_lock_resource(const redlock_lock* lock, size_t i, const char** data, size_t* len) {
  return guarded([&] {
    auto l = find<LockObj>(lock);
    if (!l || !data || !len || i >= l->resources.size()) return REDLOCK_E_INVALID;
    *data = l->resources[i].data();
    *len = l->resources[i].size();
    return REDLOCK_OK;
  });
}

int redlock_lock_fence(const redlock_lock* lock, uint64_t* out) {
  return guarded([&] {
    auto l = find<LockObj>(lock);
    if (!l || !out || !l->fence) return REDLOCK_E_INVALID;
    *out = *l->fence;
    return REDLOCK_OK;
  });
}

int redlock_lock_validity_ms(const redlock_lock* lock, uint64_t* out) {
  return guarded([&] {
    auto l = find<LockObj>(lock);
    if (!l || !out) return REDLOCK_E_INVALID;
    std::lock_guard<std::mutex> g(l->mu);
    l->refresh();
    *out = static_cast<uint64_t>(std::max<Millis::rep>(0, l->current.validity().count()));
    return REDLOCK_OK;
  });
}

int redlock_lock_remaining_ms(const redlock_lock* lock, uint64_t* out) {
  return guarded([&] {
    auto l = find<LockObj>(lock);
    if (!l || !out) return REDLOCK_E_INVALID;
    std::lock_guard<std::mutex> g(l->mu);
    Millis left{0};
    if (l->auto_extend) {
      left = l->guard.remaining();  // 0 once released (empty Guard) or lost
    } else if (!l->released && !l->loss) {
      left = l->current.remaining();
    }
    *out = static_cast<uint64_t>(std::max<Millis::rep>(0, left.count()));
    return REDLOCK_OK;
  });
}

int redlock_lock_votes(const redlock_lock* lock, int* out) {
  return guarded([&] {
    auto l = find<LockObj>(lock);
    if (!l || !out) return REDLOCK_E_INVALID;
    std::lock_guard<std::mutex> g(l->mu);
    l->refresh();
    *out = l->current.votes();
    return REDLOCK_OK;
  });
}

int redlock_lock_extensions(const redlock_lock* lock, int* out) {
  return guarded([&] {
    auto l = find<LockObj>(lock);
    if (!l || !out) return REDLOCK_E_INVALID;
    std::lock_guard<std::mutex> g(l->mu);
    l->refresh();
    *out = l->extensions;
    return REDLOCK_OK;
  });
}

}  // extern "C"
