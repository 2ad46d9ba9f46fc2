/**
 * @file
 * redlock.h: the C API of libredlock (Redlock distributed locks over independent Redis masters).
 *
 * For C programs and for foreign-function interfaces (Python ctypes/cffi, Rust, Go cgo, ...).
 * It is a thin layer over the C++ redlock::Client and redlock::Guard: same engine, same I/O
 * thread, same guarantees (see docs/design.md "Safety model" and docs/guide.md).
 *
 * ABI. Only opaque handles, fixed-width integers, size_t, double, char pointers and function
 * pointer types cross this boundary; no struct layout is public, so fields and functions can be
 * added without breaking compiled callers. REDLOCK_C_API_VERSION grows when functions are added.
 *
 * Errors. Every function that does something returns an int: REDLOCK_OK (0) or a REDLOCK_E_*
 * code; redlock_strerror() names it. Given NULL, a handle of the wrong kind, or a handle that was
 * already freed, a function returns REDLOCK_E_INVALID (accessors return their documented
 * sentinel) and touches nothing: a handle is an id looked up in a registry of live objects, never
 * an address that is dereferenced, and a freed handle's value is never handed out again.
 * The C++ code never lets an exception cross into C: failures inside become REDLOCK_E_NOMEM or
 * REDLOCK_E_INTERNAL.
 *
 * Detail. Operations take an optional `redlock_result* detail` (NULL: not wanted). When given it
 * is overwritten with the outcome: the code, a message, and the per-node record (what every
 * Redis node answered: the way to tell a contended lock from failing nodes).
 *
 * Strings. Resource names and tokens are length-delimited (pointer + length): a resource may
 * contain NUL bytes. Strings returned for display (messages, node names, states) are
 * NUL-terminated. Returned pointers stay valid until the handle they came from is freed (for a
 * result: also until it is passed to the next operation).
 *
 * Thread-safety.
 *   - redlock_client: thread-safe. Any number of threads may use one client at once (their
 *     commands share one pipelined connection per node). Create one per process.
 *   - redlock_lock: thread-safe: any thread may query, extend or release it. Its release, also
 *     through redlock_lock_free(), waits for the nodes' answers (bounded by node_timeout).
 *   - redlock_cancel: thread-safe; redlock_cancel_request() may be called from any thread,
 *     a signal handler excepted.
 *   - redlock_result, redlock_options, redlock_acquire_options: not synchronized; one thread at a
 *     time (they are cheap: use one per thread).
 *   - Inside a loss or log callback (the client's I/O thread) the functions that wait for that
 * thread (acquire, extend, client_free) and redlock_client_quorum() return REDLOCK_E_INVALID at
 * once instead of deadlocking. redlock_release() and redlock_lock_free() are allowed there (the
 *     release is sent, not awaited), and so is every accessor.
 *   - Not fork-safe: a child process must create its own client.
 *
 * Time is always in milliseconds (uint64_t, suffix _ms) or microseconds (_us).
 */
#ifndef REDLOCK_REDLOCK_H
#define REDLOCK_REDLOCK_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define REDLOCK_C_API __attribute__((visibility("default")))
#else
#define REDLOCK_C_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Grows by one with every release that adds functions; compare with redlock_c_api_version(). */
#define REDLOCK_C_API_VERSION \
  5 /* 2: redlock_cancel; 3: redlock_options_set_tls*; 4: logger; 5: election */

