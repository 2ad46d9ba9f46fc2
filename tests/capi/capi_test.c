/* The C API (redlock/redlock.h) from plain C11, against real redis-server processes that the tests'
 * one launcher (tests/support/node-launcher) starts on free ports and stops at exit.
 *
 * Covers: acquire / contended / extend / release, the per-node record (including a node that is
 * down), handles that are NULL, freed, forged or of the wrong kind, a resource with NUL bytes
 * (checked on the servers), fencing, auto-extension with the loss callback (exactly once, and
 * blocking calls refused inside it), cancelling a waiting acquisition from another thread, the
 * logger (levels, thread, no password), the "auth-failed" node state, and leader election
 * (campaign blocking and with a callback, resign, leader, observe, cancel, bad input).
 * Exit status 0 only if every check passed. */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "redlock/redlock.h"

/* ---- checks --------------------------------------------------------------------------------*/

static int checks;
static int failures;

#define CHECK(cond)                                                            \
  do {                                                                         \
    ++checks;                                                                  \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

/* A return code: prints both codes' names when it differs. */
#define CHECK_RC(expr, want)                                                                     \
  do {                                                                                           \
    int rc_ = (expr);                                                                            \
    ++checks;                                                                                    \
    if (rc_ != (want)) {                                                                         \
      fprintf(stderr, "%s:%d: %s returned %d (%s), wanted %d (%s)\n", __FILE__, __LINE__, #expr, \
              rc_, redlock_strerror(rc_), (want), redlock_strerror(want));                       \
      ++failures;                                                                                \
    }                                                                                            \
  } while (0)

/* Stops the program when later checks would only cascade. */
#define REQUIRE(cond)                                                            \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond); \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

/* ---- real redis-server processes -----------------------------------------------------------*/

#define NSERVERS 3

static int server_port[NSERVERS];

static int free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(s >= 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(s, (struct sockaddr*)&a, sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(getsockname(s, (struct sockaddr*)&a, &len) == 0);
  close(s);
  return ntohs(a.sin_port);
}

/* Sends one command (binary-safe arguments) and reads the first line of the reply into `out`
 * ("+OK", ":1", "$-1", ...). Returns 0 on success. */
static int redis_cmd(int port, int argc, const char* const* argv, const size_t* lens, char* out,
                     size_t cap) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) return -1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(s, (struct sockaddr*)&a, sizeof a) != 0) {
    close(s);
    return -1;
  }
  char buf[1024];
  int n = snprintf(buf, sizeof buf, "*%d\r\n", argc);
  for (int i = 0; i < argc; ++i) {
    n += snprintf(buf + n, sizeof buf - (size_t)n, "$%zu\r\n", lens[i]);
    memcpy(buf + n, argv[i], lens[i]);
    n += (int)lens[i];
    memcpy(buf + n, "\r\n", 2);
    n += 2;
  }
  int rc = -1;
  if (send(s, buf, (size_t)n, MSG_NOSIGNAL) == n) {
    size_t got = 0;
    while (got + 1 < cap) {
      ssize_t r = recv(s, out + got, 1, 0);
      if (r <= 0) break;
      if (out[got] == '\n') {
        out[got > 0 ? got - 1 : 0] = '\0'; /* drop "\r\n" */
        rc = 0;
        break;
      }
      ++got;
    }
  }
  close(s);
  return rc;
}

/* EXISTS on one server for a binary key: 1, 0, or -1 when the server did not answer. */
static int redis_exists(int port, const char* key, size_t len) {
  const char* argv[2] = {"EXISTS", key};
  size_t lens[2] = {6, len};
  char reply[64];
  if (redis_cmd(port, 2, argv, lens, reply, sizeof reply) != 0) return -1;
  return strcmp(reply, ":1") == 0 ? 1 : strcmp(reply, ":0") == 0 ? 0 : -1;
}

static int exists_on_all(const char* key, size_t len) {
  int n = 0;
  for (int i = 0; i < NSERVERS; ++i) n += redis_exists(server_port[i], key, len) == 1;
  return n;
}

/* The outcome is decided on the first answers that agree; the rest of the nodes get their command
 * a moment later. Polls (up to `ms`) until `want` servers have the key; returns the last count. */
static int wait_exists_ms(const char* key, size_t len, int want, long ms) {
  int n = exists_on_all(key, len);
  for (long i = 0; i < ms / 10 && n != want; ++i) {
    sleep_ms(10);
    n = exists_on_all(key, len);
  }
  return n;
}

static int wait_exists(const char* key, size_t len, int want) {
  return wait_exists_ms(key, len, want, 2000);
}

static void redis_del_everywhere(const char* key, size_t len) {
  const char* argv[2] = {"DEL", key};
  size_t lens[2] = {3, len};
  char reply[64];
  for (int i = 0; i < NSERVERS; ++i) redis_cmd(server_port[i], 2, argv, lens, reply, sizeof reply);
}

/* The servers come from the tests' one launcher (tests/support/node-launcher, the C++ fixture as a
 * program; meson names it in $REDLOCK_NODE_LAUNCHER): a free port (another one if it was taken
 * meanwhile), a temp dir, the binary from $REDLOCK_TEST_REDIS_SERVER or PATH, ready once our own
 * process answers PING. It prints "PORT PID TLS_PORT DIR" and keeps the server until its stdin
 * ends: then it kills the server, waits for it and removes its dir. This program signals no
 * server; the launchers (its children) end when it closes their stdin, or when it dies. */
static pid_t launcher_pid[NSERVERS];
static int launcher_in[NSERVERS] = {-1, -1, -1}; /* the write end of each launcher's stdin */

extern char** environ;

static void start_server(int i) {
  const char* launcher = getenv("REDLOCK_NODE_LAUNCHER");
  if (launcher == NULL || *launcher == '\0') {
    fprintf(stderr, "REDLOCK_NODE_LAUNCHER is not set: run through meson test\n");
    exit(1);
  }
  int in[2], out[2];
  REQUIRE(pipe(in) == 0 && pipe(out) == 0);
  /* Our ends stay out of the launchers started after this one: its stdin must end when we close
   * it. */
  REQUIRE(fcntl(in[1], F_SETFD, FD_CLOEXEC) == 0 && fcntl(out[0], F_SETFD, FD_CLOEXEC) == 0);
  posix_spawn_file_actions_t fa;
  REQUIRE(posix_spawn_file_actions_init(&fa) == 0);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, in[0]);
  posix_spawn_file_actions_addclose(&fa, out[1]);
  char* argv[] = {(char*)launcher, NULL};
  const int rc = posix_spawn(&launcher_pid[i], launcher, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  if (rc != 0) {
    fprintf(stderr, "cannot start %s: %s\n", launcher, strerror(rc));
    exit(1);
  }
  launcher_in[i] = in[1];
  FILE* from = fdopen(out[0], "r");
  REQUIRE(from != NULL);
  char line[512];
  int pid = 0, tls_port = 0;
  if (fgets(line, sizeof line, from) == NULL ||
      sscanf(line, "%d %d %d", &server_port[i], &pid, &tls_port) != 3) {
    fprintf(stderr, "the launcher did not start a server (its message is above)\n");
    exit(1);
  }
  fclose(from); /* its later answers are not read: this program sends it no command */
}

static void stop_servers(void) {
  for (int i = 0; i < NSERVERS; ++i) {
    if (launcher_in[i] >= 0) {
      close(launcher_in[i]); /* end of input: the launcher stops its server and exits */
      launcher_in[i] = -1;
    }
  }
  for (int i = 0; i < NSERVERS; ++i) {
    if (launcher_pid[i] > 0) {
      while (waitpid(launcher_pid[i], NULL, 0) < 0 && errno == EINTR) {
      }
      launcher_pid[i] = 0;
    }
  }
}

/* ---- helpers over the API ------------------------------------------------------------------*/

static int dead_port;
static char node_list[256];      /* the three live servers */
static char node_list_dead[256]; /* the same plus one address where nothing listens */

static size_t count_state(const redlock_result* r, const char* state) {
  size_t n = 0;
  for (size_t i = 0; i < redlock_result_node_count(r); ++i) {
    const char* s = redlock_result_node_state(r, i);
    n += s && strcmp(s, state) == 0;
  }
  return n;
}

/* With three nodes the outcome is decided by the first two answers that agree; the third may
 * still be "pending" then. `state` on at least two nodes, and nothing but `state` or pending. */
static int decided_by(const redlock_result* r, const char* state) {
  return redlock_result_node_count(r) == 3 && count_state(r, state) >= 2 &&
         count_state(r, state) + count_state(r, "pending") == 3;
}

static redlock_client* make_client_for(const char* nodes) {
  redlock_options* o = NULL;
  REQUIRE(redlock_options_new(&o) == REDLOCK_OK);
  REQUIRE(redlock_options_set_nodes(o, nodes, strlen(nodes), NULL) == REDLOCK_OK);
  REQUIRE(redlock_options_set_retry(o, 0, 50, 10) == REDLOCK_OK);
  /* Generous: other test suites may run at the same time on a small machine. */
  REQUIRE(redlock_options_set_node_timeout_ms(o, 250) == REDLOCK_OK);
  redlock_client* c = NULL;
  REQUIRE(redlock_client_new(o, &c, NULL) == REDLOCK_OK);
  CHECK_RC(redlock_options_free(o), REDLOCK_OK); /* the client copied them */
  return c;
}

static redlock_client* make_client(void) { return make_client_for(node_list); }

