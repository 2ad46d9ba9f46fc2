#include "core/info.hpp"

#include <charconv>

namespace redlock::detail {

std::string_view info_field(std::string_view info, std::string_view field) {
  std::size_t pos = 0;
  while (pos < info.size()) {
    const auto eol = info.find('\n', pos);
    auto line = info.substr(pos, eol == std::string_view::npos ? info.npos : eol - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > field.size() && line.starts_with(field) && line[field.size()] == ':') {
      return line.substr(field.size() + 1);
    }
    if (eol == std::string_view::npos) break;
    pos = eol + 1;
  }
  return {};
}

std::optional<ServerInfo> parse_server_info(std::string_view info) {
  ServerInfo s;
  s.run_id = std::string(info_field(info, "run_id"));
  if (s.run_id.empty()) return std::nullopt;
  const auto up = info_field(info, "uptime_in_seconds");
  long long v = 0;
  auto [p, ec] = std::from_chars(up.data(), up.data() + up.size(), v);
  if (ec == std::errc() && p == up.data() + up.size() && v >= 0) s.uptime_seconds = v;
  return s;
}

}  // namespace redlock::detail
