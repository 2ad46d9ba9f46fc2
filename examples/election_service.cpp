// An HA service that does its work only while it leads (docs/guide.md, "Electing a leader").
//
//   election_service NODES NAME ID [SECONDS]
//
// Campaigns for NAME as ID on NODES (redlock-cli's address list), and while leader "writes" a
// shared resource once every 100 ms, fenced with its term: the resource keeps the highest term it
// has seen and refuses writes that carry a lower one, so a leader paused past its validity cannot
// overwrite its successor's work when it resumes. A loss stops the work at once; then it
// campaigns again. Runs SECONDS (default 10), then resigns and exits 0.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include "redlock/redlock.hpp"

namespace {

// The protected resource. In a real service: a database row with a `term` column
// (UPDATE ... WHERE term <= $term), or a Redis key written by redlock::fenced_write_script().
class FencedResource {
 public:
  bool write(std::uint64_t term, const std::string& value) {
    std::lock_guard<std::mutex> g(mu_);
    if (term < highest_) return false;  // a newer leader exists: refused
    highest_ = term;
    value_ = value;
    return true;
  }

 private:
  std::mutex mu_;
  std::uint64_t highest_ = 0;
  std::string value_;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  if (argc < 4) {
    std::cerr << "usage: election_service NODES NAME ID [SECONDS]\n";
    return 2;
  }
  redlock::Options options;
  std::string why;
  auto nodes = redlock::parse_node_list(argv[1], why);
  if (!nodes) {
    std::cerr << "election_service: " << why << "\n";
    return 2;
  }
  options.nodes = std::move(*nodes);
  const std::string id = argv[3];
  if (auto bad = redlock::check_identity(id)) {
    std::cerr << "election_service: " << *bad << "\n";
    return 2;
  }
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(argc > 4 ? std::stoi(argv[4]) : 10);

  redlock::Client client(options);
  redlock::Election election(client, argv[2]);
  FencedResource resource;
  std::stop_source stop_campaign;
  std::thread stopper([&] {  // ends a campaign still waiting when the time is up
    std::this_thread::sleep_until(until);
    stop_campaign.request_stop();
  });

  int writes = 0;
  while (std::chrono::steady_clock::now() < until) {
    redlock::CampaignOptions co;
    co.ttl = 3s;
    co.stop = stop_campaign.get_token();
    std::atomic<bool> lost{false};
    co.hold.on_lost = [&lost](const redlock::LossInfo&) { lost = true; };  // I/O thread
    auto [leadership, r] = election.try_campaign(id, co);
    if (!r) {
      if (r.error == redlock::Errc::cancelled) break;
      std::cerr << "election_service: campaign: " << r.message << "\n";
      std::this_thread::sleep_for(1s);
      continue;
    }
    std::cout << id << ": leader of " << election.name() << ", term " << leadership.term()
              << std::endl;
    // The work: only while leader, each write fenced with the term.
    while (!lost && leadership.is_leader() && std::chrono::steady_clock::now() < until) {
      if (!resource.write(leadership.term(), id + " at term " + std::to_string(leadership.term())))
        break;  // someone with a higher term wrote: we are not leader any more
      ++writes;
      std::this_thread::sleep_for(100ms);
    }
    if (lost) std::cout << id << ": leadership lost, campaigning again" << std::endl;
    leadership.resign();  // (the destructor would too)
  }
  stop_campaign.request_stop();
  stopper.join();
  std::cout << id << ": " << writes << " writes" << std::endl;
  return 0;
}
