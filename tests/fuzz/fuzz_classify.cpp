// Fuzz target: arbitrary bytes from a server, through the reader, into every lock kind's
// classification. In-process: no server, no engine, no socket.
//
// Input: byte 0 seeds how the rest is cut into reads (1..64 bytes each); the rest is what the
// server sent. Invariants:
// - the reader gives the same replies (and stops at the same error) whether the bytes come in one
//   read or in pieces;
// - every reply gets a verdict from every kind: a grant exactly for the reply that means one
//   (+OK for SET NX; :1 for the scripted kinds, and :2 for a fair one (a key handed over, taken);
//   a positive integer for a fence or a release;
//   {positive integer, 0 or 1} for a ticket), a refusal exactly for nil / :0, and otherwise a
//   failure in `error` state with a non-empty detail (an error reply's text as server_text()
//   shows it);
// - a status answer (classify_status) fills a row exactly from an 11-element array, keeps
//   counters and times within 0..2^63-1, and shows an error's text and the key's type safely;
// - describe() never shows a bulk string's bytes, nor a raw control byte;
// - server_text(), on every text a reply carries: at most 200 bytes, safe on a terminal (checked
//   independently: fuzz_check.hpp), no argument echo, no run of 32+ hex digits, unchanged when
//   shown again, and the text itself when it was plain printable ASCII already.
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "core/kinds.hpp"
#include "core/server_text.hpp"
#include "fuzz_check.hpp"
#include "net/reader.hpp"

using namespace redlock;
using namespace redlock::detail;
using redlock::net::Reader;

