// parse_duration (options.hpp): durations as people write them. Pure, no I/O.

#include <charconv>
#include <limits>
#include <string>

#include "core/validate.hpp"
#include "redlock/options.hpp"

namespace redlock {

std::optional<Millis> parse_duration(std::string_view text, std::string& error, BareNumbers bare) {
  using detail::quoted;
  auto fail = [&](const char* why) {
    error =
        "bad duration " + quoted(text) + ": " + why + " (examples: 250ms, 1.5s, 10s, 2m, 1h, 7d)";
    return std::optional<Millis>{};
  };
  if (text.empty()) return fail("empty");
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return fail(text.front() == '-' ? "negative" : "must start with a number");
  std::string_view fraction;
  std::size_t end = digits;
  if (end < text.size() && text[end] == '.') {
    std::size_t f = end + 1;
    while (f < text.size() && text[f] >= '0' && text[f] <= '9') ++f;
    fraction = text.substr(end + 1, f - end - 1);
    if (fraction.empty()) return fail("a '.' needs digits after it");
    end = f;
  }
  const auto unit = text.substr(end);
  // Zero is zero in every unit, so a lone "0" is not the trap a bare 30 is (as in Go's
  // time.ParseDuration).
  if (unit.empty() && bare == BareNumbers::refused && text != "0") {
    // The text is digits and at most one '.': nothing to escape. A fraction of a millisecond is
    // no duration, so only seconds are suggested for one.
    const std::string t(text);
    error = "bad duration " + quoted(text) + ": a duration needs a unit, e.g. " + t + "s" +
            (fraction.empty() ? " or " + t + "ms" : std::string());
    return std::nullopt;
  }
  long long mult = 0;
  if (unit.empty() || unit == "ms") {
    mult = 1;
  } else if (unit == "s") {
    mult = 1000;
  } else if (unit == "m") {
    mult = 60'000;
  } else if (unit == "h") {
    mult = 3'600'000;
  } else if (unit == "d") {
    mult = 86'400'000;
  } else {
    return fail("unknown unit");
  }
  constexpr long long limit = std::numeric_limits<long long>::max();
  long long whole = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + digits, whole);
  if (ec != std::errc() || p != text.data() + digits || whole > limit / mult)
    return fail("too large");
  long long ms = whole * mult;
  // The fraction, in ms: digits d1 d2 ... of the unit. Trailing zeros say nothing; the rest must
  // come to a whole number of milliseconds (mult has at most 8 digits, so 18 fraction digits
  // keep every product below 2^63).
  while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
  if (fraction.size() > 10) return fail("finer than a millisecond");
  long long num = 0, den = 1;
  for (char c : fraction) {
    num = num * 10 + (c - '0');
    den *= 10;
  }
  if ((num * mult) % den != 0) return fail("finer than a millisecond");
  const long long extra = num * mult / den;
  if (extra > limit - ms) return fail("too large");
  ms += extra;
  return Millis{ms};
}

}  // namespace redlock
