// Invariant checks for the fuzz targets: a failed check prints what broke and aborts, which
// libFuzzer (and the plain replay driver) report as a crash with the input that caused it.
#pragma once

#include <cctype>
#include <cstdint>
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

// A host name or address as the library may take it from a server (a cluster node, a sentinel's
// master), checked independently of core/server_text.hpp's valid_server_host(): 1-255 bytes of
// letters, digits and . - _ : % (IPv6 and its zone), nothing a terminal or a resolver could
// misread.
inline bool host_ok(std::string_view h) {
  if (h.empty() || h.size() > 255) return false;
  for (char ch : h) {
    const auto c = static_cast<unsigned char>(ch);
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!alnum && c != '.' && c != '-' && c != '_' && c != ':' && c != '%') return false;
  }
  return true;
}

// Text a server sent, as the library may show it (core/server_text.hpp), checked independently
// of how it is made: no C0 control byte or DEL, and what is above ASCII is well-formed UTF-8
// without C1 controls, line/paragraph separators or bidirectional controls. Empty when safe,
// else what is wrong.
inline std::string unsafe_for_terminal(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return "control byte at " + std::to_string(i);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
    if (n == 0 || i + n > s.size()) return "bad UTF-8 at " + std::to_string(i);
    std::uint32_t cp = c & (0x7f >> n);
    for (std::size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xc0) != 0x80) return "bad UTF-8 at " + std::to_string(i);
      cp = (cp << 6) | (b & 0x3f);
    }
    const std::uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return "bad UTF-8 at " + std::to_string(i);
    if (cp <= 0x9f || cp == 0x61c || cp == 0x200e || cp == 0x200f ||
        (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069))
      return "a control character at " + std::to_string(i);
    i += n;
  }
  return {};
}

// A run of `n` or more hex digits (what server_text() hides), the two of a "\xNN" escape apart.
inline bool has_hex_run(std::string_view s, std::size_t n) {
  std::size_t run = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\\' && i + 3 < s.size() && s[i + 1] == 'x' &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 3]))) {
      run = 0;
      i += 3;
      continue;
    }
    run = std::isxdigit(c) ? run + 1 : 0;
    if (run >= n) return true;
  }
  return false;
}

// Server text that server_text() must leave as it is: at most 200 bytes of printable ASCII,
// without an argument echo or a run of 32+ hex digits.
inline bool plain_server_text(std::string_view s) {
  if (s.size() > 200 || s.find("with args") != std::string_view::npos || has_hex_run(s, 32))
    return false;
  for (char c : s) {
    if (c < 0x20 || c >= 0x7f) return false;
  }
  return true;
}

}  // namespace fuzz

#define FUZZ_CHECK(cond, what)                                    \
  do {                                                            \
    if (!(cond)) ::fuzz::fail(__FILE__, __LINE__, #cond, (what)); \
  } while (0)