/** Return codes. Values are stable (part of the ABI). */
#define REDLOCK_OK 0
#define REDLOCK_E_CONTENDED 1 /**< held by someone else: a quorum was impossible */
#define REDLOCK_E_NO_QUORUM 2 /**< too many nodes down, timing out or answering errors */
#define REDLOCK_E_EXPIRED 3   /**< a quorum answered but the validity was used up / deadline gone */
#define REDLOCK_E_NOT_HELD 4  /**< extend/release: our token is no longer on enough nodes */
#define REDLOCK_E_INVALID 5   /**< bad argument, NULL/freed/wrong-kind handle; nothing sent */
#define REDLOCK_E_CANCELLED 6 /**< the operation was cancelled */
#define REDLOCK_E_SHUTDOWN 7  /**< the client was freed (or is being freed) before it finished */
#define REDLOCK_E_NOMEM 8     /**< out of memory */
#define REDLOCK_E_INTERNAL 9  /**< an unexpected failure inside the library (a bug: report it) */
/** Enough nodes refused this client's configuration that no quorum is possible until it is
 * fixed (credentials or database refused, a permission the ACL user lacks, TLS verification
 * failed): not retried. The per-node record says which. */
#define REDLOCK_E_REFUSED 10
/** redlock_leader() and observe (C API version 5): a quorum answered and nobody leads (no
 * identity holds on a quorum of the nodes). */
#define REDLOCK_E_NO_LEADER 11

/** The longest candidate identity accepted, in bytes: a buffer this size holds any leader's id. */
#define REDLOCK_IDENTITY_MAX 256

/** Opaque handles. */
typedef struct redlock_client redlock_client;
typedef struct redlock_lock redlock_lock;
typedef struct redlock_options redlock_options;
typedef struct redlock_acquire_options redlock_acquire_options;
typedef struct redlock_result redlock_result;
typedef struct redlock_cancel redlock_cancel;
typedef struct redlock_election redlock_election;       /* C API version 5 */
typedef struct redlock_leadership redlock_leadership;   /* C API version 5 */
typedef struct redlock_observation redlock_observation; /* C API version 5 */

/*
 * Loss callback of an auto-extended lock: the lock stopped being held while the caller still
 * held it (never after redlock_release() / redlock_lock_free() returned).
 * `reason`: REDLOCK_E_NOT_HELD (the nodes no longer have our token), REDLOCK_E_NO_QUORUM (a
 * majority of the nodes cannot be reached), REDLOCK_E_EXPIRED (the local deadline passed before
 * an extension succeeded). `message` is NUL-terminated and valid during the call only.
 * Runs at most once per lock, on the client's I/O thread: it must return quickly and must not
 * block (signal a condition variable, write to a pipe, set an atomic flag).
 */
typedef void (*redlock_loss_fn)(void* user, int reason, const char* message);

/** Log levels of redlock_log_fn (C API version 4). */
#define REDLOCK_LOG_DEBUG 0   /**< connection events, each reconnect */
#define REDLOCK_LOG_INFO 1    /**< the restart guard's notes, a node's change of state */
#define REDLOCK_LOG_WARNING 2 /**< the nodes' configuration (eviction, fencing without AOF) */
#define REDLOCK_LOG_ERROR 3

/*
 * Logger (C API version 4): the library's messages, for a service to route into its own log.
 * `level` is a REDLOCK_LOG_* value; `message` is NUL-terminated English text, valid during the
 * call only, and never contains a password. Runs on the client's I/O thread (never on the thread
 * that made the call that led to it), one call at a time per client; several clients sharing one
 * logger call it from their own threads at once. Same rules as the loss callback: return quickly,
 * do not block (no network or disk I/O that may stall: queue the message instead); the functions
 * that wait for the I/O thread return REDLOCK_E_INVALID there.
 */
typedef void (*redlock_log_fn)(void* user, int level, const char* message);

/* ---- library --------------------------------------------------------------------------------*/

/** The library version ("0.1.0"). Never NULL. */
REDLOCK_C_API const char* redlock_version(void);
/** REDLOCK_C_API_VERSION of the library actually loaded. */
REDLOCK_C_API int redlock_c_api_version(void);
/** A static English message for a return code; "unknown redlock error code" for others.
 * Never NULL. */
REDLOCK_C_API const char* redlock_strerror(int code);

