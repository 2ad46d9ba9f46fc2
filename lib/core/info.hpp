#pragma once
// What the restart guard reads from a server's INFO reply. Pure parsing, no I/O.

#include <optional>
#include <string>
#include <string_view>

namespace redlock::detail {

struct ServerInfo {
  std::string run_id;            // changes on every start of the server process
  long long uptime_seconds = 0;  // since the process started (rounded down)
};

// The value of `field:` in INFO text ("# Server\r\nrun_id:abc\r\n..."), or empty. A field name
// matches only at the start of a line, so `run_id` never matches inside `master_run_id`.
[[nodiscard]] std::string_view info_field(std::string_view info, std::string_view field);

// nullopt when the text has no run_id (not an INFO server reply).
[[nodiscard]] std::optional<ServerInfo> parse_server_info(std::string_view info);

}  // namespace redlock::detail
