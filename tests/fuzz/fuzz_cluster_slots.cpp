// Fuzz target: a Redis Cluster vote's slot map from arbitrary server bytes, with the code that
// applies it (issue 40, item 1). In-process: no server, no engine.
//
// Input: byte 0 picks the mode, the rest is
// - even: what a cluster node sent (bytes through net::Reader): each reply goes to
//   parse_cluster_slots() and, if taken, to slot_owners() and the owner table ClusterNode::apply()
//   builds from it; an error reply's text goes to parse_redirect();
// - odd: slot ranges as pairs of 32-bit integers (first, last), straight to slot_owners() (the
//   table must be safe whoever built the map), and the bytes as a redirection's text.
// Invariants:
// - parse_cluster_slots() takes a reply exactly when it is well formed (checked here on the
//   reply, independently): every range within [0, 16383] and first <= last, every master
//   [host, port, ...] with a port 1-65535 and a host of letters, digits and ".-_:%" (or "?" or
//   empty: unknown); what it took is what the reply said; its error names no raw control byte;
// - slot_owners() takes a map exactly when every range is in bounds and no slot is in two; its
//   table has one entry per slot, each the index of the one range that covers the slot, or
//   no_owner; the owner table built from it points into the map only;
// - parse_redirect() gives a slot in [0, 16383], a port 1-65535 and a host as above (or empty).
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/server_text.hpp"
#include "core/slots.hpp"
#include "fuzz_check.hpp"
#include "net/reader.hpp"

using namespace redlock::detail;
using redlock::net::Reader;

namespace {

bool well_formed(const Reply& r) {
  using T = Reply::Type;
  if (r.type != T::array) return false;
  for (const auto& e : r.elements) {
    if (e.type != T::array || e.elements.size() < 3) return false;
    if (e.elements[0].type != T::integer || e.elements[1].type != T::integer) return false;
    const long long first = e.elements[0].integer, last = e.elements[1].integer;
    if (first < 0 || last > 16383 || first > last) return false;
    const auto& m = e.elements[2];
    if (m.type != T::array || m.elements.size() < 2 || m.elements[0].type != T::string ||
        m.elements[1].type != T::integer) {
      return false;
    }
    if (m.elements[1].integer < 1 || m.elements[1].integer > 65535) return false;
    const auto& host = m.elements[0].str;
    if (!host.empty() && host != "?" && !fuzz::host_ok(host)) return false;
  }
  return true;
}

// slot_owners() on `map`, against coverage counted here.
void check_table(const std::vector<SlotRange>& map) {
  bool ok = true;
  std::vector<int> cover(16384, 0);
  for (const auto& r : map) {
    if (r.first < 0 || r.last > 16383 || r.first > r.last) {
      ok = false;
      break;
    }
    for (int s = r.first; s <= r.last; ++s) ok = ++cover[static_cast<std::size_t>(s)] == 1 && ok;
  }
  std::string error;
  const auto owner = slot_owners(map, error);
  FUZZ_CHECK(owner.has_value() == ok, "slot_owners took a bad map or refused a good one: " + error);
  if (!owner) {
    FUZZ_CHECK(!error.empty() && fuzz::unsafe_for_terminal(error).empty(), fuzz::show(error));
    return;
  }
  FUZZ_CHECK(owner->size() == 16384, "table size " + std::to_string(owner->size()));
  // ClusterNode::apply() writes owners[s] = the master of range (*owner)[s] for every slot s of
  // the table: each index it uses is checked here, slot by slot.
  for (std::size_t s = 0; s < owner->size(); ++s) {
    const std::size_t i = (*owner)[s];
    if (i == no_owner) {
      FUZZ_CHECK(cover[s] == 0, "slot " + std::to_string(s) + " lost its owner");
      continue;
    }
    FUZZ_CHECK(i < map.size(), "owner index " + std::to_string(i) + " past the map");
    FUZZ_CHECK(static_cast<int>(s) >= map[i].first && static_cast<int>(s) <= map[i].last,
               "slot " + std::to_string(s) + " given to a range that does not cover it");
  }
}

void check_redirect(std::string_view text) {
  const auto r = parse_redirect(text);
  if (!r) return;
  FUZZ_CHECK(text.starts_with(r->ask ? "ASK " : "MOVED "), fuzz::show(text));
  FUZZ_CHECK(r->slot >= 0 && r->slot < 16384, "redirect slot " + std::to_string(r->slot));
  FUZZ_CHECK(r->to.port >= 1, "redirect port 0: " + fuzz::show(text));
  FUZZ_CHECK(r->to.host.empty() || fuzz::host_ok(r->to.host),
             "redirect host " + fuzz::show(r->to.host));
}

void check_reply(const Reply& r) {
  std::string error;
  const auto map = parse_cluster_slots(r, error);
  FUZZ_CHECK(map.has_value() == well_formed(r), "parse_cluster_slots disagrees: " + error);
  if (r.is_error()) check_redirect(r.str);
  if (!map) {
    FUZZ_CHECK(!error.empty(), "refused without a reason");
    FUZZ_CHECK(fuzz::unsafe_for_terminal(error).empty(), "error " + fuzz::show(error));
    return;
  }
  FUZZ_CHECK(map->size() == r.elements.size(), "ranges lost or added");
  for (std::size_t i = 0; i < map->size(); ++i) {
    const auto& got = (*map)[i];
    const auto& e = r.elements[i];
    FUZZ_CHECK(got.first == e.elements[0].integer && got.last == e.elements[1].integer,
               "range " + std::to_string(got.first) + "-" + std::to_string(got.last));
    const auto& m = e.elements[2];
    FUZZ_CHECK(got.master.port == m.elements[1].integer, "port");
    FUZZ_CHECK(got.master.host == (m.elements[0].str == "?" ? "" : m.elements[0].str), "host");
    std::size_t ids = 0;
    for (std::size_t k = 3; k < e.elements.size(); ++k) {
      const auto& rep = e.elements[k];
      ids += rep.type == Reply::Type::array && rep.elements.size() >= 3 &&
             rep.elements[2].type == Reply::Type::string && !rep.elements[2].str.empty();
    }
    FUZZ_CHECK(got.replica_ids.size() == ids, "replica ids");
  }
  check_table(*map);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    Reader reader;
    if (!reader.feed(bytes.data(), bytes.size())) return 0;
    while (reader.next() == Reader::Next::reply) check_reply(reader.reply());
    return 0;
  }
  std::vector<SlotRange> map;
  for (std::size_t i = 0; i + 8 <= bytes.size() && map.size() < 64; i += 8) {
    std::int32_t first = 0, last = 0;
    std::memcpy(&first, bytes.data() + i, 4);
    std::memcpy(&last, bytes.data() + i + 4, 4);
    SlotRange r;
    r.first = first;
    r.last = last;
    map.push_back(r);
  }
  check_table(map);
  check_redirect(bytes);
  return 0;
}
