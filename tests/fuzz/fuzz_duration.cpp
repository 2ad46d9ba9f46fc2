// Fuzz target: parse_duration.
//
// Invariants checked on every input:
// - it accepts exactly `<digits>[.<digits>][ms|s|m|h|d]` whose value is a whole number of
//   milliseconds that fits in a signed 64-bit count (checked with 128-bit arithmetic here), and
//   the result is that value: nothing overflows and the result is never negative;
// - printing the result in ms and parsing it again gives the same duration (bare and with "ms");
// - on failure the message is set, names the value and carries no raw control bytes;
// - with BareNumbers::refused: the same, except that a number without a unit (other than "0")
//   is refused.
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "redlock/options.hpp"

__extension__ typedef __int128 i128;  // (an extension: -Wpedantic)

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string in = fuzz::show(text);

  // Independent oracle: <digits>[.<digits>][ms|s|m|h|d], the value in 128-bit arithmetic as a
  // fraction num/den of milliseconds; accepted when it is whole and fits in 63 bits.
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::size_t end = digits;
  std::string_view frac;
  bool shape = digits > 0;
  if (shape && end < text.size() && text[end] == '.') {
    std::size_t f = end + 1;
    while (f < text.size() && text[f] >= '0' && text[f] <= '9') ++f;
    frac = text.substr(end + 1, f - end - 1);
    shape = !frac.empty();
    end = f;
  }
  const std::string_view unit = text.substr(end);
  i128 mult = 0;
  if (unit.empty() || unit == "ms")
    mult = 1;
  else if (unit == "s")
    mult = 1000;
  else if (unit == "m")
    mult = 60'000;
  else if (unit == "h")
    mult = 3'600'000;
  else if (unit == "d")
    mult = 86'400'000;
  const i128 limit = std::numeric_limits<long long>::max();
  i128 whole = 0;
  bool fits = shape && mult != 0;
  for (std::size_t i = 0; fits && i < digits; ++i) {
    whole = whole * 10 + (text[i] - '0');
    if (whole * mult > limit) fits = false;
  }
  while (!frac.empty() && frac.back() == '0') frac.remove_suffix(1);
  i128 num = 0, den = 1;
  if (frac.size() > 20) fits = false;  // far finer than a millisecond whatever the unit
  for (std::size_t i = 0; fits && i < frac.size(); ++i) {
    num = num * 10 + (frac[i] - '0');
    den *= 10;
  }
  i128 value = 0;
  if (fits) {
    if ((num * mult) % den != 0) {
      fits = false;  // not a whole number of milliseconds
    } else {
      value = whole * mult + num * mult / den;
      if (value > limit) fits = false;
    }
  }

  std::string err;
  auto d = redlock::parse_duration(text, err);
  FUZZ_CHECK(d.has_value() == fits,
             std::string(d ? "accepted " : "refused ") + in + (d ? "" : ": " + err));
  if (d) {
    FUZZ_CHECK(d->count() >= 0, in);
    FUZZ_CHECK(static_cast<i128>(d->count()) == value, "wrong value for " + in);
    const std::string printed = std::to_string(d->count());
    for (const std::string& again : {printed, printed + "ms"}) {
      std::string e2;
      auto d2 = redlock::parse_duration(again, e2);
      FUZZ_CHECK(d2 && *d2 == *d,
                 "re-parse of " + again + " (from " + in + ") gives something else: " + e2);
    }
  } else {
    FUZZ_CHECK(!err.empty() && err.rfind("bad duration '", 0) == 0,
               "error " + fuzz::show(err) + " for " + in);
    for (unsigned char c : err)
      FUZZ_CHECK(c >= 0x20 && c != 0x7f, "raw control byte in " + fuzz::show(err));
  }
  // With a unit required, the same text is accepted exactly when it has a unit (or is "0"), with
  // the same value.
  std::string strict_err;
  auto strict = redlock::parse_duration(text, strict_err, redlock::BareNumbers::refused);
  const bool needs_unit = unit.empty() && text != "0";
  FUZZ_CHECK(strict.has_value() == (fits && !needs_unit), "unit required: " + in);
  if (strict) FUZZ_CHECK(*strict == *d, "unit required: another value for " + in);
  if (!strict) {
    FUZZ_CHECK(strict_err.rfind("bad duration '", 0) == 0, "error " + fuzz::show(strict_err));
    for (unsigned char c : strict_err)
      FUZZ_CHECK(c >= 0x20 && c != 0x7f, "raw control byte in " + fuzz::show(strict_err));
  }
  return 0;
}
