/* An LD_PRELOAD shim for tests: getaddrinfo() of any host name ending in ".slow.test" sleeps
 * REDLOCK_SLOW_RESOLVER_MS (default 2000) and then answers 127.0.0.1; every other name goes to
 * the real getaddrinfo. It stands for a DNS server that answers late: the library must resolve
 * off its event loop, so one slow name costs that node at most connect_timeout and the others
 * nothing (issue 16). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*getaddrinfo_fn)(const char*, const char*, const struct addrinfo*, struct addrinfo**);

int getaddrinfo(const char* node, const char* service, const struct addrinfo* hints,
                struct addrinfo** res) {
  static getaddrinfo_fn real = NULL;
  if (real == NULL) {
    /* dlsym returns an object pointer; POSIX guarantees it converts to a function pointer. */
    void* sym = dlsym(RTLD_NEXT, "getaddrinfo");
    memcpy(&real, &sym, sizeof real);
  }
  const char* suffix = ".slow.test";
  if (node != NULL) {
    size_t n = strlen(node), k = strlen(suffix);
    if (n > k && strcmp(node + n - k, suffix) == 0) {
      const char* ms_text = getenv("REDLOCK_SLOW_RESOLVER_MS");
      long ms = ms_text != NULL ? atol(ms_text) : 2000;
      struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
      while (nanosleep(&ts, &ts) != 0) {
      }
      return real("127.0.0.1", service, hints, res);
    }
  }
  return real(node, service, hints, res);
}
