#pragma once
// What a Guard shares with the Client that made it: the held lock, its watchdog, its loss, and
// its reentrant holders. Thread-safe (one mutex). The lock is one object shared with the
// watchdog (on the I/O thread) and never changed: an extension changes the lease beside it
// (LockBuilder::Lease) under the mutex, and allocates nothing that outlives it.

#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "client_impl.hpp"
#include "engine/hold.hpp"
#include "engine/lock_builder.hpp"
#include "redlock/guard.hpp"

namespace redlock {

class Guard::State final : public HoldListener {
 public:
  // Keeps of `options` only what the holder's side reads; the watchdog gets its own copy
  // (start_watchdog). Keeps no per-node record: the acquisition's is on its AcquireResult, an
  // extension's on the RenewFailure or LossInfo that reports it (Guard::lock()).
  State(std::weak_ptr<Client::Impl> client, Lock lock, const HoldOptions& options, std::string key)
      : client_(std::move(client)),
        lock_(without_nodes(std::move(lock))),
        lease_(LockBuilder::lease(*lock_)),
        on_lost_(options.on_lost),
        on_renew_failing_(options.on_renew_failing),
        key_(std::move(key)),
        auto_extend_(options.auto_extend) {}

  bool owns() const {
    std::lock_guard<std::mutex> g(mu_);
    return !released_ && !loss_ && !lock_->empty() && lease_.remaining() > Millis{0};
  }
  Millis remaining() const {
    std::lock_guard<std::mutex> g(mu_);
    return released_ || loss_ ? Millis{0} : lease_.remaining();
  }
  Lock lock() const {
    LockBuilder::Lease lease;
    {
      std::lock_guard<std::mutex> g(mu_);
      lease = lease_;
    }
    Lock l = *lock_;  // copied outside the mutex: it never changes
    LockBuilder::renew(l, lease);
    return l;
  }
  std::optional<LossInfo> lost() const {
    std::lock_guard<std::mutex> g(mu_);
    if (!loss_) return std::nullopt;
    return *loss_;
  }
  int extensions() const {
    std::lock_guard<std::mutex> g(mu_);
    return extensions_;
  }
  HoldState state() const {
    std::lock_guard<std::mutex> g(mu_);
    if (released_) return HoldState::none;
    if (loss_ || lock_->empty() || lease_.remaining() <= Millis{0}) return HoldState::lost;
    return renew_failing_ ? HoldState::renew_failing : HoldState::held;
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
    if (released_ || loss_ || lease_.remaining() <= Millis{0})
      return std::nullopt;  // not shared: taken anew
    static constexpr const char* mode_names[] = {"an exclusive", "a read", "a write"};
    if (o.acquire.mode != lock_->mode()) {
      return std::string("held by this owner as ") + mode_names[static_cast<int>(lock_->mode())] +
             " lock; a reentrant request for " + mode_names[static_cast<int>(o.acquire.mode)] +
             " lock cannot share it";
    }
    if (o.acquire.fence && !lock_->fence()) {
      return "held by this owner without a fence; a reentrant fenced request cannot share it";
    }
    if (o.hold.auto_extend && !auto_extend_) {
      return "held by this owner without auto-extension; a reentrant request for it cannot share "
             "it";
    }
    return std::nullopt;
  }

  // Reentrancy: one more holder, if still held.
  bool add_holder() {
    std::lock_guard<std::mutex> g(mu_);
    if (released_ || loss_ || lease_.remaining() <= Millis{0}) return false;
    ++holders_;
    return true;
  }

  // Starts the watchdog on the I/O thread (the hold id lives there only), with `options` (those
  // the State was made with). It shares this State's lock and tells this State (HoldListener),
  // as long as the State lives.
  void start_watchdog(const std::shared_ptr<State>& self, const HoldOptions& options) {
    auto client = client_.lock();
    if (!client) return;
    std::weak_ptr<State> weak = self;
    client->post([client_raw = client.get(), weak, options] {
      auto st = weak.lock();
      if (!st) return;
      st->hold_id_ = start_hold(EngineAccess::impl(client_raw->engine()), st->lock_, options,
                                std::weak_ptr<HoldListener>(weak));
    });
  }

  // HoldListener: on the I/O thread, from the watchdog.
  void on_extended(const Lock& extended) override {
    std::lock_guard<std::mutex> g(mu_);
    lease_ = LockBuilder::lease(extended);
    lease_.extended = true;
    ++extensions_;
    renew_failing_ = false;
  }
  void on_lost(const LossInfo& info) override {
    std::function<void(const LossInfo&)> cb;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (released_) return;
      loss_ = std::make_unique<LossInfo>(info);
      cb = on_lost_;
    }
    if (cb) cb(info);
  }
  void on_renew_failing(const RenewFailure& failure) override {
    std::function<void(const RenewFailure&)> cb;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (released_) return;
      renew_failing_ = true;
      cb = on_renew_failing_;
    }
    if (cb) cb(failure);
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
        if (it != client->reentrant_.end() && it->second.lock() == self)
          client->reentrant_.erase(it);
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
  static std::shared_ptr<const Lock> without_nodes(Lock lock) {
    LockBuilder::drop_nodes(lock);
    return std::make_shared<const Lock>(std::move(lock));
  }

  std::weak_ptr<Client::Impl> client_;
  mutable std::mutex mu_;
  const std::shared_ptr<const Lock> lock_;  // never null, never changed; the watchdog shares it
  LockBuilder::Lease lease_;                // lock_'s, then the last extension's
  std::function<void(const LossInfo&)> on_lost_;
  std::function<void(const RenewFailure&)> on_renew_failing_;
  std::string key_;                 // reentrancy key, empty when not reentrant
  std::unique_ptr<LossInfo> loss_;  // once lost (on the heap: a held lock rarely has one)
  bool auto_extend_;
  int extensions_ = 0;
  bool renew_failing_ = false;  // the last extension failed (HoldState::renew_failing)
  int holders_ = 1;
  bool released_ = false;
  Engine::HoldId hold_id_ = 0;  // I/O thread only
};

}  // namespace redlock
