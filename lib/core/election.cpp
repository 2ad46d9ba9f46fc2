#include "core/election.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>

#include "core/quorum.hpp"
#include "core/validate.hpp"
#include "redlock/error.hpp"

namespace redlock {

namespace detail {
namespace {

std::optional<std::string> text(const Reply& r) {
  if (r.type == Reply::Type::string) return r.str;
  return std::nullopt;
}

// A decimal integer reply or text, 0 to 2^63-1 (what Lua hands back for a hash field).
std::optional<std::uint64_t> number(const Reply& r) {
  if (r.type == Reply::Type::integer) {
    if (r.integer < 0) return std::nullopt;
    return static_cast<std::uint64_t>(r.integer);
  }
  if (r.type != Reply::Type::string || r.str.empty() || r.str.size() > 18) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : r.str) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');  // 18 digits fit in 63 bits
  }
  return v;
}

// The quorum-th largest of `values` (at least `quorum` of them).
Millis quorum_th(std::vector<Millis> values, int quorum) {
  std::sort(values.begin(), values.end(), std::greater<>());
  return values[static_cast<std::size_t>(quorum - 1)];
}

}  // namespace

LeaderRow classify_leader(const Reply& r) {
  LeaderRow row;
  if (r.type != Reply::Type::array || r.elements.size() != 6) return row;
  const auto& el = r.elements;
  row.answered = true;
  row.lock_value = text(el[0]);
  if (el[1].type == Reply::Type::integer && el[1].integer >= 0 && el[1].integer <= max_ttl.count())
    row.pttl = Millis{el[1].integer};
  row.token = text(el[2]);
  row.term = number(el[3]).value_or(0);
  if (el[4].type == Reply::Type::integer && el[4].integer >= 0 && el[4].integer <= max_ttl.count())
    row.since = Millis{el[4].integer};
  row.id = text(el[5]).value_or("");
  return row;
}

LeaderResult decide_leader(const std::vector<LeaderRow>& rows) {
  LeaderResult res;
  res.nodes = static_cast<int>(rows.size());
  const int quorum = quorum_of(res.nodes);
  // (token, term, id) -> the rows that store it as leader: the record carries the lock key's
  // token and a settled term.
  std::map<std::tuple<std::string, std::uint64_t, std::string>, std::vector<const LeaderRow*>> by;
  for (const auto& row : rows) {
    if (!row.answered) continue;
    ++res.answered;
    if (row.term == 0 || !row.token || row.lock_value != row.token) continue;
    // An identity no candidate could have campaigned with (empty, oversized, a control
    // character, not text) is no leader's: a hostile or corrupted node must not put a NUL, a
    // newline or a terminal escape into what `redlock-cli leader` prints (fuzz_leader).
    if (check_identity(row.id)) continue;
    by[{*row.token, row.term, row.id}].push_back(&row);
  }
  std::size_t most = 0;
  for (const auto& [key, holders] : by) {
    most = std::max(most, holders.size());
    if (static_cast<int>(holders.size()) < quorum) continue;
    // One quorum at most: two would share a node, which stores one record.
    Leader l;
    l.id = std::get<2>(key);
    l.term = std::get<1>(key);
    std::vector<Millis> ttls, since;
    for (const auto* h : holders) {
      ttls.push_back(h->pttl.value_or(Millis{0}));
      since.push_back(h->since.value_or(Millis{0}));
    }
    l.validity = quorum_th(std::move(ttls), quorum);
    l.since = quorum_th(std::move(since), quorum);
    res.leader = std::move(l);
    return res;
  }
  if (static_cast<int>(most) + (res.nodes - res.answered) >= quorum) {
    std::vector<NodeOutcome> failed;
    int refused = 0;
    for (const auto& row : rows) {
      if (row.answered) continue;
      failed.push_back(row.failure);
      if (refused_by_configuration(row.failure)) ++refused;
    }
    // As failure_reason() decides for an acquisition: refusals alone rule out a quorum.
    const bool by_configuration = refused > res.nodes - quorum;
    res.error = make_error_code(by_configuration ? Errc::refused : Errc::no_quorum);
    res.message = std::string(by_configuration ? "refused: " : "no quorum to tell: ") +
                  std::to_string(res.answered) + " of " + std::to_string(res.nodes) +
                  " nodes answered (" + summarize(failed) + ")";
  }
  return res;
}

std::optional<OptionsProblem> check_election(std::size_t resources, const AcquireOptions& o) {
  using P = OptionsProblem;
  if (o.mode != LockMode::leader) {
    if (o.identity.empty()) return std::nullopt;
    return P{"identity", "an identity is for LockMode::leader (an election) only"};
  }
  if (resources > 1) return P{"mode", "an election takes one name"};
  if (o.fair || o.fence) return P{"mode", "an election's lock is fenced already, and not fair"};
  if (auto why = check_identity(o.identity)) return P{"identity", *why};
  return std::nullopt;
}

}  // namespace detail
}  // namespace redlock
