#pragma once
// Shared by chaos-worker and chaos-driver: the line protocol between a worker and the oracle.
//
// One AF_UNIX stream connection per worker process; one text line per message, words separated
// by single spaces. "-" stands for "no fence". Messages (worker -> oracle, reply in brackets):
//   HELLO <slot> <pid>                                   [OK]
//   ACQ <res>                                            [OK]      about to call try_acquire
//   GOT <res> <0|1> <latency_us> <error-or-fence>        [OK]      outcome of that call
//   SKIP <res> <remaining_us>                            [OK]      acquired, too little validity
//   left ENTER <res> <fence|-> <remaining_us> <planned_us>    [OK | RECHECK] READ <res> <fence|->
//   [VAL <n> | REJECT] WRITE <res> <fence|-> <n>                            [OK | REJECT] LEAVE
//   <res> <remaining_us>                           [OK] REL <res> <deleted-nodes> [OK]
// The election mix's candidates (worker.cpp, --election) send instead of ENTER .. LEAVE, with
// times on CLOCK_MONOTONIC (mono_ns(), read by the worker):
//   LEAD <res> <term> <start_ns> <deadline_ns>   [OK]   campaign returned: leader from start_ns
//   VALID <res> <deadline_ns>                    [OK]   an extension moved the deadline on
//   UNLEAD <res> <end_ns> <resigned|lost>        [OK]   led until end_ns (capped at the deadline)
// Every message gets a reply, so the oracle has handled a message before the worker does its
// next step: an ENTER that follows a release elsewhere is always stamped after that LEAVE.

#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chaos {

// CLOCK_MONOTONIC in nanoseconds: the oracle's one clock.
inline std::int64_t mono_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

inline std::vector<std::string> split_words(std::string_view line) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    std::size_t j = i;
    while (j < line.size() && line[j] != ' ') ++j;
    if (j > i) out.emplace_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

inline std::vector<std::string> split_csv(std::string_view text) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i <= text.size()) {
    std::size_t j = text.find(',', i);
    if (j == std::string_view::npos) j = text.size();
    if (j > i) out.emplace_back(text.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// Buffered line reader/writer over a connected stream socket. Not thread-safe.
class LineConn {
 public:
  explicit LineConn(int fd) : fd_(fd) {}
  [[nodiscard]] int fd() const { return fd_; }

  // nullopt on EOF or error.
  std::optional<std::string> read_line() {
    for (;;) {
      auto nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      char tmp[4096];
      ssize_t n = ::read(fd_, tmp, sizeof tmp);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return std::nullopt;
      buf_.append(tmp, static_cast<std::size_t>(n));
    }
  }

  bool write_line(std::string_view line) {
    std::string out(line);
    out.push_back('\n');
    std::size_t off = 0;
    while (off < out.size()) {
      ssize_t n = ::send(fd_, out.data() + off, out.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      off += static_cast<std::size_t>(n);
    }
    return true;
  }

 private:
  int fd_;
  std::string buf_;
};

}  // namespace chaos