/* ---- results (operation detail and the per-node record) -------------------------------------*/

REDLOCK_C_API int redlock_result_new(redlock_result** out);
REDLOCK_C_API int redlock_result_free(redlock_result* result);

/** The code the last operation returned; REDLOCK_E_INVALID for a bad handle. */
REDLOCK_C_API int redlock_result_code(const redlock_result* result);
/** What happened, in words (names the bad value for REDLOCK_E_INVALID). "" when nothing to say;
 * NULL for a bad handle. */
REDLOCK_C_API const char* redlock_result_message(const redlock_result* result);
/** Acquisition attempts made (retries included); 0 for other operations or a bad handle. */
REDLOCK_C_API int redlock_result_attempts(const redlock_result* result);

/** The per-node record: one entry per node (in the configured order) for the last attempt;
 * empty when nothing was sent. Index i in [0, count). */
REDLOCK_C_API size_t redlock_result_node_count(const redlock_result* result);
/** Display address ("127.0.0.1:7001"); never contains a password. NULL for a bad handle/index. */
REDLOCK_C_API const char* redlock_result_node_name(const redlock_result* result, size_t i);
/** "ok", "held-by-other", "not-held", "timeout", "down", "error", "excluded", "pending" or
 * "auth-failed" (the server refused the credentials or the database: AUTH, ACL, SELECT; the
 * detail has its words, never the password). NULL for a bad handle/index. */
REDLOCK_C_API const char* redlock_result_node_state(const redlock_result* result, size_t i);
/** Error reply text or the reason for an exclusion; "" when nothing to add. NULL for a bad
 * handle/index. */
REDLOCK_C_API const char* redlock_result_node_detail(const redlock_result* result, size_t i);
/** Microseconds from send to answer (or to the deadline); -1 for a bad handle/index. */
REDLOCK_C_API int64_t redlock_result_node_latency_us(const redlock_result* result, size_t i);

/* ---- client options -------------------------------------------------------------------------*/

/** Defaults: no nodes, node_timeout 50 ms, connect_timeout 250 ms, 3 retries every 200 ms
 * (+-100 ms jitter), drift factor 0.01, no key prefix, restart guard with min uptime 0. */
REDLOCK_C_API int redlock_options_new(redlock_options** out);
REDLOCK_C_API int redlock_options_free(redlock_options* options);
/** Comma-separated addresses: "host:port", "redis://[[user]:password@]host[:port][/db]",
 * "rediss://..." (TLS; per-node "?sni=NAME&cacert=FILE&cert=FILE&key=FILE&insecure"),
 * "unix:///path?db=N", "redis://[::1]:7001". REDLOCK_E_INVALID (message naming the bad address in
 * `detail`, never a password) for a malformed list or a duplicate; the options are then unchanged.
 */
REDLOCK_C_API int redlock_options_set_nodes(redlock_options* options, const char* list, size_t len,
                                            redlock_result* detail);
/** Per-command deadline on each node; keep it far below the ttl. Must be > 0. */
REDLOCK_C_API int redlock_options_set_node_timeout_ms(redlock_options* options, uint64_t ms);
REDLOCK_C_API int redlock_options_set_connect_timeout_ms(redlock_options* options, uint64_t ms);
/** Extra attempts after the first (count >= 0), the sleep between them and its +- jitter. */
REDLOCK_C_API int redlock_options_set_retry(redlock_options* options, int count, uint64_t delay_ms,
                                            uint64_t jitter_ms);
/** drift = ttl * factor + 2 ms; factor in [0, 0.5) (default 0.01). */
REDLOCK_C_API int redlock_options_set_drift_factor(redlock_options* options, double factor);
/** Prepended to every resource to form the Redis key (may contain any bytes). */
REDLOCK_C_API int redlock_options_set_key_prefix(redlock_options* options, const char* prefix,
                                                 size_t len);
