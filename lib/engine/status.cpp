// Status: what every node stores for a resource (a read-only script; works whatever the key's
// type).

#include "core/kinds.hpp"
#include "core/validate.hpp"
#include "engine/operation.hpp"

namespace redlock {
namespace {

class StatusOp final : public Operation {
 public:
  StatusOp(Engine::Impl& e, Engine::StatusCallback cb) : Operation(e), cb_(std::move(cb)) {}

  void start(const std::string& resource) {
    res_.nodes.resize(static_cast<std::size_t>(e_.n()));
    key_ = e_.options_.key_prefix + resource;
    const auto cmd = net::Request::make(detail::read_status(key_, status_list_limit));
    stamp();
    for (int i = 0; i < e_.n(); ++i) {
      auto& row = res_.nodes[static_cast<std::size_t>(i)];
      row.node = e_.names()[static_cast<std::size_t>(i)];
      if (!send(i, cmd, 0)) {
        const auto err = e_.nodes_[static_cast<std::size_t>(i)]->last_error();
        row.detail = err.empty() ? "not connected" : err;
        ++answered_;
      }
    }
    maybe_finish();
  }

  void on_result(int node, std::uint32_t, const net::Result& r) override {
    if (done_) return;
    auto& row = res_.nodes[static_cast<std::size_t>(node)];
    ++answered_;
    if (r.kind == net::Result::Kind::timeout) {
      row.detail = "timeout";
    } else if (r.kind == net::Result::Kind::down || r.kind == net::Result::Kind::refused) {
      row.detail = std::string(r.error);
    } else {
      row.up = true;
      read_row(*r.reply, row);
    }
    row.where = e_.nodes_[static_cast<std::size_t>(node)]->key_owner(key_);
    maybe_finish();
  }

  void shutdown() override {
    if (!done_) complete();
  }

 private:
  // {type, value, pttl, reader count, readers, writer, queue length, queue, fence, ticket,
  // listening clients}
  // (scripts.cpp); false stands for "none" (nil in a RESP2 reply).
  static void read_row(const detail::Reply& rep, NodeKeyState& row) {
    using T = detail::Reply::Type;
    if (rep.is_error()) {
      row.detail = rep.str;
      return;
    }
    if (rep.type != T::array || rep.elements.size() != 11) {
      row.detail = "unexpected reply " + rep.describe();
      return;
    }
    const auto& el = rep.elements;
    auto number = [](const detail::Reply& r) -> std::optional<std::uint64_t> {
      if (r.type == T::integer && r.integer >= 0) return static_cast<std::uint64_t>(r.integer);
      if (r.type != T::string || r.str.empty() || r.str.size() > 19) return std::nullopt;
      std::uint64_t v = 0;
      for (char c : r.str) {
        if (c < '0' || c > '9') return std::nullopt;
        v = v * 10 + static_cast<std::uint64_t>(c - '0');
      }
      return v;
    };
    if (el[0].type == T::string || el[0].type == T::status) row.type = el[0].str;
    if (el[1].type == T::string) row.value = el[1].str;
    if (el[2].type == T::integer && el[2].integer >= 0) row.pttl = Millis{el[2].integer};
    if (el[3].type == T::integer && el[3].integer > 0)
      row.reader_count = static_cast<std::size_t>(el[3].integer);
    if (el[4].type == T::array) {
      for (std::size_t i = 0; i + 1 < el[4].elements.size(); i += 2) {
        const auto left = number(el[4].elements[i + 1]);
        row.readers.push_back(
            {el[4].elements[i].str, Millis{static_cast<Millis::rep>(left.value_or(0))}});
      }
    }
    if (el[5].type == T::string) row.writer_waiting = el[5].str;
    if (el[6].type == T::integer && el[6].integer > 0)
      row.queue_length = static_cast<std::size_t>(el[6].integer);
    if (el[7].type == T::array) {
      for (std::size_t i = 0; i + 1 < el[7].elements.size(); i += 2) {
        row.queue.push_back({el[7].elements[i].str, number(el[7].elements[i + 1]).value_or(0)});
      }
    }
    row.fence = number(el[8]);
    row.ticket = number(el[9]);
    row.listening_clients = static_cast<std::size_t>(number(el[10]).value_or(0));
  }

  void maybe_finish() {
    if (!done_ && answered_ >= e_.n()) complete();
  }
  void complete() {
    done_ = true;
    e_.defer([cb = std::move(cb_), res = std::move(res_)]() mutable { cb(std::move(res)); });
    finished();
  }

  Engine::StatusCallback cb_;
  StatusResult res_;
  std::string key_;  // the lock key (key prefix applied)
  int answered_ = 0;
  bool done_ = false;
};

}  // namespace

void start_status(Engine::Impl& e, std::string resource, Engine::StatusCallback cb) {
  if (e.closing_ || resource.empty() || resource.size() > detail::max_resource_bytes) {
    e.defer([cb = std::move(cb)]() mutable { cb(StatusResult{}); });
    return;
  }
  (new StatusOp(e, std::move(cb)))->start(resource);
}

}  // namespace redlock
