// The C API (include/redlock/redlock.h) over redlock::Client and redlock::Guard.
//
// No engine logic lives here: every lock is a Guard from Client::try_lock (so freeing a handle
// releases, and auto-extension is the Guard's watchdog), manual extension is Client::try_extend.
// What this file adds is what C callers need and C++ callers get from the type system:
//   - handle checking: a handle is an id in a registry of live objects, never a pointer into
//     memory, so NULL, freed, forged or wrong-kind handles are refused instead of dereferenced;
//   - no exception ever crosses into C;
//   - length-delimited strings in, stable NUL-terminated strings out.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "redlock/client.hpp"
#include "redlock/error.hpp"
#include "redlock/guard.hpp"
#include "redlock/lock.hpp"
#include "redlock/options.hpp"
#include "redlock/redlock.h"
#include "redlock/redlock.hpp"

namespace {

using redlock::Millis;

// ---------------------------------------------------------------------------------------------
// Objects behind the handles

struct ResultObj {
  int code = REDLOCK_OK;
  std::string message;
  int attempts = 0;
  std::vector<redlock::NodeOutcome> nodes;
};

struct AcquireOptionsObj {
  redlock::AcquireOptions acquire;
  bool auto_extend = false;
  std::optional<Millis> extend_every;
  redlock_loss_fn on_lost = nullptr;
  void* user = nullptr;
};

struct LossRecord {
  int code;
  std::string message;
  std::vector<redlock::NodeOutcome> nodes;
};

struct LockObj {
  // Weak: a lock handle must not keep the client's I/O thread alive after redlock_client_free.
  std::weak_ptr<redlock::Client> client;
  bool auto_extend = false;
  // Immutable after creation, so the pointers the accessors hand out stay valid.
  std::vector<std::string> resources;
  std::string token;
  std::optional<std::uint64_t> fence;

  // `mu` guards what follows. It is never held across a call that waits for the I/O thread:
  // the loss callback runs there and may call the accessors, which take `mu`.
  mutable std::mutex mu;
  redlock::Guard guard;   // empty once released
  redlock::Lock current;  // last known state (manual: last acquire/extend)
  int extensions = 0;     // manual extensions (auto: the Guard counts)
  bool released = false;
  std::optional<LossRecord> loss;  // manual locks: an extend found the token gone

