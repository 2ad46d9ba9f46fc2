#pragma once
// What the restart guard reads from a server's INFO reply, and what a Sentinel vote reads from
// Sentinel. Pure parsing, no I/O.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/reply.hpp"

namespace redlock::detail {

// The longest time a server's INFO or a sentinel may report (uptime, role-reported-time). The
// restart guard does time arithmetic with them in 64-bit nanoseconds, which reach +-292 years:
// a longer time is a lie that would overflow it (hazard 13), and is not believed.
inline constexpr long long max_reported_seconds = 100LL * 366 * 24 * 3600;  // 100 years

struct ServerInfo {
  std::string run_id;  // changes on every start of the server process
  // Since the process started (rounded down), 0 to max_reported_seconds. 0 also when INFO has no
  // readable uptime in that range: a server that cannot say how long it has run is taken for one
  // that just started (the guard fails closed: algorithm.md, hazard 11).
  long long uptime_seconds = 0;
};

// The value of `field:` in INFO text ("# Server\r\nrun_id:abc\r\n..."), or empty. A field name
// matches only at the start of a line, so `run_id` never matches inside `master_run_id`.
[[nodiscard]] std::string_view info_field(std::string_view info, std::string_view field);

// nullopt when the text has no run_id (not an INFO server reply).
[[nodiscard]] std::optional<ServerInfo> parse_server_info(std::string_view info);

// From `INFO replication`: this server was promoted from replica to master since its process
// started (`master_replid2` is the replication id it had as a replica; all zeros when it never
// was one). nullopt when the text has no such field or says role:slave.
[[nodiscard]] std::optional<bool> parse_promoted(std::string_view info);

// What `SENTINEL MASTER <name>` answers (a flat array of field, value pairs), in part.
struct SentinelMaster {
  std::string ip;          // valid_server_host() (core/server_text.hpp)
  std::uint16_t port = 0;  // 1-65535
  std::string flags;       // "master", "master,s_down", "master,o_down,failover_in_progress", ...
  // How long ago this sentinel saw the master take its role. A failover resets it, and so does
  // the sentinel's own start; a sentinel learns of a failover when it happens or later. So a
  // promotion, if there was one, happened at least this long ago.
  long long role_reported_ms = -1;  // 0 to max_reported_seconds * 1000
  long long config_epoch = 0;       // grows with every failover of this master name
  // How many sentinels must agree that the master is down before a failover (1 to 10000); 0 when
  // the answer has none that is readable. For reports only (redlock-cli doctor).
  int quorum = 0;
};
// nullopt (with `error` set, naming the bad value) when the reply is not such an array, lacks
// ip, port or role-reported-time, or one of them is out of its range above.
[[nodiscard]] std::optional<SentinelMaster> parse_sentinel_master(const Reply& reply,
                                                                  std::string& error);

}  // namespace redlock::detail
