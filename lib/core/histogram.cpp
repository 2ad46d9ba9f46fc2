// Histogram (declared in redlock/metrics.hpp) at the bottom of the house: the connections and the
// engine record latencies into it, so its code lives in core/, which they may reach (issue 42
// item 6: arrows only downwards). The exposition of the metrics stays in lib/metrics.cpp.
#include "redlock/metrics.hpp"

namespace redlock {

void Histogram::observe(double seconds) noexcept {
  std::size_t i = 0;
  while (i < bounds.size() && seconds > bounds[i]) ++i;
  ++buckets[i];
  ++count;
  sum_seconds += seconds;
}

}  // namespace redlock
