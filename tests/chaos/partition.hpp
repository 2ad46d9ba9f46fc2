#pragma once
// Network partitions for the `partition` mix: nftables drop rules that cut some workers off from
// some nodes. Root only. The driver first moves itself into a private network namespace
// (unshare(CLONE_NEWNET), its own loopback), so the rules, the nodes and the workers live in a
// namespace nothing else uses, and the rules match only there. Each worker runs under its own uid
// (base_uid + slot) so a rule can select it with `meta skuid` on the loopback output path.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace chaos {

// Moves the calling process into a new network namespace with `lo` up. Call before any thread
// is started. Returns an error message, or nullopt on success.
std::optional<std::string> enter_private_netns();

// Why partitions cannot be made here (not root, no nft, no private namespace), or nullopt.
std::optional<std::string> partition_unavailable(bool in_private_netns);

class Partitioner {
 public:
  static constexpr uid_t base_uid = 47000;

  explicit Partitioner(std::vector<std::uint16_t> node_ports);
  ~Partitioner();  // deletes the table
  Partitioner(const Partitioner&) = delete;
  Partitioner& operator=(const Partitioner&) = delete;

  [[nodiscard]] bool ok() const { return ok_; }
  [[nodiscard]] const std::string& error() const { return error_; }
  // Drops every packet from the workers in `slots` to the nodes in `nodes` (indices).
  bool cut(const std::vector<int>& slots, const std::vector<int>& nodes, std::string& what);
  void heal();  // removes every rule

 private:
  std::vector<std::uint16_t> ports_;
  bool ok_ = false;
  std::string error_;
};

}  // namespace chaos