/** Restart guard: a node whose Redis uptime is below this gives no vote (0: off). */
REDLOCK_C_API int redlock_options_set_min_node_uptime_ms(redlock_options* options, uint64_t ms);
/** Nonzero: nodes run appendonly yes + appendfsync always; turns the restart guard off. */
REDLOCK_C_API int redlock_options_set_durable_nodes(redlock_options* options, int durable);

/** Sends the messages of clients made from these options (from now on) at `min_level` and above
 * (REDLOCK_LOG_DEBUG .. REDLOCK_LOG_ERROR) to `fn` with `user` (see redlock_log_fn). `fn` NULL:
 * silent, the default. `user` must stay valid until every client made with it has been freed
 * (redlock_client_free returned): until then the logger may be called. C API version 4. */
REDLOCK_C_API int redlock_options_set_logger(redlock_options* options, redlock_log_fn fn,
                                             int min_level, void* user);

/* TLS (C API version 3). Verification of the servers' certificates is on unless turned off by
 * name. The files are read by redlock_client_new, which fails with REDLOCK_E_INVALID and a message
 * naming a file it cannot use. Paths are bytes of length `len` (NULL with 0: none). */
/** Nonzero: TLS to every TCP node (a rediss:// address asks for it on its own). */
REDLOCK_C_API int redlock_options_set_tls(redlock_options* options, int enabled);
/** PEM file of the CAs to trust (default, with no CA directory either: the system's). */
REDLOCK_C_API int redlock_options_set_tls_ca_file(redlock_options* options, const char* path,
                                                  size_t len);
/** Directory of CA certificates with hashed names (as c_rehash makes). */
REDLOCK_C_API int redlock_options_set_tls_ca_dir(redlock_options* options, const char* path,
                                                 size_t len);
/** Client certificate and its private key (PEM), for servers that ask for one. */
REDLOCK_C_API int redlock_options_set_tls_client_cert(redlock_options* options, const char* cert,
                                                      size_t cert_len, const char* key,
                                                      size_t key_len);
/** SNI, and the name the certificates must carry (default: each node's host). */
REDLOCK_C_API int redlock_options_set_tls_server_name(redlock_options* options, const char* name,
                                                      size_t len);
/** Nonzero: accept ANY server certificate. The connection is encrypted but not authenticated:
 * anyone on the path can pose as a node. For tests against self-signed servers only. */
REDLOCK_C_API int redlock_options_set_tls_insecure_skip_verify(redlock_options* options,
                                                               int insecure);

/* ---- client ---------------------------------------------------------------------------------*/

/** Starts the client's I/O thread and begins connecting (does not wait for the nodes).
 * The options are copied; free them whenever. REDLOCK_E_INVALID (with a message in `detail`)
 * when the options are unusable (no nodes, a zero timeout, ...). */
REDLOCK_C_API int redlock_client_new(const redlock_options* options, redlock_client** out,
                                     redlock_result* detail);
/** Unregisters the client (later calls with it return REDLOCK_E_INVALID), then stops its I/O
 * thread, failing what is still pending with REDLOCK_E_SHUTDOWN. Calls already in flight on other
 * threads finish first: the thread stops when the last of them returns (here, if none).
 * It does not release held locks: release or free them first, or they expire after their ttl;
 * their handles stay valid (extend/release then return REDLOCK_E_SHUTDOWN) until freed. */
REDLOCK_C_API int redlock_client_free(redlock_client* client);
/** How many nodes must agree (N/2+1). */
REDLOCK_C_API int redlock_client_quorum(const redlock_client* client, int* out);

/* ---- acquisition options --------------------------------------------------------------------*/

/** Defaults: ttl 30000 ms, no wait (one attempt plus the client's retries), no fence, no
 * auto-extension. */
