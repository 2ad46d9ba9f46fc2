#pragma once
// RESP encoding of commands, straight into a connection's write buffer (no per-command buffer).

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/capabilities.hpp"
#include "core/command.hpp"
#include "redlock/options.hpp"

namespace redlock::net::resp {

// `*<n>\r\n`
void append_array_header(std::string& out, std::size_t n);
// `$<len>\r\n<bytes>\r\n`: binary-safe
void append_bulk(std::string& out, std::string_view bytes);

// SHA-1 of data as 40 lowercase hex characters (OpenSSL), what EVALSHA names a script by.
[[nodiscard]] std::string sha1_hex(std::string_view data);
// The SHA-1 of a script's body, computed once.
[[nodiscard]] const std::string& script_sha(detail::ScriptId id);

enum class ScriptForm { evalsha, eval };
// The whole command. A script call goes out as EVALSHA <sha> (or, after NOSCRIPT, EVAL <body>)
// <numkeys> <args...>; a plain command as its args.
void append_command(std::string& out, const detail::Command& cmd,
                    ScriptForm form = ScriptForm::evalsha);

}  // namespace redlock::net::resp

namespace redlock::net {

// A command encoded once for every node it goes to (each connection copies the bytes into its
// write buffer). The command itself stays for a script's EVAL retry after NOSCRIPT.
struct Request {
  detail::Command command;
  std::string wire;  // RESP; a script call in its EVALSHA form
  // A write whose answer is a vote (acquire, extend): with replicated votes on, the node makes
  // sure replicas have it before the vote counts (replicated.hpp).
  bool gives_vote = false;
  // A plain lock's release or extend (detail::native_kind): its native forms, indexed by
  // detail::NativeForm, each encoded once for every node of the round, on the first node that
  // picks it (native()): most servers run neither form, and building both for every release
  // was a third of a lock cycle's allocations. Requests live on one engine's loop thread, so
  // building one late needs no lock. A node that has no native form gets the script.
  detail::NativeKind native_kind = detail::NativeKind::none;
  mutable std::array<std::unique_ptr<const Request>, detail::native_form_count> natives;
  // Set on a native form: which one, and the script call it stands for (sent instead when the
  // node refuses the native command). The form is owned by that request: see native().
  std::optional<detail::NativeForm> form;
  const Request* script_form = nullptr;

  [[nodiscard]] static std::shared_ptr<const Request> make(detail::Command c,
                                                           bool gives_vote = false) {
    auto r = std::make_shared<Request>();
    r->command = std::move(c);
    r->gives_vote = gives_vote;
    resp::append_command(r->wire, r->command);
    r->native_kind = detail::native_kind(r->command);
    return r;
  }
  // The native form `form` of `req` (nullptr when it has none), sharing `req`'s ownership: the
  // script call it stands for lives as long as it does. Built on the first call for that form.
  [[nodiscard]] static std::shared_ptr<const Request> native(
      const std::shared_ptr<const Request>& req, detail::NativeForm form) {
    if (req->native_kind == detail::NativeKind::none ||
        (form == detail::NativeForm::set_ifeq) != (req->native_kind == detail::NativeKind::extend))
      return nullptr;
    auto& n = req->natives[static_cast<std::size_t>(form)];
    if (!n) {
      auto built = std::make_unique<Request>();
      built->command = detail::native_command(req->command, form);
      built->gives_vote = req->gives_vote;
      resp::append_command(built->wire, built->command);
      built->form = form;
      built->script_form = req.get();
      n = std::move(built);
    }
    return std::shared_ptr<const Request>(req, n.get());
  }
  // The script call a native form stands for (sharing its ownership).
  [[nodiscard]] static std::shared_ptr<const Request> script_of(
      const std::shared_ptr<const Request>& native) {
    return std::shared_ptr<const Request>(native, native->script_form);
  }
};

// The AUTH command of a node ("AUTH [user] password"), or nullptr when its address has no
// password. Kept by the node for every reconnect; when the last holder lets it go, its encoded
// bytes and its arguments are overwritten (detail::wipe) before the memory is freed.
[[nodiscard]] std::shared_ptr<const Request> auth_request(const NodeAddress& address);

}  // namespace redlock::net
