#pragma once
// Turns the bytes a server sends into Reply values. hiredis's reader (redisReader) does the
// parsing; its object hooks build our Reply directly (no redisReply is ever made), into one
// reused value, so a steady stream of small replies allocates nothing.
//
// Guards against a server that sends garbage or worse, each a protocol error: more than
// `max_elements` elements in one reply, counting nested arrays (an 8-byte array header would
// otherwise allocate megabytes), and more than `max_pending_bytes` of a reply not yet complete (a
// bulk length of 2 GB would make it buffer that much). No reply this client asks for comes close.

#include <cstddef>
#include <string>

#include "core/reply.hpp"

struct redisReader;

namespace redlock::net {

class Reader {
 public:
  static constexpr long long max_elements = 1 << 18;
  static constexpr std::size_t max_pending_bytes = 64u << 20;

  Reader();
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // Appends bytes read from the connection. False on a protocol error (see error()).
  bool feed(const char* data, std::size_t len);

  enum class Next { reply, more, error };
  // The next complete reply, if any. On Next::reply, `reply()` holds it until the next call of
  // next() or reset(). After Next::error the reader stays in error until reset().
  Next next();
  [[nodiscard]] const detail::Reply& reply() const noexcept { return top_; }
  [[nodiscard]] const std::string& error() const noexcept { return error_; }

  // Drops everything buffered (a new connection starts from a clean reader).
  void reset();
  // Gives back what a large reply needed (the next reply would otherwise keep it until its own
  // end): call once the current reply has been used.
  void release_reply() noexcept { top_.clear(); }

 private:
  friend struct ReaderHooks;
  redisReader* r_ = nullptr;
  detail::Reply top_;
  long long elements_ = 0;  // array elements in the reply being built
  std::string error_;
  std::string
      refusal_;  // why a hook refused an object (more precise than hiredis's "out of memory")
};

}  // namespace redlock::net
