#pragma once
// One reply from a server, as an owned value: what the net layer hands to the engine and what
// the lock kinds classify. Plain data, no hiredis type, so classification is unit-tested and
// fuzzed without a server.

#include <string>
#include <string_view>
#include <vector>

namespace redlock::detail {

struct Reply {
  enum class Type { nil, status, error, integer, string, array };

  Type type = Type::nil;
  long long integer = 0;        // Type::integer
  std::string str;              // status, error and string replies
  std::vector<Reply> elements;  // Type::array

  [[nodiscard]] bool is_error() const noexcept { return type == Type::error; }
  // An error reply whose text starts with `prefix` ("READONLY", "NOSCRIPT", "MOVED" ...).
  [[nodiscard]] bool is_error(std::string_view prefix) const noexcept {
    return type == Type::error && str.starts_with(prefix);
  }
  [[nodiscard]] bool is_nil() const noexcept { return type == Type::nil; }
  [[nodiscard]] bool is_integer(long long v) const noexcept {
    return type == Type::integer && integer == v;
  }
  [[nodiscard]] bool is_status(std::string_view s) const noexcept {
    return type == Type::status && str == s;
  }
  // A status, error or bulk string reply whose text starts with `prefix` (e.g. "NOSCRIPT").
  [[nodiscard]] bool starts_with(std::string_view prefix) const noexcept {
    return (type == Type::status || type == Type::error || type == Type::string) &&
           str.starts_with(prefix);
  }

  // Empties the value but keeps the capacity of its strings and arrays (the reader reuses one).
  void clear() noexcept;

  // A short form for messages: `OK`, `(error) WRONGTYPE ...`, `(integer) 3`, `(nil)`,
  // `(array of 3)`, `(string of 40 bytes)`. Never the content of a bulk string: it may be a token;
  // a status or an error as server_text() shows it.
  [[nodiscard]] std::string describe() const;
};

// What a failed AUTH's error text may say in a per-node record or a log line. A server may echo
// the command's arguments (Redis without AUTH, or with it renamed: "ERR unknown command 'AUTH',
// with args beginning with: 'user' 'secret' "), and an argument is the password: the echo is cut
// off, and the password, wherever else it appears, is replaced by "***"; the rest as
// server_text() shows it.
[[nodiscard]] std::string auth_error_text(std::string_view text, std::string_view password);

}  // namespace redlock::detail
