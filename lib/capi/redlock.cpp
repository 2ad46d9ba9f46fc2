// The C API (include/redlock/redlock.h) over redlock::Client and redlock::Guard.
//
// No engine logic lives here: every lock is a Guard from Client::try_lock (so freeing a handle
// releases, and auto-extension is the Guard's watchdog), manual extension is Client::try_extend.
// What this file adds is what C callers need and C++ callers get from the type system:
//   - handle checking: a handle is an id in a registry of live objects, never a pointer into
//     memory, so NULL, freed, forged or wrong-kind handles are refused instead of dereferenced;
//   - no exception ever crosses into C;
//   - length-delimited strings in, stable NUL-terminated strings out.

#include "capi/handles.hpp"
#include "core/secret.hpp"

using namespace redlock::capi;

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
    case REDLOCK_E_REFUSED:
      return "refused by the nodes' configuration (credentials, permissions or TLS)";
    case REDLOCK_E_NO_LEADER:
      return "no leader: no identity holds on a quorum of the nodes";
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

namespace {
// The passwords of `nodes` are overwritten before their memory is freed.
void wipe_passwords(std::vector<redlock::NodeAddress>& nodes) noexcept {
  for (auto& n : nodes) redlock::detail::wipe(n.password);
}
}  // namespace

int redlock_options_free(redlock_options* options) {
  return guarded([&] {
    auto o = registry().remove<redlock::Options>(options);
    if (!o) return REDLOCK_E_INVALID;
    if (o.use_count() == 1) wipe_passwords(o->nodes);  // nobody else reads them now
    return REDLOCK_OK;
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
    wipe_passwords(o->nodes);
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

static_assert(static_cast<int>(redlock::LogLevel::debug) == REDLOCK_LOG_DEBUG &&
              static_cast<int>(redlock::LogLevel::info) == REDLOCK_LOG_INFO &&
              static_cast<int>(redlock::LogLevel::warning) == REDLOCK_LOG_WARNING &&
              static_cast<int>(redlock::LogLevel::error) == REDLOCK_LOG_ERROR);

int redlock_options_set_logger(redlock_options* options, redlock_log_fn fn, int min_level,
                               void* user) {
  return guarded([&] {
    auto o = find<redlock::Options>(options);
    if (!o || min_level < REDLOCK_LOG_DEBUG || min_level > REDLOCK_LOG_ERROR)
      return REDLOCK_E_INVALID;
    if (!fn) {
      o->logger = nullptr;
      return REDLOCK_OK;
    }
    o->logger = [fn, min_level, user](redlock::LogLevel level, std::string_view message) {
      const int c_level = static_cast<int>(level);  // the REDLOCK_LOG_* values, in the same order
      if (c_level < min_level) return;
      try {
        const std::string text(message);  // NUL-terminated for C
        ++in_loss_callback;
        fn(user, c_level, text.c_str());
        --in_loss_callback;
      } catch (...) {
        // Out of memory for the copy: the message is lost, the I/O thread goes on.
      }
    };
    return REDLOCK_OK;
  });
}

// ---- TLS options (C API version 3) ----------------------------------------------------------

namespace {
// Sets one string field of the TLS options from C bytes.
int set_tls_text(redlock_options* options, const char* text, std::size_t len,
                 std::string redlock::TlsOptions::*field) {
  return guarded([&] {
    auto o = find<redlock::Options>(options);
    if (!o || (!text && len)) return REDLOCK_E_INVALID;
    ((o->tls).*field).assign(text ? text : "", len);
    return REDLOCK_OK;
  });
}
}  // namespace

int redlock_options_set_tls(redlock_options* options, int enabled) {
  return guarded([&] {
    auto o = find<redlock::Options>(options);
    if (!o) return REDLOCK_E_INVALID;
    o->tls.enabled = enabled != 0;
    return REDLOCK_OK;
  });
}

int redlock_options_set_tls_ca_file(redlock_options* options, const char* path, size_t len) {
  return set_tls_text(options, path, len, &redlock::TlsOptions::ca_file);
}

int redlock_options_set_tls_ca_dir(redlock_options* options, const char* path, size_t len) {
  return set_tls_text(options, path, len, &redlock::TlsOptions::ca_dir);
}

int redlock_options_set_tls_client_cert(redlock_options* options, const char* cert, size_t cert_len,
                                        const char* key, size_t key_len) {
  if ((!cert && cert_len) || (!key && key_len)) return REDLOCK_E_INVALID;
  const int rc = set_tls_text(options, cert, cert_len, &redlock::TlsOptions::cert_file);
  return rc != REDLOCK_OK ? rc
                          : set_tls_text(options, key, key_len, &redlock::TlsOptions::key_file);
}

int redlock_options_set_tls_server_name(redlock_options* options, const char* name, size_t len) {
  return set_tls_text(options, name, len, &redlock::TlsOptions::server_name);
}

int redlock_options_set_tls_insecure_skip_verify(redlock_options* options, int insecure) {
  return guarded([&] {
    auto o = find<redlock::Options>(options);
    if (!o) return REDLOCK_E_INVALID;
    o->tls.insecure_skip_verify = insecure != 0;
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
    o->acquire.stop =
        src->get_token();  // shares the source's state: valid after the source is freed
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
  return guarded(
      [&] { return registry().remove<std::stop_source>(cancel) ? REDLOCK_OK : REDLOCK_E_INVALID; });
}

}  // extern "C"
