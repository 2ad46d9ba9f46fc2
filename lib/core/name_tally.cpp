#include "core/name_tally.hpp"

#include <algorithm>

#include "core/quorum.hpp"

namespace redlock::detail {

void NameTally::reset(int nodes) {
  nodes_ = nodes;
  releases_.clear();
}

bool NameTally::named(int node, std::string_view release) {
  if (node < 0 || node >= nodes_) return false;
  auto it = std::find_if(releases_.begin(), releases_.end(),
                         [&](const Release& r) { return r.id == release; });
  if (it == releases_.end()) {
    if (releases_.size() == max_releases) releases_.erase(releases_.begin());
    releases_.push_back(
        Release{std::string(release), std::vector<char>(static_cast<std::size_t>(nodes_), 0), 0});
    it = releases_.end() - 1;
  }
  char& seen = it->nodes[static_cast<std::size_t>(node)];
  if (seen != 0) return false;  // one release's names for several keys of one lock
  seen = 1;
  return ++it->count == quorum_of(nodes_);
}

bool NameTally::quorum_besides(std::string_view release) const {
  return std::any_of(releases_.begin(), releases_.end(), [&](const Release& r) {
    return r.id != release && r.count >= quorum_of(nodes_);
  });
}

}  // namespace redlock::detail