namespace {

std::string deep(const Reply& x) {
  std::string s =
      std::to_string(static_cast<int>(x.type)) + ":" + std::to_string(x.integer) + ":" + x.str;
  for (const auto& e : x.elements) s += "[" + deep(e) + "]";
  return s;
}

struct Read {
  std::vector<std::string> replies;
  bool failed = false;
};

Read read(std::string_view bytes, const std::function<std::size_t()>& next_chunk,
          const std::function<void(const Reply&)>& each) {
  Read out;
  Reader r;
  std::size_t pos = 0;
  while (pos < bytes.size() && !out.failed) {
    const std::size_t n = std::min(next_chunk(), bytes.size() - pos);
    if (!r.feed(bytes.data() + pos, n)) {
      out.failed = true;
      break;
    }
    pos += n;
    for (;;) {
      const auto next = r.next();
      if (next == Reader::Next::more) break;
      if (next == Reader::Next::error) {
        FUZZ_CHECK(!r.error().empty(), "an error without a message");
        out.failed = true;
        break;
      }
      out.replies.push_back(deep(r.reply()));
      if (each) each(r.reply());
    }
  }
  return out;
}

// An error reply's text in a record: server_text() of it, or a fixed note when that is empty (an
// empty text, or one that is all argument echo) so the record still says there was an error.
std::string shown_error(const Reply& r) {
  const std::string shown = server_text(r.str);
  return shown.empty() ? "an error reply without text" : shown;
}

void check_verdict(const Verdict& v, const Reply& r, bool grant, bool refuse, const char* who) {
  const std::string what = std::string(who) + " on " + r.describe();
  if (grant) {
    FUZZ_CHECK(v.vote == Vote::yes && v.state == NodeState::ok, what);
  } else if (refuse) {
    FUZZ_CHECK(v.vote == Vote::no &&
                   (v.state == NodeState::held_by_other || v.state == NodeState::not_held),
               what);
  } else {
    FUZZ_CHECK(v.vote == Vote::failed && v.state == NodeState::error && !v.detail.empty(), what);
    if (r.is_error()) FUZZ_CHECK(v.detail == shown_error(r), what);
    FUZZ_CHECK(fuzz::unsafe_for_terminal(v.detail).empty(), what + ": " + fuzz::show(v.detail));
  }
}

void check_server_text(std::string_view raw) {
  const std::string shown = server_text(raw);
  const std::string what = fuzz::show(raw) + " shown as " + fuzz::show(shown);
  FUZZ_CHECK(shown.size() <= server_text_max, what);
  FUZZ_CHECK(fuzz::unsafe_for_terminal(shown).empty(), what);
  FUZZ_CHECK(shown.find("with args") == std::string::npos, what);
  FUZZ_CHECK(!fuzz::has_hex_run(shown, 32), what);
  FUZZ_CHECK(server_text(shown) == shown, what + ": not stable");
  FUZZ_CHECK(server_text(shown, 50).size() <= 50, what);
  if (fuzz::plain_server_text(raw)) FUZZ_CHECK(shown == raw, what + ": plain text changed");
}

void check_status(const Reply& r) {
  using T = Reply::Type;
  NodeKeyState row;
  classify_status(r, row);
  const std::string what = "status on " + r.describe();
  FUZZ_CHECK(fuzz::unsafe_for_terminal(row.detail).empty(), what);
  FUZZ_CHECK(fuzz::unsafe_for_terminal(row.type).empty() && row.type.size() <= 32, what);
  if (r.is_error()) {
    FUZZ_CHECK(row.detail == shown_error(r) && row.type.empty() && !row.value, what);
    return;
  }
  if (r.type != T::array || r.elements.size() != 11) {
    FUZZ_CHECK(row.detail.starts_with("unexpected reply ") && !row.value && !row.pttl, what);
    return;
  }
  const auto& el = r.elements;
  FUZZ_CHECK(row.detail.empty(), what);
  FUZZ_CHECK(row.pttl.has_value() == (el[2].type == T::integer && el[2].integer >= 0), what);
  if (row.pttl) FUZZ_CHECK(row.pttl->count() == el[2].integer, what);
  for (const auto& reader : row.readers) FUZZ_CHECK(reader.remaining.count() >= 0, what);
  constexpr auto most = static_cast<std::uint64_t>(std::numeric_limits<long long>::max());
  for (const auto& w : row.queue) FUZZ_CHECK(w.ticket <= most, what);
  if (row.fence) FUZZ_CHECK(*row.fence <= most, what);
  if (row.ticket) FUZZ_CHECK(*row.ticket <= most, what);
  FUZZ_CHECK(row.listening_clients <= most, what);
}

void check_texts(const Reply& r) {
  if (r.type == Reply::Type::status || r.type == Reply::Type::error ||
      r.type == Reply::Type::string) {
    check_server_text(r.str);
  }
  for (const auto& e : r.elements) check_texts(e);
}

void classify_everything(const Reply& r) {
  using T = Reply::Type;
  const bool is_int = r.type == T::integer;
  const bool one = r.is_integer(1), zero = r.is_integer(0), positive = is_int && r.integer > 0;
  std::vector<std::string> keys{"k"};
  AcquireOptions plain, multi, fenced, read_o, write_o, fair;
  fenced.fence = true;
  read_o.mode = LockMode::read;
  write_o.mode = LockMode::write;
  fair.fair = true;
  check_verdict(kind_for_acquire(plain, 1).classify_acquire(r), r, r.is_status("OK"),
                r.type == T::nil, "plain");
  check_verdict(kind_for_acquire(multi, 2).classify_acquire(r), r, one, zero, "multi");
  check_verdict(kind_for_acquire(read_o, 1).classify_acquire(r), r, one, zero, "read");
  check_verdict(kind_for_acquire(write_o, 1).classify_acquire(r), r, one, zero, "write");
  check_verdict(kind_for_acquire(fair, 1).classify_acquire(r), r, one || r.is_integer(2), zero,
                "fair");
  const auto f = kind_for_acquire(fenced, 1).classify_acquire(r);
  check_verdict(f, r, positive, zero, "fenced");
  if (positive) FUZZ_CHECK(f.value == static_cast<std::uint64_t>(r.integer), "fence value");
  check_verdict(LockKind::classify_extend(r), r, one, zero, "extend");
  check_verdict(LockKind::classify_release(r), r, positive, zero, "release");
  // A ticket: {counter > 0, 0 (first), 1 (someone ahead) or 2 (granted)}.
  const bool ticket =
      r.type == T::array && r.elements.size() == 2 && r.elements[0].type == T::integer &&
      r.elements[0].integer > 0 &&
      (r.elements[1].is_integer(0) || r.elements[1].is_integer(1) || r.elements[1].is_integer(2));
  const auto t = classify_ticket(r);
  check_verdict(t, r, ticket, false, "ticket");
  if (ticket) {
    FUZZ_CHECK(t.value == static_cast<std::uint64_t>(r.elements[0].integer) &&
                   t.behind == r.elements[1].is_integer(1) &&
                   t.granted == r.elements[1].is_integer(2),
               "ticket value");
  }
  check_verdict(classify_raise(r), r, one, false, "write-back");
  // A bulk string is described by its size only (its bytes may be a token); checked exactly,
  // since a string such as " of 8 by" is also a part of that description.
  if (r.type == T::string) {
    FUZZ_CHECK(r.describe() == "(string of " + std::to_string(r.str.size()) + " bytes)",
               "describe shows bytes");
  }
  FUZZ_CHECK(fuzz::unsafe_for_terminal(r.describe()).empty(), fuzz::show(r.describe()));
  check_status(r);
  check_texts(r);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::uint32_t state = data[0] * 2654435761u + 1;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto whole = read(
      bytes, [&] { return bytes.size(); }, classify_everything);
  const auto pieces = read(bytes,
                           [&] {
                             state = state * 1103515245u + 12345u;
                             return static_cast<std::size_t>((state >> 16) % 64 + 1);
                           },
                           {});
  FUZZ_CHECK(whole.replies == pieces.replies,
             "replies differ between one read and pieces: " + fuzz::show(bytes));
  FUZZ_CHECK(whole.failed == pieces.failed,
             "an error in one way of reading only: " + fuzz::show(bytes));
  return 0;
}