static int acquire_once(redlock_client* c, const char* res, size_t len, uint64_t ttl,
                        redlock_lock** out, redlock_result* detail) {
  redlock_acquire_options* ao = NULL;
  REQUIRE(redlock_acquire_options_new(&ao) == REDLOCK_OK);
  REQUIRE(redlock_acquire_options_set_ttl_ms(ao, ttl) == REDLOCK_OK);
  REQUIRE(redlock_acquire_options_set_retry_count(ao, 0) == REDLOCK_OK);
  int rc = redlock_acquire_ex(c, &res, &len, 1, ao, out, detail);
  redlock_acquire_options_free(ao);
  return rc;
}

/* ---- the tests -----------------------------------------------------------------------------*/

static void test_library(void) {
  CHECK(strlen(redlock_version()) > 0);
  CHECK(redlock_c_api_version() == REDLOCK_C_API_VERSION);
  CHECK(strcmp(redlock_strerror(REDLOCK_OK), "ok") == 0);
  CHECK(strstr(redlock_strerror(REDLOCK_E_CONTENDED), "held") != NULL);
  CHECK(strstr(redlock_strerror(REDLOCK_E_NO_QUORUM), "quorum") != NULL);
  CHECK(strcmp(redlock_strerror(12345), "unknown redlock error code") == 0);
  /* Every code has its own message. */
  for (int a = REDLOCK_OK; a <= REDLOCK_E_NO_LEADER; ++a)
    for (int b = a + 1; b <= REDLOCK_E_NO_LEADER; ++b)
      CHECK(strcmp(redlock_strerror(a), redlock_strerror(b)) != 0);
}

static void test_null_and_forged_handles(void) {
  redlock_lock* l = (redlock_lock*)(uintptr_t)0x1; /* must be reset to NULL */
  CHECK_RC(redlock_acquire(NULL, "x", 1, 1000, &l, NULL), REDLOCK_E_INVALID);
  CHECK(l == NULL);
  CHECK_RC(redlock_acquire_ex(NULL, NULL, NULL, 0, NULL, &l, NULL), REDLOCK_E_INVALID);
  CHECK_RC(redlock_extend(NULL, 1000, NULL), REDLOCK_E_INVALID);
  CHECK_RC(redlock_release(NULL, NULL), REDLOCK_E_INVALID);
  CHECK_RC(redlock_lock_free(NULL), REDLOCK_E_INVALID);
  CHECK_RC(redlock_lock_check(NULL, NULL), REDLOCK_E_INVALID);
  CHECK_RC(redlock_client_free(NULL), REDLOCK_E_INVALID);
  CHECK_RC(redlock_options_free(NULL), REDLOCK_E_INVALID);
  CHECK_RC(redlock_acquire_options_free(NULL), REDLOCK_E_INVALID);
  CHECK_RC(redlock_cancel_new(NULL), REDLOCK_E_INVALID);
  CHECK_RC(redlock_cancel_request(NULL), REDLOCK_E_INVALID);
  CHECK_RC(redlock_cancel_free(NULL), REDLOCK_E_INVALID);
  CHECK_RC(redlock_acquire_options_set_cancel(NULL, NULL), REDLOCK_E_INVALID);
  CHECK_RC(redlock_result_free(NULL), REDLOCK_E_INVALID);
  CHECK_RC(redlock_options_set_nodes(NULL, "a:1", 3, NULL), REDLOCK_E_INVALID);
  CHECK_RC(redlock_options_set_node_timeout_ms(NULL, 50), REDLOCK_E_INVALID);
  CHECK_RC(redlock_acquire_options_set_ttl_ms(NULL, 50), REDLOCK_E_INVALID);
  redlock_client* c = (redlock_client*)(uintptr_t)0x1;
  CHECK_RC(redlock_client_new(NULL, &c, NULL), REDLOCK_E_INVALID);
  CHECK(c == NULL);
  int q = 0;
  CHECK_RC(redlock_client_quorum(NULL, &q), REDLOCK_E_INVALID);
  const char* data = NULL;
  size_t len = 0;
  uint64_t u = 0;
  CHECK_RC(redlock_lock_token(NULL, &data, &len), REDLOCK_E_INVALID);
  CHECK_RC(redlock_lock_fence(NULL, &u), REDLOCK_E_INVALID);
  CHECK_RC(redlock_lock_remaining_ms(NULL, &u), REDLOCK_E_INVALID);
  CHECK_RC(redlock_result_new(NULL), REDLOCK_E_INVALID);

  /* Accessors of a result: their sentinels. */
  CHECK(redlock_result_code(NULL) == REDLOCK_E_INVALID);
  CHECK(redlock_result_message(NULL) == NULL);
  CHECK(redlock_result_node_count(NULL) == 0);
  CHECK(redlock_result_node_name(NULL, 0) == NULL);
  CHECK(redlock_result_node_state(NULL, 0) == NULL);
  CHECK(redlock_result_node_detail(NULL, 0) == NULL);
  CHECK(redlock_result_node_latency_us(NULL, 0) == -1);

  /* Forged handles: a real address that was never a handle, and a made-up value. Neither is
   * dereferenced (this would crash or corrupt memory if it were). */
  long stack_object[4] = {0, 0, 0, 0};
  CHECK_RC(redlock_acquire((redlock_client*)(void*)stack_object, "x", 1, 1000, &l, NULL),
           REDLOCK_E_INVALID);
  CHECK_RC(redlock_client_free((redlock_client*)(uintptr_t)0xdeadbeef), REDLOCK_E_INVALID);
  CHECK_RC(redlock_lock_free((redlock_lock*)(void*)stack_object), REDLOCK_E_INVALID);
  CHECK(stack_object[0] == 0 && stack_object[3] == 0);

  /* A handle of the wrong kind: a result passed as a client. The detail says what was wrong. */
  redlock_result* r = NULL;
  REQUIRE(redlock_result_new(&r) == REDLOCK_OK);
  CHECK(redlock_result_code(r) == REDLOCK_OK);
  CHECK(strcmp(redlock_result_message(r), "") == 0);
  CHECK_RC(redlock_acquire((redlock_client*)(void*)r, "x", 1, 1000, &l, r), REDLOCK_E_INVALID);
  CHECK(redlock_result_code(r) == REDLOCK_E_INVALID);
  CHECK(strstr(redlock_result_message(r), "invalid client handle") != NULL);
  CHECK(redlock_result_node_count(r) == 0);
  CHECK(redlock_result_node_name(r, 0) == NULL); /* index out of range */
  CHECK_RC(redlock_result_free(r), REDLOCK_OK);
}

static void test_options(void) {
  redlock_options* o = NULL;
  redlock_result* r = NULL;
  REQUIRE(redlock_options_new(&o) == REDLOCK_OK);
  REQUIRE(redlock_result_new(&r) == REDLOCK_OK);

  const char* bad = "127.0.0.1:7001,127.0.0.1:99999";
  CHECK_RC(redlock_options_set_nodes(o, bad, strlen(bad), r), REDLOCK_E_INVALID);
  CHECK(strstr(redlock_result_message(r), "99999") != NULL); /* names the bad address */
  const char* dup = "127.0.0.1:7001,127.0.0.1:7001";
  CHECK_RC(redlock_options_set_nodes(o, dup, strlen(dup), r), REDLOCK_E_INVALID);
  CHECK_RC(redlock_options_set_node_timeout_ms(o, 0), REDLOCK_E_INVALID);
  CHECK_RC(redlock_options_set_node_timeout_ms(o, UINT64_MAX), REDLOCK_E_INVALID);
  CHECK_RC(redlock_options_set_drift_factor(o, 0.7), REDLOCK_E_INVALID);
  CHECK_RC(redlock_options_set_retry(o, -1, 10, 10), REDLOCK_E_INVALID);
  CHECK_RC(redlock_options_set_key_prefix(o, NULL, 3), REDLOCK_E_INVALID);

  /* No nodes set (the bad lists above changed nothing): the client refuses, saying why. */
  redlock_client* c = NULL;
  CHECK_RC(redlock_client_new(o, &c, r), REDLOCK_E_INVALID);
  CHECK(c == NULL);
  CHECK(strstr(redlock_result_message(r), "no nodes") != NULL);

  /* TLS (C API version 3): a CA file that does not exist is refused by redlock_client_new, which
   * names it; nothing is sent. */
  const char* tls_node = "rediss://127.0.0.1:1";
  CHECK_RC(redlock_options_set_nodes(o, tls_node, strlen(tls_node), r), REDLOCK_OK);
  CHECK_RC(redlock_options_set_tls(o, 1), REDLOCK_OK);
  const char* missing = "/nonexistent/redlock-ca.pem";
  CHECK_RC(redlock_options_set_tls_ca_file(o, missing, strlen(missing)), REDLOCK_OK);
  CHECK_RC(redlock_options_set_tls_ca_file(o, NULL, 3), REDLOCK_E_INVALID);
  CHECK_RC(redlock_options_set_tls_client_cert(o, NULL, 1, NULL, 0), REDLOCK_E_INVALID);
  CHECK_RC(redlock_options_set_tls_server_name(o, "localhost", 9), REDLOCK_OK);
  CHECK_RC(redlock_options_set_tls_insecure_skip_verify(o, 0), REDLOCK_OK);
  CHECK_RC(redlock_client_new(o, &c, r), REDLOCK_E_INVALID);
  CHECK(c == NULL);
  CHECK(strstr(redlock_result_message(r), missing) != NULL);
  CHECK_RC(redlock_options_set_tls_ca_file(o, NULL, 0), REDLOCK_OK); /* back to the system's CAs */
  CHECK_RC(redlock_options_set_tls(NULL, 1), REDLOCK_E_INVALID);

  redlock_acquire_options* ao = NULL;
  REQUIRE(redlock_acquire_options_new(&ao) == REDLOCK_OK);
  CHECK_RC(redlock_acquire_options_set_ttl_ms(ao, 0), REDLOCK_E_INVALID);
  CHECK_RC(redlock_acquire_options_set_ttl_ms(ao, 366ULL * 24 * 3600 * 1000), REDLOCK_E_INVALID);
  CHECK_RC(redlock_acquire_options_set_retry_count(ao, -2), REDLOCK_E_INVALID);
  CHECK_RC(redlock_acquire_options_free(ao), REDLOCK_OK);
  CHECK_RC(redlock_acquire_options_free(ao), REDLOCK_E_INVALID);

  CHECK_RC(redlock_options_free(o), REDLOCK_OK);
  CHECK_RC(redlock_options_free(o), REDLOCK_E_INVALID);
  CHECK_RC(redlock_options_set_node_timeout_ms(o, 50), REDLOCK_E_INVALID); /* freed */
  CHECK_RC(redlock_client_new(o, &c, r), REDLOCK_E_INVALID);
  redlock_result_free(r);
}

