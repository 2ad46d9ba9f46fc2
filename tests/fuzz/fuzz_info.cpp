// Fuzz target: a server's INFO text with the code that applies it: the restart guard (hazard 6)
// and the promotion check of Sentinel and Cluster votes (INFO replication). In-process.
//
// Input: byte 0 picks the guard's policy (quarantine, minimum uptime, durable nodes), bytes 1-8
// the time it is read at, byte 9 how much later the server is seen again with another run_id,
// the rest is the INFO text. Invariants (UBSan also stops at any overflow in the time
// arithmetic, which a wrapped or huge uptime used to reach):
// - info_field() returns a view into the text: the rest of its line, less the line's "\r";
// - parse_server_info() finds the server exactly when it has a run_id; its uptime is the field's
//   value when that is a decimal 0..max_reported_seconds, else 0 (a server that cannot say how
//   long it has run is taken for one that just started);
// - the guard then excludes the server exactly as the policy says: never when durable (no
//   promotion yet); when younger than the minimum uptime, until it is that old; after a restart
//   (run_id changed), while younger than the quarantine; never past the longest of them;
// - parse_promoted() says "promoted" exactly for role:master with a master_replid2 that is not all
//   zeros, and a promotion excludes for exactly one quarantine;
// - observe() itself bounds an uptime nobody checked (a ServerInfo made here from raw bytes).
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/info.hpp"
#include "core/restart_guard.hpp"
#include "fuzz_check.hpp"

using namespace redlock;
using namespace redlock::detail;
using std::chrono::seconds;

namespace {

constexpr Millis quarantines[] = {Millis{0}, Millis{1}, Millis{30'000}, max_ttl};
constexpr Millis min_uptimes[] = {Millis{0}, Millis{1000}, Millis{3'600'000}, max_ttl};

void check_field(std::string_view text, std::string_view name) {
  const auto v = info_field(text, name);
  if (v.empty()) return;
  FUZZ_CHECK(v.data() >= text.data() && v.data() + v.size() <= text.data() + text.size(),
             "a field outside the text");
  FUZZ_CHECK(v.find('\n') == std::string_view::npos, "a field across lines");
  // The value runs to the end of its line, less the line's one "\r".
  const auto rest = text.substr(static_cast<std::size_t>(v.data() + v.size() - text.data()));
  FUZZ_CHECK(
      rest.empty() || rest[0] == '\n' || (rest[0] == '\r' && (rest.size() == 1 || rest[1] == '\n')),
      "a field cut short: " + fuzz::show(text));
}

// The uptime the field says, read here: digits only, in range.
long long expected_uptime(std::string_view field) {
  if (field.empty()) return 0;
  for (char c : field) {
    if (c < '0' || c > '9') return 0;
  }
  while (field.size() > 1 && field.front() == '0') field.remove_prefix(1);
  if (field.size() > 19) return 0;
  std::uint64_t v = 0;  // 19 digits fit
  for (char c : field) v = v * 10 + static_cast<std::uint64_t>(c - '0');
  return v <= static_cast<std::uint64_t>(max_reported_seconds) ? static_cast<long long>(v) : 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 10) return 0;
  const RestartGuard::Policy policy{quarantines[data[0] & 3], min_uptimes[(data[0] >> 2) & 3],
                                    ((data[0] >> 4) & 1) != 0};
  std::uint64_t raw = 0;
  std::memcpy(&raw, data + 1, 8);
  // A boot-clock reading: up to 100 years after boot.
  const auto now =
      BootClock::time_point{} +
      BootClock::duration{static_cast<BootClock::rep>(raw % 3'155'760'000'000'000'000ULL)};
  const auto later = now + seconds(data[9]);
  const std::string_view text(reinterpret_cast<const char*>(data) + 10, size - 10);

  for (auto name : {"run_id", "uptime_in_seconds", "role", "master_replid2"})
    check_field(text, name);

  // A ServerInfo nobody checked: observe() must bound it itself.
  {
    long long uptime = 0;
    std::memcpy(&uptime, data + 1, 8);
    RestartGuard g;
    (void)g.observe(ServerInfo{"x", uptime}, now, policy);
    (void)g.observe(ServerInfo{"y", ~uptime}, later, policy);
    (void)g.exclusion(later, policy.durable, policy.quarantine);
  }

  const auto info = parse_server_info(text);
  FUZZ_CHECK(info.has_value() == !info_field(text, "run_id").empty(), "run_id found or not");
  if (info) {
    const long long up = info->uptime_seconds;
    FUZZ_CHECK(up == expected_uptime(info_field(text, "uptime_in_seconds")),
               "uptime " + std::to_string(up));
    RestartGuard g;
    FUZZ_CHECK(!g.observe(*info, now, policy), "a warning at the first meeting");
    const auto young = seconds(up) < policy.min_uptime;
    const auto ex = g.exclusion(now, policy.durable, policy.quarantine);
    if (policy.durable) {
      FUZZ_CHECK(!ex, "a durable server excluded: " + *ex);
    } else {
      FUZZ_CHECK(ex.has_value() == young, "minimum uptime " + std::to_string(up) + " s");
    }
    // The same address, another process.
    ServerInfo again = *info;
    again.run_id += "'";
    const auto warning = g.observe(again, later, policy);
    FUZZ_CHECK(warning.has_value() == !policy.durable, "a restart warned or not");
    const auto ex2 = g.exclusion(later, policy.durable, policy.quarantine);
    FUZZ_CHECK(ex2.has_value() == (!policy.durable && (seconds(up) < policy.quarantine || young)),
               "a restart " + std::to_string(up) + " s ago");
    FUZZ_CHECK(!g.exclusion(later + policy.quarantine + policy.min_uptime, policy.durable,
                            policy.quarantine),
               "excluded past every bound");
  }

  const auto promoted = parse_promoted(text);
  const auto role = info_field(text, "role");
  const auto replid2 = info_field(text, "master_replid2");
  FUZZ_CHECK(promoted.has_value() == (role == "master" && !replid2.empty()), "role read");
  if (promoted) {
    FUZZ_CHECK(*promoted == (replid2.find_first_not_of('0') != std::string_view::npos),
               "master_replid2 read");
    if (*promoted) {
      RestartGuard g;
      g.promoted(now, "promoted");
      const auto ex = g.exclusion(now, policy.durable, policy.quarantine);
      FUZZ_CHECK(ex.has_value() == (policy.quarantine > Millis{0}), "a promotion's quarantine");
      FUZZ_CHECK(!g.exclusion(now + policy.quarantine, policy.durable, policy.quarantine),
                 "a promotion excluded past its quarantine");
    }
  }
  return 0;
}
