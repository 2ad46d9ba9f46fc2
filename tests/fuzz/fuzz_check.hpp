// Invariant checks for the fuzz targets: a failed check prints what broke and aborts, which
// libFuzzer (and the plain replay driver) report as a crash with the input that caused it.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace fuzz {

[[noreturn]] inline void fail(const char* file, int line, const char* cond,
                              const std::string& what) {
  std::fprintf(stderr, "%s:%d: invariant broken: %s\n  %s\n", file, line, cond, what.c_str());
  std::abort();
}

// A printable rendering of arbitrary bytes for failure messages.
inline std::string show(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace fuzz

#define FUZZ_CHECK(cond, what)                                    \
  do {                                                            \
    if (!(cond)) ::fuzz::fail(__FILE__, __LINE__, #cond, (what)); \
  } while (0)
