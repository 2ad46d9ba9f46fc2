// Node addresses (redlock/options.hpp's NodeAddress and parse_node_list): the URL forms, their
// query parameters, what an error may show of one (never a password), and when two addresses
// are one server. Pure functions, no I/O.

#include "core/address.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <set>
#include <string>
#include <tuple>

#include "core/trust.hpp"
#include "core/validate.hpp"

namespace redlock {
namespace {

using detail::quoted;

bool parse_int(std::string_view s, long long lo, long long hi, long long& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && out >= lo && out <= hi;
}

// Decodes %XX escapes (user names and passwords may contain ':' '@' '/').
bool percent_decode(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    auto hex = [](char c) {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    const int hi = hex(in[i + 1]), lo = hex(in[i + 2]);  // exactly two hex digits: no sign
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

bool valid_host(std::string_view h) {
  if (h.empty() || h.size() > 253) return false;
  for (char c : h) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

bool valid_master_name(std::string_view n) {
  if (n.empty() || n.size() > 200) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == '_';
  });
}

bool valid_ipv6(std::string_view h) {
  if (h.size() < 2 || h.size() > 45) return false;
  bool colon = false;
  for (char c : h) {
    bool ok = (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || (c >= '0' && c <= '9') ||
              c == ':' || c == '.';
    if (!ok) return false;
    colon |= c == ':';
  }
  return colon;
}

// host[:port] or [v6][:port]
bool parse_host_port(std::string_view hp, NodeAddress& a, std::string& why) {
  std::string_view host, port;
  if (!hp.empty() && hp.front() == '[') {
    auto close = hp.find(']');
    if (close == std::string_view::npos) {
      why = "unclosed '[' in IPv6 address";
      return false;
    }
    host = hp.substr(1, close - 1);
    auto rest = hp.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        why = "expected ':port' after ']'";
        return false;
      }
      port = rest.substr(1);
      if (port.empty()) {
        why = "empty port";
        return false;
      }
    }
    if (!valid_ipv6(host)) {
      why = "bad IPv6 address";
      return false;
    }
  } else {
    auto colon = hp.rfind(':');
    if (colon != std::string_view::npos) {
      if (hp.find(':') != colon) {
        why = "IPv6 addresses need brackets, as in redis://[::1]:7001";
        return false;
      }
      host = hp.substr(0, colon);
      port = hp.substr(colon + 1);
      if (port.empty()) {
        why = "empty port";
        return false;
      }
    } else {
      host = hp;
    }
    if (!valid_host(host)) {
      why = host.empty() ? "empty host" : "bad host name";
      return false;
    }
  }
  a.host = std::string(host);
  if (!port.empty()) {
    long long p = 0;
    if (!parse_int(port, 1, 65535, p)) {
      why = "port must be 1-65535";
      return false;
    }
    a.port = static_cast<std::uint16_t>(p);
  }
  return true;
}

bool parse_db(std::string_view s, NodeAddress& a, std::string& why) {
  long long db = 0;
  if (!parse_int(s, 0, std::numeric_limits<int>::max(), db)) {
    why = "database must be a non-negative integer";
    return false;
  }
  a.db = static_cast<int>(db);
  return true;
}

// ?min_replicas=N: replicated votes for this vote only (Options::min_replicas has the same range).
bool parse_min_replicas(std::string_view s, NodeAddress& a, std::string& why) {
  long long n = 0;
  if (!parse_int(s, 0, 100, n)) {
    why = "min_replicas must be 0-100, got " + quoted(s);
    return false;
  }
  a.min_replicas = static_cast<int>(n);
  return true;
}

// The query of a redis:// or rediss:// address: TLS settings for this node only (rediss://); of a
// sentinel address also `sentinel=host:port` (repeated) and `db=N`.
bool parse_query(std::string_view query, NodeAddress& a, std::string& why) {
  const bool sentinel = a.kind == NodeAddress::Kind::sentinel;
  const bool cluster = a.kind == NodeAddress::Kind::cluster;
  std::set<std::string, std::less<>> seen;
  // After a sentinel_password, a parameter name may be a piece of a password with an unescaped
  // '&': errors do not show it.
  bool after_secret = false;
  auto param = [&after_secret](std::string_view name) {
    return after_secret ? std::string("after sentinel_password (write '&' in it as %26)")
                        : "'" + std::string(name) + "'";
  };
  while (!query.empty()) {
    const auto amp = query.find('&');
    const auto item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const auto eq = item.find('=');
    const auto name = item.substr(0, eq);
    std::string value;
    if (eq != std::string_view::npos && !percent_decode(item.substr(eq + 1), value)) {
      why = "bad %-escape in the value of parameter " + param(name);
      return false;
    }
    if (sentinel && name == "sentinel") {
      NodeAddress other;
      other.port = 26379;
      if (!parse_host_port(value, other, why)) {
        why = "sentinel " + quoted(value) + ": " + why;
        return false;
      }
      a.more_sentinels.push_back({other.host, other.port});
      continue;
    }
    if (cluster && name == "seed") {
      NodeAddress other;
      if (!parse_host_port(value, other, why)) {
        why = "seed " + quoted(value) + ": " + why;
        return false;
      }
      a.more_seeds.push_back({other.host, other.port});
      continue;
    }
    if ((sentinel || cluster) && name == "allow") {
      if (auto bad = detail::check_allow_entry(value)) {
        why = "allow " + quoted(value) + ": " + *bad;
        return false;
      }
      a.allow.push_back(std::move(value));
      continue;
    }
    if (!seen.insert(std::string(name)).second) {
      why = "parameter " + param(name) + " given twice";
      return false;
    }
    auto& t = a.tls_override;
    const bool file = name == "cacert" || name == "cert" || name == "key";
    if (name == "sni" || file || name == "insecure") {
      if (!a.tls) {
        why =
            "'" + std::string(name) + "' is a TLS setting: use rediss:// (or --tls and the flags)";
        return false;
      }
    }
    if (name == "insecure") {
      if (eq != std::string_view::npos && value != "1" && value != "true" && value != "yes") {
        why = "insecure takes no value (or 1, true, yes)";
        return false;
      }
      t.insecure = true;
    } else if (name == "sni" || file) {
      if (value.empty()) {
        why = "'" + std::string(name) + "' needs a value";
        return false;
      }
      (name == "sni"      ? t.server_name
       : name == "cacert" ? t.ca_file
       : name == "cert"   ? t.cert_file
                          : t.key_file) = std::move(value);
    } else if (name == "min_replicas") {
      if (!parse_min_replicas(value, a, why)) return false;
    } else if (sentinel && name == "db") {
      if (!parse_db(value, a, why)) return false;
    } else if (sentinel && (name == "sentinel_user" || name == "sentinel_password")) {
      if (value.empty()) {
        why = "'" + std::string(name) + "' needs a value";
        return false;
      }
      after_secret = after_secret || name == "sentinel_password";
      (name == "sentinel_user" ? a.sentinel_user : a.sentinel_password) = std::move(value);
    } else if ((sentinel || cluster) && name == "verify_name") {
      if (!a.tls || (!valid_host(value) && !valid_ipv6(value))) {
        why = !a.tls ? "'verify_name' is a TLS setting: use rediss+sentinel:// or rediss+cluster://"
                     : "verify_name " + quoted(value) + ": not a host name or IP address";
        return false;
      }
      a.verify_name = std::move(value);
    } else {
      why =
          "unknown parameter " + param(name) +
          (sentinel ? " (a sentinel address takes sentinel, db, sentinel_user, "
                      "sentinel_password, allow, min_replicas, and with rediss+sentinel:// "
                      "verify_name, sni, "
                      "cacert, cert, key, insecure)"
           : cluster
               ? " (a cluster address takes seed, allow, min_replicas, and with rediss+cluster:// "
                 "verify_name, sni, cacert, cert, key, insecure)"
               : " (redis:// takes min_replicas; rediss:// also sni, cacert, cert, key, insecure)");
      return false;
    }
  }
  if (!a.sentinel_user.empty() && a.sentinel_password.empty()) {
    why = "sentinel_user needs sentinel_password";
    return false;
  }
  return true;
}

// unix:///path[?db=N&min_replicas=N]: `rest` is what follows the scheme.
bool parse_unix_address(std::string_view rest, NodeAddress& a, std::string& why) {
  a.transport = NodeAddress::Transport::unix_socket;
  auto q = rest.find('?');
  auto path = rest.substr(0, q);
  if (path.empty() || path.front() != '/') {
    why = "unix socket path must be absolute (unix:///path)";
    return false;
  }
  if (path.size() > 107) {
    why = "unix socket path longer than 107 bytes";
    return false;
  }
  a.path = std::string(path);
  if (q != std::string_view::npos) {
    auto query = rest.substr(q + 1);
    bool db_seen = false;
    while (true) {
      const auto amp = query.find('&');
      const auto item = query.substr(0, amp);
      if (item.starts_with("db=") && !db_seen) {
        db_seen = true;
        if (!parse_db(item.substr(3), a, why)) return false;
      } else if (item.starts_with("min_replicas=") && !a.min_replicas) {
        if (!parse_min_replicas(item.substr(13), a, why)) return false;
      } else {
        why = "only ?db=N and min_replicas=N (each once) are understood after a unix socket path";
        return false;
      }
      if (amp == std::string_view::npos) break;
      query = query.substr(amp + 1);
    }
  }
  return true;
}

// A URL's credentials (what comes before the last '@' of its authority), %-decoded.
bool parse_userinfo(std::string_view userinfo, NodeAddress& a, std::string& why) {
  auto colon = userinfo.find(':');
  std::string user, pass;
  if (colon == std::string_view::npos) {
    // redis://secret@host: a password alone, as redis-cli understands it
    if (!percent_decode(userinfo, pass)) {
      why = "bad %-escape in password";
      return false;
    }
  } else {
    if (!percent_decode(userinfo.substr(0, colon), user) ||
        !percent_decode(userinfo.substr(colon + 1), pass)) {
      why = "bad %-escape in user or password";
      return false;
    }
  }
  // A user without a password (`redis://alice:@host`) is left for the caller to complete
  // (redlock-cli: --password-file); check_options refuses it if nobody does.
  a.user = std::move(user);
  a.password = std::move(pass);
  return true;
}

// What follows the scheme of a redis://-like URL ([user[:password]@]host[:port], then /db or
// /master-name, then ?query); `a` has the scheme's kind and TLS already.
bool parse_url_rest(std::string_view rest, NodeAddress& a, std::string& why) {
  // The credentials end at the last '@': a '/' or '?' before it can only be part of them.
  const auto last_at = rest.rfind('@');
  const auto after_userinfo = last_at == std::string_view::npos ? 0 : last_at + 1;
  if (last_at != std::string_view::npos &&
      rest.substr(0, last_at).find('/') != std::string_view::npos) {
    why =
        "a '/' in the user or password must be written %2F (and '@' as %40, '?' as %3F, ':' in a "
        "user name as %3A)";
    return false;
  }
  const auto q = rest.find('?', after_userinfo);
  if (q != std::string_view::npos) {
    if (!parse_query(rest.substr(q + 1), a, why)) return false;
    rest = rest.substr(0, q);
  }
  auto slash = rest.find('/', after_userinfo);
  auto authority = rest.substr(0, slash);
  const auto path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  if (a.kind == NodeAddress::Kind::sentinel) {
    if (!valid_master_name(path)) {
      why = path.empty() ? "a sentinel address needs the master's name: "
                           "redis+sentinel://host:port/master-name"
                         : "bad master name (letters, digits, '.', '-', '_', at most 200)";
      return false;
    }
    a.master_name = std::string(path);
  } else if (a.kind == NodeAddress::Kind::cluster) {
    if (!path.empty()) {
      why = "a Redis Cluster has database 0 only: no /" + std::string(path) +
            " (redis+cluster://host:port)";
      return false;
    }
  } else if (!path.empty() && !parse_db(path, a, why)) {
    return false;
  }
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    if (!parse_userinfo(authority.substr(0, at), a, why)) return false;
    authority = authority.substr(at + 1);
  }
  return parse_host_port(authority, a, why);
}

bool parse_address(std::string_view text, NodeAddress& a, std::string& why) {
  if (text.empty()) {
    why = "empty address";
    return false;
  }
  for (unsigned char c : text) {
    if (c <= 0x20 || c == 0x7f) {
      why = "spaces or control characters";
      return false;
    }
  }
  constexpr std::string_view redis_scheme = "redis://";
  constexpr std::string_view rediss_scheme = "rediss://";
  constexpr std::string_view unix_scheme = "unix://";
  if (text.starts_with(unix_scheme))
    return parse_unix_address(text.substr(unix_scheme.size()), a, why);
  using K = NodeAddress::Kind;
  for (auto [scheme, tls, kind] :
       {std::tuple{redis_scheme, false, K::server}, std::tuple{rediss_scheme, true, K::server},
        std::tuple{std::string_view("redis+sentinel://"), false, K::sentinel},
        std::tuple{std::string_view("redis-sentinel://"), false, K::sentinel},
        std::tuple{std::string_view("rediss+sentinel://"), true, K::sentinel},
        std::tuple{std::string_view("redis+cluster://"), false, K::cluster},
        std::tuple{std::string_view("rediss+cluster://"), true, K::cluster}}) {
    if (!text.starts_with(scheme)) continue;
    a.tls = tls;
    a.kind = kind;
    if (kind == K::sentinel) a.port = 26379;
    return parse_url_rest(text.substr(scheme.size()), a, why);
  }
  if (text.find("://") != std::string_view::npos) {
    why =
        "unknown scheme (use redis://, rediss://, unix://, redis+sentinel://, "
        "rediss+sentinel://, redis+cluster:// or rediss+cluster://)";
    return false;
  }
  if (text.find('@') != std::string_view::npos) {
    why = "a user or password needs the redis:// form, as in redis://user:password@host:port";
    return false;
  }
  return parse_host_port(text, a, why);
}

// Where the credentials' secret lies in an address as written: [from, to), or nullopt when it
// has no '@'. Whatever the input, everything between the scheme (or the start) and the last '@'
// is taken for credentials and only a user name before the first ':' is kept, so a password with
// an unescaped '/', '@' or ':' is hidden too.
std::optional<std::pair<std::size_t, std::size_t>> userinfo_secret(std::string_view text) {
  const auto at = text.rfind('@');
  if (at == std::string_view::npos) return std::nullopt;
  // A scheme only where the text starts with one (letters, digits, '+', '-', '.'): a "://" later
  // on is part of what is hidden.
  const auto scheme = text.find("://");
  const bool has_scheme =
      scheme != std::string_view::npos && scheme > 0 && scheme < at &&
      text.substr(0, scheme).find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.") ==
          std::string_view::npos;
  const std::size_t start = has_scheme ? scheme + 3 : 0;
  const auto userinfo = text.substr(start, at - start);
  const auto colon = userinfo.find(':');
  const bool plain_user = colon != std::string_view::npos &&
                          userinfo.substr(0, colon).find_first_of("/@") == std::string_view::npos;
  return std::pair{plain_user ? start + colon + 1 : start, at};
}

// The address as it may appear in an error message: a password never does. The userinfo's
// secret is hidden, and a sentinel_password= hides everything after it too (with an unescaped
// '&', '@' or ',' in it, nothing else tells where it ends); where the two overlap (the parameter
// may be a piece of the userinfo's password), everything from the first hidden byte on is hidden.
std::string redacted(std::string_view text) {
  constexpr auto npos = std::string_view::npos;
  constexpr std::string_view param = "sentinel_password=";
  const auto p = text.find(param);
  const auto cut = p == npos ? npos : p + param.size();
  const auto secret = userinfo_secret(text);
  if (!secret) return cut == npos ? std::string(text) : std::string(text.substr(0, cut)) + "***";
  const auto [from, to] = *secret;
  if (cut != npos && cut <= to) return std::string(text.substr(0, std::min(from, cut))) + "***";
  return std::string(text.substr(0, from)) + "***" +
         std::string(text.substr(to, cut == npos ? npos : cut - to)) + (cut == npos ? "" : "***");
}

// A ',' separates nodes, so a raw one in a user name or password cuts the address in two, and
// the first part, a piece of the password, would be quoted by the error about it. Credentials
// end at the last '@' before the path, as in parse_address: when a ',' comes before that '@',
// the node that starts at `start` has one in its credentials. Returns the error, which shows
// no part of them, or nullopt.
std::optional<std::string> comma_in_credentials(std::string_view list, std::size_t start) {
  constexpr auto npos = std::string_view::npos;
  const auto scheme = list.find("://", start);
  const std::size_t from = scheme < list.find(',', start) ? scheme + 3 : start;
  const auto slash = list.find('/', from);
  const auto span = list.substr(from, slash == npos ? npos : slash - from);
  const auto at = span.rfind('@');
  if (at == npos || span.substr(0, at).find(',') == npos) return std::nullopt;
  const auto host = list.substr(from + at, list.find(',', from + at) - (from + at));
  return "bad node address " +
         quoted(std::string(list.substr(start, from - start)) + "***" + std::string(host)) +
         ": a ',' in a user name or password must be written %2C (a ',' separates nodes)";
}

}  // namespace

