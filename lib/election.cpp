// Leader election for Client users (election.hpp): campaign is Client::try_lock with the leader
// kind, held with the watchdog; leader and observe are the engine's reads, on the I/O thread.

#include "redlock/election.hpp"

#include <future>
#include <mutex>
#include <stdexcept>

#include "client_impl.hpp"
#include "core/validate.hpp"
#include "redlock/error.hpp"

namespace redlock {

struct Observation::State {
  // Held while the user's callback runs, so stop() from another thread waits for it; recursive,
  // so stop() from inside the callback does not.
  std::recursive_mutex mu;
  bool stopped = false;
  std::function<void()> stop_on_loop;  // posts Engine::stop_observe to the I/O thread
};

Observation& Observation::operator=(Observation&& other) noexcept {
  if (this != &other) {
    stop();
    state_ = std::move(other.state_);
  }
  return *this;
}

Observation::~Observation() { stop(); }

void Observation::stop() noexcept {
  if (!state_) return;
  std::function<void()> stop_on_loop;
  {
    std::lock_guard<std::recursive_mutex> g(state_->mu);
    if (state_->stopped) return;
    state_->stopped = true;
    stop_on_loop = std::move(state_->stop_on_loop);
  }
  try {
    if (stop_on_loop) stop_on_loop();
  } catch (...) {
    // Only allocation can fail here; the callback already runs no more (stopped).
  }
}

bool Observation::active() const noexcept {
  if (!state_) return false;
  std::lock_guard<std::recursive_mutex> g(state_->mu);
  return !state_->stopped;
}

Election::Election(Client& client, std::string name) : client_(client), name_(std::move(name)) {
  if (auto why = detail::check_resources({name_}, client_.options().key_prefix))
    throw std::invalid_argument("election name: " + *why);
}

std::pair<Leadership, AcquireResult> Election::try_campaign(std::string_view id,
                                                            const CampaignOptions& options) {
  LockOptions lo;
  lo.acquire.ttl = options.ttl;
  lo.acquire.mode = LockMode::leader;
  lo.acquire.identity = std::string(id);
  lo.acquire.stop = options.stop;
  lo.hold = options.hold;
  lo.hold.auto_extend = true;
  if (lo.hold.reentrant) {
    AcquireResult r;
    r.error = make_error_code(Errc::invalid_argument);
    r.message = "a leadership is not reentrant";
    return {Leadership{}, std::move(r)};
  }
  std::optional<BootClock::time_point> until;
  if (options.wait) until = BootClock::now() + *options.wait;
  // Without a deadline, the campaign is a series of waits (each wakes on a release, polls at the
  // retry delay) that ends only when elected, stopped, or refused.
  constexpr Millis slice{60'000};
  while (true) {
    if (until) {
      lo.acquire.wait = std::max(Millis{0}, std::chrono::ceil<Millis>(*until - BootClock::now()));
    } else {
      lo.acquire.wait = slice;
    }
    auto [guard, r] = client_.try_lock({name_}, lo);
    if (r) {
      const auto term = r.lock.fence().value_or(0);
      return {Leadership(std::move(guard), name_, std::string(id), term), std::move(r)};
    }
    const bool waits_more =
        r.error == Errc::contended || r.error == Errc::no_quorum || r.error == Errc::expired;
    if (!waits_more || options.stop.stop_requested() || (until && BootClock::now() >= *until))
      return {Leadership{}, std::move(r)};
  }
}

Leadership Election::campaign(std::string_view id, const CampaignOptions& options) {
  auto [leadership, r] = try_campaign(id, options);
  if (r.error) throw Error(r.error, r.message, std::move(r.nodes));
  return std::move(leadership);
}

LeaderResult Election::leader() {
  auto& impl = *client_.impl_;
  LeaderResult failed;
  failed.error = make_error_code(Errc::invalid_argument);
  if (impl.on_io_thread()) {
    failed.message = "blocking redlock::Election call made on the client's own I/O thread";
    return failed;
  }
  std::promise<LeaderResult> p;
  auto f = p.get_future();
  if (!impl.post([&impl, name = name_, &p]() mutable {
        impl.engine().leader(std::move(name), [&p](LeaderResult r) { p.set_value(std::move(r)); });
      })) {
    failed.error = make_error_code(Errc::shutdown);
    failed.message = "client is shutting down";
    return failed;
  }
  return f.get();
}

Observation Election::observe(std::function<void(const LeaderResult&)> on_change,
                              const ObserveOptions& options) {
  if (options.poll <= Millis{0} || !on_change) return Observation{};
  auto state = std::make_shared<Observation::State>();
  std::weak_ptr<Client::Impl> client = client_.impl_;
  // The id is known on the I/O thread only; the stop goes there too, so it always comes after
  // the start.
  auto id = std::make_shared<Engine::ObserveId>(0);
  state->stop_on_loop = [client, id] {
    if (auto impl = client.lock()) {
      impl->post([impl = impl.get(), id] { impl->engine().stop_observe(*id); });
    }
  };
  std::weak_ptr<Observation::State> weak = state;
  auto cb = [weak, on_change = std::move(on_change)](const LeaderResult& r) {
    auto st = weak.lock();
    if (!st) return;
    std::lock_guard<std::recursive_mutex> g(st->mu);
    if (!st->stopped) on_change(r);
  };
  auto start = [impl = client_.impl_.get(), name = name_, poll = options.poll, id,
                cb = std::move(cb)]() mutable {
    *id = impl->engine().observe(std::move(name), poll, std::move(cb));
  };
  if (client_.impl_->on_io_thread()) {
    start();
  } else if (!client_.impl_->post(std::move(start))) {
    return Observation{};
  }
  return Observation(std::move(state));
}

}  // namespace redlock
