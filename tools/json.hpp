#pragma once
// The one JSON writer of redlock-cli: every --json output is a Json value printed by print_json().
// Debian's nlohmann-json; ordered_json keeps the keys in the order they are set, which is the order
// the outputs have always had (scripts that grep the text see no change).
//
// Included only where an output is built (output.cpp, cmd/cluster.cpp, cmd/bench.cpp): the header
// is large, and the other sources have no need of it.

#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace redlock::cli {

using Json = nlohmann::ordered_json;

// A JSON string for arbitrary bytes. Resources, tokens and stored values need not be UTF-8: each
// byte maps to the code point of the same value (U+0000..U+00FF), which print_json() writes as
// \u00XX unless it is printable ASCII, so every byte string gives valid JSON and can be mapped
// back.
[[nodiscard]] inline Json text(std::string_view bytes) {
  std::string utf8;
  utf8.reserve(bytes.size());
  for (unsigned char c : bytes) {
    if (c < 0x80) {
      utf8 += static_cast<char>(c);
    } else {
      utf8 += static_cast<char>(0xC0 | (c >> 6));
      utf8 += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return Json(std::move(utf8));
}

// The compact, ASCII-only form of `j`.
[[nodiscard]] inline std::string dump(const Json& j) {
  // `replace` only guards against a string that skipped text(): it must never throw mid-output.
  return j.dump(-1, ' ', /*ensure_ascii=*/true, Json::error_handler_t::replace);
}

// One line on stdout.
inline void print_json(const Json& j) { std::cout << dump(j) << "\n"; }

// `v` rounded to `decimals` places: the precision the figures of bench have always been given in.
[[nodiscard]] inline double rounded(double v, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}

}  // namespace redlock::cli
