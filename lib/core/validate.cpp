#include "core/validate.hpp"

#include <set>
#include <string_view>

#include "core/election.hpp"
#include "core/quorum.hpp"
#include "core/token.hpp"
#include "redlock/keys.hpp"

namespace redlock::detail {

std::string quoted(std::string_view s) {
  std::string out = "'";
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += "'";
  return out;
}

std::optional<std::string> check_resources(const std::vector<std::string>& resources,
                                           std::string_view key_prefix) {
  if (resources.empty()) return "no resource given";
  // (Checked for every acquire and release: one resource, the usual case, allocates nothing.)
  std::set<std::string_view> seen;
  for (const auto& r : resources) {
    if (r.empty()) return "empty resource name";
    if (r.size() > max_resource_bytes) {
      return "resource name of " + std::to_string(r.size()) +
             " bytes is longer than the limit of " + std::to_string(max_resource_bytes);
    }
    if (resources.size() > 1 && !seen.insert(r).second) return "resource '" + r + "' given twice";
    if (key_prefix.empty() ? is_derived_key(r) : is_derived_key(std::string(key_prefix) + r)) {
      // Name what makes it so: with a key prefix, the prefix may be the bad value.
      const std::string what = key_prefix.empty()
                                   ? "resource '" + r + "'"
                                   : "the key '" + std::string(key_prefix) + r + "' (key prefix '" +
                                         std::string(key_prefix) + "', resource '" + r + "')";
      return what +
             " has the form of the library's own keys ({...}:redlock:...), which no lock key may "
             "take";
    }
  }
  return std::nullopt;
}

std::optional<std::string> check_declared_ttl(Millis ttl, const Options& client) {
  if (!client.max_ttl || ttl <= *client.max_ttl) return std::nullopt;
  return "ttl of " + std::to_string(ttl.count()) + " ms is above the declared max_ttl of " +
         std::to_string(client.max_ttl->count()) +
         " ms (the restart guard's quarantine is sized for it)";
}

std::optional<std::string> check_ttl(Millis ttl, double drift_factor) {
  if (ttl <= Millis{0}) return "ttl must be positive, got " + std::to_string(ttl.count()) + " ms";
  if (ttl > max_ttl) {
    return "ttl of " + std::to_string(ttl.count()) + " ms exceeds the maximum of " +
           std::to_string(max_ttl.count()) + " ms";
  }
  // validity = ttl - elapsed - drift: a ttl that the drift allowance alone uses up can never give
  // a valid lock, whatever the network does, so it is a bad argument rather than a failure.
  if (const auto d = drift(ttl, drift_factor); d >= ttl) {
    return "ttl of " + std::to_string(ttl.count()) +
           " ms is not longer than the clock-drift allowance (" + std::to_string(d.count()) +
           " us): no lock taken with it could ever be valid";
  }
  return std::nullopt;
}

std::optional<std::string> check_token_resources(std::string_view token, std::size_t resources) {
  const auto n = token_resources(token);
  if (!n || *n == resources) return std::nullopt;
  return "the token is of a lock over " + std::to_string(*n) + " resources, " +
         std::to_string(resources) +
         " given: give all of them (a part would be released and the rest stay held)";
}

std::optional<OptionsProblem> find_acquire_problem(const std::vector<std::string>& resources,
                                                   const AcquireOptions& o, double drift_factor,
                                                   std::string_view key_prefix) {
  using P = OptionsProblem;
  if (auto why = check_resources(resources, key_prefix)) return P{"resources", *why};
  if (auto why = check_ttl(o.ttl, drift_factor)) return P{"ttl", *why};
  if (auto p = check_election(resources.size(), o)) return p;
  if (o.wait && *o.wait < Millis{0}) return P{"wait", "wait must be >= 0"};
  if (o.retry_count && *o.retry_count < 0) return P{"retry_count", "retry_count must be >= 0"};
  if (o.fence && resources.size() > 1) return P{"fence", "fencing takes one resource per lock"};
  if (o.mode != LockMode::exclusive && resources.size() > 1)
    return P{"mode", "read and write locks take one resource"};
  if (o.fair && (o.mode != LockMode::exclusive || o.fence || resources.size() > 1)) {
    return P{"fair", "a fair lock is an exclusive lock on one resource, without fencing"};
  }
  if (o.fair && (o.heartbeat_ttl < Millis{100} || o.heartbeat_ttl > max_ttl)) {
    return P{"heartbeat_ttl", "heartbeat_ttl must be at least 100 ms"};
  }
  if (o.mode != LockMode::exclusive && o.fence)
    return P{"fence", "fencing is offered on exclusive locks only"};
  return std::nullopt;
}

std::optional<OptionsProblem> find_acquire_problem(const std::vector<std::string>& resources,
                                                   const AcquireOptions& o, const Options& client) {
  if (auto p = find_acquire_problem(resources, o, client.drift_factor, client.key_prefix)) return p;
  if (auto why = check_declared_ttl(o.ttl, client)) return OptionsProblem{"ttl", *why};
  return std::nullopt;
}

std::optional<OptionsProblem> find_token_problem(const std::vector<std::string>& resources,
                                                 std::string_view token,
                                                 std::string_view key_prefix) {
  using P = OptionsProblem;
  if (token.empty()) return P{"token", "empty lock (no token)"};
  if (auto why = check_resources(resources, key_prefix)) return P{"resources", *why};
  if (auto why = check_token_resources(token, resources.size())) return P{"token", *why};
  return std::nullopt;
}

std::optional<OptionsProblem> find_extend_problem(const std::vector<std::string>& resources,
                                                  std::string_view token, Millis ttl,
                                                  const Options& client) {
  if (auto p = find_token_problem(resources, token, client.key_prefix)) return p;
  if (auto why = check_ttl(ttl, client.drift_factor)) return OptionsProblem{"ttl", *why};
  if (auto why = check_declared_ttl(ttl, client)) return OptionsProblem{"ttl", *why};
  return std::nullopt;
}

}  // namespace redlock::detail
