// Fuzz target: a sentinel's answers with the code that applies them (sentinel.cpp): SENTINEL
// MASTER <name> (the fields the node reads: ip, port, flags, role-reported-time, config-epoch;
// and the quorum doctor reports),
// the promotion time it derives from role-reported-time, and the restart guard that holds the
// promoted master's votes. In-process.
//
// Input: byte 0 picks the quarantine, bytes 1-8 the time the answer came, the rest is what the
// sentinel sent (bytes through net::Reader). Invariants (UBSan stops at any overflow of the time
// arithmetic, which role-reported-time = 2^63-1 used to reach):
// - parse_sentinel_master() takes an answer exactly when it is field/value pairs with an ip
//   (letters, digits, ".-_:%"), a port 1-65535 and a role-reported-time 0..max_reported_seconds
//   * 1000 (checked here independently, field by field, as a sentinel sends them); a bad value is
//   refused at once, with an error that shows no raw control byte;
// - the promotion time is the answer's time minus role-reported-time plus the follow window,
//   exactly, and the guard excludes the master until one quarantine after it;
// - promoted_at_latest() bounds an unchecked role-reported-time itself;
// - every string the sentinel sent (a +switch-master payload is logged) is shown safely.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "core/info.hpp"
#include "core/restart_guard.hpp"
#include "core/server_text.hpp"
#include "fuzz_check.hpp"
#include "net/reader.hpp"

using namespace redlock;
using namespace redlock::detail;
using redlock::net::Reader;

namespace {

constexpr Millis quarantines[] = {Millis{0}, Millis{1}, Millis{30'000}, max_ttl};
constexpr Millis follow_window{2000};  // sentinel.cpp's

// "-"? digits, as a 64-bit number; nullopt for anything else or past 64 bits.
std::optional<long long> number(std::string_view s) {
  const bool minus = s.starts_with('-');
  if (minus) s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  while (s.size() > 1 && s.front() == '0') s.remove_prefix(1);
  if (s.size() > 19) return std::nullopt;
  std::uint64_t v = 0;  // 19 digits fit
  for (char c : s) v = v * 10 + static_cast<std::uint64_t>(c - '0');
  const std::uint64_t most = static_cast<std::uint64_t>(INT64_MAX);
  if (!minus) return v <= most ? std::optional<long long>(static_cast<long long>(v)) : std::nullopt;
  if (v > most + 1) return std::nullopt;
  return v == most + 1 ? INT64_MIN : -static_cast<long long>(v);
}

struct Expected {
  bool ok = false;
  std::string ip;
  long long port = 0, role_reported_ms = -1;
  long long quorum = 0;  // doctor's report: 1-10000, else 0 (the master is kept)
};

Expected expected(const Reply& r) {
  Expected e;
  if (r.type != Reply::Type::array || r.elements.size() % 2 != 0) return e;
  bool have_port = false;
  for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    const auto& k = r.elements[i];
    const auto& v = r.elements[i + 1];
    if (k.type != Reply::Type::string || v.type != Reply::Type::string) continue;
    const auto n = number(v.str);
    if (k.str == "ip") {
      if (!fuzz::host_ok(v.str)) return e;
      e.ip = v.str;
    } else if (k.str == "port") {
      if (!n || *n < 1 || *n > 65535) return e;
      e.port = *n;
      have_port = true;
    } else if (k.str == "role-reported-time") {
      if (!n || *n < 0 || *n > max_reported_seconds * 1000) return e;
      e.role_reported_ms = *n;
    } else if (k.str == "quorum") {
      e.quorum = n && *n >= 1 && *n <= 10000 ? *n : 0;
    }
  }
  e.ok = !e.ip.empty() && have_port && e.role_reported_ms >= 0;
  return e;
}

void shown_safely(const Reply& r) {
  if (r.type == Reply::Type::string || r.type == Reply::Type::status || r.is_error()) {
    const auto shown = server_text(r.str);
    FUZZ_CHECK(fuzz::unsafe_for_terminal(shown).empty(), fuzz::show(shown));
  }
  for (const auto& e : r.elements) shown_safely(e);
}

void check_answer(const Reply& r, BootClock::time_point at, Millis quarantine) {
  shown_safely(r);
  std::string error;
  const auto m = parse_sentinel_master(r, error);
  const auto want = expected(r);
  FUZZ_CHECK(m.has_value() == want.ok, "parse_sentinel_master disagrees: " + error);
  if (!m) {
    FUZZ_CHECK(!error.empty() && fuzz::unsafe_for_terminal(error).empty(), fuzz::show(error));
    return;
  }
  FUZZ_CHECK(m->ip == want.ip && m->port == want.port &&
                 m->role_reported_ms == want.role_reported_ms && m->quorum == want.quorum,
             "fields read wrong");
  // What SentinelNode::promoted() does with them.
  const auto p = promoted_at_latest(at, m->role_reported_ms, follow_window);
  FUZZ_CHECK(p == at - Millis{m->role_reported_ms} + follow_window, "promotion time");
  RestartGuard g;
  g.promoted(p, "Sentinel failover");
  // (A quarantine of 0 turns the guard off.)
  FUZZ_CHECK(g.exclusion(at, false, quarantine).has_value() ==
                 (quarantine > Millis{0} && at < p + quarantine),
             "quarantine at the answer");
  FUZZ_CHECK(!g.exclusion(p + quarantine, false, quarantine), "excluded past the quarantine");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 9) return 0;
  const Millis quarantine = quarantines[data[0] & 3];
  std::uint64_t raw = 0;
  std::memcpy(&raw, data + 1, 8);
  const auto at =
      BootClock::time_point{} +
      BootClock::duration{static_cast<BootClock::rep>(raw % 3'155'760'000'000'000'000ULL)};
  // An unchecked role-reported-time: bounded by promoted_at_latest() itself.
  long long unchecked = 0;
  std::memcpy(&unchecked, data + 1, 8);
  (void)promoted_at_latest(at, unchecked, follow_window);

  const std::string_view bytes(reinterpret_cast<const char*>(data) + 9, size - 9);
  Reader reader;
  if (!reader.feed(bytes.data(), bytes.size())) return 0;
  while (reader.next() == Reader::Next::reply) check_answer(reader.reply(), at, quarantine);
  return 0;
}