REDLOCK_C_API int redlock_acquire_options_new(redlock_acquire_options** out);
REDLOCK_C_API int redlock_acquire_options_free(redlock_acquire_options* options);
/** How long the nodes keep the lock: 1 ms .. 365 days. */
REDLOCK_C_API int redlock_acquire_options_set_ttl_ms(redlock_acquire_options* options, uint64_t ms);
/** Keep starting attempts until this much time has passed (the client's retry count is then
 * ignored). 0: no wait. */
REDLOCK_C_API int redlock_acquire_options_set_wait_ms(redlock_acquire_options* options,
                                                      uint64_t ms);
/** Overrides the client's retry count for this acquisition (>= 0). */
REDLOCK_C_API int redlock_acquire_options_set_retry_count(redlock_acquire_options* options,
                                                          int count);
/** Nonzero: also take a fencing token (redlock_lock_fence()); one resource only. */
REDLOCK_C_API int redlock_acquire_options_set_fence(redlock_acquire_options* options, int fence);
/** Nonzero `enabled`: the lock is extended automatically (on the I/O thread, no thread of yours)
 * every `every_ms` (0: ttl/3; must be below the ttl) with its own ttl until released.
 * `on_lost` (may be NULL) is called at most once with `user` if it is lost meanwhile.
 * `user` must stay valid until the lock handle is freed. */
REDLOCK_C_API int redlock_acquire_options_set_auto_extend(redlock_acquire_options* options,
                                                          int enabled, uint64_t every_ms,
                                                          redlock_loss_fn on_lost, void* user);
/** Acquisitions made with these options can be cancelled through `cancel` (NULL: not
 * cancellable). Since C API version 2. */
REDLOCK_C_API int redlock_acquire_options_set_cancel(redlock_acquire_options* options,
                                                     redlock_cancel* cancel);

/* ---- cancellation (since C API version 2) ---------------------------------------------------*/

/** A cancellation source, e.g. for a service that shuts down while a thread waits for a lock. */
REDLOCK_C_API int redlock_cancel_new(redlock_cancel** out);
/** Ends every acquisition started with options that carry this source, now or later, with
 * REDLOCK_E_CANCELLED: no further attempt starts, the attempt in flight is rolled back on every
 * node. An acquisition already decided keeps its outcome (a lock it got must still be freed).
 * Permanent and idempotent: take a new source for new acquisitions. */
REDLOCK_C_API int redlock_cancel_request(redlock_cancel* cancel);
/** Options that carry the source stay cancellable through it after this. */
REDLOCK_C_API int redlock_cancel_free(redlock_cancel* cancel);

/* ---- locks ----------------------------------------------------------------------------------*/

/** Takes a lock on one resource (`len` bytes at `resource`, NUL bytes allowed) for `ttl_ms`,
 * with the client's retries. Blocks until decided. On REDLOCK_OK `*out` is a new lock handle:
 * free it with redlock_lock_free() (which releases it if still held). On failure `*out` is NULL:
 * REDLOCK_E_CONTENDED, REDLOCK_E_NO_QUORUM, REDLOCK_E_EXPIRED, REDLOCK_E_INVALID, ... */
REDLOCK_C_API int redlock_acquire(redlock_client* client, const char* resource, size_t len,
                                  uint64_t ttl_ms, redlock_lock** out, redlock_result* detail);
/** The general form: one lock over `count` resources (all-or-nothing on each node, one token),
 * with acquisition options (NULL: defaults). */
REDLOCK_C_API int redlock_acquire_ex(redlock_client* client, const char* const* resources,
                                     const size_t* lens, size_t count,
                                     const redlock_acquire_options* options, redlock_lock** out,
                                     redlock_result* detail);
/** Resets the lock's expiry to `ttl_ms` on every node that still holds its token; REDLOCK_OK
 * gives it a new local deadline. REDLOCK_E_NOT_HELD: lost (released, or the token is gone from
 * too many nodes). REDLOCK_E_INVALID for an auto-extended lock: its watchdog does this. */
