#include "oracle.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include "common.hpp"

namespace chaos {

struct Oracle::Conn {
  explicit Conn(int fd) : io(fd) {}
  LineConn io;
  std::thread thread;
  int slot = -1;
  pid_t pid = 0;
  bool closed = false;
};

Oracle::Oracle(std::string socket_path, int resources, bool fencing)
    : path_(std::move(socket_path)), fencing_(fencing) {
  rec_.resources.resize(static_cast<std::size_t>(resources));
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0)
    throw std::runtime_error("oracle: socket: " + std::string(std::strerror(errno)));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path_.size() >= sizeof addr.sun_path)
    throw std::runtime_error("oracle: socket path too long: " + path_);
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  ::unlink(path_.c_str());
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 64) != 0) {
    throw std::runtime_error("oracle: bind/listen " + path_ + ": " + std::strerror(errno));
  }
  acceptor_ = std::thread([this] { accept_loop(); });
}

Oracle::~Oracle() {
  {
    std::lock_guard lk(m_);
    stopping_ = true;
    pausing_.clear();
    for (auto& c : conns_) ::shutdown(c->io.fd(), SHUT_RDWR);
  }
  cv_.notify_all();
  if (acceptor_.joinable()) acceptor_.join();
  for (auto& c : conns_) {
    if (c->thread.joinable()) c->thread.join();
    ::close(c->io.fd());
  }
  ::close(listen_fd_);
  ::unlink(path_.c_str());
}

