#include "core/server_text.hpp"

namespace redlock::detail {
namespace {

bool is_alnum(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_hex(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
// "\xNN" at the start of `s`: what escaped() writes (or a server wrote: it is as harmless).
bool is_escape(std::string_view s) {
  return s.size() >= 4 && s[0] == '\\' && s[1] == 'x' && is_hex(static_cast<unsigned char>(s[2])) &&
         is_hex(static_cast<unsigned char>(s[3]));
}

// A run this long of hex digits is taken for a token (40), a token's SHA-1 or another secret.
constexpr std::size_t hidden_hex_run = 32;

std::string escaped(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += "\\x";
    out += digits[c >> 4];
    out += digits[c & 0xf];
  }
  return out;
}

// The length of the UTF-8 character at the start of `s` and its code point, or 0 when `s` does
// not start with one (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, or
// cut short).
std::size_t utf8_char(std::string_view s, char32_t& cp) {
  const auto b0 = static_cast<unsigned char>(s[0]);
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range (RFC 3629's table)
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    n = 2;
    cp = b0 & 0x1f;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    n = 3;
    cp = b0 & 0x0f;
    if (b0 == 0xe0) lo = 0xa0;
    if (b0 == 0xed) hi = 0x9f;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    n = 4;
    cp = b0 & 0x07;
    if (b0 == 0xf0) lo = 0x90;
    if (b0 == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  for (std::size_t i = 1; i < n; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xbf)) return 0;
    cp = (cp << 6) | (b & 0x3f);
  }
  return n;
}

// Characters that are valid but change what a terminal or an editor shows around them.
bool is_format_control(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) ||                    // C1 (U+009B is CSI)
         cp == 0x061c || cp == 0x200e || cp == 0x200f ||  // bidirectional marks
         (cp >= 0x2028 && cp <= 0x202e) ||                // separators, embeddings, overrides
         (cp >= 0x2066 && cp <= 0x2069);                  // bidirectional isolates
}

}  // namespace

std::string server_text(std::string_view text, std::size_t max_bytes) {
  if (max_bytes < 3) max_bytes = 3;
  // Redis's echo of an unknown command's arguments, and what follows it.
  if (const auto echo = text.find("with args"); echo != std::string_view::npos) {
    text = text.substr(0, echo);
    while (!text.empty() && (text.back() == ' ' || text.back() == ',')) text.remove_suffix(1);
  }
  // Each piece is shown whole or not at all, so a cut never splits a character or an escape.
  // The text is read only until the output is known to be cut (a server's reply may be megabytes):
  // `fits` is where the cut goes, the end of the last piece that leaves room for "...".
  std::string out;
  std::size_t fits = 0;
  auto add = [&](std::string_view piece) {
    if (out.size() + piece.size() <= max_bytes - 3) fits = out.size() + piece.size();
    out += piece;
  };
  for (std::size_t i = 0; i < text.size() && out.size() <= max_bytes;) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (is_escape(text.substr(i))) {
      // "\xNN" is one piece, and its digits join no run: so shown text is shown again unchanged.
      add(text.substr(i, 4));
      i += 4;
    } else if (is_hex(c)) {
      std::size_t end = i;
      while (end < text.size() && is_hex(static_cast<unsigned char>(text[end]))) ++end;
      if (end - i >= hidden_hex_run) {
        add("<hex>");
      } else {
        for (std::size_t j = i; j < end; ++j) add(text.substr(j, 1));
      }
      i = end;
    } else if (c < 0x80) {
      add(c < 0x20 || c == 0x7f ? escaped(text.substr(i, 1)) : text.substr(i, 1));
      ++i;
    } else {
      char32_t cp = 0;
      const std::size_t n = utf8_char(text.substr(i), cp);
      if (n == 0) {
        add(escaped(text.substr(i, 1)));
        ++i;
      } else {
        add(is_format_control(cp) ? escaped(text.substr(i, n)) : text.substr(i, n));
        i += n;
      }
    }
  }
  if (out.size() > max_bytes) {
    out.resize(fits);
    out += "...";
  }
  return out;
}

bool valid_server_host(std::string_view host) noexcept {
  if (host.empty() || host.size() > 255) return false;
  for (char ch : host) {
    const auto c = static_cast<unsigned char>(ch);
    if (!is_alnum(c) && c != '.' && c != '-' && c != '_' && c != ':' && c != '%') return false;
  }
  return true;
}

}  // namespace redlock::detail
