#include "output.hpp"

#include <iomanip>
#include <iostream>

namespace redlock::cli {

int exit_code_for(std::error_code ec) {
  if (!ec) return exit_ok;
  if (ec.category() != category()) return exit_no_quorum;
  switch (static_cast<Errc>(ec.value())) {
    case Errc::contended:
    case Errc::not_held:
      return exit_held;
    case Errc::invalid_argument:
      return exit_usage;
    default:
      return exit_no_quorum;
  }
}

std::string error_name(std::error_code ec) {
  if (!ec) return "";
  switch (static_cast<Errc>(ec.value())) {
    case Errc::contended:
      return "contended";
    case Errc::no_quorum:
      return "no_quorum";
    case Errc::expired:
      return "expired";
    case Errc::not_held:
      return "not_held";
    case Errc::invalid_argument:
      return "invalid_argument";
    case Errc::cancelled:
      return "cancelled";
    case Errc::shutdown:
      return "shutdown";
  }
  return "error";
}

void print_nodes(std::ostream& out, const std::vector<NodeOutcome>& nodes) {
  std::size_t width = 4;
  for (const auto& n : nodes) width = std::max(width, n.node.size());
  for (const auto& n : nodes) {
    out << "  " << std::left << std::setw(static_cast<int>(width)) << n.node << "  "
        << std::setw(13) << to_string(n.state) << " " << std::right << std::setw(8)
        << n.latency.count() << " us";
    if (!n.detail.empty()) out << "  " << n.detail;
    out << "\n";
  }
}

std::string json_nodes(const std::vector<NodeOutcome>& nodes) {
  std::string s = "\"per_node\":[";
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto& n = nodes[i];
    if (i) s += ",";
    s += "{\"node\":" + json_string(n.node) + ",\"state\":" + json_string(to_string(n.state)) +
         ",\"latency_us\":" + std::to_string(n.latency.count());
    if (!n.detail.empty()) s += ",\"detail\":" + json_string(n.detail);
    s += "}";
  }
  return s + "]";
}

std::string json_array(const std::vector<std::string>& items) {
  std::string s = "[";
  for (std::size_t i = 0; i < items.size(); ++i) s += (i ? "," : "") + json_string(items[i]);
  return s + "]";
}

void report_failure(const Globals& g, std::error_code ec, const std::string& what,
                    const std::string& message, const std::vector<NodeOutcome>& nodes) {
  if (g.quiet && exit_code_for(ec) == exit_held) return;
  std::cerr << "redlock-cli: " << what << ": " << message << "\n";
  if (g.verbose) print_nodes(std::cerr, nodes);
}

}  // namespace redlock::cli
