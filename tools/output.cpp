#include "output.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iomanip>
#include <iostream>
#include <mutex>

#include "json.hpp"

namespace redlock::cli {
namespace {

// The one table of error names and the exit codes they give.
struct ErrcInfo {
  Errc errc;
  const char* name;
  int exit_code;
};
constexpr ErrcInfo errc_table[] = {
    {Errc::contended, "contended", exit_held},
    {Errc::no_quorum, "no_quorum", exit_no_quorum},
    {Errc::expired, "expired", exit_no_quorum},
    {Errc::not_held, "not_held", exit_held},
    {Errc::invalid_argument, "invalid_argument", exit_usage},
    {Errc::cancelled, "cancelled", exit_no_quorum},
    {Errc::shutdown, "shutdown", exit_no_quorum},
    {Errc::refused, "refused", exit_refused},
};

const ErrcInfo* info_of(std::error_code ec) {
  if (!ec || ec.category() != category()) return nullptr;
  for (const auto& i : errc_table) {
    if (static_cast<int>(i.errc) == ec.value()) return &i;
  }
  return nullptr;
}

Json texts(const std::vector<std::string>& items) {
  Json a = Json::array();
  for (const auto& i : items) a.push_back(text(i));
  return a;
}

// `"per_node":[...]`: one node's outcome of the operation each.
Json per_node(const std::vector<NodeOutcome>& nodes) {
  Json a = Json::array();
  for (const auto& n : nodes) {
    Json o = {
        {"node", text(n.node)}, {"state", to_string(n.state)}, {"latency_us", n.latency.count()}};
    if (!n.detail.empty()) o["detail"] = text(n.detail);
    a.push_back(std::move(o));
  }
  return a;
}

}  // namespace

int exit_code_for(std::error_code ec) {
  if (!ec) return exit_ok;
  const ErrcInfo* i = info_of(ec);
  return i != nullptr ? i->exit_code : exit_no_quorum;
}

std::string error_name(std::error_code ec) {
  if (!ec) return "";
  const ErrcInfo* i = info_of(ec);
  return i != nullptr ? i->name : "error";
}

Stderr::~Stderr() { write_stderr(text_.str()); }

void write_stderr(std::string_view text) {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  while (!text.empty()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stderr closed or full: nothing better to do with the text
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

std::string nodes_table(const std::vector<NodeOutcome>& nodes) {
  std::ostringstream out;
  std::size_t width = 4;
  for (const auto& n : nodes) width = std::max(width, n.node.size());
  for (const auto& n : nodes) {
    out << "  " << std::left << std::setw(static_cast<int>(width)) << n.node << "  "
        << std::setw(13) << to_string(n.state) << " " << std::right << std::setw(8)
        << n.latency.count() << " us";
    if (!n.detail.empty()) out << "  " << n.detail;
    out << "\n";
  }
  return out.str();
}

void report_failure(const Globals& g, std::error_code ec, const std::string& what,
                    const std::string& message, const std::vector<NodeOutcome>& nodes) {
  if (g.quiet && exit_code_for(ec) == exit_held) return;
  Stderr report;
  report << "redlock-cli: " << what << ": " << message << "\n";
  if (exit_code_for(ec) == exit_no_quorum && default_nodes_used(g)) {
    // "(5 down)" alone does not say which nodes were tried when nobody named any.
    report << "redlock-cli: no nodes were given (-n or REDLOCK_NODES), so the local ones of "
              "`redlock-cli cluster up` were used: "
           << default_nodes_summary << "\n";
  }
  if (g.verbose) report << nodes_table(nodes);
}

std::string printable(std::string_view bytes) {
  const std::string quoted = dump(text(bytes));
  return quoted.substr(1, quoted.size() - 2);
}

void print_acquire_json(const std::vector<std::string>& resources, const AcquireResult& res,
                        std::size_t nodes, int quorum) {
  Json j = {{"resource", text(resources.front())}, {"resources", texts(resources)}};
  if (res) {
    j["token"] = text(res.lock.token());
    j["ttl_ms"] = res.lock.ttl().count();
    j["validity_ms"] = res.lock.validity().count();
    j["votes"] = res.lock.votes();
    if (res.lock.fence()) j["fence"] = *res.lock.fence();
  } else {
    j["error"] = error_name(res.error);
    j["message"] = text(res.message);
    j["votes"] = std::count_if(res.nodes.begin(), res.nodes.end(),
                               [](const NodeOutcome& n) { return n.state == NodeState::ok; });
  }
  j["nodes"] = nodes;
  j["quorum"] = quorum;
  j["attempts"] = res.attempts;
  j["per_node"] = per_node(res.nodes);
  print_json(j);
}

void print_release_json(const std::vector<std::string>& resources, const std::string& token,
                        const ReleaseResult& res, std::size_t nodes) {
  Json j = {{"resource", text(resources.front())},
            {"resources", texts(resources)},
            {"token", text(token)},
            {"deleted", res.deleted},
            {"not_held", res.not_held},
            {"unreachable", res.unreachable}};
  if (res.error) {
    j["error"] = error_name(res.error);
    j["message"] = text(res.message);
  }
  j["nodes"] = nodes;
  j["per_node"] = per_node(res.nodes);
  print_json(j);
}

void print_extend_json(const std::vector<std::string>& resources, const std::string& token,
                       Millis ttl, const ExtendResult& res, std::size_t nodes) {
  Json j = {{"resource", text(resources.front())},
            {"resources", texts(resources)},
            {"token", text(token)},
            {"ttl_ms", ttl.count()}};
  if (res) {
    j["validity_ms"] = res.lock.validity().count();
  } else {
    j["error"] = error_name(res.error);
    j["message"] = text(res.message);
  }
  j["nodes"] = nodes;
  j["per_node"] = per_node(res.nodes);
  print_json(j);
}

// `nodes` is the count here too, as in every other output; what each node stores is in
// `per_node`.
void print_status_json(const std::string& resource, const StatusResult& res, std::size_t nodes,
                       const StatusVerdict& verdict, std::string_view verdict_name) {
  Json records = Json::array();
  for (const auto& n : res.nodes) {
    Json o = {{"node", text(n.node)},
              {"up", n.up},
              {"value", n.value ? text(*n.value) : Json(nullptr)},
              {"pttl_ms", n.pttl ? Json(n.pttl->count()) : Json(nullptr)}};
    if (!n.type.empty()) o["type"] = text(n.type);
    if (!n.detail.empty()) o["detail"] = text(n.detail);
    o["where"] = n.where.empty() ? Json(nullptr) : text(n.where);
    o["capabilities"] = text(n.capabilities);
    if (n.up) {
      Json readers = Json::array();
      for (const auto& r : n.readers) {
        readers.push_back({{"token", text(r.token)}, {"remaining_ms", r.remaining.count()}});
      }
      Json queue = Json::array();
      for (const auto& w : n.queue) queue.push_back({{"id", text(w.id)}, {"ticket", w.ticket}});
      o["reader_count"] = n.reader_count;
      o["readers"] = std::move(readers);
      o["writer_waiting"] = n.writer_waiting ? text(*n.writer_waiting) : Json(nullptr);
      o["queue_length"] = n.queue_length;
      o["queue"] = std::move(queue);
      o["fence"] = n.fence ? Json(*n.fence) : Json(nullptr);
      o["ticket"] = n.ticket ? Json(*n.ticket) : Json(nullptr);
      o["listening_clients"] = n.listening_clients;
    }
    records.push_back(std::move(o));
  }
  const bool held = verdict.kind == StatusVerdict::Kind::held;
  print_json({{"resource", text(resource)},
              {"verdict", std::string(verdict_name)},
              {"token", held && !verdict.token.empty() ? text(verdict.token) : Json(nullptr)},
              {"readers", verdict.readers},
              {"held_on", verdict.holding},
              {"answered", verdict.answered},
              {"remaining_ms",
               held && verdict.remaining ? Json(verdict.remaining->count()) : Json(nullptr)},
              {"nodes", nodes},
              {"per_node", std::move(records)}});
}

void print_leader_json(const std::string& name, const LeaderResult& res) {
  const auto& l = res.leader;
  Json j = {{"name", text(name)},
            {"id", l ? text(l->id) : Json(nullptr)},
            {"term", l ? Json(l->term) : Json(nullptr)},
            {"since_ms", l ? Json(l->since.count()) : Json(nullptr)},
            {"validity_ms", l ? Json(l->validity.count()) : Json(nullptr)},
            {"answered", res.answered},
            {"nodes", res.nodes}};
  if (res.error) j["error"] = error_name(res.error);
  print_json(j);
}

}  // namespace redlock::cli