static void test_acquire_contend_extend_release(redlock_client* c) {
  int q = 0;
  CHECK_RC(redlock_client_quorum(c, &q), REDLOCK_OK);
  CHECK(q == 2); /* 3 nodes */

  redlock_result* r = NULL;
  REQUIRE(redlock_result_new(&r) == REDLOCK_OK);
  static const char res[] = "capi-basic";
  redlock_lock* l = NULL;
  CHECK_RC(redlock_acquire(c, res, strlen(res), 10000, &l, r), REDLOCK_OK);
  REQUIRE(l != NULL);
  CHECK(redlock_result_code(r) == REDLOCK_OK);
  CHECK(redlock_result_attempts(r) == 1);

  /* The per-node record: every configured node, in order. */
  REQUIRE(redlock_result_node_count(r) == 3);
  CHECK(decided_by(r, "ok"));
  for (size_t i = 0; i < NSERVERS; ++i) {
    char want[32];
    snprintf(want, sizeof want, "127.0.0.1:%d", server_port[i]);
    CHECK(strcmp(redlock_result_node_name(r, i), want) == 0);
    CHECK(redlock_result_node_latency_us(r, i) >= 0);
    CHECK(redlock_result_node_detail(r, i) != NULL);
  }
  CHECK(redlock_result_node_name(r, 3) == NULL);

  const char* tok = NULL;
  size_t tok_len = 0;
  CHECK_RC(redlock_lock_token(l, &tok, &tok_len), REDLOCK_OK);
  CHECK(tok_len == 40);
  CHECK(strspn(tok, "0123456789abcdef") >= 40);
  CHECK(wait_exists(res, strlen(res), 3) == 3);
  int votes = 0;
  CHECK_RC(redlock_lock_votes(l, &votes), REDLOCK_OK);
  CHECK(votes >= 2);
  uint64_t validity = 0, left = 0;
  CHECK_RC(redlock_lock_validity_ms(l, &validity), REDLOCK_OK);
  CHECK(validity > 9000 && validity <= 10000);
  CHECK_RC(redlock_lock_remaining_ms(l, &left), REDLOCK_OK);
  CHECK(left > 9000 && left <= 10000);
  CHECK_RC(redlock_lock_check(l, NULL), REDLOCK_OK);
  uint64_t fence = 0;
  CHECK_RC(redlock_lock_fence(l, &fence), REDLOCK_E_INVALID); /* not requested */

  /* Contended: a second acquisition of the same resource, through the same client. */
  redlock_lock* l2 = (redlock_lock*)(uintptr_t)0x1;
  CHECK_RC(acquire_once(c, res, strlen(res), 10000, &l2, r), REDLOCK_E_CONTENDED);
  CHECK(l2 == NULL);
  CHECK(redlock_result_code(r) == REDLOCK_E_CONTENDED);
  CHECK(decided_by(r, "held-by-other"));
  CHECK(strlen(redlock_result_message(r)) > 0);

  /* Extend: the local deadline moves past the first ttl. */
  CHECK_RC(redlock_extend(l, 20000, r), REDLOCK_OK);
  CHECK(decided_by(r, "ok"));
  CHECK_RC(redlock_lock_remaining_ms(l, &left), REDLOCK_OK);
  CHECK(left > 15000);
  int ext = 0;
  CHECK_RC(redlock_lock_extensions(l, &ext), REDLOCK_OK);
  CHECK(ext == 1);
  CHECK_RC(redlock_extend(l, 0, r), REDLOCK_E_INVALID); /* ttl must be positive */

  /* Release: gone from every node; idempotent; the handle still answers. */
  CHECK_RC(redlock_release(l, r), REDLOCK_OK);
  CHECK(count_state(r, "ok") >= 1);
  CHECK(wait_exists(res, strlen(res), 0) == 0);
  CHECK_RC(redlock_release(l, r), REDLOCK_OK);
  CHECK(redlock_result_node_count(r) == 0); /* nothing sent the second time */
  CHECK_RC(redlock_lock_check(l, r), REDLOCK_E_NOT_HELD);
  CHECK_RC(redlock_lock_remaining_ms(l, &left), REDLOCK_OK);
  CHECK(left == 0);
  CHECK_RC(redlock_extend(l, 1000, r), REDLOCK_E_NOT_HELD);
  CHECK_RC(redlock_lock_token(l, &tok, &tok_len), REDLOCK_OK);
  CHECK_RC(redlock_lock_free(l), REDLOCK_OK);

  /* Freeing a held lock releases it on the nodes. */
  CHECK_RC(acquire_once(c, res, strlen(res), 10000, &l, r), REDLOCK_OK);
  CHECK(wait_exists(res, strlen(res), 3) == 3);
  CHECK_RC(redlock_lock_free(l), REDLOCK_OK);
  CHECK(wait_exists(res, strlen(res), 0) == 0);
  CHECK_RC(acquire_once(c, res, strlen(res), 10000, &l, r), REDLOCK_OK);
  CHECK_RC(redlock_lock_free(l), REDLOCK_OK);

  /* A lost token: extend reports it and check remembers it. */
  CHECK_RC(acquire_once(c, res, strlen(res), 10000, &l, r), REDLOCK_OK);
  redis_del_everywhere(res, strlen(res));
  CHECK_RC(redlock_extend(l, 10000, r), REDLOCK_E_NOT_HELD);
  CHECK(decided_by(r, "not-held"));
  CHECK_RC(redlock_lock_check(l, r), REDLOCK_E_NOT_HELD);
  CHECK(redlock_result_node_count(r) == 3);
  CHECK_RC(redlock_lock_free(l), REDLOCK_OK);

  /* Empty and NULL resources are refused before anything is sent. */
  CHECK_RC(redlock_acquire(c, "", 0, 1000, &l, r), REDLOCK_E_INVALID);
  CHECK(strstr(redlock_result_message(r), "empty") != NULL);
  CHECK_RC(redlock_acquire(c, NULL, 4, 1000, &l, r), REDLOCK_E_INVALID);
  CHECK_RC(redlock_acquire(c, "x", 1, 0, &l, r), REDLOCK_E_INVALID);
  CHECK(l == NULL);
  redlock_result_free(r);
}

/* A node that is down: still acquired (3 of 4), and the record says which node did not vote. */
static void test_down_node(void) {
  redlock_client* c = make_client_for(node_list_dead);
  int q = 0;
  CHECK_RC(redlock_client_quorum(c, &q), REDLOCK_OK);
  CHECK(q == 3);
  redlock_result* r = NULL;
  REQUIRE(redlock_result_new(&r) == REDLOCK_OK);
  redlock_lock* l = NULL;
  CHECK_RC(redlock_acquire(c, "capi-down", 9, 10000, &l, r), REDLOCK_OK);
  REQUIRE(redlock_result_node_count(r) == 4);
  CHECK(count_state(r, "ok") == 3);
  char dead[32];
  snprintf(dead, sizeof dead, "127.0.0.1:%d", dead_port);
  CHECK(strcmp(redlock_result_node_name(r, 3), dead) == 0);
  CHECK(strcmp(redlock_result_node_state(r, 3), "down") == 0);
  CHECK(strlen(redlock_result_node_detail(r, 3)) > 0); /* why: e.g. "Connection refused" */
  CHECK(redlock_result_node_latency_us(r, 3) >= 0);
  CHECK(redlock_result_node_name(r, 4) == NULL);
  int votes = 0;
  CHECK_RC(redlock_lock_votes(l, &votes), REDLOCK_OK);
  CHECK(votes == 3);
  CHECK_RC(redlock_release(l, r), REDLOCK_OK);
  CHECK(count_state(r, "ok") >= 1);
  CHECK(wait_exists("capi-down", 9, 0) == 0);
  CHECK_RC(redlock_lock_free(l), REDLOCK_OK);
  redlock_result_free(r);
  CHECK_RC(redlock_client_free(c), REDLOCK_OK);
}

/* ---- the logger (C API version 4) ---------------------------------------------------------*/

struct log_record {
  pthread_mutex_t mu;
  pthread_t caller;      /* the thread that makes the calls */
  redlock_client* other; /* the logger tries a blocking call with it: refused there */
  int calls, below_min, on_caller_thread, leaked, quorum_rc, saw_connect_failed, saw_auth_failed;
  int min_level;
};

static void record_log(void* user, int level, const char* message) {
  struct log_record* r = user;
  pthread_mutex_lock(&r->mu);
  ++r->calls;
  r->below_min += level < r->min_level || level > REDLOCK_LOG_ERROR;
  r->on_caller_thread += pthread_equal(pthread_self(), r->caller) != 0;
  r->leaked += strstr(message, "S3CR3T") != NULL;
  r->saw_connect_failed += strstr(message, "connect failed") != NULL;
  r->saw_auth_failed += strstr(message, "AUTH failed") != NULL && level == REDLOCK_LOG_ERROR;
  int q = 0; /* a call that waits for an I/O thread (with its own client: a deadlock) */
  r->quorum_rc = redlock_client_quorum(r->other, &q);
  pthread_mutex_unlock(&r->mu);
}