  // Auto-extended locks change on the I/O thread: refresh the snapshot from the Guard.
  void refresh() {
    if (!auto_extend) return;
    redlock::Lock l = guard.lock();
    if (!l.empty()) {
      current = std::move(l);
      extensions = guard.extensions();
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Handle registry

enum class Kind : std::uint8_t { client = 1, lock, options, acquire_options, result, cancel };

template <class T>
struct KindOf;
template <>
struct KindOf<redlock::Client> {
  static constexpr Kind value = Kind::client;
};
template <>
struct KindOf<LockObj> {
  static constexpr Kind value = Kind::lock;
};
template <>
struct KindOf<redlock::Options> {
  static constexpr Kind value = Kind::options;
};
template <>
struct KindOf<AcquireOptionsObj> {
  static constexpr Kind value = Kind::acquire_options;
};
template <>
struct KindOf<ResultObj> {
  static constexpr Kind value = Kind::result;
};
template <>
struct KindOf<std::stop_source> {
  static constexpr Kind value = Kind::cancel;
};

// Handle values are ids, not addresses: a freed handle can be looked up and refused, never
// dereferenced, and because ids are never reused a stale handle cannot alias a newer object
// (with real pointers, the allocator would hand the same address out again). On 64-bit targets
// the ids are non-canonical addresses, so a caller that dereferences one faults at once instead
// of reading some other object.
constexpr std::uintptr_t id_base =
    sizeof(std::uintptr_t) >= 8 ? static_cast<std::uintptr_t>(0x5ED10C0000000000ULL) : 0x5ED10000u;
constexpr std::uintptr_t id_step = 16;  // keeps handle values aligned like real pointers

class Registry {
 public:
  template <class T>
  std::uintptr_t add(std::shared_ptr<T> obj) {
    std::lock_guard<std::mutex> g(mu_);
    next_ += id_step;
    const std::uintptr_t id = id_base + next_;
    live_.emplace(id, Entry{KindOf<T>::value, std::move(obj)});
    return id;
  }

  template <class T>
  std::shared_ptr<T> find(const void* handle) {
    if (!handle) return nullptr;
    std::lock_guard<std::mutex> g(mu_);
    auto it = live_.find(reinterpret_cast<std::uintptr_t>(handle));
    if (it == live_.end() || it->second.kind != KindOf<T>::value) return nullptr;
    return std::static_pointer_cast<T>(it->second.obj);
  }

  // Takes the object out: later lookups fail. The caller drops the last reference it holds
  // outside the registry's mutex (destroying a Client joins a thread).
  template <class T>
  std::shared_ptr<T> remove(const void* handle) {
    if (!handle) return nullptr;
    std::lock_guard<std::mutex> g(mu_);
    auto it = live_.find(reinterpret_cast<std::uintptr_t>(handle));
    if (it == live_.end() || it->second.kind != KindOf<T>::value) return nullptr;
    auto obj = std::static_pointer_cast<T>(std::move(it->second.obj));
    live_.erase(it);
    return obj;
  }

 private:
  struct Entry {
    Kind kind;
    std::shared_ptr<void> obj;
  };
  std::mutex mu_;
  std::unordered_map<std::uintptr_t, Entry> live_;
  std::uintptr_t next_ = 0;
};

// Never destroyed: a client the program did not free must not be torn down (joining its I/O
// thread) by static destructors at exit, possibly while another thread still uses it.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

template <class T, class H>
H* publish(std::shared_ptr<T> obj) {
  return reinterpret_cast<H*>(registry().add(std::move(obj)));
}

template <class T>
std::shared_ptr<T> find(const void* handle) {
  return registry().find<T>(handle);
}

// ---------------------------------------------------------------------------------------------
// Helpers

// Set while a loss callback runs on the I/O thread: blocking calls would wait for that very
// thread, and dropping the last reference to a Client there would make it join itself.
thread_local int in_loss_callback = 0;

int code_of(std::error_code ec) noexcept {
  if (!ec) return REDLOCK_OK;
  if (ec.category() != redlock::category()) return REDLOCK_E_INTERNAL;
  switch (static_cast<redlock::Errc>(ec.value())) {
    case redlock::Errc::contended:
      return REDLOCK_E_CONTENDED;
    case redlock::Errc::no_quorum:
      return REDLOCK_E_NO_QUORUM;
    case redlock::Errc::expired:
      return REDLOCK_E_EXPIRED;
    case redlock::Errc::not_held:
      return REDLOCK_E_NOT_HELD;
    case redlock::Errc::invalid_argument:
      return REDLOCK_E_INVALID;
    case redlock::Errc::cancelled:
      return REDLOCK_E_CANCELLED;
    case redlock::Errc::shutdown:
      return REDLOCK_E_SHUTDOWN;
  }
  return REDLOCK_E_INTERNAL;
}

// Writes the outcome into `res` (when the caller asked for detail) and returns `code`.
int finish(ResultObj* res, int code, std::string message = {},
           std::vector<redlock::NodeOutcome> nodes = {}, int attempts = 0) {
  if (res) {
    res->code = code;
    res->message = std::move(message);
    res->nodes = std::move(nodes);
    res->attempts = attempts;
  }
  return code;
}

// Runs an API body; exceptions become codes (nothing may unwind into C).
template <class F>
int guarded(F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return REDLOCK_E_NOMEM;
  } catch (...) {
    return REDLOCK_E_INTERNAL;
  }
}

// Resolves the optional `detail` argument. False: a non-NULL detail that is not a live result.
bool resolve_detail(redlock_result* detail, std::shared_ptr<ResultObj>& out) {
  if (!detail) return true;
  out = find<ResultObj>(detail);
  return out != nullptr;
}

// uint64 milliseconds from C into a Millis (int64). False when it does not fit.
bool to_millis(std::uint64_t ms, Millis& out) {
  if (ms > static_cast<std::uint64_t>(std::numeric_limits<Millis::rep>::max())) return false;
  out = Millis{static_cast<Millis::rep>(ms)};
  return true;
}

const char* const bad_client = "invalid client handle (NULL, freed, or not a client)";
const char* const bad_lock = "invalid lock handle (NULL, freed, or not a lock)";
const char* const bad_detail = "invalid result handle (freed, or not a result)";
const char* const from_callback =
    "blocking redlock call made inside a loss callback (on the client's I/O thread)";

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
  lo.hold.auto_extend = ao.auto_extend;
  lo.hold.extend_every = ao.extend_every;
  if (ao.auto_extend && ao.on_lost) {
    lo.hold.on_lost = [fn = ao.on_lost, user = ao.user](const redlock::LossInfo& info) {
      ++in_loss_callback;
      fn(user, code_of(info.reason), info.message.c_str());
      --in_loss_callback;
    };
  }
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

// =============================================================================================
// The exported functions

extern "C" {

const char* redlock_version(void) { return redlock::version(); }

int redlock_c_api_version(void) { return REDLOCK_C_API_VERSION; }

const char* redlock_strerror(int code) {
  switch (code) {
    case REDLOCK_OK:
      return "ok";
    case REDLOCK_E_CONTENDED:
      return "held by someone else";
    case REDLOCK_E_NO_QUORUM:
      return "no quorum: too many nodes down, timing out or failing";
    case REDLOCK_E_EXPIRED:
      return "validity used up";
    case REDLOCK_E_NOT_HELD:
      return "not held by this token";
    case REDLOCK_E_INVALID:
      return "invalid argument or handle";
    case REDLOCK_E_CANCELLED:
      return "cancelled";
    case REDLOCK_E_SHUTDOWN:
      return "client shut down";
    case REDLOCK_E_NOMEM:
      return "out of memory";
    case REDLOCK_E_INTERNAL:
      return "internal error in libredlock";
    default:
      return "unknown redlock error code";
  }
}

// ---- results --------------------------------------------------------------------------------

int redlock_result_new(redlock_result** out) {
  return guarded([&] {
    if (!out) return REDLOCK_E_INVALID;
    *out = publish<ResultObj, redlock_result>(std::make_shared<ResultObj>());
    return REDLOCK_OK;
  });
}

int redlock_result_free(redlock_result* result) {
  return guarded(
      [&] { return registry().remove<ResultObj>(result) ? REDLOCK_OK : REDLOCK_E_INVALID; });
}

int redlock_result_code(const redlock_result* result) {
  return guarded([&] {
    auto r = find<ResultObj>(result);
    return r ? r->code : REDLOCK_E_INVALID;
  });
}

const char* redlock_result_message(const redlock_result* result) {
  try {
    auto r = find<ResultObj>(result);
    return r ? r->message.c_str() : nullptr;
  } catch (...) {
    return nullptr;
  }
}

int redlock_result_attempts(const redlock_result* result) {
  try {
    auto r = find<ResultObj>(result);
    return r ? r->attempts : 0;
  } catch (...) {
    return 0;
  }
}

size_t redlock_result_node_count(const redlock_result* result) {
  try {
    auto r = find<ResultObj>(result);
    return r ? r->nodes.size() : 0;
  } catch (...) {
    return 0;
  }
}

namespace {
const redlock::NodeOutcome* node_at(const redlock_result* result, size_t i) {
  try {
    auto r = find<ResultObj>(result);
    if (!r || i >= r->nodes.size()) return nullptr;
    return &r->nodes[i];  // owned by the registry until freed or overwritten (one thread at a time)
  } catch (...) {
    return nullptr;
  }
}
}  // namespace

const char* redlock_result_node_name(const redlock_result* result, size_t i) {
  const auto* n = node_at(result, i);
  return n ? n->node.c_str() : nullptr;
}

const char* redlock_result_node_state(const redlock_result* result, size_t i) {
  const auto* n = node_at(result, i);
  return n ? redlock::to_string(n->state) : nullptr;
}

const char* redlock_result_node_detail(const redlock_result* result, size_t i) {
  const auto* n = node_at(result, i);
  return n ? n->detail.c_str() : nullptr;
}

int64_t redlock_result_node_latency_us(const redlock_result* result, size_t i) {
  const auto* n = node_at(result, i);
  return n ? static_cast<int64_t>(n->latency.count()) : -1;
}

// ---- client options -------------------------------------------------------------------------

int redlock_options_new(redlock_options** out) {
  return guarded([&] {
    if (!out) return REDLOCK_E_INVALID;
    *out = publish<redlock::Options, redlock_options>(std::make_shared<redlock::Options>());
    return REDLOCK_OK;
  });
}

int redlock_options_free(redlock_options* options) {
  return guarded([&] {
    return registry().remove<redlock::Options>(options) ? REDLOCK_OK : REDLOCK_E_INVALID;
  });
}

int redlock_options_set_nodes(redlock_options* options, const char* list, size_t len,
                              redlock_result* detail) {
  return guarded([&] {
    std::shared_ptr<ResultObj> res;
    if (!resolve_detail(detail, res)) return REDLOCK_E_INVALID;
    auto o = find<redlock::Options>(options);
    if (!o)
      return finish(res.get(), REDLOCK_E_INVALID,
                    "invalid options handle (NULL, freed, or not options)");
    if (!list && len) return finish(res.get(), REDLOCK_E_INVALID, "node list is NULL");
    std::string err;
    auto nodes = redlock::parse_node_list(std::string_view(list ? list : "", len), err);
    if (!nodes) return finish(res.get(), REDLOCK_E_INVALID, err);
    o->nodes = std::move(*nodes);
    return finish(res.get(), REDLOCK_OK);
  });
}

int redlock_options_set_node_timeout_ms(redlock_options* options, uint64_t ms) {
  return guarded([&] {
    auto o = find<redlock::Options>(options);
    Millis v;
    if (!o || !to_millis(ms, v) || v <= Millis{0}) return REDLOCK_E_INVALID;
    o->node_timeout = v;
    return REDLOCK_OK;
  });
}

int redlock_options_set_connect_timeout_ms(redlock_options* options, uint64_t ms) {
  return guarded([&] {
    auto o = find<redlock::Options>(options);
    Millis v;
    if (!o || !to_millis(ms, v) || v <= Millis{0}) return REDLOCK_E_INVALID;
    o->connect_timeout = v;
    return REDLOCK_OK;
  });
}

int redlock_options_set_retry(redlock_options* options, int count, uint64_t delay_ms,
                              uint64_t jitter_ms) {
  return guarded([&] {
    auto o = find<redlock::Options>(options);
    Millis delay, jitter;
    if (!o || count < 0 || !to_millis(delay_ms, delay) || !to_millis(jitter_ms, jitter))
      return REDLOCK_E_INVALID;
    o->retry_count = count;
    o->retry_delay = delay;
    o->retry_jitter = jitter;
    return REDLOCK_OK;
  });
}

int redlock_options_set_drift_factor(redlock_options* options, double factor) {
  return guarded([&] {
    auto o = find<redlock::Options>(options);
    // The engine's own bound; refusing here points at the setter instead of at client_new.
    if (!o || !(factor >= 0.0 && factor < 0.5)) return REDLOCK_E_INVALID;
    o->drift_factor = factor;
    return REDLOCK_OK;
  });
}

int redlock_options_set_key_prefix(redlock_options* options, const char* prefix, size_t len) {
  return guarded([&] {
    auto o = find<redlock::Options>(options);
    if (!o || (!prefix && len)) return REDLOCK_E_INVALID;
    o->key_prefix.assign(prefix ? prefix : "", len);
    return REDLOCK_OK;
  });
}

int redlock_options_set_min_node_uptime_ms(redlock_options* options, uint64_t ms) {
  return guarded([&] {
    auto o = find<redlock::Options>(options);
    Millis v;
    if (!o || !to_millis(ms, v)) return REDLOCK_E_INVALID;
    o->min_node_uptime = v;
    return REDLOCK_OK;
  });
}

int redlock_options_set_durable_nodes(redlock_options* options, int durable) {
  return guarded([&] {
    auto o = find<redlock::Options>(options);
    if (!o) return REDLOCK_E_INVALID;
    o->durable_nodes = durable != 0;
    return REDLOCK_OK;
  });
}

// ---- client ---------------------------------------------------------------------------------

int redlock_client_new(const redlock_options* options, redlock_client** out,
                       redlock_result* detail) {
  return guarded([&] {
    if (out) *out = nullptr;
    std::shared_ptr<ResultObj> res;
    if (!resolve_detail(detail, res)) return REDLOCK_E_INVALID;
    if (!out) return finish(res.get(), REDLOCK_E_INVALID, "out is NULL");
    auto o = find<redlock::Options>(options);
    if (!o)
      return finish(res.get(), REDLOCK_E_INVALID,
                    "invalid options handle (NULL, freed, or not options)");
    std::shared_ptr<redlock::Client> client;
    try {
      client = std::make_shared<redlock::Client>(*o);
    } catch (const std::invalid_argument& e) {
      return finish(res.get(), REDLOCK_E_INVALID, e.what());
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception& e) {
      return finish(res.get(), REDLOCK_E_INTERNAL, e.what());
    }
    *out = publish<redlock::Client, redlock_client>(std::move(client));
    return finish(res.get(), REDLOCK_OK);
  });
}

int redlock_client_free(redlock_client* client) {
  return guarded([&] {
    // On the I/O thread the Client would have to join itself; refuse before unregistering.
    if (in_loss_callback) return REDLOCK_E_INVALID;
    auto c = registry().remove<redlock::Client>(client);
    if (!c) return REDLOCK_E_INVALID;
    c.reset();  // joins the I/O thread here, unless a call in flight elsewhere still holds it
    return REDLOCK_OK;
  });
}

int redlock_client_quorum(const redlock_client* client, int* out) {
  return guarded([&] {
    if (!out || in_loss_callback) return REDLOCK_E_INVALID;
    auto c = find<redlock::Client>(client);
    if (!c) return REDLOCK_E_INVALID;
    *out = c->quorum();
    return REDLOCK_OK;
  });
}

// ---- acquisition options --------------------------------------------------------------------

int redlock_acquire_options_new(redlock_acquire_options** out) {
  return guarded([&] {
    if (!out) return REDLOCK_E_INVALID;
    *out =
        publish<AcquireOptionsObj, redlock_acquire_options>(std::make_shared<AcquireOptionsObj>());
    return REDLOCK_OK;
  });
}

int redlock_acquire_options_free(redlock_acquire_options* options) {
  return guarded([&] {
    return registry().remove<AcquireOptionsObj>(options) ? REDLOCK_OK : REDLOCK_E_INVALID;
  });
}

int redlock_acquire_options_set_ttl_ms(redlock_acquire_options* options, uint64_t ms) {
  return guarded([&] {
    auto o = find<AcquireOptionsObj>(options);
    Millis v;
    if (!o || !to_millis(ms, v) || v <= Millis{0} || v > redlock::max_ttl) return REDLOCK_E_INVALID;
    o->acquire.ttl = v;
    return REDLOCK_OK;
  });
}

int redlock_acquire_options_set_wait_ms(redlock_acquire_options* options, uint64_t ms) {
  return guarded([&] {
    auto o = find<AcquireOptionsObj>(options);
    Millis v;
    if (!o || !to_millis(ms, v)) return REDLOCK_E_INVALID;
    if (ms == 0) {
      o->acquire.wait.reset();
    } else {
      o->acquire.wait = v;
    }
    return REDLOCK_OK;
  });
}

int redlock_acquire_options_set_retry_count(redlock_acquire_options* options, int count) {
  return guarded([&] {
    auto o = find<AcquireOptionsObj>(options);
    if (!o || count < 0) return REDLOCK_E_INVALID;
    o->acquire.retry_count = count;
    return REDLOCK_OK;
  });
}

int redlock_acquire_options_set_fence(redlock_acquire_options* options, int fence) {
  return guarded([&] {
    auto o = find<AcquireOptionsObj>(options);
    if (!o) return REDLOCK_E_INVALID;
    o->acquire.fence = fence != 0;
    return REDLOCK_OK;
  });
}

int redlock_acquire_options_set_auto_extend(redlock_acquire_options* options, int enabled,
                                            uint64_t every_ms, redlock_loss_fn on_lost,
                                            void* user) {
  return guarded([&] {
    auto o = find<AcquireOptionsObj>(options);
    Millis every;
    if (!o || !to_millis(every_ms, every)) return REDLOCK_E_INVALID;
    o->auto_extend = enabled != 0;
    o->extend_every = every_ms ? std::optional<Millis>(every)
                               : std::nullopt;  // checked against the ttl at acquire
    o->on_lost = on_lost;
    o->user = user;
    return REDLOCK_OK;
  });
}

int redlock_acquire_options_set_cancel(redlock_acquire_options* options, redlock_cancel* cancel) {
  return guarded([&] {
    auto o = find<AcquireOptionsObj>(options);
    if (!o) return REDLOCK_E_INVALID;
    if (!cancel) {
      o->acquire.stop = {};
      return REDLOCK_OK;
    }
    auto src = find<std::stop_source>(cancel);
    if (!src) return REDLOCK_E_INVALID;
    o->acquire.stop = src->get_token();  // shares the source's state: valid after the source is freed
    return REDLOCK_OK;
  });
}

// ---- cancellation ---------------------------------------------------------------------------

int redlock_cancel_new(redlock_cancel** out) {
  return guarded([&] {
    if (!out) return REDLOCK_E_INVALID;
    *out = publish<std::stop_source, redlock_cancel>(std::make_shared<std::stop_source>());
    return REDLOCK_OK;
  });
}

int redlock_cancel_request(redlock_cancel* cancel) {
  return guarded([&] {
    auto src = find<std::stop_source>(cancel);
    if (!src) return REDLOCK_E_INVALID;
    src->request_stop();
    return REDLOCK_OK;
  });
}

int redlock_cancel_free(redlock_cancel* cancel) {
  return guarded([&] { return registry().remove<std::stop_source>(cancel) ? REDLOCK_OK : REDLOCK_E_INVALID; });
}

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
