// Status: what every node stores for a resource (a read-only script; works whatever the key's
// type).

#include "core/capabilities.hpp"
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
        row.detail = not_sent(i).detail;
        row.capabilities = capabilities(i);
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
      detail::classify_status(*r.reply, row);
    }
    row.where = e_.nodes_[static_cast<std::size_t>(node)]->key_owner(key_);
    row.capabilities = capabilities(node);
    maybe_finish();
  }

  void shutdown() override {
    if (!done_) complete();
  }

 private:
  std::string capabilities(int node) const {
    return detail::describe(e_.nodes_[static_cast<std::size_t>(node)]->capabilities());
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
