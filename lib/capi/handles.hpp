#pragma once
// The C API's private parts: the objects behind the handles, the handle registry, and the helpers
// every exported function uses (see capi/redlock.cpp for what the C API adds over C++).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "redlock/client.hpp"
#include "redlock/election.hpp"
#include "redlock/error.hpp"
#include "redlock/guard.hpp"
#include "redlock/lock.hpp"
#include "redlock/options.hpp"
#include "redlock/redlock.h"
#include "redlock/redlock.hpp"

namespace redlock::capi {

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

struct LeadershipObj {
  // Weak, as LockObj's: a leadership must not keep the client's I/O thread alive.
  std::weak_ptr<redlock::Client> client;
  std::string id;  // immutable: the pointer redlock_leadership_id hands out stays valid
  std::uint64_t term = 0;
  // `mu` guards the Leadership; never held across its resign (see LockObj::mu).
  mutable std::mutex mu;
  redlock::Leadership leadership;  // empty once resigned
  bool resigned = false;
};

// An asynchronous campaign's thread, joined by redlock_election_free (or the next start).
struct CampaignThread {
  std::thread thread;
  std::shared_ptr<std::atomic<bool>> done;
};

struct ElectionObj {
  std::weak_ptr<redlock::Client> client;  // as LockObj: does not keep the client alive
  std::string name;
  std::optional<std::string> id;  // nullopt: a handle that only reads and observes
  std::mutex mu;                  // guards what follows
  std::stop_source stop;          // requested by redlock_election_free: ends the async campaigns
  std::vector<CampaignThread> campaigns;
};

struct ObservationObj {
  redlock::Observation observation;
};

// ---------------------------------------------------------------------------------------------
// Handle registry

enum class Kind : std::uint8_t {
  client = 1,
  lock,
  options,
  acquire_options,
  result,
  cancel,
  election,
  leadership,
  observation,
};

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
template <>
struct KindOf<ElectionObj> {
  static constexpr Kind value = Kind::election;
};
template <>
struct KindOf<LeadershipObj> {
  static constexpr Kind value = Kind::leadership;
};
template <>
struct KindOf<ObservationObj> {
  static constexpr Kind value = Kind::observation;
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
Registry& registry();

template <class T, class H>
H* publish(std::shared_ptr<T> obj) {
  return reinterpret_cast<H*>(registry().add(std::move(obj)));
}

template <class T>
std::shared_ptr<T> find(const void* handle) {
  return registry().find<T>(handle);
}

// Set while a loss callback or the logger runs on the I/O thread: blocking calls would wait for
// that very thread, and dropping the last reference to a Client there would make it join itself.
extern thread_local int in_loss_callback;

[[nodiscard]] int code_of(std::error_code ec) noexcept;
// Writes the outcome into `res` (when the caller asked for detail) and returns `code`.
int finish(ResultObj* res, int code, std::string message = {},
           std::vector<redlock::NodeOutcome> nodes = {}, int attempts = 0);
// Resolves the optional `detail` argument. False: a non-NULL detail that is not a live result.
[[nodiscard]] bool resolve_detail(redlock_result* detail, std::shared_ptr<ResultObj>& out);
// uint64 milliseconds from C into a Millis (int64). False when it does not fit.
[[nodiscard]] bool to_millis(std::uint64_t ms, Millis& out);

// How a lock taken with these options is held: auto-extension every extend_every, and the C loss
// callback (marking the I/O thread as inside a callback while it runs). Locks and leaderships.
[[nodiscard]] redlock::HoldOptions hold_options(const AcquireOptionsObj& ao);

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

inline const char* const bad_client = "invalid client handle (NULL, freed, or not a client)";
inline const char* const bad_lock = "invalid lock handle (NULL, freed, or not a lock)";
inline const char* const bad_detail = "invalid result handle (freed, or not a result)";
inline const char* const from_callback =
    "blocking redlock call made inside a loss or log callback (on the client's I/O thread)";

}  // namespace redlock::capi
