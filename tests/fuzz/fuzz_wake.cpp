// Fuzz target: wake-up messages (what a release publishes on a lock's wake channel, and what
// anyone with PUBLISH rights can send there) with the code that applies them: the name parser
// (parse_wake_message), the listener count that spreads woken waiters (wake_listeners), and the
// per-release tally of names that wakes a named waiter (NameTally). In-process.
//
// Input: byte 0 % 7 + 1 is the number of nodes; then records of [node byte][length byte][that
// many message bytes]. Invariants:
// - a name is "<waiter>/<40 lowercase hex>"; the parts are views into the message and put it back
//   together exactly; any other message is all waiter, with no release (a message grants nothing:
//   it is a hint, see docs/design.md);
// - a "#<n>" waiter's listener count is its leading digits, at most max_wake_listeners, so the
//   spread a publisher can make a waiter sleep is bounded; any other waiter has none;
// - the tally matches a model kept here: per release, the set of nodes that named the waiter (at
//   most 16 releases, the oldest forgotten first); named() is true exactly when a release
//   reaches a quorum, once; quorum_besides() exactly when another release has one.
#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/name_tally.hpp"
#include "core/quorum.hpp"
#include "core/scripts.hpp"
#include "core/token.hpp"
#include "fuzz_check.hpp"

using namespace redlock::detail;

namespace {

bool inside(std::string_view part, std::string_view whole) {
  return part.empty() ||
         (part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size());
}

void check_name(std::string_view m, const WakeName& w) {
  FUZZ_CHECK(inside(w.waiter, m) && inside(w.release, m), "a part outside the message");
  if (w.release.empty()) {
    FUZZ_CHECK(w.waiter == m, "no release, yet not all waiter: " + fuzz::show(m));
    return;
  }
  FUZZ_CHECK(looks_like_token(w.release), "release " + fuzz::show(w.release));
  const std::string whole = std::string(w.waiter) + "/" + std::string(w.release);
  FUZZ_CHECK(whole == m, "parts " + fuzz::show(whole) + " of " + fuzz::show(m));
}

void check_listeners(std::string_view waiter) {
  const auto n = wake_listeners(waiter);
  FUZZ_CHECK(n.has_value() == waiter.starts_with('#'), fuzz::show(waiter));
  if (!n) return;
  FUZZ_CHECK(*n >= 0 && *n <= max_wake_listeners, "listeners " + std::to_string(*n));
  long long digits = 0;  // the leading digits, saturated, read here
  for (char c : waiter.substr(1)) {
    if (c < '0' || c > '9') break;
    digits = std::min<long long>(max_wake_listeners + 1, digits * 10 + (c - '0'));
  }
  FUZZ_CHECK(*n == std::min(digits, max_wake_listeners), "listeners " + std::to_string(*n));
}

// NameTally as a plain list.
struct Model {
  struct Release {
    std::string id;
    std::set<int> nodes;
  };
  int nodes = 0;
  std::vector<Release> releases;
  bool named(int node, std::string_view release) {
    if (node < 0 || node >= nodes) return false;
    auto it = std::find_if(releases.begin(), releases.end(),
                           [&](const Release& r) { return r.id == release; });
    if (it == releases.end()) {
      if (releases.size() == NameTally::max_releases) releases.erase(releases.begin());
      releases.push_back({std::string(release), {}});
      it = releases.end() - 1;
    }
    if (!it->nodes.insert(node).second) return false;
    return static_cast<int>(it->nodes.size()) == quorum_of(nodes);
  }
  bool quorum_besides(std::string_view release) const {
    return std::any_of(releases.begin(), releases.end(), [&](const Release& r) {
      return r.id != release && static_cast<int>(r.nodes.size()) >= quorum_of(nodes);
    });
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const int nodes = data[0] % 7 + 1;
  NameTally tally;
  tally.reset(nodes);
  Model model;
  model.nodes = nodes;
  for (std::size_t i = 1; i + 2 <= size;) {
    const int node = data[i] % 9 - 1;  // -1 and past the last node too: the tally refuses them
    const std::size_t len = std::min<std::size_t>(data[i + 1], size - i - 2);
    const std::string_view m(reinterpret_cast<const char*>(data) + i + 2, len);
    i += 2 + len;
    const auto w = parse_wake_message(m);
    check_name(m, w);
    check_listeners(w.waiter);
    FUZZ_CHECK(tally.named(node, w.release) == model.named(node, w.release), "named()");
    FUZZ_CHECK(tally.quorum_besides(w.release) == model.quorum_besides(w.release),
               "quorum_besides()");
  }
  return 0;
}
