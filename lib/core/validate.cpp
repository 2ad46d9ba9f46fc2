#include "core/validate.hpp"

#include <set>
#include <string_view>

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
  std::set<std::string_view> seen;
  for (const auto& r : resources) {
    if (r.empty()) return "empty resource name";
    if (r.size() > max_resource_bytes) {
      return "resource name of " + std::to_string(r.size()) +
             " bytes is longer than the limit of " + std::to_string(max_resource_bytes);
    }
    if (!seen.insert(r).second) return "resource '" + r + "' given twice";
    if (is_derived_key(std::string(key_prefix) + r)) {
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

}  // namespace redlock::detail