static int log_seen(struct log_record* r, int connect_failed, int auth_failed) {
  for (int i = 0; i < 250; ++i) { /* up to 5 s */
    pthread_mutex_lock(&r->mu);
    int done = (!connect_failed || r->saw_connect_failed) && (!auth_failed || r->saw_auth_failed);
    pthread_mutex_unlock(&r->mu);
    if (done) return 1;
    sleep_ms(20);
  }
  return 0;
}

/* Node 0 refuses our password (the servers have none), node 1 grants, node 2 is down. */
static redlock_client* make_logged_client(struct log_record* r, int min_level,
                                          redlock_client* other) {
  char nodes[256];
  snprintf(nodes, sizeof nodes, "redis://:S3CR3T-pw@127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
           server_port[0], server_port[1], dead_port);
  redlock_options* o = NULL;
  REQUIRE(redlock_options_new(&o) == REDLOCK_OK);
  REQUIRE(redlock_options_set_nodes(o, nodes, strlen(nodes), NULL) == REDLOCK_OK);
  REQUIRE(redlock_options_set_retry(o, 0, 50, 10) == REDLOCK_OK);
  REQUIRE(redlock_options_set_node_timeout_ms(o, 250) == REDLOCK_OK);
  memset(r, 0, sizeof *r);
  pthread_mutex_init(&r->mu, NULL);
  r->caller = pthread_self();
  r->min_level = min_level;
  r->quorum_rc = -1;
  r->other = other;
  CHECK_RC(redlock_options_set_logger(o, record_log, min_level, r), REDLOCK_OK);
  redlock_client* c = NULL;
  REQUIRE(redlock_client_new(o, &c, NULL) == REDLOCK_OK);
  redlock_options_free(o);
  return c;
}

static void test_logger_and_auth_failed(redlock_client* other) {
  redlock_options* o = NULL;
  REQUIRE(redlock_options_new(&o) == REDLOCK_OK);
  struct log_record unused;
  CHECK_RC(redlock_options_set_logger(NULL, record_log, REDLOCK_LOG_DEBUG, &unused),
           REDLOCK_E_INVALID);
  CHECK_RC(redlock_options_set_logger(o, record_log, REDLOCK_LOG_DEBUG - 1, &unused),
           REDLOCK_E_INVALID);
  CHECK_RC(redlock_options_set_logger(o, record_log, REDLOCK_LOG_ERROR + 1, &unused),
           REDLOCK_E_INVALID);
  CHECK_RC(redlock_options_set_logger(o, NULL, REDLOCK_LOG_DEBUG, NULL), REDLOCK_OK); /* silent */
  redlock_options_free(o);

  /* Everything from debug on: the connect failures of the node that is down and the refused AUTH,
   * on the client's I/O thread, where a blocking call is refused, and never the password. */
  struct log_record all;
  redlock_client* c = make_logged_client(&all, REDLOCK_LOG_DEBUG, other);
  redlock_result* r = NULL;
  REQUIRE(redlock_result_new(&r) == REDLOCK_OK);
  /* The refusal is the node's state once its handshake is done ("down" before that). */
  const char* state = "";
  for (int i = 0; i < 50 && strcmp(state, "auth-failed") != 0; ++i) {
    redlock_lock* l = NULL;
    CHECK(redlock_acquire(c, "capi-log", 8, 10000, &l, r) != REDLOCK_OK); /* 1 vote of 3 */
    CHECK(l == NULL);
    state = redlock_result_node_count(r) == 3 ? redlock_result_node_state(r, 0) : "";
    if (strcmp(state, "auth-failed") != 0) sleep_ms(50);
  }
  CHECK(strcmp(state, "auth-failed") == 0);
  CHECK(strstr(redlock_result_node_detail(r, 0), "S3CR3T") == NULL);
  CHECK(log_seen(&all, 1, 1));
  /* Rolled back where it was granted. (Node 0 may keep it until its ttl: a command pipelined
   * behind the refused AUTH runs on a server that needs no password. Reported, not ours here.) */
  for (int i = 0; i < 200 && redis_exists(server_port[1], "capi-log", 8); ++i) sleep_ms(10);
  CHECK(!redis_exists(server_port[1], "capi-log", 8));
  redis_del_everywhere("capi-log", 8);
  CHECK_RC(redlock_client_free(c), REDLOCK_OK); /* no call after this returns */
  pthread_mutex_lock(&all.mu);
  const int calls = all.calls;
  pthread_mutex_unlock(&all.mu);
  sleep_ms(100);
  CHECK(all.calls == calls);
  CHECK(all.on_caller_thread == 0);
  CHECK(all.leaked == 0);
  CHECK(all.below_min == 0);
  CHECK_RC(all.quorum_rc, REDLOCK_E_INVALID);

  /* From warnings on: the refused AUTH (an error) comes, and a node's connect failure once, when
   * it goes down (issue 41 item 4), never once per reconnect (debug). */
  struct log_record errors;
  c = make_logged_client(&errors, REDLOCK_LOG_WARNING, other);
  redlock_lock* l = NULL;
  for (int i = 0; i < 50 && !log_seen(&errors, 0, 1); ++i) {
    CHECK(redlock_acquire(c, "capi-log", 8, 10000, &l, r) != REDLOCK_OK);
  }
  CHECK(errors.saw_auth_failed > 0);
  sleep_ms(600); /* several reconnects of the dead node (backoff from 50 ms) */
  CHECK_RC(redlock_client_free(c), REDLOCK_OK);
  CHECK(errors.saw_connect_failed == 1); /* node 2 going down (node 0's drop says AUTH failed) */
  CHECK(errors.below_min == 0);
  CHECK(errors.leaked == 0);
  redlock_result_free(r);
}

static void test_nul_bytes(redlock_client* c) {
  static const char a[] = {'n', 'u', 'l', '\0', 'a'};
  static const char b[] = {'n', 'u', 'l', '\0', 'b'};
  redlock_lock *la = NULL, *lb = NULL, *lp = NULL, *again = NULL;
  CHECK_RC(acquire_once(c, a, sizeof a, 10000, &la, NULL), REDLOCK_OK);
  /* The key on the servers is all five bytes, not "nul". */
  CHECK(wait_exists(a, sizeof a, 3) == 3);
  CHECK(wait_exists("nul", 3, 0) == 0);
  /* Distinct names stay distinct; the same name is contended. */
  CHECK_RC(acquire_once(c, b, sizeof b, 10000, &lb, NULL), REDLOCK_OK);
  CHECK_RC(acquire_once(c, "nul", 3, 10000, &lp, NULL), REDLOCK_OK);
  CHECK_RC(acquire_once(c, a, sizeof a, 10000, &again, NULL), REDLOCK_E_CONTENDED);
  size_t n = 0;
  const char* data = NULL;
  size_t len = 0;
  CHECK_RC(redlock_lock_resource_count(la, &n), REDLOCK_OK);
  CHECK(n == 1);
  CHECK_RC(redlock_lock_resource(la, 0, &data, &len), REDLOCK_OK);
  CHECK(len == sizeof a && memcmp(data, a, len) == 0);
  CHECK_RC(redlock_lock_resource(la, 1, &data, &len), REDLOCK_E_INVALID);
  CHECK_RC(redlock_release(la, NULL), REDLOCK_OK);
  CHECK(wait_exists(a, sizeof a, 0) == 0);
  CHECK(wait_exists(b, sizeof b, 3) == 3); /* releasing one did not touch the other */
  redlock_lock_free(la);
  redlock_lock_free(lb);
  redlock_lock_free(lp);
}

static void test_fence(redlock_client* c) {
  redlock_acquire_options* ao = NULL;
  REQUIRE(redlock_acquire_options_new(&ao) == REDLOCK_OK);
  CHECK_RC(redlock_acquire_options_set_fence(ao, 1), REDLOCK_OK);
  CHECK_RC(redlock_acquire_options_set_retry_count(ao, 0), REDLOCK_OK);
  const char* res = "capi-fence";
  size_t len = strlen(res);
  uint64_t f1 = 0, f2 = 0;
  redlock_lock* l = NULL;
  CHECK_RC(redlock_acquire_ex(c, &res, &len, 1, ao, &l, NULL), REDLOCK_OK);
  CHECK_RC(redlock_lock_fence(l, &f1), REDLOCK_OK);
  CHECK(f1 >= 1);
  CHECK_RC(redlock_lock_free(l), REDLOCK_OK);
  CHECK_RC(redlock_acquire_ex(c, &res, &len, 1, ao, &l, NULL), REDLOCK_OK);
  CHECK_RC(redlock_lock_fence(l, &f2), REDLOCK_OK);
  CHECK(f2 > f1); /* strictly grows with every acquisition */
  CHECK_RC(redlock_lock_free(l), REDLOCK_OK);

  /* Fencing takes one resource per lock: refused with a reason, nothing held. */
  const char* two[2] = {"capi-fence-a", "capi-fence-b"};
  size_t lens[2] = {12, 12};
  redlock_result* r = NULL;
  REQUIRE(redlock_result_new(&r) == REDLOCK_OK);
  CHECK_RC(redlock_acquire_ex(c, two, lens, 2, ao, &l, r), REDLOCK_E_INVALID);
  CHECK(strstr(redlock_result_message(r), "one resource") != NULL);
  /* Without fencing, two resources make one lock. */
  CHECK_RC(redlock_acquire_ex(c, two, lens, 2, NULL, &l, r), REDLOCK_OK);
  size_t n = 0;
  CHECK_RC(redlock_lock_resource_count(l, &n), REDLOCK_OK);
  CHECK(n == 2);
  CHECK(wait_exists(two[0], lens[0], 3) == 3 && wait_exists(two[1], lens[1], 3) == 3);
  CHECK_RC(redlock_lock_free(l), REDLOCK_OK);
  CHECK(wait_exists(two[0], lens[0], 0) == 0 && wait_exists(two[1], lens[1], 0) == 0);
  redlock_result_free(r);
  redlock_acquire_options_free(ao);
}

