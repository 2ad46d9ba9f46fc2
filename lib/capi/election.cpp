// The C API's leader election: elections, campaigns (blocking and with a callback), leaderships,
// the leader read and observe (redlock.h), over redlock::Election.
//
// An election handle keeps only a weak reference to its client and builds a redlock::Election (a
// client reference and a name: cheap) for each call, so a freed client makes its calls return
// REDLOCK_E_SHUTDOWN instead of keeping the I/O thread alive.

#include <string_view>

#include "capi/handles.hpp"

using namespace redlock::capi;

namespace {

const char* const bad_election = "invalid election handle (NULL, freed, or not an election)";
const char* const bad_leadership = "invalid leadership handle (NULL, freed, or not a leadership)";
const char* const client_gone = "the client was freed";

// The acquisition options a campaign takes (redlock.h, redlock_campaign). False: `options` is
// not NULL and not live acquisition options.
bool load_options(const redlock_acquire_options* options, AcquireOptionsObj& out) {
  if (!options) return true;
  auto o = find<AcquireOptionsObj>(options);
  if (!o) return false;
  out = *o;
  return true;
}

redlock::CampaignOptions campaign_options(AcquireOptionsObj ao, std::stop_token stop) {
  ao.auto_extend = true;  // a leadership is always extended: hold_options wires the loss callback
  redlock::CampaignOptions co;
  co.ttl = ao.acquire.ttl;
  co.wait = ao.acquire.wait;  // unset (wait 0): until elected or cancelled
  co.stop = std::move(stop);
  co.hold = hold_options(ao);
  return co;
}

redlock_leadership* publish_leadership(const std::shared_ptr<redlock::Client>& client,
                                       redlock::Leadership leadership) {
  auto obj = std::make_shared<LeadershipObj>();
  obj->client = client;
  obj->id = leadership.id();
  obj->term = leadership.term();
  obj->leadership = std::move(leadership);  // from here on, dropping `obj` resigns
  return publish<LeadershipObj, redlock_leadership>(std::move(obj));
}

// Joins the campaign threads that have called back (the rest keep running).
void reap_finished(std::vector<CampaignThread>& campaigns) {
  std::erase_if(campaigns, [](CampaignThread& c) {
    if (!c.done->load()) return false;
    c.thread.join();
    return true;
  });
}

}  // namespace

