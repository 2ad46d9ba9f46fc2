#pragma once
// Counters and latency histograms a service can export, and their Prometheus text rendering.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "redlock/export.hpp"

namespace redlock {

// Cumulative histogram with fixed bucket bounds (seconds, Prometheus style).
struct REDLOCK_API Histogram {
  static constexpr std::array<double, 13> bounds = {
      0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5};
  std::array<std::uint64_t, bounds.size() + 1> buckets{};  // last: above every bound (+Inf)
  std::uint64_t count = 0;
  double sum_seconds = 0;
  void observe(double seconds) noexcept;
};

struct NodeMetrics {
  std::string node;  // display address
  std::uint64_t ok = 0;
  std::uint64_t timeouts = 0;
  std::uint64_t down = 0;      // not connected / connection lost
  std::uint64_t errors = 0;    // error replies (READONLY, OOM, NOAUTH, WRONGTYPE, ...)
  std::uint64_t excluded = 0;  // votes excluded by the restart guard
  Histogram latency;           // time to answer, per command
};

struct Metrics {
  // Acquisitions by final outcome (one per acquire call, whatever its number of attempts).
  std::uint64_t acquired = 0;
  std::uint64_t contended = 0;
  std::uint64_t no_quorum = 0;
  std::uint64_t expired = 0;
  std::uint64_t other_failures = 0;  // invalid_argument, shutdown
  std::uint64_t attempts = 0;        // acquire attempts (retries included)
  std::uint64_t extended = 0;
  std::uint64_t extend_failed = 0;
  std::uint64_t released = 0;
  std::uint64_t lost = 0;     // held locks whose watchdog reported a loss
  Histogram acquire_latency;  // from the call to its result, retries included
  std::vector<NodeMetrics> nodes;
};

// The Prometheus text exposition format (version 0.0.4), metric names prefixed with `prefix`.
[[nodiscard]] REDLOCK_API std::string to_prometheus(const Metrics& m,
                                                    std::string_view prefix = "redlock");

}  // namespace redlock
