// Fuzz target: node addresses (NodeAddress::parse, parse_node_list, NodeAddress::to_string).
//
// Invariants checked on every input:
// - a parsed address is well-formed (port 1-65535, db >= 0, absolute unix path of <= 107 bytes,
//   min_replicas 0-100; a user without a password is allowed: `redis://user:@host` leaves it to
//   the caller);
// - to_string() is exactly the display form built from transport/host/port/db/path, so it never
//   contains the user or the password, and it parses back as it is to the same host/port/db/path
//   with no credentials;
// - an error message is set on failure, names the value, and carries no raw control bytes, and
//   never the password part of the value (what lies between the scheme and the last '@');
// - parse_node_list accepts exactly the lists whose items all parse and name distinct servers
//   (host+port or socket path), and returns the same addresses as parsing each item alone;
//   an item whose credentials hold a raw ',' (one before the last '@' ahead of the first '/'
//   after its scheme) is refused with every byte of the credentials masked.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "redlock/options.hpp"

using redlock::NodeAddress;

namespace {

std::string expected_display(const NodeAddress& a) {
  if (a.transport == NodeAddress::Transport::unix_socket) {
    return "unix://" + a.path + (a.db != 0 ? "?db=" + std::to_string(a.db) : "");
  }
  // With a database only the URL form is an address, so the display form uses it.
  const std::string h = a.host.find(':') != std::string::npos ? "[" + a.host + "]" : a.host;
  if (a.kind == NodeAddress::Kind::sentinel) {
    // scheme, the first sentinel, the master's name, then the query: every other sentinel, db
    std::string out = std::string(a.tls ? "rediss+sentinel://" : "redis+sentinel://") + h + ":" +
                      std::to_string(a.port) + "/" + a.master_name;
    std::vector<std::string> query;
    for (const auto& more : a.more_sentinels) {
      const std::string mh =
          more.host.find(':') != std::string::npos ? "[" + more.host + "]" : more.host;
      query.push_back("sentinel=" + mh + ":" + std::to_string(more.port));
    }
    if (a.db != 0) query.push_back("db=" + std::to_string(a.db));
    for (std::size_t i = 0; i < query.size(); ++i) out += (i == 0 ? "?" : "&") + query[i];
    return out;
  }
  if (a.kind == NodeAddress::Kind::cluster) {
    // scheme, the first seed, then every other seed in the query
    std::string out = std::string(a.tls ? "rediss+cluster://" : "redis+cluster://") + h + ":" +
                      std::to_string(a.port);
    for (std::size_t i = 0; i < a.more_seeds.size(); ++i) {
      const auto& more = a.more_seeds[i];
      const std::string mh =
          more.host.find(':') != std::string::npos ? "[" + more.host + "]" : more.host;
      out += (i == 0 ? "?seed=" : "&seed=") + mh + ":" + std::to_string(more.port);
    }
    return out;
  }
  return (a.tls       ? "rediss://"
          : a.db != 0 ? "redis://"
                      : "") +
         h + ":" + std::to_string(a.port) + (a.db != 0 ? "/" + std::to_string(a.db) : "");
}

std::string identity(const NodeAddress& a) {
  if (a.kind == NodeAddress::Kind::sentinel) {
    return "sentinel|" + a.master_name + "|" + a.host + "|" + std::to_string(a.port);
  }
  if (a.kind == NodeAddress::Kind::cluster) {
    return "cluster|" + a.host + "|" + std::to_string(a.port);
  }
  return a.transport == NodeAddress::Transport::unix_socket
             ? "unix|" + a.path
             : "tcp|" + a.host + "|" + std::to_string(a.port);
}

// The library's rendering of bytes in messages: control bytes as \xHH.
std::string as_quoted(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// Whatever the input, the part that may be a password (after the first ':' of everything between
// the scheme, where the text starts with one, and the last '@') never shows in an error: the
// error quotes the input exactly with that part masked as "***" (the user may be masked too).
void check_no_password(std::string_view input, const std::string& error) {
  const auto at = input.rfind('@');
  if (at == std::string_view::npos) return;
  const auto scheme = input.find("://");
  const bool has_scheme =
      scheme != std::string_view::npos && scheme > 0 && scheme < at &&
      input.substr(0, scheme).find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.") ==
          std::string_view::npos;
  std::size_t start = has_scheme ? scheme + 3 : 0;
  if (const auto colon = input.substr(start, at - start).find(':');
      colon != std::string_view::npos) {
    start += colon + 1;
  }
  const std::string opening = "bad node address '";
  // (a sentinel_password= after the '@' hides the rest as well)
  constexpr std::string_view param = "sentinel_password=";
  const auto later = input.find(param, at);
  const std::string rest =
      later == std::string_view::npos
          ? "***" + as_quoted(input.substr(at)) + "': "
          : "***" + as_quoted(input.substr(at, later + param.size() - at)) + "***': ";
  const std::string masked = opening + as_quoted(input.substr(0, start)) + rest;
  const std::string masked_user =
      opening + as_quoted(input.substr(0, has_scheme ? scheme + 3 : 0)) + rest;
  // A "sentinel_password=" before the last '@' may be a piece of the userinfo's password (or a
  // parameter whose value holds a raw '@'): then everything from the first hidden byte on is.
  bool all_after = false;
  if (const auto p = input.find(param); p != std::string_view::npos && p < at) {
    const auto cut = std::min(p + param.size(), start);
    const auto cut_user = std::min(p + param.size(), has_scheme ? scheme + 3 : std::size_t{0});
    all_after = error.rfind(opening + as_quoted(input.substr(0, cut)) + "***': ", 0) == 0 ||
                error.rfind(opening + as_quoted(input.substr(0, cut_user)) + "***': ", 0) == 0;
  }
  FUZZ_CHECK(all_after || error.rfind(masked, 0) == 0 || error.rfind(masked_user, 0) == 0,
             "password not masked in " + fuzz::show(error) + " for " + fuzz::show(input));
}

// `quoted` is the input whose (redacted) text the error quotes: for a list, the first item that
// does not parse.
void check_error(std::string_view input, const std::string& error, std::string_view prefix,
                 std::string_view quoted) {
  FUZZ_CHECK(!error.empty(), "no error message for " + fuzz::show(input));
  FUZZ_CHECK(error.rfind(prefix, 0) == 0,
             "error " + fuzz::show(error) + " for " + fuzz::show(input));
  for (unsigned char c : error) {
    FUZZ_CHECK(c >= 0x20 && c != 0x7f, "raw control byte in error " + fuzz::show(error));
  }
  check_no_password(quoted, error);
}

void check_address(std::string_view input, const NodeAddress& a) {
  const std::string in = fuzz::show(input);
  FUZZ_CHECK(a.db >= 0, in);
  FUZZ_CHECK(a.tls || a.tls_override == NodeAddress::TlsOverride{},
             "TLS settings without TLS from " + in);
  FUZZ_CHECK(!a.min_replicas || (*a.min_replicas >= 0 && *a.min_replicas <= 100),
             "min_replicas out of 0-100 from " + in);
  if (a.transport == NodeAddress::Transport::unix_socket) {
    FUZZ_CHECK(!a.path.empty() && a.path.front() == '/' && a.path.size() <= 107, in);
  } else {
    FUZZ_CHECK(a.port >= 1, in);
    FUZZ_CHECK(!a.host.empty() && a.host.size() <= 253, in);
    FUZZ_CHECK(a.path.empty(), in);
  }
  const std::string display = a.to_string();
  FUZZ_CHECK(display == expected_display(a), "to_string " + fuzz::show(display) + " != " +
                                                 fuzz::show(expected_display(a)) + " for " + in);
  if (!a.user.empty() || !a.password.empty()) {
    FUZZ_CHECK(display.find('@') == std::string::npos ||
                   a.transport == NodeAddress::Transport::unix_socket,
               "credentials shown in " + fuzz::show(display));
  }

  // The display form parses back, as it is, to the same server and database.
  std::string err;
  auto back = NodeAddress::parse(display, err);
  FUZZ_CHECK(back.has_value(),
             "to_string " + fuzz::show(display) + " of " + in + " does not parse: " + err);
  FUZZ_CHECK(back->transport == a.transport && back->db == a.db && back->tls == a.tls &&
                 back->kind == a.kind && back->master_name == a.master_name &&
                 back->more_sentinels == a.more_sentinels,
             fuzz::show(display) + " re-parses differently");
  if (a.transport == NodeAddress::Transport::tcp) {
    FUZZ_CHECK(back->host == a.host && back->port == a.port,
               fuzz::show(display) + " re-parses differently");
  } else {
    FUZZ_CHECK(back->path == a.path, fuzz::show(display) + " re-parses differently");
  }
  FUZZ_CHECK(back->user.empty() && back->password.empty(),
             "credentials came back from " + fuzz::show(display));
}

// The error of parse_node_list for an item (starting at `start`) with a raw ',' in its
// credentials, or nullopt: the credentials are what lies between the item's scheme (if it has
// one) and the last '@' before the first '/' after it; they are shown as "***" whole.
std::optional<std::string> comma_in_credentials(std::string_view text, std::size_t start) {
  const auto next_comma = text.find(',', start);
  const auto scheme = text.find("://", start);
  const std::size_t from =
      scheme != std::string_view::npos && scheme < next_comma ? scheme + 3 : start;
  std::size_t slash = text.find('/', from);
  if (slash == std::string_view::npos) slash = text.size();
  std::size_t at = std::string_view::npos;
  for (std::size_t i = from; i < slash; ++i) {
    if (text[i] == '@') at = i;
  }
  if (at == std::string_view::npos) return std::nullopt;
  bool comma = false;
  for (std::size_t i = from; i < at; ++i) comma = comma || text[i] == ',';
  if (!comma) return std::nullopt;
  std::size_t end = at;
  while (end < text.size() && text[end] != ',') ++end;
  return "bad node address '" + as_quoted(text.substr(start, from - start)) + "***" +
         as_quoted(text.substr(at, end - at)) +
         "': a ',' in a user name or password must be written %2C (a ',' separates nodes)";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  std::string err;
  auto one = NodeAddress::parse(text, err);
  if (one) {
    check_address(text, *one);
  } else {
    check_error(text, err, "bad node address '", text);
  }

  // The list: split on ',' independently and compare.
  std::vector<std::string_view> items;
  for (std::size_t start = 0;;) {
    auto comma = text.find(',', start);
    items.push_back(text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  std::vector<NodeAddress> expect;
  std::set<std::string> seen;
  bool valid = !text.empty();
  std::string_view bad_item;  // the first item that does not parse, if any
  std::string comma_error;    // the error expected for a raw ',' in credentials
  for (auto item : items) {
    if (auto masked =
            comma_in_credentials(text, static_cast<std::size_t>(item.data() - text.data()))) {
      comma_error = *masked;
      valid = false;
      break;
    }
    std::string e;
    auto a = NodeAddress::parse(item, e);
    if (!a) bad_item = item;
    if (!a || !seen.insert(identity(*a)).second) {
      valid = false;
      break;
    }
    expect.push_back(std::move(*a));
  }
  std::string list_err;
  auto list = redlock::parse_node_list(text, list_err);
  FUZZ_CHECK(list.has_value() == valid, "parse_node_list " +
                                            std::string(list ? "accepted " : "refused ") +
                                            fuzz::show(text) + (list ? "" : ": " + list_err));
  if (list) {
    FUZZ_CHECK(*list == expect,
               "parse_node_list differs from item-wise parsing for " + fuzz::show(text));
    for (std::size_t i = 0; i < list->size(); ++i) check_address(items[i], (*list)[i]);
  } else if (!comma_error.empty()) {
    FUZZ_CHECK(list_err == comma_error, "error " + fuzz::show(list_err) + " for " +
                                            fuzz::show(text) + ", expected " +
                                            fuzz::show(comma_error));
  } else if (!text.empty()) {
    // (A duplicate is named by display forms, which never carry credentials.)
    check_error(text, list_err, list_err.rfind("node '", 0) == 0 ? "node '" : "bad node address '",
                bad_item);
  }
  return 0;
}
