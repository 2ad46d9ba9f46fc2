#pragma once
// Replicated votes (Options::min_replicas): a write that gives a vote goes out followed, on the
// same connection, by `WAIT <replicas> <timeout>`. Its caller hears one result. A write that may
// have granted (an `OK`, a positive integer) is answered once WAIT has: with its own reply, or,
// when fewer replicas acknowledged it, an error reply that says so, which every lock kind counts
// as no vote. Anything else (a refusal, an error, a timeout) is passed on at once, unchanged:
// WAIT only matters for a yes.

#include <memory>

#include "core/timing.hpp"
#include "net/connection.hpp"

namespace redlock::net {

// One vote's replicated votes (core/timing.hpp says how they are chosen and how long they wait).
using ReplicaPolicy = detail::ReplicaWait;

// As Connection::send (the same callback contract towards `sink`), with the WAIT added when
// `policy.replicas` > 0. The write keeps `deadline`; the WAIT gets `deadline + policy.allowance`.
bool send_replicated(Connection& c, const std::shared_ptr<const Request>& req,
                     BootClock::time_point deadline, Sink& sink, std::uint32_t tag,
                     BootClock::time_point sent, const ReplicaPolicy& policy);

}  // namespace redlock::net