namespace {

std::string host_port(const std::string& host, std::uint16_t port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

}  // namespace

std::string detail::address_identity(const NodeAddress& a) {
  if (a.transport == NodeAddress::Transport::unix_socket) return a.path;
  if (a.kind == NodeAddress::Kind::sentinel)
    return "sentinel " + a.master_name + "@" + host_port(a.host, a.port);
  if (a.kind == NodeAddress::Kind::cluster) return "cluster@" + host_port(a.host, a.port);
  return a.host + "|" + std::to_string(a.port);
}

std::string NodeAddress::to_string() const {
  if (transport == Transport::unix_socket) {
    return "unix://" + path + (db != 0 ? "?db=" + std::to_string(db) : "");
  }
  if (kind == Kind::sentinel) {
    std::string out = (tls ? "rediss+sentinel://" : "redis+sentinel://") + host_port(host, port) +
                      "/" + master_name;
    char sep = '?';
    for (const auto& s : more_sentinels) {
      out += sep + std::string("sentinel=") + host_port(s.host, s.port);
      sep = '&';
    }
    if (db != 0) out += sep + std::string("db=") + std::to_string(db);
    return out;
  }
  if (kind == Kind::cluster) {
    std::string out = (tls ? "rediss+cluster://" : "redis+cluster://") + host_port(host, port);
    char sep = '?';
    for (const auto& s : more_seeds) {
      out += sep + std::string("seed=") + host_port(s.host, s.port);
      sep = '&';
    }
    return out;
  }
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  // With a database or TLS only the URL form parses back (host:port/db is not an address).
  const char* scheme = tls ? "rediss://" : db != 0 ? "redis://" : "";
  return scheme + h + ":" + std::to_string(port) + (db != 0 ? "/" + std::to_string(db) : "");
}

std::optional<NodeAddress> NodeAddress::parse(std::string_view text, std::string& error) {
  NodeAddress a;
  std::string why;
  if (!parse_address(text, a, why)) {
    error = "bad node address " + quoted(redacted(text)) + ": " + why;
    return std::nullopt;
  }
  return a;
}

std::optional<std::vector<NodeAddress>> parse_node_list(std::string_view text, std::string& error) {
  std::vector<NodeAddress> out;
  std::set<std::string> seen;
  if (text.empty()) {
    error = "empty node list";
    return std::nullopt;
  }
  std::size_t start = 0;
  while (true) {
    if (auto why = comma_in_credentials(text, start)) {
      error = std::move(*why);
      return std::nullopt;
    }
    auto comma = text.find(',', start);
    auto item = text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
    auto a = NodeAddress::parse(item, error);
    if (!a) return std::nullopt;
    if (!seen.insert(detail::address_identity(*a)).second) {
      error = "node " + quoted(redacted(item)) +
              " appears twice in the node list (it would vote twice)";
      return std::nullopt;
    }
    out.push_back(std::move(*a));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace redlock
