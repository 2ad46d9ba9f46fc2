#pragma once
// Text a server sent, as this library shows or uses it (algorithm.md, hazard 13: a server is an
// input). An error reply, an INFO or CONFIG value, a pub/sub payload or a host name a server
// named reaches per-node records (NodeOutcome::detail, --json), log lines and error messages;
// there it must not move a terminal's cursor or clear it, break a log line in two, carry a lock
// token or a password that the server echoed, or grow without bound. Pure, no I/O.

#include <cstddef>
#include <string>
#include <string_view>

namespace redlock::detail {

// The most bytes of server text in a record, a log line or a message.
inline constexpr std::size_t server_text_max = 200;

// `text` as it may be shown, at most `max_bytes` bytes long (counting the "..." that ends it when
// it was cut; never cut inside a character or an escape):
// - an argument echo is cut off: Redis answers an unknown command with "ERR unknown command 'X',
//   with args beginning with: 'a' 'b' ", and an argument may be a token or a password;
// - a run of 32 or more hex digits (our tokens are 40 of them, a script's SHA-1 too) becomes
//   "<hex>", wherever it stands (also inside a longer word: cut short, its prefix would show);
// - control characters (C0, DEL, C1, the line and paragraph separators and the bidirectional
//   overrides, which can reorder what a terminal shows) and bytes that are not UTF-8 become
//   "\xNN", one per byte; the rest of UTF-8 is kept.
// Shown text passes through unchanged (server_text(server_text(t)) == server_text(t)), so a
// caller may shorten already shown text again with it.
[[nodiscard]] std::string server_text(std::string_view text,
                                      std::size_t max_bytes = server_text_max);

// What a server may name as a host (CLUSTER SLOTS, MOVED/ASK, Sentinel's "ip"): an IPv4 or IPv6
// address or a DNS name, 1-255 bytes of letters, digits and ".-_:%" (an IPv6 zone after "%").
// Anything else (NUL, spaces, control characters, "/", "@") is refused before it is connected
// to, printed or handed to the resolver (which would stop at a NUL and reach another host).
[[nodiscard]] bool valid_server_host(std::string_view host) noexcept;

}  // namespace redlock::detail
