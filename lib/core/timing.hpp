#pragma once
// How long things wait, in one place: the watchdog's schedule of a hold. Pure functions (no I/O),
// shared by the engine and the checks the public API makes before anything is sent.

#include <optional>
#include <string>

#include "redlock/guard.hpp"
#include "redlock/options.hpp"

namespace redlock::detail {

// ---- holding a lock (HoldOptions) ---------------------------------------------------------------

struct HoldSchedule {
  Millis extend_every;    // an extension is due this long after the last success
  Millis renew_deadline;  // no success for this long: the hold gives up (signals the loss)
};

// The schedule of a hold of a lock of `ttl`. extend_every defaults to ttl/3 (Redisson's watchdog).
// renew_deadline defaults to halfway between the first extension and the ttl: half of what is
// left after the first try is for retrying, the other half is the holder's time to stop before
// the lock may be someone else's. With the default extend_every that is 2/3 of the ttl, the ratio
// of client-go's leader election (RenewDeadline 10 s of a 15 s lease). nullopt, with `why` naming
// the bad value, when extend_every is not in (0, ttl) or renew_deadline not in (extend_every, ttl]
// (a renew deadline at the ttl gives up only at the validity deadline, as without one).
[[nodiscard]] std::optional<HoldSchedule> hold_schedule(Millis ttl, const HoldOptions& options,
                                                        std::string& why);

}  // namespace redlock::detail
