#include "net/resp.hpp"

#include <openssl/evp.h>

#include <array>
#include <charconv>
#include <stdexcept>

#include "core/secret.hpp"

namespace redlock::net::resp {
namespace {

void append_line(std::string& out, char type, std::size_t n) {
  char num[24];
  auto [p, ec] = std::to_chars(num, num + sizeof num, n);
  (void)ec;  // 24 characters hold any size_t
  out += type;
  out.append(num, p);
  out += "\r\n";
}

}  // namespace

std::string sha1_hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha1(), nullptr) != 1 || len != 20) {
    throw std::runtime_error("OpenSSL could not compute a SHA-1");
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(40, '0');
  for (unsigned i = 0; i < 20; ++i) {
    out[2 * i] = hex[md[i] >> 4];
    out[2 * i + 1] = hex[md[i] & 15];
  }
  return out;
}

const std::string& script_sha(detail::ScriptId id) {
  static const auto all = [] {
    std::array<std::string, detail::script_count()> a;
    for (std::size_t i = 0; i < a.size(); ++i)
      a[i] = sha1_hex(detail::script_body(static_cast<detail::ScriptId>(i)));
    return a;
  }();
  return all[static_cast<std::size_t>(id)];
}

void append_array_header(std::string& out, std::size_t n) { append_line(out, '*', n); }

void append_bulk(std::string& out, std::string_view bytes) {
  append_line(out, '$', bytes.size());
  out.append(bytes);
  out += "\r\n";
}

void append_command(std::string& out, const detail::Command& cmd, ScriptForm form) {
  // One allocation for the whole command rather than a regrowth every few arguments: each
  // argument costs its bytes and at most 16 of framing ("$<len>\r\n" and "\r\n").
  std::size_t size = out.size() + 16 + 16 * 3 + 40;  // header, EVALSHA, sha, numkeys
  if (cmd.script && form != ScriptForm::evalsha) size += detail::script_body(*cmd.script).size();
  for (const auto& a : cmd.args) size += a.size() + 16;
  out.reserve(size);
  if (!cmd.script) {
    append_array_header(out, cmd.args.size());
    for (const auto& a : cmd.args) append_bulk(out, a);
    return;
  }
  append_array_header(out, cmd.args.size() + 3);
  if (form == ScriptForm::evalsha) {
    append_bulk(out, "EVALSHA");
    append_bulk(out, script_sha(*cmd.script));
  } else {
    append_bulk(out, "EVAL");
    append_bulk(out, detail::script_body(*cmd.script));
  }
  char num[16];
  auto [p, ec] = std::to_chars(num, num + sizeof num, cmd.numkeys);
  (void)ec;
  append_bulk(out, std::string_view(num, static_cast<std::size_t>(p - num)));
  for (const auto& a : cmd.args) append_bulk(out, a);
}

}  // namespace redlock::net::resp

namespace redlock::net {

std::shared_ptr<const Request> auth_request(const NodeAddress& address) {
  if (address.password.empty()) return nullptr;
  detail::Command auth = detail::Command::plain({"AUTH"});
  if (!address.user.empty()) auth.arg(address.user);
  auth.arg(address.password);
  auto r = std::shared_ptr<Request>(new Request, [](Request* q) {
    detail::wipe(q->wire);
    for (auto& a : q->command.args) detail::wipe(a);
    delete q;
  });
  r->command = std::move(auth);
  // Room for all of it first: a buffer outgrown while appending would be freed unwiped.
  std::size_t size = 16;
  for (const auto& a : r->command.args) size += a.size() + 32;
  r->wire.reserve(size);
  resp::append_command(r->wire, r->command);
  return r;
}

}  // namespace redlock::net
