#pragma once
// How the tools' synchronous client (nodes/client.hpp) reaches the servers behind a configured
// vote, the way the library does: `bench` measures them raw, `doctor` checks them.

#include <cstdint>
#include <string>

#include "nodes/client.hpp"
#include "redlock/options.hpp"

namespace redlock::cli {

// Where the library connects for `a`: TLS for a rediss:// address, and for any tcp one with
// --tls; the address's own settings before the client's (lib/net/standalone.cpp does the same).
[[nodiscard]] nodes::Endpoint endpoint_of(const NodeAddress& a, const TlsOptions& tls);

// One server of a cluster vote, as a plain address with the vote's credentials and TLS.
[[nodiscard]] NodeAddress cluster_member(const NodeAddress& vote, const std::string& host,
                                         std::uint16_t port);

}  // namespace redlock::cli
