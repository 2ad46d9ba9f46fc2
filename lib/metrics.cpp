#include "redlock/metrics.hpp"

#include <cstdio>

namespace redlock {

// (Histogram::observe lives in core/histogram.cpp, where the connections reach it.)

namespace {

std::string label_value(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void histogram(std::string& out, const std::string& name, const std::string& labels,
               const Histogram& h) {
  std::uint64_t cumulative = 0;
  const std::string sep = labels.empty() ? "" : labels + ",";
  for (std::size_t i = 0; i < Histogram::bounds.size(); ++i) {
    cumulative += h.buckets[i];
    out += name + "_bucket{" + sep + "le=\"" + num(Histogram::bounds[i]) + "\"} " +
           std::to_string(cumulative) + "\n";
  }
  cumulative += h.buckets.back();
  out += name + "_bucket{" + sep + "le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  out += name + "_sum" + braces + " " + num(h.sum_seconds) + "\n";
  out += name + "_count" + braces + " " + std::to_string(h.count) + "\n";
}

}  // namespace

std::string to_prometheus(const Metrics& m, std::string_view prefix) {
  const std::string p(prefix);
  std::string out;
  header(out, p + "_acquire_total", "counter", "Acquire calls by final outcome.");
  for (auto [outcome, v] : {std::pair{"acquired", m.acquired},
                            {"contended", m.contended},
                            {"no_quorum", m.no_quorum},
                            {"expired", m.expired},
                            {"other", m.other_failures}}) {
    out += p + "_acquire_total{outcome=\"" + outcome + "\"} " + std::to_string(v) + "\n";
  }
  header(out, p + "_acquire_attempts_total", "counter", "Acquire attempts, retries included.");
  out += p + "_acquire_attempts_total " + std::to_string(m.attempts) + "\n";
  header(out, p + "_extend_total", "counter", "Extend calls by outcome.");
  out += p + "_extend_total{outcome=\"extended\"} " + std::to_string(m.extended) + "\n";
  out += p + "_extend_total{outcome=\"failed\"} " + std::to_string(m.extend_failed) + "\n";
  header(out, p + "_release_total", "counter", "Release calls.");
  out += p + "_release_total " + std::to_string(m.released) + "\n";
  header(out, p + "_lost_total", "counter", "Held locks reported lost by the watchdog.");
  out += p + "_lost_total " + std::to_string(m.lost) + "\n";
  header(out, p + "_acquire_duration_seconds", "histogram",
         "Time from an acquire call to its result.");
  histogram(out, p + "_acquire_duration_seconds", "", m.acquire_latency);
  header(out, p + "_node_replies_total", "counter", "Per-node command outcomes.");
  for (const auto& n : m.nodes) {
    const std::string node = "node=\"" + label_value(n.node) + "\"";
    for (auto [kind, v] : {std::pair{"ok", n.ok},
                           {"timeout", n.timeouts},
                           {"down", n.down},
                           {"error", n.errors},
                           {"excluded", n.excluded}}) {
      out +=
          p + "_node_replies_total{" + node + ",kind=\"" + kind + "\"} " + std::to_string(v) + "\n";
    }
  }
  header(out, p + "_node_latency_seconds", "histogram", "Per-node time to answer a command.");
  for (const auto& n : m.nodes)
    histogram(out, p + "_node_latency_seconds", "node=\"" + label_value(n.node) + "\"", n.latency);
  return out;
}

}  // namespace redlock
