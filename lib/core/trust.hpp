#pragma once
// Trust in discovered servers: which server that a Sentinel or Cluster vote learned of (a master a
// sentinel names, an endpoint of CLUSTER SLOTS, a MOVED/ASK target) may receive the vote's
// credentials and give its vote, and which name its TLS certificate must carry. Pure logic,
// unit-tested; net/sentinel.cpp and net/cluster*.cpp apply it. The rules, and why, are in the
// NodeAddress comment (redlock/options.hpp) and the man page (NODES).
//
// A discovery source is an input like any other server text: a sentinel that lies (or anyone on
// the path of a plaintext link to it) could otherwise name its own server and collect the
// password, or hand out votes. So a discovered server is trusted only when
//  - it is on a host the user named for this vote (a seed, a sentinel; 127.0.0.1, ::1 and
//    localhost count as one host: this machine), or matches one of the vote's `allow=`
//    entries; or
//  - the link to it is TLS with verification on, against a name that does not come from the
//    discovery source: `verify_name=`, else the vote's `sni=`/--sni, else the host the user named
//    first (the seed, the first sentinel).
// A trusted server on the user's hosts or allow-list is verified against its own host (or the
// fixed name, when one is given).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/info.hpp"
#include "redlock/options.hpp"

namespace redlock::detail {

// Why `entry` cannot be an allow= entry, or nullopt. Entries: `*` (any address), a host name or
// IP literal (compared as written, case-insensitively: no DNS lookup, whose answer the path could
// forge too), `*.example.com` (any name under it), or a network as `10.0.0.0/8`, `fd00::/8`.
[[nodiscard]] std::optional<std::string> check_allow_entry(std::string_view entry);

// Whether `host`, as a sentinel or the cluster wrote it, matches the allow= entry `entry`.
[[nodiscard]] bool allow_matches(std::string_view entry, std::string_view host);

// Whether two hosts are one machine as far as an address can tell: equal (ignoring case), or both
// this machine's loopback names (127.0.0.1, ::1, localhost).
[[nodiscard]] bool same_host(std::string_view a, std::string_view b);

struct DiscoveredTrust {
  bool trusted = false;
  // TLS only: the name the server's certificate must carry (and SNI); empty without TLS.
  std::string verify_name;
  // When not trusted: why, naming the address and how to allow it.
  std::string why_not;
};

// The decision for the server at host:port that the Sentinel or Cluster vote `vote` discovered,
// with the client's TLS settings `tls` (Options::tls).
[[nodiscard]] DiscoveredTrust trust_discovered(const NodeAddress& vote, const TlsOptions& tls,
                                               std::string_view host, std::uint16_t port);

// One sentinel's reply to SENTINEL MASTER: the master it names, or its error text ("ERR No such
// master with that name", an answer that could not be read).
struct SentinelAnswer {
  std::string sentinel;  // host:port, for messages
  std::optional<SentinelMaster> master;
  std::string error;
};
struct SentinelVerdict {
  std::optional<SentinelMaster> master;
  std::string why;  // without a master: why (the one error, or what each sentinel said)
};
// The master a strict majority of the sentinels that answered name (address ip:port); one answer
// is a majority of one. Of the agreeing answers, the highest config epoch and the shortest
// role-reported-time (the latest possible promotion: the longer quarantine) are kept. Sentinels
// that did not answer at all are not in `answers`.
[[nodiscard]] SentinelVerdict agree_on_master(const std::vector<SentinelAnswer>& answers);

}  // namespace redlock::detail
