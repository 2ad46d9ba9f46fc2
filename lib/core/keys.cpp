// keys.hpp: the key layout and Redis Cluster's hash slots.

#include "redlock/keys.hpp"

#include <array>
#include <vector>

namespace redlock {
namespace {

constexpr std::string_view marker = ":redlock:";

// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, as the Redis Cluster specification
// defines the key hash. Table built at compile time.
constexpr std::array<std::uint16_t, 256> crc_table = [] {
  std::array<std::uint16_t, 256> t{};
  for (unsigned i = 0; i < 256; ++i) {
    std::uint16_t c = static_cast<std::uint16_t>(i << 8);
    for (int b = 0; b < 8; ++b)
      c = static_cast<std::uint16_t>((c & 0x8000) ? (c << 1) ^ 0x1021 : c << 1);
    t[i] = c;
  }
  return t;
}();

std::uint16_t crc16(std::string_view s) noexcept {
  std::uint16_t crc = 0;
  for (unsigned char ch : s)
    crc = static_cast<std::uint16_t>((crc << 8) ^ crc_table[((crc >> 8) ^ ch) & 0xff]);
  return crc;
}

// The hash tag if the key has one (non-empty text between the first '{' and the next '}').
bool has_tag(std::string_view key, std::string_view& tag) noexcept {
  const auto open = key.find('{');
  if (open == std::string_view::npos) return false;
  const auto close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return false;
  tag = key.substr(open + 1, close - open - 1);
  return true;
}

}  // namespace

std::string_view to_string(KeyRole role) noexcept {
  switch (role) {
    case KeyRole::fence:
      return "fence";
    case KeyRole::readers:
      return "readers";
    case KeyRole::writer_waiting:
      return "writer";
    case KeyRole::ticket:
      return "ticket";
    case KeyRole::queue:
      return "queue";
    case KeyRole::heartbeats:
      return "heartbeats";
    case KeyRole::wake:
      return "wake";
    case KeyRole::waiting:
      return "waiting";
    case KeyRole::handoff:
      return "handoff";
    case KeyRole::leader:
      return "leader";
  }
  return "?";
}

std::string_view hash_tag(std::string_view key) noexcept {
  std::string_view tag;
  return has_tag(key, tag) ? tag : key;
}

unsigned hash_slot(std::string_view key) noexcept { return crc16(hash_tag(key)) & 16383u; }

std::string slot_tag(unsigned slot) {
  // The first number of each slot, found once: about 160,000 CRCs (every slot is hit by then).
  static const std::vector<std::uint32_t> first = [] {
    std::vector<std::uint32_t> t(16384, 0);
    std::vector<bool> found(16384, false);
    std::size_t left = t.size();
    for (std::uint32_t n = 0; left > 0; ++n) {
      const auto s = crc16(std::to_string(n)) & 16383u;
      if (!found[s]) {
        found[s] = true;
        t[s] = n;
        --left;
      }
    }
    return t;
  }();
  return std::to_string(first[slot & 16383u]);
}

std::string derived_key(std::string_view lock_key, KeyRole role) {
  std::string_view tag;
  std::string number;
  if (!has_tag(lock_key, tag)) {
    // The whole key is what Redis Cluster hashes: make it the derived key's tag. A key with a '}'
    // cannot be one, nor can the empty key: a number of the same slot stands in (keys.hpp).
    if (!lock_key.empty() && lock_key.find('}') == std::string_view::npos) {
      tag = lock_key;
    } else {
      number = slot_tag(hash_slot(lock_key));
      tag = number;
    }
  }
  const auto name = to_string(role);
  std::string out;
  out.reserve(tag.size() + marker.size() + name.size() + lock_key.size() + 3);
  out += '{';
  out += tag;
  out += '}';
  out += marker;
  out += name;
  out += ':';
  out += lock_key;
  return out;
}

bool is_derived_key(std::string_view key) noexcept {
  if (key.empty() || key.front() != '{') return false;
  const auto close = key.find('}');
  return close != std::string_view::npos && key.substr(close + 1).starts_with(marker);
}

}  // namespace redlock
