#pragma once
// The releases that named one waiter since its sleep began (and while the attempt they started
// is out), counted per release. Pure: the engine feeds it the names its subscriber heard.
//
// Why per release: a node names a waiter once per release, but not only in the release the
// waiter is waiting for. An attempt that won too few nodes rolls back there and names the next
// waiter; a release that reached only some nodes names it on those. Counted with the next
// release's names, such names made a "quorum" as soon as one node of that release had run it: the
// waiter tried, lost on the nodes still held, and slept until its poll.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::detail {

class NameTally {
 public:
  // Forgets every name; the waiter's lock is on `nodes` nodes.
  void reset(int nodes);
  // Node `node` named the waiter in release `release` (the hash its message carried; empty when
  // it carried none). True when this name is the one that makes a quorum of nodes name the
  // waiter in that release (once per release).
  bool named(int node, std::string_view release);
  // A quorum of nodes has named the waiter in some release other than `release`.
  [[nodiscard]] bool quorum_besides(std::string_view release) const;

  // Releases remembered at once; the oldest goes first (its names are stale by then).
  static constexpr std::size_t max_releases = 16;

 private:
  struct Release {
    std::string id;
    std::vector<char> nodes;  // 1: this node named the waiter in this release
    int count = 0;
  };
  int nodes_ = 0;
  std::vector<Release> releases_;
};

}  // namespace redlock::detail