/* What the loss callback saw. Written on the client's I/O thread, read on the main thread. */
struct loss_state {
  atomic_int calls;
  atomic_int reason;
  char message[256];
  redlock_client* client;
  atomic_int free_rc;    /* redlock_client_free from inside the callback */
  atomic_int acquire_rc; /* redlock_acquire from inside the callback */
  redlock_lock* lock;
  atomic_int check_rc; /* an accessor from inside the callback */
};

static void on_lost(void* user, int reason, const char* message) {
  struct loss_state* st = user;
  snprintf(st->message, sizeof st->message, "%s", message ? message : "(null)");
  atomic_store(&st->reason, reason);
  redlock_lock* l = NULL;
  atomic_store(&st->acquire_rc, redlock_acquire(st->client, "capi-cb", 7, 1000, &l, NULL));
  atomic_store(&st->free_rc, redlock_client_free(st->client));
  atomic_store(&st->check_rc, redlock_lock_check(st->lock, NULL));
  atomic_fetch_add(&st->calls, 1); /* last: the main thread reads the rest after seeing this */
}

static void test_auto_extend_and_loss(redlock_client* c) {
  static struct loss_state st;
  st.client = c;
  atomic_store(&st.calls, 0);
  atomic_store(&st.check_rc, -1);
  redlock_acquire_options* ao = NULL;
  REQUIRE(redlock_acquire_options_new(&ao) == REDLOCK_OK);
  /* Short enough to see several extensions, long enough not to be lost on a busy machine. */
  CHECK_RC(redlock_acquire_options_set_ttl_ms(ao, 1200), REDLOCK_OK);
  CHECK_RC(redlock_acquire_options_set_auto_extend(ao, 1, 200, on_lost, &st), REDLOCK_OK);
  const char* res = "capi-watch";
  size_t len = strlen(res);
  redlock_lock* l = NULL;
  REQUIRE(redlock_acquire_ex(c, &res, &len, 1, ao, &l, NULL) == REDLOCK_OK);
  st.lock = l;

  /* Held well past its ttl: the watchdog extends it. */
  sleep_ms(1600);
  CHECK_RC(redlock_lock_check(l, NULL), REDLOCK_OK);
  int ext = 0;
  CHECK_RC(redlock_lock_extensions(l, &ext), REDLOCK_OK);
  CHECK(ext >= 3);
  uint64_t left = 0;
  CHECK_RC(redlock_lock_remaining_ms(l, &left), REDLOCK_OK);
  CHECK(left > 0 && left <= 1200);
  CHECK(wait_exists(res, len, 3) == 3);
  CHECK(atomic_load(&st.calls) == 0);
  CHECK_RC(redlock_extend(l, 1000, NULL), REDLOCK_E_INVALID); /* the watchdog's job */

  /* The token disappears from the nodes: the next extension finds it gone. */
  redis_del_everywhere(res, len);
  for (int i = 0; i < 300 && atomic_load(&st.calls) == 0; ++i) sleep_ms(10);
  CHECK(atomic_load(&st.calls) == 1);
  CHECK(atomic_load(&st.reason) == REDLOCK_E_NOT_HELD);
  CHECK(strlen(st.message) > 0);
  /* Inside the callback: blocking calls refused, accessors fine. */
  CHECK(atomic_load(&st.acquire_rc) == REDLOCK_E_INVALID);
  CHECK(atomic_load(&st.free_rc) == REDLOCK_E_INVALID);
  CHECK(atomic_load(&st.check_rc) == REDLOCK_E_NOT_HELD);
  redlock_result* r = NULL;
  REQUIRE(redlock_result_new(&r) == REDLOCK_OK);
  CHECK_RC(redlock_lock_check(l, r), REDLOCK_E_NOT_HELD);
  CHECK(strcmp(redlock_result_message(r), st.message) == 0);
  CHECK_RC(redlock_lock_remaining_ms(l, &left), REDLOCK_OK);
  CHECK(left == 0);
  sleep_ms(400);
  CHECK(atomic_load(&st.calls) == 1); /* exactly once */
  CHECK_RC(redlock_lock_free(l), REDLOCK_OK);

  /* The client survived the refused free inside the callback. */
  redlock_lock* l2 = NULL;
  CHECK_RC(redlock_acquire(c, "capi-after-cb", 13, 5000, &l2, NULL), REDLOCK_OK);
  redlock_lock_free(l2);

  /* Released before anything went wrong: no callback, ever. */
  atomic_store(&st.calls, 0);
  REQUIRE(redlock_acquire_ex(c, &res, &len, 1, ao, &l, NULL) == REDLOCK_OK);
  st.lock = l;
  sleep_ms(300);
  CHECK_RC(redlock_release(l, NULL), REDLOCK_OK);
  CHECK(wait_exists(res, len, 0) == 0);
  sleep_ms(1400); /* past the ttl: the watchdog is stopped, the local deadline passed */
  CHECK(atomic_load(&st.calls) == 0);
  CHECK_RC(redlock_lock_free(l), REDLOCK_OK);

  /* extend_every must be below the ttl. */
  CHECK_RC(redlock_acquire_options_set_auto_extend(ao, 1, 1200, NULL, NULL), REDLOCK_OK);
  CHECK_RC(redlock_acquire_ex(c, &res, &len, 1, ao, &l, r), REDLOCK_E_INVALID);
  CHECK(l == NULL);
  redlock_result_free(r);
  redlock_acquire_options_free(ao);
}

/* Issue 40 item 11: redlock_lock_free inside a loss callback (on the client's I/O thread) holds
 * a reference to the client's state while it sends the release; redlock_client_free on the main
 * thread at that moment left the last reference to the I/O thread, which then joined itself
 * (std::terminate). Each round moves the main thread's moment a little within that window. */
struct race_state {
  atomic_int lost;
  redlock_lock* lock;
  atomic_int free_rc;
};

static void free_in_callback(void* user, int reason, const char* message) {
  (void)reason;
  (void)message;
  struct race_state* st = user;
  atomic_store(&st->lost, 1);
  atomic_store(&st->free_rc, redlock_lock_free(st->lock));
}

static void spin_us(long us) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do {
    clock_gettime(CLOCK_MONOTONIC, &b);
  } while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

static void test_lock_free_in_callback_races_client_free(void) {
  enum { rounds = 40 };
  /* Static: a callback may still be running when its round ends. */
  static struct race_state st[rounds];
  int lost = 0;
  for (int i = 0; i < rounds; ++i) {
    struct race_state* s = &st[i];
    atomic_store(&s->lost, 0);
    atomic_store(&s->free_rc, -1);
    redlock_client* c = make_client();
    redlock_acquire_options* ao = NULL;
    REQUIRE(redlock_acquire_options_new(&ao) == REDLOCK_OK);
    CHECK_RC(redlock_acquire_options_set_ttl_ms(ao, 10000), REDLOCK_OK);
    CHECK_RC(redlock_acquire_options_set_auto_extend(ao, 1, 20, free_in_callback, s), REDLOCK_OK);
    /* Set-up, not the race: a fresh client's first round may miss a node still in its handshake
     * on a loaded machine (1 run in 5 beside stress-ng), so it may try again. */
    CHECK_RC(redlock_acquire_options_set_retry_count(ao, 5), REDLOCK_OK);
    char res[32];
    snprintf(res, sizeof res, "capi-race-%d", i);
    const char* name = res;
    size_t len = strlen(res);
    redlock_lock* l = NULL;
    /* The callback reads s->lock: set before the key goes away below. */
    REQUIRE(redlock_acquire_ex(c, &name, &len, 1, ao, &l, NULL) == REDLOCK_OK);
    s->lock = l;
    redlock_acquire_options_free(ao);
    redis_del_everywhere(res, len);
    /* Spinning, not sleeping: the window opens the moment the flag is set. */
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
      clock_gettime(CLOCK_MONOTONIC, &t);
    } while (!atomic_load(&s->lost) && t.tv_sec - t0.tv_sec < 10);
    if (atomic_load(&s->lost)) {
      ++lost;
      spin_us(i % 20);
    }
    CHECK_RC(redlock_client_free(c), REDLOCK_OK);
  }
  CHECK(lost == rounds);
  /* Every callback got to free its lock. */
  for (int i = 0; i < rounds; ++i) {
    for (int w = 0; w < 400 && atomic_load(&st[i].free_rc) == -1; ++w) sleep_ms(5);
    CHECK(atomic_load(&st[i].free_rc) == REDLOCK_OK);
  }
}

struct cancel_args {
  redlock_client* client;
  redlock_acquire_options* options;
  const char* resource;
  int rc;
};

static void* acquire_in_thread(void* p) {
  struct cancel_args* a = p;
  size_t len = strlen(a->resource);
  redlock_lock* l = NULL;
  a->rc = redlock_acquire_ex(a->client, &a->resource, &len, 1, a->options, &l, NULL);
  if (l) redlock_lock_free(l);
  return NULL;
}

