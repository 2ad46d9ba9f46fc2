#include "core/slots.hpp"

#include <charconv>

#include "core/server_text.hpp"
#include "redlock/keys.hpp"

namespace redlock::detail {
namespace {

bool to_int(std::string_view s, long long& out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// [ip, port, id, ...] of CLUSTER SLOTS. An unknown endpoint ("?" or "") leaves the host empty.
// False, with `error` saying what is wrong, for a port outside 1-65535 or a host no server has.
bool parse_endpoint(const Reply& r, ClusterEndpoint& e, std::string& id, std::string& error) {
  if (r.type != Reply::Type::array || r.elements.size() < 2 ||
      r.elements[0].type != Reply::Type::string || r.elements[1].type != Reply::Type::integer) {
    error = "not [host, port, id...]";
    return false;
  }
  const auto& host = r.elements[0].str;
  const long long port = r.elements[1].integer;
  if (port < 1 || port > 65535) {  // checked before it is narrowed
    error = "port " + std::to_string(port);
    return false;
  }
  if (!host.empty() && host != "?" && !valid_server_host(host)) {
    error = "host \"" + server_text(host, 80) + "\"";
    return false;
  }
  e.host = host == "?" ? std::string() : host;
  e.port = static_cast<std::uint16_t>(port);
  id.clear();
  if (r.elements.size() >= 3 && r.elements[2].type == Reply::Type::string) id = r.elements[2].str;
  return true;
}

bool is_multi(const Command& c) {
  return c.script && (*c.script == ScriptId::acquire_multi ||
                      *c.script == ScriptId::release_multi || *c.script == ScriptId::extend_multi);
}

// release_multi: how many of its keys are lock keys (the rest are their waiting marks, one each,
// with as many wake channels after the token).
std::size_t lock_key_count(const Command& c) {
  const auto argv = c.args.size() - static_cast<std::size_t>(c.numkeys);
  if (*c.script != ScriptId::release_multi || argv <= 1) return static_cast<std::size_t>(c.numkeys);
  return static_cast<std::size_t>(c.numkeys) / 2;
}

}  // namespace

std::optional<std::vector<SlotRange>> parse_cluster_slots(const Reply& reply, std::string& error) {
  if (reply.type != Reply::Type::array) {
    error = "CLUSTER SLOTS answered " + reply.describe();
    return std::nullopt;
  }
  std::vector<SlotRange> out;
  for (const auto& e : reply.elements) {
    if (e.type != Reply::Type::array || e.elements.size() < 3 ||
        e.elements[0].type != Reply::Type::integer || e.elements[1].type != Reply::Type::integer) {
      error = "CLUSTER SLOTS: an entry is not [first, last, master, replicas...]";
      return std::nullopt;
    }
    // The server's 64-bit numbers are checked before they are narrowed: [4294967295, 0] must not
    // pass as [-1, 0] (issue 40, item 1).
    const long long first = e.elements[0].integer;
    const long long last = e.elements[1].integer;
    if (first < 0 || last >= cluster_slots || first > last) {
      error = "CLUSTER SLOTS: bad slot range " + std::to_string(first) + "-" + std::to_string(last);
      return std::nullopt;
    }
    SlotRange range;
    range.first = static_cast<int>(first);
    range.last = static_cast<int>(last);
    std::string bad;
    if (!parse_endpoint(e.elements[2], range.master, range.master_id, bad)) {
      error = "CLUSTER SLOTS: bad master entry for slots " + std::to_string(range.first) + "-" +
              std::to_string(range.last) + ": " + bad;
      return std::nullopt;
    }
    // A replica's id is all that is used (a master later seen with it was promoted), so it is
    // taken whatever its address says: a wrong port must not hide a promotion.
    for (std::size_t i = 3; i < e.elements.size(); ++i) {
      const auto& replica = e.elements[i];
      if (replica.type == Reply::Type::array && replica.elements.size() >= 3 &&
          replica.elements[2].type == Reply::Type::string && !replica.elements[2].str.empty()) {
        range.replica_ids.push_back(replica.elements[2].str);
      }
    }
    out.push_back(std::move(range));
  }
  return out;
}

std::optional<std::vector<std::size_t>> slot_owners(const std::vector<SlotRange>& map,
                                                    std::string& error) {
  std::vector<std::size_t> owner(cluster_slots, no_owner);
  for (std::size_t i = 0; i < map.size(); ++i) {
    const auto& r = map[i];
    if (r.first < 0 || r.last >= cluster_slots || r.first > r.last) {
      error =
          "CLUSTER SLOTS: bad slot range " + std::to_string(r.first) + "-" + std::to_string(r.last);
      return std::nullopt;
    }
    for (auto s = static_cast<std::size_t>(r.first); s <= static_cast<std::size_t>(r.last); ++s) {
      if (owner[s] != no_owner) {
        error = "CLUSTER SLOTS: slot " + std::to_string(s) + " is in two ranges";
        return std::nullopt;
      }
      owner[s] = i;
    }
  }
  return owner;
}

std::optional<Redirect> parse_redirect(std::string_view error) {
  Redirect r;
  if (error.starts_with("MOVED ")) {
    error.remove_prefix(6);
  } else if (error.starts_with("ASK ")) {
    r.ask = true;
    error.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const auto space = error.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  long long slot = 0;
  if (!to_int(error.substr(0, space), slot) || slot < 0 || slot >= cluster_slots)
    return std::nullopt;
  const auto where = error.substr(space + 1);
  const auto colon = where.rfind(':');
  long long port = 0;
  if (colon == std::string_view::npos || !to_int(where.substr(colon + 1), port) || port <= 0 ||
      port > 65535) {
    return std::nullopt;
  }
  auto host = where.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (!host.empty() && !valid_server_host(host)) return std::nullopt;
  r.slot = static_cast<int>(slot);
  r.to.host = std::string(host);
  r.to.port = static_cast<std::uint16_t>(port);
  return r;
}

std::optional<unsigned> command_slot(const Command& c) {
  if (c.script) {
    if (c.numkeys <= 0 || c.args.empty()) return std::nullopt;
    return hash_slot(c.args[0]);
  }
  // The plain commands the lock kinds send name their key first (SET key ..., GET key, ...);
  // anything else (PING, INFO, ...) has no key.
  if (c.args.size() < 2) return std::nullopt;
  static constexpr std::string_view keyed[] = {"SET",  "GET",    "DEL", "PEXPIRE",
                                               "PTTL", "EXISTS", "ZREM"};
  for (auto k : keyed) {
    if (c.args[0] == k) return hash_slot(c.args[1]);
  }
  return std::nullopt;
}

std::optional<std::vector<SlotPart>> split_by_slot(const Command& c) {
  if (!is_multi(c) || c.numkeys <= 1) return std::nullopt;
  const std::size_t m = lock_key_count(c);
  const std::size_t nkeys = static_cast<std::size_t>(c.numkeys);
  const bool marks = *c.script == ScriptId::release_multi && nkeys == 2 * m;
  std::vector<SlotPart> parts;
  for (std::size_t i = 0; i < m; ++i) {
    const unsigned slot = hash_slot(c.args[i]);
    SlotPart* p = nullptr;
    for (auto& q : parts) {
      if (q.slot == slot) p = &q;
    }
    if (p == nullptr) {
      parts.push_back({slot, {}, {}});
      p = &parts.back();
    }
    p->lock_keys.push_back(c.args[i]);
  }
  if (parts.size() == 1) return std::nullopt;
  for (auto& p : parts) {
    std::vector<std::string> keys = p.lock_keys;
    if (marks) {
      for (std::size_t i = 0; i < m; ++i) {
        if (hash_slot(c.args[i]) == p.slot) keys.push_back(c.args[m + i]);
      }
    }
    p.command = Command::call(*c.script, std::move(keys));
    const auto& argv = c.args;
    const std::size_t argv0 = nkeys;
    if (argv0 >= argv.size()) continue;
    p.command.arg(argv[argv0]);  // the token
    if (*c.script == ScriptId::release_multi) {
      if (marks) {
        for (std::size_t i = 0; i < m; ++i) {
          if (hash_slot(c.args[i]) == p.slot && argv0 + 1 + i < argv.size())
            p.command.arg(argv[argv0 + 1 + i]);
        }
      }
    } else {
      for (std::size_t i = argv0 + 1; i < argv.size(); ++i) p.command.arg(argv[i]);
    }
  }
  return parts;
}

Reply combine_parts(const Command& whole, const std::vector<const Reply*>& parts) {
  Reply out;
  out.type = Reply::Type::integer;
  for (const Reply* p : parts) {
    if (p->is_error()) return *p;
  }
  if (whole.script && *whole.script == ScriptId::release_multi) {
    for (const Reply* p : parts) {
      if (p->type == Reply::Type::integer) out.integer += p->integer;
    }
    return out;
  }
  out.integer = 1;
  for (const Reply* p : parts) {
    if (!p->is_integer(1)) out.integer = 0;
  }
  return out;
}

std::optional<Command> without_wake_keys(const Command& c) {
  if (!c.script || c.numkeys <= 1) return std::nullopt;
  const auto nkeys = static_cast<std::size_t>(c.numkeys);
  if (nkeys >= c.args.size()) return std::nullopt;
  const std::string& token = c.args[nkeys];
  if (*c.script == ScriptId::release)
    return Command::call(ScriptId::release, {c.args[0]}).arg(token);
  if (*c.script != ScriptId::release_multi) return std::nullopt;
  const std::size_t m = lock_key_count(c);
  if (m == nkeys) return std::nullopt;  // no marks to leave out
  return Command::call(ScriptId::release_multi,
                       std::vector<std::string>(c.args.begin(),
                                                c.args.begin() + static_cast<std::ptrdiff_t>(m)))
      .arg(token);
}

Command rollback(const Command& whole, const SlotPart& part) {
  const std::size_t token_at = static_cast<std::size_t>(whole.numkeys);
  Command c = Command::call(ScriptId::release_multi, part.lock_keys);
  if (token_at < whole.args.size()) c.arg(whole.args[token_at]);
  return c;
}

}  // namespace redlock::detail
