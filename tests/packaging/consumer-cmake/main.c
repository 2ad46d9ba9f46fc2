/* The C API as an installed package: version, node-list parsing through the options, and (given
 * a resource) a real acquisition whose token is printed for the test to find on the servers. */
#include <redlock/redlock.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: consumer NODES [RESOURCE]\n");
    return 2;
  }
  printf("version=%s\n", redlock_version());
  redlock_options* opts = NULL;
  redlock_result* detail = NULL;
  if (redlock_options_new(&opts) != REDLOCK_OK || redlock_result_new(&detail) != REDLOCK_OK)
    return 1;
  int rc = redlock_options_set_nodes(opts, argv[1], strlen(argv[1]), detail);
  if (rc != REDLOCK_OK) {
    printf("parse-error=%s\n", redlock_result_message(detail));
    return 1;
  }
  if (argc < 3) {
    printf("parsed=yes\n");
    return 0;
  }
  redlock_client* client = NULL;
  rc = redlock_client_new(opts, &client, detail);
  redlock_options_free(opts);
  if (rc != REDLOCK_OK) {
    printf("client-error=%s\n", redlock_result_message(detail));
    return 1;
  }
  redlock_lock* lock = NULL;
  rc = redlock_acquire(client, argv[2], strlen(argv[2]), 30000, &lock, detail);
  if (rc != REDLOCK_OK) {
    printf("acquire-error=%s: %s\n", redlock_strerror(rc), redlock_result_message(detail));
    return 1;
  }
  const char* tok = NULL;
  size_t len = 0;
  redlock_lock_token(lock, &tok, &len);
  printf("token=%.*s\n", (int)len, tok);
  printf("nodes=%zu\n", redlock_result_node_count(detail));
  /* Leave it held: freeing the client does not release it, and the test reads it on the servers. */
  redlock_client_free(client);
  redlock_lock_free(lock);
  redlock_result_free(detail);
  return 0;
}