static void test_cancel(redlock_client* c) {
  static const char res[] = "capi-cancel";
  redlock_lock* holder = NULL;
  CHECK_RC(redlock_acquire(c, res, strlen(res), 20000, &holder, NULL), REDLOCK_OK);
  redlock_cancel* cancel = NULL;
  REQUIRE(redlock_cancel_new(&cancel) == REDLOCK_OK);
  redlock_acquire_options* ao = NULL;
  REQUIRE(redlock_acquire_options_new(&ao) == REDLOCK_OK);
  CHECK_RC(redlock_acquire_options_set_wait_ms(ao, 30000), REDLOCK_OK);
  CHECK_RC(redlock_acquire_options_set_cancel(ao, cancel), REDLOCK_OK);

  /* Another thread waits up to 30 s for the held lock; the request ends the wait. */
  struct cancel_args a = {c, ao, res, -1};
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, acquire_in_thread, &a) == 0);
  sleep_ms(300);
  time_t start = time(NULL);
  CHECK_RC(redlock_cancel_request(cancel), REDLOCK_OK);
  CHECK_RC(redlock_cancel_request(cancel), REDLOCK_OK); /* idempotent */
  pthread_join(t, NULL);
  CHECK(time(NULL) - start < 10);
  CHECK_RC(a.rc, REDLOCK_E_CANCELLED);
  CHECK(wait_exists(res, strlen(res), 3) == 3); /* the holder is untouched */

  /* Requested before the call: cancelled at once, nothing sent. */
  static const char other[] = "capi-cancel-later";
  struct cancel_args b = {c, ao, other, -1};
  acquire_in_thread(&b);
  CHECK_RC(b.rc, REDLOCK_E_CANCELLED);
  CHECK(wait_exists(other, strlen(other), 0) == 0);

  /* A freed source is refused; NULL makes the options not cancellable again. */
  CHECK_RC(redlock_cancel_free(cancel), REDLOCK_OK);
  CHECK_RC(redlock_cancel_request(cancel), REDLOCK_E_INVALID);
  CHECK_RC(redlock_acquire_options_set_cancel(ao, cancel), REDLOCK_E_INVALID);
  CHECK_RC(redlock_acquire_options_set_cancel(ao, NULL), REDLOCK_OK);
  CHECK_RC(redlock_acquire_options_set_wait_ms(ao, 0), REDLOCK_OK);
  CHECK_RC(redlock_acquire_options_set_retry_count(ao, 0), REDLOCK_OK);
  acquire_in_thread(&b);
  CHECK_RC(b.rc, REDLOCK_OK);
  CHECK(wait_exists(other, strlen(other), 0) == 0); /* freed (released) by the thread */
  CHECK_RC(redlock_lock_free(holder), REDLOCK_OK);
  redlock_acquire_options_free(ao);
}

static void test_freed_handles(void) {
  redlock_client* c = make_client();
  redlock_lock* l = NULL;
  static const char res[] = "capi-freed";
  CHECK_RC(redlock_acquire(c, res, strlen(res), 10000, &l, NULL), REDLOCK_OK);
  redlock_result* r = NULL;
  REQUIRE(redlock_result_new(&r) == REDLOCK_OK);

  CHECK_RC(redlock_client_free(c), REDLOCK_OK);
  CHECK_RC(redlock_client_free(c), REDLOCK_E_INVALID); /* double free: detected */
  redlock_lock* l2 = NULL;
  CHECK_RC(redlock_acquire(c, "x", 1, 1000, &l2, r), REDLOCK_E_INVALID);
  CHECK(strstr(redlock_result_message(r), "invalid client handle") != NULL);
  int q = 0;
  CHECK_RC(redlock_client_quorum(c, &q), REDLOCK_E_INVALID);

  /* A lock of a freed client: its handle still answers, operations say the client is gone, and
   * (as documented) freeing the client did not release it. */
  const char* tok = NULL;
  size_t tok_len = 0;
  CHECK_RC(redlock_lock_token(l, &tok, &tok_len), REDLOCK_OK);
  CHECK_RC(redlock_extend(l, 1000, r), REDLOCK_E_SHUTDOWN);
  CHECK_RC(redlock_release(l, r), REDLOCK_E_SHUTDOWN);
  CHECK(wait_exists(res, strlen(res), 3) == 3);
  CHECK_RC(redlock_lock_free(l), REDLOCK_OK);
  CHECK_RC(redlock_lock_free(l), REDLOCK_E_INVALID);
  CHECK_RC(redlock_lock_token(l, &tok, &tok_len), REDLOCK_E_INVALID);
  CHECK_RC(redlock_release(l, r), REDLOCK_E_INVALID);
  CHECK_RC(redlock_lock_check(l, r), REDLOCK_E_INVALID);
  redis_del_everywhere(res, strlen(res));

  /* A freed result is refused as detail, and the operation is not carried out. */
  CHECK_RC(redlock_result_free(r), REDLOCK_OK);
  CHECK_RC(redlock_result_free(r), REDLOCK_E_INVALID);
  CHECK(redlock_result_code(r) == REDLOCK_E_INVALID);
  CHECK(redlock_result_message(r) == NULL);
  redlock_client* c2 = make_client();
  CHECK_RC(redlock_acquire(c2, res, strlen(res), 10000, &l, r), REDLOCK_E_INVALID);
  CHECK(l == NULL);
  CHECK(wait_exists(res, strlen(res), 0) == 0);

  /* New handles never reuse a freed one's value. */
  redlock_client* c3 = make_client();
  CHECK(c3 != c && c2 != c);
  CHECK_RC(redlock_client_free(c3), REDLOCK_OK);
  CHECK_RC(redlock_client_free(c2), REDLOCK_OK);
}

/* ---- leader election -----------------------------------------------------------------------*/

#define ELECTION "capi-elect"
/* The waiting candidates' mark beside the election's lock key (redlock/keys.hpp, "waiting"). */
#define ELECTION_WAITING "{" ELECTION "}:redlock:waiting:" ELECTION

static redlock_election* make_election(redlock_client* c, const char* id) {
  redlock_election* e = NULL;
  REQUIRE(redlock_election_new(c, ELECTION, strlen(ELECTION), id, id ? strlen(id) : 0, &e, NULL) ==
          REDLOCK_OK);
  return e;
}

/* What an observer saw, in order. */
#define MAX_SEEN 64
struct seen {
  pthread_mutex_t mu;
  int count;
  int code[MAX_SEEN];
  char id[MAX_SEEN][REDLOCK_IDENTITY_MAX + 1];
  uint64_t term[MAX_SEEN];
};

static void record_change(void* user, int code, const char* id, size_t id_len, uint64_t term) {
  struct seen* s = user;
  pthread_mutex_lock(&s->mu);
  if (s->count < MAX_SEEN) {
    s->code[s->count] = code;
    memcpy(s->id[s->count], id ? id : "", id_len);
    s->id[s->count][id_len] = '\0';
    s->term[s->count] = term;
    ++s->count;
  }
  pthread_mutex_unlock(&s->mu);
}

/* Waits (up to 5 s) until the last change seen is `id` leading; returns its term or 0. */
static uint64_t wait_seen_leader(struct seen* s, const char* id) {
  for (int i = 0; i < 500; ++i) {
    pthread_mutex_lock(&s->mu);
    uint64_t term = 0;
    if (s->count > 0 && s->code[s->count - 1] == REDLOCK_OK && strcmp(s->id[s->count - 1], id) == 0)
      term = s->term[s->count - 1];
    pthread_mutex_unlock(&s->mu);
    if (term) return term;
    sleep_ms(10);
  }
  return 0;
}

struct campaign_args {
  redlock_election* election;
  redlock_acquire_options* options; /* may be NULL */
  redlock_leadership* leadership;
  atomic_int done;
  int rc;
  char message[256];
};

static void* campaign_in_thread(void* p) {
  struct campaign_args* a = p;
  redlock_result* r = NULL;
  REQUIRE(redlock_result_new(&r) == REDLOCK_OK);
  a->rc = redlock_campaign(a->election, a->options, &a->leadership, r);
  snprintf(a->message, sizeof a->message, "%s", redlock_result_message(r));
  redlock_result_free(r);
  atomic_store(&a->done, 1);
  return NULL;
}

/* Waits up to `ms` for the thread's campaign to end; returns whether it did. */
static int wait_done(atomic_int* done, long ms) {
  for (long i = 0; i < ms / 10 && !atomic_load(done); ++i) sleep_ms(10);
  return atomic_load(done);
}

static uint64_t leadership_term(const redlock_leadership* l) {
  uint64_t t = 0;
  CHECK_RC(redlock_leadership_term(l, &t), REDLOCK_OK);
  return t;
}

