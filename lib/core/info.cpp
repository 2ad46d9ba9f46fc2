#include "core/info.hpp"

#include <charconv>

#include "core/server_text.hpp"

namespace redlock::detail {
namespace {

bool to_integer(std::string_view s, long long& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

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
  long long v = 0;
  if (to_integer(info_field(info, "uptime_in_seconds"), v) && v >= 0 && v <= max_reported_seconds)
    s.uptime_seconds = v;
  return s;
}

std::optional<bool> parse_promoted(std::string_view info) {
  if (info_field(info, "role") != "master") return std::nullopt;
  const auto id = info_field(info, "master_replid2");
  if (id.empty()) return std::nullopt;
  return id.find_first_not_of('0') != std::string_view::npos;
}

std::optional<SentinelMaster> parse_sentinel_master(const Reply& r, std::string& error) {
  if (r.type != Reply::Type::array || r.elements.size() % 2 != 0) {
    error = "SENTINEL MASTER answered " + r.describe() + ", not field/value pairs";
    return std::nullopt;
  }
  SentinelMaster m;
  bool have_port = false;
  for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    const auto& k = r.elements[i];
    const auto& v = r.elements[i + 1];
    if (k.type != Reply::Type::string || v.type != Reply::Type::string) continue;
    long long n = 0;
    // Every number is checked in 64 bits before it is narrowed or used in time arithmetic.
    if (k.str == "ip") {
      if (!valid_server_host(v.str)) {
        error = "SENTINEL MASTER: bad ip \"" + server_text(v.str, 80) + "\"";
        return std::nullopt;
      }
      m.ip = v.str;
    } else if (k.str == "port") {
      if (!to_integer(v.str, n) || n < 1 || n > 65535) {
        error = "SENTINEL MASTER: bad port \"" + server_text(v.str, 40) + "\"";
        return std::nullopt;
      }
      m.port = static_cast<std::uint16_t>(n);
      have_port = true;
    } else if (k.str == "flags") {
      m.flags = v.str;
    } else if (k.str == "role-reported-time") {
      if (!to_integer(v.str, n) || n < 0 || n > max_reported_seconds * 1000) {
        error = "SENTINEL MASTER: bad role-reported-time \"" + server_text(v.str, 40) + "\"";
        return std::nullopt;
      }
      m.role_reported_ms = n;
    } else if (k.str == "config-epoch") {
      if (to_integer(v.str, n) && n >= 0) m.config_epoch = n;
    } else if (k.str == "quorum") {
      if (to_integer(v.str, n) && n >= 1 && n <= 10000) m.quorum = static_cast<int>(n);
    }
  }
  if (m.ip.empty() || !have_port || m.role_reported_ms < 0) {
    error = "SENTINEL MASTER: no ip, port or role-reported-time in the answer";
    return std::nullopt;
  }
  return m;
}

}  // namespace redlock::detail