extern "C" {

int redlock_election_new(redlock_client* client_h, const char* name, size_t len, const char* id,
                         size_t id_len, redlock_election** out, redlock_result* detail) {
  return guarded([&] {
    if (out) *out = nullptr;
    std::shared_ptr<ResultObj> res;
    if (!resolve_detail(detail, res)) return REDLOCK_E_INVALID;
    if (!out) return finish(res.get(), REDLOCK_E_INVALID, "out is NULL");
    if (!name && len) return finish(res.get(), REDLOCK_E_INVALID, "name is NULL");
    auto client = find<redlock::Client>(client_h);
    if (!client) return finish(res.get(), REDLOCK_E_INVALID, bad_client);
    auto obj = std::make_shared<ElectionObj>();
    obj->client = client;
    obj->name.assign(name ? name : "", len);
    if (id) {
      obj->id.emplace(id, id_len);
      if (auto why = redlock::check_identity(*obj->id))
        return finish(res.get(), REDLOCK_E_INVALID, "id: " + *why);
    } else if (id_len) {
      return finish(res.get(), REDLOCK_E_INVALID, "id is NULL");
    }
    try {
      redlock::Election check(*client, obj->name);  // refuses a bad name, naming it
    } catch (const std::invalid_argument& e) {
      return finish(res.get(), REDLOCK_E_INVALID, e.what());
    }
    *out = publish<ElectionObj, redlock_election>(std::move(obj));
    return finish(res.get(), REDLOCK_OK);
  });
}

int redlock_election_free(redlock_election* election) {
  return guarded([&] {
    // The campaigns joined here wait for the I/O thread: not from a callback that runs on it.
    if (in_loss_callback) return REDLOCK_E_INVALID;
    auto e = registry().remove<ElectionObj>(election);
    if (!e) return REDLOCK_E_INVALID;
    std::vector<CampaignThread> campaigns;
    {
      std::lock_guard<std::mutex> g(e->mu);
      e->stop.request_stop();
      campaigns = std::move(e->campaigns);
    }
    for (auto& c : campaigns) {
      // Freed from a campaign's own callback: that thread ends by itself right after.
      if (c.thread.get_id() == std::this_thread::get_id()) {
        c.thread.detach();
      } else {
        c.thread.join();
      }
    }
    return REDLOCK_OK;
  });
}

int redlock_campaign(redlock_election* election, const redlock_acquire_options* options,
                     redlock_leadership** out, redlock_result* detail) {
  return guarded([&] {
    if (out) *out = nullptr;
    std::shared_ptr<ResultObj> res;
    if (!resolve_detail(detail, res)) return REDLOCK_E_INVALID;
    if (!out) return finish(res.get(), REDLOCK_E_INVALID, "out is NULL");
    if (in_loss_callback) return finish(res.get(), REDLOCK_E_INVALID, from_callback);
    auto e = find<ElectionObj>(election);
    if (!e) return finish(res.get(), REDLOCK_E_INVALID, bad_election);
    if (!e->id)
      return finish(res.get(), REDLOCK_E_INVALID,
                    "the election handle has no candidate id (made to read and observe only)");
    AcquireOptionsObj ao;
    if (!load_options(options, ao))
      return finish(res.get(), REDLOCK_E_INVALID,
                    "invalid acquire options handle (freed, or not acquire options)");
    auto client = e->client.lock();
    if (!client) return finish(res.get(), REDLOCK_E_SHUTDOWN, client_gone);
    redlock::Election el(*client, e->name);
    auto [leadership, r] = el.try_campaign(*e->id, campaign_options(ao, ao.acquire.stop));
    const int code = code_of(r.error);
    if (code != REDLOCK_OK)
      return finish(res.get(), code, std::move(r.message), std::move(r.nodes), r.attempts);
    *out = publish_leadership(client, std::move(leadership));
    return finish(res.get(), REDLOCK_OK, std::move(r.message), std::move(r.nodes), r.attempts);
  });
}

int redlock_campaign_async(redlock_election* election, const redlock_acquire_options* options,
                           redlock_campaign_fn fn, void* user, redlock_result* detail) {
  return guarded([&] {
    std::shared_ptr<ResultObj> res;
    if (!resolve_detail(detail, res)) return REDLOCK_E_INVALID;
    if (!fn) return finish(res.get(), REDLOCK_E_INVALID, "fn is NULL");
    auto e = find<ElectionObj>(election);
    if (!e) return finish(res.get(), REDLOCK_E_INVALID, bad_election);
    if (!e->id)
      return finish(res.get(), REDLOCK_E_INVALID,
                    "the election handle has no candidate id (made to read and observe only)");
    AcquireOptionsObj ao;
    if (!load_options(options, ao))
      return finish(res.get(), REDLOCK_E_INVALID,
                    "invalid acquire options handle (freed, or not acquire options)");
    auto client = e->client.lock();
    if (!client) return finish(res.get(), REDLOCK_E_SHUTDOWN, client_gone);

    std::lock_guard<std::mutex> g(e->mu);
    // Freed by another thread since the lookup: its free has taken the campaigns to join, so a
    // thread started now would be joined by nobody.
    if (e->stop.stop_requested()) return finish(res.get(), REDLOCK_E_INVALID, bad_election);
    reap_finished(e->campaigns);
    auto done = std::make_shared<std::atomic<bool>>(false);
    // Everything the thread uses is its own: redlock_election_free may detach it (when called
    // from its callback) and drop the election.
    auto body = [client = std::move(client), name = e->name, id = *e->id, ao,
                 election_stop = e->stop.get_token(), fn, user, done]() mutable {
      // Either the caller's cancel source or the election's free ends the campaign.
      std::stop_source stop;
      std::stop_callback by_caller(ao.acquire.stop, [&stop] { stop.request_stop(); });
      std::stop_callback by_free(election_stop, [&stop] { stop.request_stop(); });
      int code = REDLOCK_E_INTERNAL;
      std::string message;
      redlock_leadership* handle = nullptr;
      try {
        redlock::Election el(*client, name);
        auto [leadership, r] = el.try_campaign(id, campaign_options(ao, stop.get_token()));
        code = code_of(r.error);
        message = std::move(r.message);
        if (code == REDLOCK_OK) handle = publish_leadership(client, std::move(leadership));
      } catch (const std::bad_alloc&) {
        code = REDLOCK_E_NOMEM;
        message.clear();
      } catch (...) {
        code = REDLOCK_E_INTERNAL;
        message.clear();
      }
      client.reset();  // the callback may free the client: this thread holds no reference then
      fn(user, code, handle, message.c_str());
      done->store(true);
    };
    e->campaigns.push_back(CampaignThread{std::thread(std::move(body)), done});
    return finish(res.get(), REDLOCK_OK);
  });
}

int redlock_leader(redlock_election* election, char* id, size_t id_cap, size_t* id_len,
                   uint64_t* term, uint64_t* since_ms, uint64_t* validity_ms,
                   redlock_result* detail) {
  return guarded([&] {
    if (id_len) *id_len = 0;
    if (term) *term = 0;
    if (since_ms) *since_ms = 0;
    if (validity_ms) *validity_ms = 0;
    std::shared_ptr<ResultObj> res;
    if (!resolve_detail(detail, res)) return REDLOCK_E_INVALID;
    if (!id && id_cap) return finish(res.get(), REDLOCK_E_INVALID, "id is NULL");
    if (in_loss_callback) return finish(res.get(), REDLOCK_E_INVALID, from_callback);
    auto e = find<ElectionObj>(election);
    if (!e) return finish(res.get(), REDLOCK_E_INVALID, bad_election);
    auto client = e->client.lock();
    if (!client) return finish(res.get(), REDLOCK_E_SHUTDOWN, client_gone);
    redlock::Election el(*client, e->name);
    redlock::LeaderResult r = el.leader();
    client.reset();
    if (r.error) return finish(res.get(), code_of(r.error), std::move(r.message));
    if (!r.leader) {
      return finish(res.get(), REDLOCK_E_NO_LEADER,
                    "nobody leads: no identity holds on a quorum of the nodes");
    }
    const redlock::Leader& l = *r.leader;
    if (id && id_cap < l.id.size()) {
      return finish(res.get(), REDLOCK_E_INVALID,
                    "id_cap " + std::to_string(id_cap) + " is below the leader's id of " +
                        std::to_string(l.id.size()) + " bytes");
    }
    if (id) std::copy(l.id.begin(), l.id.end(), id);
    if (id_len) *id_len = l.id.size();
    if (term) *term = l.term;
    if (since_ms) *since_ms = static_cast<uint64_t>(std::max<Millis::rep>(0, l.since.count()));
    if (validity_ms)
      *validity_ms = static_cast<uint64_t>(std::max<Millis::rep>(0, l.validity.count()));
    return finish(res.get(), REDLOCK_OK);
  });
}

int redlock_observe(redlock_election* election, uint64_t poll_ms, redlock_observe_fn fn, void* user,
                    redlock_observation** out, redlock_result* detail) {
  return guarded([&] {
    if (out) *out = nullptr;
    std::shared_ptr<ResultObj> res;
    if (!resolve_detail(detail, res)) return REDLOCK_E_INVALID;
    if (!out) return finish(res.get(), REDLOCK_E_INVALID, "out is NULL");
    if (!fn) return finish(res.get(), REDLOCK_E_INVALID, "fn is NULL");
    auto e = find<ElectionObj>(election);
    if (!e) return finish(res.get(), REDLOCK_E_INVALID, bad_election);
    redlock::ObserveOptions oo;
    if (poll_ms != 0 && !to_millis(poll_ms, oo.poll))
      return finish(res.get(), REDLOCK_E_INVALID, "poll_ms out of range");
    auto client = e->client.lock();
    if (!client) return finish(res.get(), REDLOCK_E_SHUTDOWN, client_gone);
    redlock::Election el(*client, e->name);
    auto on_change = [fn, user](const redlock::LeaderResult& r) {
      int code = code_of(r.error);
      if (code == REDLOCK_OK && !r.leader) code = REDLOCK_E_NO_LEADER;
      ++in_loss_callback;
      if (code == REDLOCK_OK) {
        fn(user, code, r.leader->id.data(), r.leader->id.size(), r.leader->term);
      } else {
        fn(user, code, nullptr, 0, 0);
      }
      --in_loss_callback;
    };
    auto obj = std::make_shared<ObservationObj>();
    obj->observation = el.observe(std::move(on_change), oo);
    if (!obj->observation.active())
      return finish(res.get(), REDLOCK_E_SHUTDOWN, "client is shutting down");
    *out = publish<ObservationObj, redlock_observation>(std::move(obj));
    return finish(res.get(), REDLOCK_OK);
  });
}

int redlock_observation_free(redlock_observation* observation) {
  return guarded([&] {
    auto o = registry().remove<ObservationObj>(observation);
    if (!o) return REDLOCK_E_INVALID;
    // Here, not whenever the last reference goes: after this returns no callback may run.
    o->observation.stop();
    return REDLOCK_OK;
  });
}

// ---- leaderships ----------------------------------------------------------------------------

int redlock_leadership_check(const redlock_leadership* leadership, redlock_result* detail) {
  return guarded([&] {
    std::shared_ptr<ResultObj> res;
    if (!resolve_detail(detail, res)) return REDLOCK_E_INVALID;
    auto l = find<LeadershipObj>(leadership);
    if (!l) return finish(res.get(), REDLOCK_E_INVALID, bad_leadership);
    std::lock_guard<std::mutex> g(l->mu);
    if (l->resigned) return finish(res.get(), REDLOCK_E_NOT_HELD, "resigned");
    if (auto loss = l->leadership.lost())
      return finish(res.get(), code_of(loss->reason), loss->message, loss->nodes);
    if (!l->leadership.is_leader())
      return finish(res.get(), REDLOCK_E_EXPIRED, "the local deadline passed");
    return finish(res.get(), REDLOCK_OK);
  });
}

int redlock_leadership_term(const redlock_leadership* leadership, uint64_t* out) {
  return guarded([&] {
    auto l = find<LeadershipObj>(leadership);
    if (!l || !out) return REDLOCK_E_INVALID;
    *out = l->term;
    return REDLOCK_OK;
  });
}

int redlock_leadership_fence(const redlock_leadership* leadership, uint64_t* out) {
  return redlock_leadership_term(leadership, out);  // the term is the name's fence
}

int redlock_leadership_id(const redlock_leadership* leadership, const char** data, size_t* len) {
  return guarded([&] {
    auto l = find<LeadershipObj>(leadership);
    if (!l || !data || !len) return REDLOCK_E_INVALID;
    *data = l->id.data();
    *len = l->id.size();
    return REDLOCK_OK;
  });
}

int redlock_leadership_validity_ms(const redlock_leadership* leadership, uint64_t* out) {
  return guarded([&] {
    auto l = find<LeadershipObj>(leadership);
    if (!l || !out) return REDLOCK_E_INVALID;
    std::lock_guard<std::mutex> g(l->mu);
    *out = static_cast<uint64_t>(std::max<Millis::rep>(0, l->leadership.lock().validity().count()));
    return REDLOCK_OK;
  });
}

int redlock_leadership_remaining_ms(const redlock_leadership* leadership, uint64_t* out) {
  return guarded([&] {
    auto l = find<LeadershipObj>(leadership);
    if (!l || !out) return REDLOCK_E_INVALID;
    std::lock_guard<std::mutex> g(l->mu);
    *out = static_cast<uint64_t>(std::max<Millis::rep>(0, l->leadership.remaining().count()));
    return REDLOCK_OK;
  });
}

int redlock_leadership_resign(redlock_leadership* leadership, redlock_result* detail) {
  return guarded([&] {
    std::shared_ptr<ResultObj> res;
    if (!resolve_detail(detail, res)) return REDLOCK_E_INVALID;
    auto l = find<LeadershipObj>(leadership);
    if (!l) return finish(res.get(), REDLOCK_E_INVALID, bad_leadership);
    redlock::Leadership held;
    {
      std::lock_guard<std::mutex> g(l->mu);
      if (l->resigned) return finish(res.get(), REDLOCK_OK, "already resigned; nothing sent");
      l->resigned = true;
      held = std::move(l->leadership);
    }
    // Outside `mu`: this waits for the I/O thread (see LockObj::mu).
    redlock::ReleaseResult r = held.resign();
    return finish(res.get(), code_of(r.error), std::move(r.message), std::move(r.nodes));
  });
}

int redlock_leadership_free(redlock_leadership* leadership) {
  return guarded([&] {
    auto l = registry().remove<LeadershipObj>(leadership);
    if (!l) return REDLOCK_E_INVALID;
    redlock::Leadership held;
    {
      std::lock_guard<std::mutex> g(l->mu);
      l->resigned = true;
      held = std::move(l->leadership);
    }
    // Here, not whenever the last reference goes: after this returns the loss callback must not
    // run any more.
    (void)held.resign();
    return REDLOCK_OK;
  });
}

}  // extern "C"