REDLOCK_C_API int redlock_extend(redlock_lock* lock, uint64_t ttl_ms, redlock_result* detail);
/** Compare-and-delete on every node (stops auto-extension first). REDLOCK_OK if at least one node
 * deleted it; REDLOCK_E_NOT_HELD if no reachable node held our token; REDLOCK_E_NO_QUORUM if no
 * node could be reached. Idempotent: later calls return REDLOCK_OK and send nothing. The handle
 * stays valid (accessors still work) until redlock_lock_free(). */
REDLOCK_C_API int redlock_release(redlock_lock* lock, redlock_result* detail);
/** Releases the lock if it is still held (as redlock_release, answer discarded), then frees the
 * handle. After it returns the loss callback does not run any more. */
REDLOCK_C_API int redlock_lock_free(redlock_lock* lock);

/** REDLOCK_OK while held: acquired, not released, not lost, local deadline not passed. Otherwise
 * why not: REDLOCK_E_NOT_HELD (released, or an extension found the token gone),
 * REDLOCK_E_EXPIRED, REDLOCK_E_NO_QUORUM (auto-extension: lost with a majority unreachable).
 * `detail` (optional) gets the loss's message and per-node record when there was one. */
REDLOCK_C_API int redlock_lock_check(const redlock_lock* lock, redlock_result* detail);
/** The token (40 hex characters; not NUL-terminated: use `*len`). */
REDLOCK_C_API int redlock_lock_token(const redlock_lock* lock, const char** data, size_t* len);
REDLOCK_C_API int redlock_lock_resource_count(const redlock_lock* lock, size_t* out);
/** Resource `i` exactly as given to acquire (may contain NUL bytes). */
REDLOCK_C_API int redlock_lock_resource(const redlock_lock* lock, size_t i, const char** data,
                                        size_t* len);
/** The fencing token of a lock acquired with set_fence; REDLOCK_E_INVALID if it has none.
 * Fences grow strictly with every fenced acquisition of the resource, across all clients: the
 * protected resource remembers the highest it has seen and refuses older ones. */
REDLOCK_C_API int redlock_lock_fence(const redlock_lock* lock, uint64_t* out);
/** Validity computed when the lock was taken or last extended. */
REDLOCK_C_API int redlock_lock_validity_ms(const redlock_lock* lock, uint64_t* out);
/** Time left before the local deadline; 0 once passed, released or lost. Work that must stay
 * exclusive has to finish before this reaches 0. */
REDLOCK_C_API int redlock_lock_remaining_ms(const redlock_lock* lock, uint64_t* out);
/** Nodes that granted the lock (or its last extension). */
REDLOCK_C_API int redlock_lock_votes(const redlock_lock* lock, int* out);
/** Successful extensions so far (automatic or by redlock_extend). */
REDLOCK_C_API int redlock_lock_extensions(const redlock_lock* lock, int* out);

/* ---- leader election (C API version 5) ------------------------------------------------------*/
/*
 * An election over a name on the client's nodes (docs/guide.md, "Electing a leader"): the leader
 * holds the name's lock (the plain Redlock key) and, beside it on each node, a record of its
 * identity and term. The term grows strictly from leader to leader: a leader passes it with every
 * write to what it controls, and that resource refuses a term lower than the highest it has seen.
 * A leader paused past its validity still believes it leads until it looks; the term is the
 * defence.
 *
 * Thread-safety: redlock_election, redlock_leadership and redlock_observation are thread-safe.
 * Free the elections, leaderships and observations of a client before the client.
 */

/*
 * Result of redlock_campaign_async(): called exactly once per call that returned REDLOCK_OK, on a
 * thread the library started for that campaign (never the caller's thread, never the client's
 * I/O thread: blocking calls are allowed in it, redlock_election_free() of this election too).
 * `code` REDLOCK_OK: `leadership` is a new handle the callee owns (free it with
 * redlock_leadership_free()). Otherwise `leadership` is NULL and `code` says why: as
 * redlock_campaign(), and REDLOCK_E_CANCELLED when the election handle was freed meanwhile.
 * `message` is NUL-terminated, valid during the call only.
 */
