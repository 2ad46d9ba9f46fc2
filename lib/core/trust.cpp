// trust.hpp: which discovered server gets a vote's credentials and counts as its vote.

#include "core/trust.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>

namespace redlock::detail {
namespace {

// An IP literal as bytes (4 or 16), or nullopt for anything else (a name).
struct Ip {
  std::array<unsigned char, 16> bytes{};
  int length = 0;  // 4 or 16
};

std::optional<Ip> parse_ip(std::string_view text) {
  if (text.empty() || text.size() > 45) return std::nullopt;
  const std::string s(text);
  Ip ip;
  if (inet_pton(AF_INET, s.c_str(), ip.bytes.data()) == 1) {
    ip.length = 4;
    return ip;
  }
  if (inet_pton(AF_INET6, s.c_str(), ip.bytes.data()) == 1) {
    ip.length = 16;
    return ip;
  }
  return std::nullopt;
}

// The names of this machine's loopback interface. Not all of 127.0.0.0/8: a test (or a user) can
// tell 127.0.0.2 apart, and nothing needs it to be the same host.
bool is_loopback(std::string_view host) {
  if (host == "localhost") return true;
  const auto ip = parse_ip(host);
  if (!ip) return false;
  if (ip->length == 4) return ip->bytes == std::array<unsigned char, 16>{127, 0, 0, 1};
  static constexpr std::array<unsigned char, 16> v6_loopback{0, 0, 0, 0, 0, 0, 0, 0,
                                                             0, 0, 0, 0, 0, 0, 0, 1};
  return ip->bytes == v6_loopback;
}

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
           return lower(x) == lower(y);
         });
}

bool valid_name(std::string_view h) {
  if (h.empty() || h.size() > 253) return false;
  return std::all_of(h.begin(), h.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == '_';
  });
}

// "a.b.c.d/n" or "v6/n": the network and its prefix length.
std::optional<std::pair<Ip, int>> parse_network(std::string_view entry) {
  const auto slash = entry.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const auto ip = parse_ip(entry.substr(0, slash));
  if (!ip) return std::nullopt;
  const auto bits = entry.substr(slash + 1);
  int n = -1;
  auto [p, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), n);
  if (ec != std::errc() || p != bits.data() + bits.size() || n < 0 || n > ip->length * 8)
    return std::nullopt;
  return std::pair{*ip, n};
}

bool in_network(const Ip& net, int bits, const Ip& ip) {
  if (net.length != ip.length) return false;
  for (int i = 0; i < bits; ++i) {
    const int byte = i / 8, bit = 7 - i % 8;
    if (((net.bytes[byte] >> bit) & 1) != ((ip.bytes[byte] >> bit) & 1)) return false;
  }
  return true;
}

// host:port for a message: the host came from a server, so control bytes and overlong text are
// not passed on to a terminal or a log.
std::string host_port(std::string_view host, std::uint16_t port) {
  std::string h;
  for (char c : host.substr(0, 253)) h += (c > 0x20 && c < 0x7f) ? c : '?';
  return (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + std::to_string(port);
}

}  // namespace

std::optional<std::string> check_allow_entry(std::string_view entry) {
  if (entry == "*") return std::nullopt;
  if (entry.find('/') != std::string_view::npos) {
    if (parse_network(entry)) return std::nullopt;
    return "bad network (as in 10.0.0.0/8 or fd00::/8)";
  }
  if (parse_ip(entry)) return std::nullopt;
  const auto name = entry.starts_with("*.") ? entry.substr(2) : entry;
  if (valid_name(name) && name.find('*') == std::string_view::npos) return std::nullopt;
  return "not a host name, an IP address, *.domain, a network or *";
}

bool allow_matches(std::string_view entry, std::string_view host) {
  if (entry == "*") return true;
  if (auto net = parse_network(entry)) {
    const auto ip = parse_ip(host);
    return ip && in_network(net->first, net->second, *ip);
  }
  if (entry.starts_with("*.")) {
    const auto suffix = entry.substr(1);  // ".example.com"
    return host.size() > suffix.size() && !parse_ip(host) &&
           iequal(host.substr(host.size() - suffix.size()), suffix);
  }
  const auto a = parse_ip(entry), b = parse_ip(host);
  if (a && b) return a->length == b->length && a->bytes == b->bytes;  // ::1 and 0::1 alike
  return iequal(entry, host);
}

bool same_host(std::string_view a, std::string_view b) {
  if (iequal(a, b)) return true;
  return is_loopback(a) && is_loopback(b);
}

DiscoveredTrust trust_discovered(const NodeAddress& vote, const TlsOptions& tls,
                                 std::string_view host, std::uint16_t port) {
  DiscoveredTrust out;
  bool allowed = same_host(host, vote.host);
  const auto& named =
      vote.kind == NodeAddress::Kind::sentinel ? vote.more_sentinels : vote.more_seeds;
  for (const auto& n : named) allowed = allowed || same_host(host, n.host);
  for (const auto& entry : vote.allow) allowed = allowed || allow_matches(entry, host);

  const bool tls_on = vote.tls || tls.enabled;
  const bool verified = tls_on && !(vote.tls_override.insecure || tls.insecure_skip_verify);
  const std::string& fixed = !vote.verify_name.empty() ? vote.verify_name
                             : !vote.tls_override.server_name.empty()
                                 ? vote.tls_override.server_name
                                 : tls.server_name;
  if (tls_on) out.verify_name = !fixed.empty() ? fixed : allowed ? std::string(host) : vote.host;
  out.trusted = allowed || verified;
  if (!out.trusted) {
    const std::string where = host_port(host, port);
    out.why_not = where + " is not on a host this address names and " +
                  (tls_on ? "its TLS certificate is not verified (insecure)"
                          : "the link would be plaintext") +
                  ": no credentials sent, no vote (allow it with ?allow=HOST or its network to the "
                  "address, or use TLS with verification)";
  }
  return out;
}

SentinelVerdict agree_on_master(const std::vector<SentinelAnswer>& answers) {
  SentinelVerdict out;
  if (answers.empty()) {
    out.why = "no sentinel answered";
    return out;
  }
  auto where = [](const SentinelMaster& m) {
    return host_port(m.ip, static_cast<std::uint16_t>(m.port));
  };
  for (const auto& a : answers) {
    if (!a.master) continue;
    std::size_t agree = 0;
    SentinelMaster best = *a.master;
    for (const auto& b : answers) {
      if (!b.master || b.master->ip != a.master->ip || b.master->port != a.master->port) continue;
      ++agree;
      best.config_epoch = std::max(best.config_epoch, b.master->config_epoch);
      best.role_reported_ms = std::min(best.role_reported_ms, b.master->role_reported_ms);
    }
    if (agree * 2 > answers.size()) {
      out.master = std::move(best);
      return out;
    }
  }
  if (answers.size() == 1) {
    out.why = answers[0].error;
    return out;
  }
  out.why = "the sentinels disagree on the master:";
  const char* sep = " ";
  for (const auto& a : answers) {
    out.why += sep + a.sentinel + (a.master ? " names " + where(*a.master) : ": " + a.error);
    sep = ", ";
  }
  return out;
}

}  // namespace redlock::detail