static void test_election_bad_input(redlock_client* c) {
  redlock_result* r = NULL;
  REQUIRE(redlock_result_new(&r) == REDLOCK_OK);
  redlock_election* e = (redlock_election*)(uintptr_t)0x1; /* must be reset to NULL */

  CHECK_RC(redlock_election_new(c, ELECTION, strlen(ELECTION), "", 0, &e, r), REDLOCK_E_INVALID);
  CHECK(e == NULL);
  CHECK(strstr(redlock_result_message(r), "identity is empty") != NULL);

  char big[REDLOCK_IDENTITY_MAX + 2];
  memset(big, 'x', sizeof big);
  CHECK_RC(redlock_election_new(c, ELECTION, strlen(ELECTION), big, sizeof big, &e, r),
           REDLOCK_E_INVALID);
  CHECK(strstr(redlock_result_message(r), "258 bytes") != NULL);
  /* The largest identity is accepted. */
  CHECK_RC(redlock_election_new(c, ELECTION, strlen(ELECTION), big, REDLOCK_IDENTITY_MAX, &e, r),
           REDLOCK_OK);
  CHECK_RC(redlock_election_free(e), REDLOCK_OK);
  CHECK_RC(redlock_election_free(e), REDLOCK_E_INVALID);

  CHECK_RC(redlock_election_new(c, ELECTION, strlen(ELECTION), "bad\nid", 6, &e, r),
           REDLOCK_E_INVALID);
  CHECK(strstr(redlock_result_message(r), "control character") != NULL);
  CHECK_RC(redlock_election_new(c, ELECTION, strlen(ELECTION), NULL, 3, &e, r), REDLOCK_E_INVALID);
  CHECK(strstr(redlock_result_message(r), "id is NULL") != NULL);
  CHECK_RC(redlock_election_new(c, "", 0, "a", 1, &e, r), REDLOCK_E_INVALID);
  CHECK(strstr(redlock_result_message(r), "election name") != NULL);
  CHECK_RC(redlock_election_new(c, NULL, 2, "a", 1, &e, r), REDLOCK_E_INVALID);
  CHECK(strstr(redlock_result_message(r), "name is NULL") != NULL);
  CHECK_RC(redlock_election_new(NULL, ELECTION, strlen(ELECTION), "a", 1, &e, r),
           REDLOCK_E_INVALID);
  CHECK(strstr(redlock_result_message(r), "invalid client handle") != NULL);
  CHECK_RC(redlock_election_new(c, ELECTION, strlen(ELECTION), "a", 1, NULL, r), REDLOCK_E_INVALID);
  CHECK(strstr(redlock_result_message(r), "out is NULL") != NULL);

  /* NULL handles and out-parameters. */
  redlock_leadership* l = (redlock_leadership*)(uintptr_t)0x1;
  CHECK_RC(redlock_campaign(NULL, NULL, &l, r), REDLOCK_E_INVALID);
  CHECK(l == NULL);
  CHECK(strstr(redlock_result_message(r), "invalid election handle") != NULL);
  CHECK_RC(redlock_campaign_async(NULL, NULL, NULL, NULL, r), REDLOCK_E_INVALID);
  CHECK_RC(redlock_leader(NULL, NULL, 0, NULL, NULL, NULL, NULL, r), REDLOCK_E_INVALID);
  redlock_observation* o = NULL;
  CHECK_RC(redlock_observe(NULL, 0, record_change, NULL, &o, r), REDLOCK_E_INVALID);
  CHECK_RC(redlock_observation_free(NULL), REDLOCK_E_INVALID);
  CHECK_RC(redlock_election_free(NULL), REDLOCK_E_INVALID);
  CHECK_RC(redlock_leadership_check(NULL, r), REDLOCK_E_INVALID);
  CHECK(strstr(redlock_result_message(r), "invalid leadership handle") != NULL);
  uint64_t u = 0;
  const char* data = NULL;
  size_t len = 0;
  CHECK_RC(redlock_leadership_term(NULL, &u), REDLOCK_E_INVALID);
  CHECK_RC(redlock_leadership_fence(NULL, &u), REDLOCK_E_INVALID);
  CHECK_RC(redlock_leadership_id(NULL, &data, &len), REDLOCK_E_INVALID);
  CHECK_RC(redlock_leadership_remaining_ms(NULL, &u), REDLOCK_E_INVALID);
  CHECK_RC(redlock_leadership_validity_ms(NULL, &u), REDLOCK_E_INVALID);
  CHECK_RC(redlock_leadership_resign(NULL, r), REDLOCK_E_INVALID);
  CHECK_RC(redlock_leadership_free(NULL), REDLOCK_E_INVALID);

  /* A wrong-kind handle (a client as an election), a read-only handle, NULL callbacks. */
  CHECK_RC(redlock_campaign((redlock_election*)c, NULL, &l, r), REDLOCK_E_INVALID);
  e = make_election(c, NULL);
  CHECK_RC(redlock_campaign(e, NULL, NULL, r), REDLOCK_E_INVALID);
  CHECK(strstr(redlock_result_message(r), "out is NULL") != NULL);
  CHECK_RC(redlock_campaign(e, NULL, &l, r), REDLOCK_E_INVALID);
  CHECK(strstr(redlock_result_message(r), "no candidate id") != NULL);
  CHECK_RC(redlock_campaign_async(e, NULL, NULL, NULL, r), REDLOCK_E_INVALID);
  CHECK(strstr(redlock_result_message(r), "fn is NULL") != NULL);
  CHECK_RC(redlock_observe(e, 0, NULL, NULL, &o, r), REDLOCK_E_INVALID);
  CHECK(strstr(redlock_result_message(r), "fn is NULL") != NULL);
  CHECK_RC(redlock_observe(e, 0, record_change, NULL, NULL, r), REDLOCK_E_INVALID);
  CHECK_RC(redlock_leader(e, NULL, 5, NULL, NULL, NULL, NULL, r), REDLOCK_E_INVALID);
  CHECK(strstr(redlock_result_message(r), "id is NULL") != NULL);
  /* Nobody campaigned: "none", told apart from no quorum. */
  uint64_t term = 7;
  CHECK_RC(redlock_leader(e, NULL, 0, NULL, &term, NULL, NULL, r), REDLOCK_E_NO_LEADER);
  CHECK(term == 0);
  CHECK_RC(redlock_election_free(e), REDLOCK_OK);
  CHECK(wait_exists(ELECTION, strlen(ELECTION), 0) == 0); /* nothing was written */
  redlock_result_free(r);
}

/* Two candidates, a reader and an observer: one leads, the other's blocking campaign waits; a
 * resign hands over with a higher term; the reader and the observer agree. */
static void test_election_handover(redlock_client* c) {
  redlock_client* c2 = make_client();
  redlock_client* c3 = make_client();
  redlock_election* alpha = make_election(c, "alpha");
  redlock_election* beta = make_election(c2, "beta");
  redlock_election* reader = make_election(c3, NULL);
  redlock_acquire_options* ao = NULL;
  REQUIRE(redlock_acquire_options_new(&ao) == REDLOCK_OK);
  CHECK_RC(redlock_acquire_options_set_ttl_ms(ao, 10000), REDLOCK_OK);

  redlock_leadership* la = NULL;
  CHECK_RC(redlock_campaign(alpha, ao, &la, NULL), REDLOCK_OK);
  REQUIRE(la != NULL);
  CHECK_RC(redlock_leadership_check(la, NULL), REDLOCK_OK);
  const uint64_t ta = leadership_term(la);
  uint64_t u = 0;
  CHECK(ta > 0);
  CHECK_RC(redlock_leadership_fence(la, &u), REDLOCK_OK);
  CHECK(u == ta);
  const char* data = NULL;
  size_t len = 0;
  CHECK_RC(redlock_leadership_id(la, &data, &len), REDLOCK_OK);
  CHECK(len == 5 && memcmp(data, "alpha", 5) == 0);
  CHECK_RC(redlock_leadership_remaining_ms(la, &u), REDLOCK_OK);
  CHECK(u > 0 && u <= 10000);
  CHECK_RC(redlock_leadership_validity_ms(la, &u), REDLOCK_OK);
  CHECK(u > 0 && u <= 10000);
  CHECK(wait_exists(ELECTION, strlen(ELECTION), 3) == 3); /* the plain Redlock key */

  /* A third handle reads the same leader and term (its client is new: until it has connected to
   * enough nodes, too few answer). */
  char id[REDLOCK_IDENTITY_MAX];
  uint64_t term = 0, since = 0, validity = 0;
  int rc = REDLOCK_E_NO_QUORUM;
  for (int i = 0; i < 100 && rc == REDLOCK_E_NO_QUORUM; ++i) {
    rc = redlock_leader(reader, id, sizeof id, &len, &term, &since, &validity, NULL);
    if (rc == REDLOCK_E_NO_QUORUM) sleep_ms(20);
  }
  CHECK_RC(rc, REDLOCK_OK);
  CHECK(len == 5 && memcmp(id, "alpha", 5) == 0);
  CHECK(term == ta);
  CHECK(validity > 0 && validity <= 10000);
  char small[2];
  redlock_result* r = NULL;
  REQUIRE(redlock_result_new(&r) == REDLOCK_OK);
  CHECK_RC(redlock_leader(reader, small, sizeof small, &len, &term, NULL, NULL, r),
           REDLOCK_E_INVALID);
  CHECK(strstr(redlock_result_message(r), "id_cap 2") != NULL);

  struct seen s;
  memset(&s, 0, sizeof s);
  pthread_mutex_init(&s.mu, NULL);
  redlock_observation* obs = NULL;
  CHECK_RC(redlock_observe(reader, 200, record_change, &s, &obs, NULL), REDLOCK_OK);
  CHECK(wait_seen_leader(&s, "alpha") == ta);

  /* Beta's blocking campaign waits while alpha leads... */
  struct campaign_args b;
  memset(&b, 0, sizeof b);
  b.election = beta;
  b.options = ao;
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, campaign_in_thread, &b) == 0);
  sleep_ms(500);
  CHECK(!atomic_load(&b.done));
  CHECK(wait_exists(ELECTION_WAITING, strlen(ELECTION_WAITING), 3) >= 2); /* it is queued */
  /* ...and a bounded one gives up, contended. */
  redlock_acquire_options* bounded = NULL;
  REQUIRE(redlock_acquire_options_new(&bounded) == REDLOCK_OK);
  CHECK_RC(redlock_acquire_options_set_wait_ms(bounded, 300), REDLOCK_OK);
  redlock_leadership* none = NULL;
  CHECK_RC(redlock_campaign(beta, bounded, &none, r), REDLOCK_E_CONTENDED);
  CHECK(none == NULL);
  redlock_acquire_options_free(bounded);

  /* Alpha resigns: beta is elected, with a higher term. */
  CHECK_RC(redlock_leadership_resign(la, r), REDLOCK_OK);
  CHECK_RC(redlock_leadership_resign(la, r), REDLOCK_OK); /* idempotent */
  CHECK(strstr(redlock_result_message(r), "already resigned") != NULL);
  CHECK_RC(redlock_leadership_check(la, NULL), REDLOCK_E_NOT_HELD);
  CHECK(wait_done(&b.done, 5000));
  pthread_join(t, NULL);
  CHECK_RC(b.rc, REDLOCK_OK);
  REQUIRE(b.leadership != NULL);
  const uint64_t tb = leadership_term(b.leadership);
  CHECK(tb > ta);
  CHECK_RC(redlock_leader(reader, id, sizeof id, &len, &term, NULL, NULL, NULL), REDLOCK_OK);
  CHECK(len == 4 && memcmp(id, "beta", 4) == 0);
  CHECK(term == tb);

  /* The observer saw the change, in order, with the higher term. */
  CHECK(wait_seen_leader(&s, "beta") == tb);
  pthread_mutex_lock(&s.mu);
  CHECK(s.count >= 2 && s.code[0] == REDLOCK_OK && s.term[0] == ta);
  for (int i = 1; i < s.count; ++i) CHECK(s.code[i] != REDLOCK_OK || s.term[i] > s.term[i - 1]);
  pthread_mutex_unlock(&s.mu);

  /* After its free returns no callback runs, though the leader changes again. */
  CHECK_RC(redlock_observation_free(obs), REDLOCK_OK);
  CHECK_RC(redlock_observation_free(obs), REDLOCK_E_INVALID);
  pthread_mutex_lock(&s.mu);
  const int seen_at_free = s.count;
  pthread_mutex_unlock(&s.mu);
  CHECK_RC(redlock_leadership_free(b.leadership), REDLOCK_OK); /* resigns */
  CHECK_RC(redlock_leader(reader, NULL, 0, NULL, NULL, NULL, NULL, NULL), REDLOCK_E_NO_LEADER);
  CHECK(wait_exists(ELECTION, strlen(ELECTION), 0) == 0);
  sleep_ms(500);
  pthread_mutex_lock(&s.mu);
  CHECK(s.count == seen_at_free);
  pthread_mutex_unlock(&s.mu);
  pthread_mutex_destroy(&s.mu);

  CHECK_RC(redlock_leadership_free(la), REDLOCK_OK);
  redlock_result_free(r);
  redlock_acquire_options_free(ao);
  CHECK_RC(redlock_election_free(alpha), REDLOCK_OK);
  CHECK_RC(redlock_election_free(beta), REDLOCK_OK);
  CHECK_RC(redlock_election_free(reader), REDLOCK_OK);
  CHECK_RC(redlock_client_free(c3), REDLOCK_OK);
  CHECK_RC(redlock_client_free(c2), REDLOCK_OK);
}

