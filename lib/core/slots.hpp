#pragma once
// What a Redis Cluster vote (net/cluster.cpp) needs to know without I/O: the slot map a cluster
// node gives (`CLUSTER SLOTS`), the redirections it answers with (`MOVED`, `ASK`), and how a
// command whose keys live in several slots is split into one command per slot and its answers put
// back together. Pure logic, unit-tested.
//
// Every key one resource uses (the lock key and its derived keys: redlock/keys.hpp) hashes to
// one slot, so a single-resource command goes to one master whole. Only the multi-resource
// scripts (acquire_multi, release_multi, extend_multi) can span slots; they are split per slot:
// - acquire_multi: a vote is yes only if every slot's part granted; the parts that granted
//   while another refused or failed are taken back (rollback()), as the script would never have
//   set them on one server;
// - extend_multi: yes only if every part extended (a part that did only lengthened keys that
//   carry our token, which the release takes back anyway);
// - release_multi: the number of keys deleted, summed.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/command.hpp"
#include "core/reply.hpp"

namespace redlock::detail {

inline constexpr int cluster_slots = 16384;

struct ClusterEndpoint {
  std::string host;  // may be empty in a redirection: the host of the node that answered
  std::uint16_t port = 0;
  friend bool operator==(const ClusterEndpoint&, const ClusterEndpoint&) = default;
};

// One range of `CLUSTER SLOTS`: [first, last], its master and its replicas (node ids may be
// empty on servers older than Redis 4).
struct SlotRange {
  int first = 0;
  int last = 0;
  ClusterEndpoint master;
  std::string master_id;
  std::vector<std::string> replica_ids;
};

// nullopt (with `error` naming what was wrong) unless `reply` is a well-formed CLUSTER SLOTS
// answer: every range within [0, cluster_slots) and first <= last, every master's port 1-65535
// and its host valid_server_host() (or unknown: "?" or empty). An empty array is well formed (a
// cluster with no slots assigned yet).
[[nodiscard]] std::optional<std::vector<SlotRange>> parse_cluster_slots(const Reply& reply,
                                                                        std::string& error);

// The slot map's table: for each of the cluster_slots slots, the index in `map` of the range that
// serves it, or no_owner. Every index it writes is checked here, whoever built `map`: nullopt (with
// `error`) for a range outside [0, cluster_slots) or reversed, and for a slot in two ranges (no
// cluster answers so; which of the two masters has the key would be a guess).
inline constexpr std::size_t no_owner = static_cast<std::size_t>(-1);
[[nodiscard]] std::optional<std::vector<std::size_t>> slot_owners(const std::vector<SlotRange>& map,
                                                                  std::string& error);

// "MOVED 3999 127.0.0.1:6381" and "ASK 3999 127.0.0.1:6381" (also "MOVED 3999 :6381", the form a
// node without a known endpoint answers). nullopt for any other text.
struct Redirect {
  bool ask = false;
  int slot = 0;
  ClusterEndpoint to;
};
[[nodiscard]] std::optional<Redirect> parse_redirect(std::string_view error);

// The slot a command's keys hash to; nullopt for a command without keys. For a command whose keys
// span slots, the first key's (split_by_slot() is what handles those).
[[nodiscard]] std::optional<unsigned> command_slot(const Command& c);

// A multi-resource command whose keys span slots, as one command per slot.
struct SlotPart {
  unsigned slot = 0;
  Command command;
  std::vector<std::string> lock_keys;  // the resources' keys this part covers (for a rollback)
};
// nullopt when the command goes whole to one slot (every single-resource command, and a
// multi-resource one whose keys share a slot).
[[nodiscard]] std::optional<std::vector<SlotPart>> split_by_slot(const Command& c);

// The answer the whole command would have given, from its parts' answers (in part order).
// An error reply of any part is the answer (the first one); acquire_multi and extend_multi are 1
// only if every part answered 1, else 0; release_multi is the sum.
[[nodiscard]] Reply combine_parts(const Command& whole, const std::vector<const Reply*>& parts);

// A release that also names its waiting marks (and a fair queue) to publish on the wake channel,
// as the compare-and-delete of its lock keys alone; nullopt for any other command. For a slot
// being migrated: Redis answers TRYAGAIN to a command over several keys of such a slot when some
// are missing (the marks usually are), and the release must still happen; its waiters then
// notice by polling.
[[nodiscard]] std::optional<Command> without_wake_keys(const Command& c);

// Takes back what one part of an acquire_multi set (its keys, where they still carry the token):
// release_multi on that part's lock keys.
[[nodiscard]] Command rollback(const Command& whole, const SlotPart& part);

}  // namespace redlock::detail
