#pragma once
// `redlock-cli bench --handoff 2,8,32`: one hot lock. For each number of waiters W, W clients (one
// redlock::Client each, so each has its own connections, as separate processes would) take the
// same resource in turn with an empty critical section, plain and fair, with wake-ups on and off,
// and the floor: the same clients in a fixed turn, each told in-process when the release before it
// returned. Reports handoffs per second and the gap from a release to the next acquisition (all
// of them, and those by another client), beside the round trip to the first node measured in the
// same run.

#include <string>
#include <vector>

#include "cli.hpp"

namespace redlock::cli {

int run_handoff(const std::vector<int>& waiters, double seconds, const Globals& g);

}  // namespace redlock::cli