/* The callback form: runs once, on a thread of its own, with the leadership or the error. */
struct async_result {
  atomic_int calls;
  int code;
  redlock_leadership* leadership;
  pthread_t thread;
  char message[256];
};

static void on_campaign(void* user, int code, redlock_leadership* leadership, const char* message) {
  struct async_result* a = user;
  a->code = code;
  a->leadership = leadership;
  a->thread = pthread_self();
  snprintf(a->message, sizeof a->message, "%s", message);
  atomic_fetch_add(&a->calls, 1);
}

/* Cancelling a blocking campaign ends it and takes its waiting mark back; the callback form runs
 * exactly once, for an election and when its election is freed. */
static void test_election_cancel_and_async(redlock_client* c) {
  /* A slow poll: the waiting mark then lives for seconds (2 x the retry delay + 1 s, renewed
   * while at least 1.5 s are left), so its absence soon after the cancel shows it was taken back
   * rather than expired. The release still wakes the waiter at once. */
  redlock_options* o = NULL;
  REQUIRE(redlock_options_new(&o) == REDLOCK_OK);
  REQUIRE(redlock_options_set_nodes(o, node_list, strlen(node_list), NULL) == REDLOCK_OK);
  REQUIRE(redlock_options_set_retry(o, 0, 1000, 10) == REDLOCK_OK);
  REQUIRE(redlock_options_set_node_timeout_ms(o, 250) == REDLOCK_OK);
  redlock_client* c2 = NULL;
  REQUIRE(redlock_client_new(o, &c2, NULL) == REDLOCK_OK);
  redlock_options_free(o);
  redlock_election* holder = make_election(c, "holder");
  redlock_election* waiter = make_election(c2, "waiter");
  redlock_leadership* lh = NULL;
  CHECK_RC(redlock_campaign(holder, NULL, &lh, NULL), REDLOCK_OK);
  REQUIRE(lh != NULL);

  redlock_cancel* cancel = NULL;
  REQUIRE(redlock_cancel_new(&cancel) == REDLOCK_OK);
  redlock_acquire_options* ao = NULL;
  REQUIRE(redlock_acquire_options_new(&ao) == REDLOCK_OK);
  CHECK_RC(redlock_acquire_options_set_cancel(ao, cancel), REDLOCK_OK);
  struct campaign_args w;
  memset(&w, 0, sizeof w);
  w.election = waiter;
  w.options = ao;
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, campaign_in_thread, &w) == 0);
  sleep_ms(500);
  CHECK(!atomic_load(&w.done));
  CHECK(wait_exists(ELECTION_WAITING, strlen(ELECTION_WAITING), 3) >= 2);
  CHECK_RC(redlock_cancel_request(cancel), REDLOCK_OK);
  const int cancelled = wait_done(&w.done, 5000);
  CHECK(cancelled);
  if (!cancelled) CHECK_RC(redlock_leadership_resign(lh, NULL), REDLOCK_OK); /* let it end */
  pthread_join(t, NULL);
  CHECK_RC(w.rc, cancelled ? REDLOCK_E_CANCELLED : -1);
  CHECK(w.leadership == NULL);
  /* Nothing queued: taken back by the cancelled campaign (within 1 s, long before it expires). */
  CHECK(wait_exists_ms(ELECTION_WAITING, strlen(ELECTION_WAITING), 0, 1000) == 0);
  if (w.leadership) redlock_leadership_free(w.leadership);
  CHECK_RC(redlock_leadership_check(lh, NULL), cancelled ? REDLOCK_OK : REDLOCK_E_NOT_HELD);

  /* The callback form waits while the holder leads, then is elected once it resigns. */
  struct async_result a;
  memset(&a, 0, sizeof a);
  CHECK_RC(redlock_campaign_async(waiter, NULL, on_campaign, &a, NULL), REDLOCK_OK);
  sleep_ms(300);
  CHECK(atomic_load(&a.calls) == 0);
  const uint64_t th = leadership_term(lh);
  CHECK_RC(redlock_leadership_free(lh), REDLOCK_OK);
  CHECK(wait_done(&a.calls, 5000));
  sleep_ms(100);
  CHECK(atomic_load(&a.calls) == 1);
  CHECK_RC(a.code, REDLOCK_OK);
  CHECK(!pthread_equal(a.thread, pthread_self()));
  REQUIRE(a.leadership != NULL);
  CHECK(leadership_term(a.leadership) > th);
  CHECK_RC(redlock_leadership_check(a.leadership, NULL), REDLOCK_OK);

  /* Freeing an election ends its waiting campaign: its callback ran once, cancelled, before the
   * free returned. */
  struct async_result b;
  memset(&b, 0, sizeof b);
  CHECK_RC(redlock_campaign_async(holder, NULL, on_campaign, &b, NULL), REDLOCK_OK);
  sleep_ms(300);
  CHECK(atomic_load(&b.calls) == 0);
  CHECK_RC(redlock_election_free(holder), REDLOCK_OK);
  CHECK(atomic_load(&b.calls) == 1);
  CHECK_RC(b.code, REDLOCK_E_CANCELLED);
  CHECK(b.leadership == NULL);
  CHECK(wait_exists(ELECTION_WAITING, strlen(ELECTION_WAITING), 0) == 0);
  CHECK_RC(redlock_leadership_check(a.leadership, NULL), REDLOCK_OK);

  CHECK_RC(redlock_leadership_free(a.leadership), REDLOCK_OK);
  CHECK(wait_exists(ELECTION, strlen(ELECTION), 0) == 0);
  CHECK_RC(redlock_cancel_free(cancel), REDLOCK_OK);
  redlock_acquire_options_free(ao);
  CHECK_RC(redlock_election_free(waiter), REDLOCK_OK);
  CHECK_RC(redlock_client_free(c2), REDLOCK_OK);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  atexit(stop_servers);
  for (int i = 0; i < NSERVERS; ++i) start_server(i);
  dead_port = free_port(); /* nothing listens there: a node that is down */
  snprintf(node_list_dead, sizeof node_list_dead,
           "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", server_port[0], server_port[1],
           server_port[2], dead_port);
  snprintf(node_list, sizeof node_list, "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", server_port[0],
           server_port[1], server_port[2]);

  test_library();
  test_null_and_forged_handles();
  test_options();
  redlock_client* c = make_client();
  test_acquire_contend_extend_release(c);
  test_down_node();
  test_logger_and_auth_failed(c);
  test_nul_bytes(c);
  test_fence(c);
  test_auto_extend_and_loss(c);
  test_cancel(c);
  test_election_bad_input(c);
  test_election_handover(c);
  test_election_cancel_and_async(c);
  CHECK_RC(redlock_client_free(c), REDLOCK_OK);
  test_freed_handles();
  test_lock_free_in_callback_races_client_free();

  printf("capi_test: %d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