typedef void (*redlock_campaign_fn)(void* user, int code, redlock_leadership* leadership,
                                    const char* message);

/*
 * A change seen by redlock_observe(). `code` REDLOCK_OK: `id` (`id_len` bytes, not
 * NUL-terminated) leads with `term`. REDLOCK_E_NO_LEADER: nobody leads. REDLOCK_E_NO_QUORUM: too
 * few nodes answered to tell. `id` is NULL and `term` 0 except for REDLOCK_OK; `id` is valid
 * during the call only.
 * Called first with who leads now, then once per change (a new term, nobody, no quorum), in order,
 * one call at a time, on the client's I/O thread: same rules as the loss callback (return quickly,
 * do not block; the functions that wait for the I/O thread return REDLOCK_E_INVALID there;
 * redlock_observation_free() is allowed). No call starts after redlock_observation_free()
 * returned; a call running on another thread is waited for.
 */
typedef void (*redlock_observe_fn)(void* user, int code, const char* id, size_t id_len,
                                   uint64_t term);

/** An election over `name` (`len` bytes) as candidate `id` (`id_len` bytes: 1 to
 * REDLOCK_IDENTITY_MAX, no control characters; every client of the nodes can read it, so never a
 * secret). `id` NULL with `id_len` 0: a handle that only reads (redlock_leader, redlock_observe)
 * and cannot campaign. REDLOCK_E_INVALID, naming the bad value in `detail`: an empty, oversized or
 * control-character id, an empty name or one of the form of the library's own keys. The handle
 * does not keep the client alive: once the client is freed its calls return REDLOCK_E_SHUTDOWN. */
REDLOCK_C_API int redlock_election_new(redlock_client* client, const char* name, size_t len,
                                       const char* id, size_t id_len, redlock_election** out,
                                       redlock_result* detail);
/** Cancels the election's campaigns of redlock_campaign_async() and waits until their callbacks
 * have returned (each runs, with REDLOCK_E_CANCELLED unless it was decided before), then frees
 * the handle. Leaderships it handed out stay valid: free them on their own. REDLOCK_E_INVALID
 * inside a loss or observe callback (the campaigns it waits for need the I/O thread). */
REDLOCK_C_API int redlock_election_free(redlock_election* election);

/** Campaigns until this candidate leads. Blocks until elected, the wait passes, or the options'
 * redlock_cancel is requested. Of the acquisition options (NULL: defaults) it takes: the ttl of
 * the leader's lock (a dead leader is replaced about that long later); the wait (0, the default:
 * campaign until elected or cancelled; otherwise REDLOCK_E_CONTENDED while another leads, or
 * REDLOCK_E_NO_QUORUM while the nodes cannot elect anyone, once it passed); the cancel source
 * (REDLOCK_E_CANCELLED; the attempt in flight and the waiting mark are taken back on the nodes);
 * and auto-extension's every_ms and loss callback (a leadership is always extended; `enabled` is
 * ignored; the loss callback runs at most once, as for a lock). Fence and retry count do not apply
 * (the term is the fence). On REDLOCK_OK `*out` is a new leadership: free it with
 * redlock_leadership_free(), which resigns. REDLOCK_E_INVALID on a read-only election handle. */
REDLOCK_C_API int redlock_campaign(redlock_election* election,
                                   const redlock_acquire_options* options, redlock_leadership** out,
                                   redlock_result* detail);
/** The same campaign without blocking the caller: REDLOCK_OK when it started, and then `fn` is
 * called exactly once with `user` (see redlock_campaign_fn for the thread). Any other code: it did
 * not start and `fn` is never called. The options are copied; `user` must stay valid until `fn`
 * returned. */
