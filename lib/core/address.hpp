#pragma once
// Node addresses: what core's other rooms need of them beyond redlock/options.hpp (whose
// NodeAddress::parse, to_string and parse_node_list live in core/address.cpp).

#include <string>

#include "redlock/options.hpp"

namespace redlock::detail {

// Two addresses with one identity are one server (or one Sentinel-managed master, or one
// cluster's seed): it would vote twice. The database is not part of it: two databases of one
// server share one process, so they are one failure domain.
[[nodiscard]] std::string address_identity(const NodeAddress& a);

}  // namespace redlock::detail