void Oracle::accept_loop() {
  for (;;) {
    {
      std::lock_guard lk(m_);
      if (stopping_) return;
    }
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lk(m_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    conns_.push_back(std::make_unique<Conn>(fd));
    Conn* c = conns_.back().get();
    c->thread = std::thread([this, c] { serve(c); });
  }
}

void Oracle::serve(Conn* c) {
  for (;;) {
    auto line = c->io.read_line();
    std::unique_lock lk(m_);
    if (!line) {
      // The worker died (kill -9) or exited: a section it was in ends here.
      close_open(*c, Interval::End::died, mono_ns());
      c->closed = true;
      return;
    }
    std::string reply = handle(*c, split_words(*line), lk);
    lk.unlock();
    if (!c->io.write_line(reply)) {
      lk.lock();
      close_open(*c, Interval::End::died, mono_ns());
      c->closed = true;
      return;
    }
  }
}

int Oracle::res_index(const std::string& name) {
  // Resources are named "<anything>r<index>".
  auto pos = name.rfind('r');
  if (pos == std::string::npos) return -1;
  try {
    int i = std::stoi(name.substr(pos + 1));
    return i >= 0 && i < static_cast<int>(rec_.resources.size()) ? i : -1;
  } catch (...) {
    return -1;
  }
}

bool Oracle::fence_ok(ResourceState& r, const std::string& fence) {
  if (!fencing_ || fence == "-") return true;
  const std::uint64_t f = std::stoull(fence);
  if (f < r.highest_fence) return false;
  r.highest_fence = f;
  return true;
}

void Oracle::note_ticket(const Conn& c, int ri, ResourceState& r, std::uint64_t ticket) {
  if (r.last_ticket && ticket < *r.last_ticket) {
    ++r.fifo_violations;
    if (rec_.fifo_breaks.size() < 10) {
      rec_.fifo_breaks.push_back("worker " + std::to_string(c.slot) + " got r" +
                                 std::to_string(ri) + " with ticket " + std::to_string(ticket) +
                                 " after a holder with ticket " + std::to_string(*r.last_ticket));
    }
  } else if (r.last_ticket && ticket == *r.last_ticket) {
    ++r.ticket_ties;
  }
  r.last_ticket = ticket;
}

void Oracle::close_open(Conn& c, Interval::End end, std::int64_t now) {
  auto it = open_.find(&c);
  if (it == open_.end()) return;
  Interval& iv = rec_.intervals[it->second];
  // A leader that died or was still leading at the end led at most until its deadline.
  iv.leave_ns = iv.leadership ? std::min(now, iv.valid_until_ns) : now;
  iv.end = end;
  open_.erase(it);
}

std::string Oracle::handle(Conn& c, const std::vector<std::string>& w,
                           std::unique_lock<std::mutex>& lk) {
  const std::int64_t now = mono_ns();
  auto bad = [&](const std::string& why) {
    std::string line;
    for (const auto& s : w) line += s + " ";
    rec_.protocol_errors.push_back("slot " + std::to_string(c.slot) + ": " + why + ": " + line);
    return std::string("ERR");
  };
  if (w.empty()) return bad("empty message");
  const std::string& op = w[0];
  try {
    if (op == "HELLO" && w.size() == 3) {
      c.slot = std::stoi(w[1]);
      c.pid = static_cast<pid_t>(std::stol(w[2]));
      return "OK";
    }
    if (w.size() < 2) return bad("short message");
    const int ri = res_index(w[1]);
    if (ri < 0) return bad("unknown resource");
    ResourceState& r = rec_.resources[static_cast<std::size_t>(ri)];

    if (op == "ACQ") {
      if (w.size() == 3) {
        const long long skew =
            std::llabs(std::stoll(w[2]) - static_cast<long long>(::time(nullptr)));
        rec_.acq.max_wall_skew_s = std::max(rec_.acq.max_wall_skew_s, skew);
      }
      if (armed_ == Trigger::at_acquire && (armed_slot_ == -1 || armed_slot_ == c.slot)) {
        armed_ = Trigger::none;
        pausing_[c.slot] = true;
        fired_ = std::make_pair(c.slot, c.pid);
        cv_.notify_all();
      }
      return "OK";
    }
    // GOT res 1 latency_us fence|- ticket|-   or   GOT res 0 latency_us why
    if (op == "GOT" && (w.size() == 5 || (w.size() == 6 && w[2] == "1"))) {
      ++rec_.acq.attempts;
      if (w[2] == "1") {
        ++rec_.acq.acquired;
        rec_.acq.latency_us.push_back(std::stoll(w[3]));
        if (w.size() == 6 && w[5] != "-") note_ticket(c, ri, r, std::stoull(w[5]));
        if (armed_ == Trigger::at_acquired && (armed_slot_ == -1 || armed_slot_ == c.slot)) {
          armed_ = Trigger::none;
          pausing_[c.slot] = true;
          fired_ = std::make_pair(c.slot, c.pid);
          cv_.notify_all();
        }
      } else {
        ++rec_.acq.errors[w[4]];
      }
      return "OK";
    }
    if (op == "SKIP") {
      ++rec_.acq.skipped;
      return "OK";
    }
    if (op == "ENTER" && w.size() == 5) {
      if (pausing_.count(c.slot) != 0 && pausing_[c.slot]) {
        // The nemesis is pausing this worker outside its critical section: hold the answer
        // until the pause is over, then make it look at its validity again.
        cv_.wait(lk, [&] { return stopping_ || pausing_.count(c.slot) == 0 || !pausing_[c.slot]; });
        ++rec_.acq.rechecks;
        return "RECHECK";
      }
      if (open_.count(&c) != 0) return bad("ENTER while inside");
      const std::int64_t t = mono_ns();  // after a possible wait
      Interval iv;
      iv.resource = ri;
      iv.slot = c.slot;
      iv.pid = c.pid;
      iv.enter_ns = t;
      if (w[2] != "-") iv.fence = std::stoull(w[2]);
      iv.remaining_at_enter_us = std::stoll(w[3]);
      if (iv.fence) {
        if (r.highest_enter_fence && *iv.fence <= *r.highest_enter_fence) ++r.fence_regressions;
        if (!r.highest_enter_fence || *iv.fence > *r.highest_enter_fence)
          r.highest_enter_fence = iv.fence;
      }
      open_[&c] = rec_.intervals.size();
      rec_.intervals.push_back(iv);
      ++rec_.acq.entered;
      if (armed_ == Trigger::at_enter && (armed_slot_ == -1 || armed_slot_ == c.slot)) {
        armed_ = Trigger::none;
        fired_ = std::make_pair(c.slot, c.pid);
        cv_.notify_all();
      }
      return "OK";
    }
    if (op == "LEAD" || op == "VALID" || op == "UNLEAD") return handle_leadership(c, w, ri, lk);
    if (op == "READ" && w.size() == 3) {
      if (open_.count(&c) == 0) return bad("READ outside a critical section");
      if (!fence_ok(r, w[2])) {
        ++r.rejected_reads;
        return "REJECT";
      }
      return "VAL " + std::to_string(r.value);
    }
    if (op == "WRITE" && w.size() == 4) {
      if (open_.count(&c) == 0) return bad("WRITE outside a critical section");
      if (!fence_ok(r, w[2])) {
        ++r.rejected_writes;
        return "REJECT";
      }
      const long long v = std::stoll(w[3]);
      if (v != r.value + 1) {  // its read was stale: an increment is lost
        ++r.clobbered_writes;
        if (rec_.stale_writes.size() < 10) {
          rec_.stale_writes.push_back("worker " + std::to_string(c.slot) + " wrote " + w[3] +
                                      " with fence " + w[2] + " over " + std::to_string(r.value) +
                                      " on r" + std::to_string(ri) + " (highest fence seen " +
                                      std::to_string(r.highest_fence) + ")");
        }
      }
      r.value = v;
      ++r.accepted_writes;
      return "OK";
    }
    if (op == "LEAVE" && w.size() == 3) {
      auto it = open_.find(&c);
      if (it == open_.end()) return bad("LEAVE outside a critical section");
      rec_.intervals[it->second].remaining_at_leave_us = std::stoll(w[2]);
      close_open(c, Interval::End::leave, now);
      return "OK";
    }
    if (op == "REL") return "OK";
  } catch (const std::exception& e) {
    return bad(std::string("unparsable (") + e.what() + ")");
  }
  return bad("unknown message");
}

std::string Oracle::handle_leadership(Conn& c, const std::vector<std::string>& w, int ri,
                                      std::unique_lock<std::mutex>& lk) {
  auto bad = [&](const std::string& why) {
    std::string line;
    for (const auto& s : w) line += s + " ";
    rec_.protocol_errors.push_back("slot " + std::to_string(c.slot) + ": " + why + ": " + line);
    return std::string("ERR");
  };
  const std::string& op = w[0];
  auto it = open_.find(&c);
  if (op == "LEAD" && w.size() == 5) {
    if (it != open_.end()) return bad("LEAD while leading");
    // The nemesis is pausing this candidate right after it was elected: hold the answer until
    // the pause is over (the leadership still began at the candidate's own stamp, start_ns).
    cv_.wait(lk, [&] { return stopping_ || pausing_.count(c.slot) == 0 || !pausing_[c.slot]; });
    Interval iv;
    iv.resource = ri;
    iv.slot = c.slot;
    iv.pid = c.pid;
    iv.leadership = true;
    iv.fence = std::stoull(w[2]);
    iv.enter_ns = std::stoll(w[3]);
    iv.valid_until_ns = std::stoll(w[4]);
    iv.remaining_at_enter_us = (iv.valid_until_ns - iv.enter_ns) / 1000;
    open_[&c] = rec_.intervals.size();
    rec_.intervals.push_back(iv);
    ++rec_.acq.entered;
    if (armed_ == Trigger::at_enter && (armed_slot_ == -1 || armed_slot_ == c.slot)) {
      armed_ = Trigger::none;
      fired_ = std::make_pair(c.slot, c.pid);
      cv_.notify_all();
    }
    return "OK";
  }
  if (it == open_.end() || !rec_.intervals[it->second].leadership)
    return bad(op + " while not leading");
  Interval& iv = rec_.intervals[it->second];
  if (op == "VALID" && w.size() == 3) {
    iv.valid_until_ns = std::max(iv.valid_until_ns, static_cast<std::int64_t>(std::stoll(w[2])));
    return "OK";
  }
  if (op == "UNLEAD" && w.size() == 4) {
    const std::int64_t end = std::stoll(w[2]);
    iv.remaining_at_leave_us = (iv.valid_until_ns - end) / 1000;
    close_open(c, Interval::End::leave, end);
    return "OK";
  }
  return bad("malformed " + op);
}

void Oracle::arm(int slot, Trigger t) {
  std::lock_guard lk(m_);
  armed_slot_ = slot;
  armed_ = t;
  fired_.reset();
}

std::optional<std::pair<int, pid_t>> Oracle::wait_trigger(int timeout_ms) {
  std::unique_lock lk(m_);
  cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return fired_.has_value(); });
  armed_ = Trigger::none;
  auto f = fired_;
  fired_.reset();
  return f;
}

