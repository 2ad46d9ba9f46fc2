/* An LD_PRELOAD shim for tests: a resolver that misbehaves for a few made-up names, and hands
 * every other name to the real getaddrinfo.
 * - "*.slow.test" sleeps REDLOCK_SLOW_RESOLVER_MS (default 2000) and then answers 127.0.0.1. It
 *   stands for a DNS server that answers late: the library must resolve off its event loop, so
 *   one slow name costs that node at most connect_timeout and the others nothing (issue 16).
 * - "*.first-blackhole.test" answers 127.0.0.2 first, then 127.0.0.1: a name whose first address
 *   drops packets (the test makes 127.0.0.2 a blackhole on the port) must still be reachable
 *   through the second within connect_timeout (Happy Eyeballs, issue 40). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*getaddrinfo_fn)(const char*, const char*, const struct addrinfo*, struct addrinfo**);

static int ends_with(const char* name, const char* suffix) {
  size_t n = strlen(name), k = strlen(suffix);
  return n > k && strcmp(name + n - k, suffix) == 0;
}

int getaddrinfo(const char* node, const char* service, const struct addrinfo* hints,
                struct addrinfo** res) {
  static getaddrinfo_fn real = NULL;
  if (real == NULL) {
    /* dlsym returns an object pointer; POSIX guarantees it converts to a function pointer. */
    void* sym = dlsym(RTLD_NEXT, "getaddrinfo");
    memcpy(&real, &sym, sizeof real);
  }
  if (node != NULL && ends_with(node, ".slow.test")) {
    const char* ms_text = getenv("REDLOCK_SLOW_RESOLVER_MS");
    long ms = ms_text != NULL ? atol(ms_text) : 2000;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
    return real("127.0.0.1", service, hints, res);
  }
  if (node != NULL && ends_with(node, ".first-blackhole.test")) {
    struct addrinfo *first = NULL, *second = NULL, *last;
    int rc = real("127.0.0.2", service, hints, &first);
    if (rc != 0) return rc;
    rc = real("127.0.0.1", service, hints, &second);
    if (rc != 0) {
      freeaddrinfo(first);
      return rc;
    }
    /* One list: glibc's freeaddrinfo frees it entry by entry. */
    for (last = first; last->ai_next != NULL; last = last->ai_next) {
    }
    last->ai_next = second;
    *res = first;
    return 0;
  }
  return real(node, service, hints, res);
}
