#pragma once
// What the node manager asks the system about processes and ports: /proc and a test bind.
// Nothing here signals anything.

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace redlock::nodes {

// The one-letter state of /proc/PID/stat ('R', 'S', 'T' stopped, 'Z' zombie ...); nullopt if there
// is no such process.
[[nodiscard]] std::optional<char> proc_state(pid_t pid);

// Alive and not a zombie: a zombie has exited and only waits to be reaped, so it counts as gone.
[[nodiscard]] bool alive(pid_t pid);

// /proc/PID/cmdline with the NULs as spaces; empty if unreadable.
[[nodiscard]] std::string proc_cmdline(pid_t pid);

// Is `pid` a live redis-server serving `port` (redis rewrites its title to
// "redis-server 127.0.0.1:PORT"), or one just exec'd with the config file `conf` (before that
// rewrite)? This is what stands between a stale pid file and signalling an unrelated process.
[[nodiscard]] bool is_redis_on(pid_t pid, int port, const std::filesystem::path& conf);

// Empty if 127.0.0.1:port can be listened on, else why not. Binding is the only reliable test:
// a connect would miss a socket that is bound but not listening yet. SO_REUSEADDR, as redis uses,
// so the TIME_WAIT left by a just-killed node does not count as taken.
[[nodiscard]] std::string port_busy(int port);

// waitpid(), retried on EINTR.
pid_t waitpid_eintr(pid_t pid, int* status, int options);

// This process's environment without libfaketime and LD_PRELOAD (redis-server with jemalloc and
// faketime crashes, and a server's clock must stay real): what children we start get.
[[nodiscard]] std::vector<std::string> environment_without_preload();

}  // namespace redlock::nodes