void Oracle::begin_pause(int slot) {
  std::lock_guard lk(m_);
  pausing_[slot] = true;
}

void Oracle::end_pause(int slot) {
  {
    std::lock_guard lk(m_);
    pausing_.erase(slot);
  }
  cv_.notify_all();
}

bool Oracle::mark_paused_inside(int slot) {
  std::lock_guard lk(m_);
  for (auto& [conn, idx] : open_) {
    if (conn->slot == slot && !conn->closed) {
      rec_.intervals[idx].paused_inside = true;
      return true;
    }
  }
  return false;
}

bool Oracle::inside(int slot) {
  std::lock_guard lk(m_);
  for (auto& [conn, idx] : open_) {
    if (conn->slot == slot && !conn->closed) return true;
  }
  return false;
}

std::size_t Oracle::connected() {
  std::lock_guard lk(m_);
  std::size_t n = 0;
  for (auto& c : conns_) n += !c->closed;
  return n;
}

OracleRecord Oracle::finish() {
  std::lock_guard lk(m_);
  const std::int64_t now = mono_ns();
  for (auto& [conn, idx] : open_) {
    Interval& iv = rec_.intervals[idx];
    iv.leave_ns = iv.leadership ? std::min(now, iv.valid_until_ns) : now;
    iv.end = Interval::End::mix_end;
  }
  open_.clear();
  return rec_;
}

}  // namespace chaos