REDLOCK_C_API int redlock_campaign_async(redlock_election* election,
                                         const redlock_acquire_options* options,
                                         redlock_campaign_fn fn, void* user,
                                         redlock_result* detail);

/** Who leads now, read from every node. REDLOCK_OK: the leader's id is copied into `id` (capacity
 * `id_cap`; REDLOCK_IDENTITY_MAX always suffices; not NUL-terminated), its length to `*id_len`,
 * its term, how long it has led and its validity (until fewer than a quorum hold it, unless it is
 * extended) to the rest. REDLOCK_E_NO_LEADER: nobody leads. REDLOCK_E_NO_QUORUM: too few nodes
 * answered to tell. Every out-parameter may be NULL (not wanted); `id` NULL needs `id_cap` 0. */
REDLOCK_C_API int redlock_leader(redlock_election* election, char* id, size_t id_cap,
                                 size_t* id_len, uint64_t* term, uint64_t* since_ms,
                                 uint64_t* validity_ms, redlock_result* detail);

/** Watches who leads: `fn` with `user` (see redlock_observe_fn), reading the nodes at least every
 * `poll_ms` (0: 1000) and at once when a node announces a release or a new term. Until
 * redlock_observation_free(*out) or the client is freed. `user` must stay valid until
 * redlock_observation_free() returned. */
REDLOCK_C_API int redlock_observe(redlock_election* election, uint64_t poll_ms,
                                  redlock_observe_fn fn, void* user, redlock_observation** out,
                                  redlock_result* detail);
/** Stops the observation and frees the handle. After it returns no callback runs (one running on
 * another thread is waited for; called from inside the callback, none runs after that one). */
REDLOCK_C_API int redlock_observation_free(redlock_observation* observation);

/** REDLOCK_OK while this candidate leads: elected, not resigned, not lost, its local deadline not
 * passed. Otherwise why not: REDLOCK_E_NOT_HELD (resigned, or the nodes no longer have its lock),
 * REDLOCK_E_NO_QUORUM (lost: the nodes could not be reached), REDLOCK_E_EXPIRED. `detail` gets
 * the loss's message and per-node record when there was one. Check it before each piece of work. */
REDLOCK_C_API int redlock_leadership_check(const redlock_leadership* leadership,
                                           redlock_result* detail);
/** The term: grows strictly from leader to leader. Fence the leader's writes with it. */
REDLOCK_C_API int redlock_leadership_term(const redlock_leadership* leadership, uint64_t* out);
/** The same number as the term, for resources that take fencing tokens. */
REDLOCK_C_API int redlock_leadership_fence(const redlock_leadership* leadership, uint64_t* out);
/** The identity it campaigned with (not NUL-terminated: use `*len`). */
REDLOCK_C_API int redlock_leadership_id(const redlock_leadership* leadership, const char** data,
                                        size_t* len);
/** Validity computed when it was elected or last extended. */
REDLOCK_C_API int redlock_leadership_validity_ms(const redlock_leadership* leadership,
                                                 uint64_t* out);
/** Time left before the local deadline (moves with every extension); 0 once resigned or lost. */
REDLOCK_C_API int redlock_leadership_remaining_ms(const redlock_leadership* leadership,
                                                  uint64_t* out);
/** Steps down: stops extending, deletes the lock and the leader's record on the nodes and wakes
 * the candidate that has waited longest. Codes as redlock_release(); idempotent. The handle stays
 * valid until redlock_leadership_free(). Allowed inside a loss callback. */
REDLOCK_C_API int redlock_leadership_resign(redlock_leadership* leadership, redlock_result* detail);
/** Resigns if still leader, then frees the handle. After it returns the loss callback does not
 * run any more. */
REDLOCK_C_API int redlock_leadership_free(redlock_leadership* leadership);

#ifdef __cplusplus
}
#endif

#endif /* REDLOCK_REDLOCK_H */
