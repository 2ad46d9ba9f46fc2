#include "net/resp.hpp"

#include <charconv>

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

void append_array_header(std::string& out, std::size_t n) { append_line(out, '*', n); }

void append_bulk(std::string& out, std::string_view bytes) {
  append_line(out, '$', bytes.size());
  out.append(bytes);
  out += "\r\n";
}

void append_command(std::string& out, const detail::Command& cmd, ScriptForm form) {
  if (!cmd.script) {
    append_array_header(out, cmd.args.size());
    for (const auto& a : cmd.args) append_bulk(out, a);
    return;
  }
  const auto& s = detail::script(*cmd.script);
  append_array_header(out, cmd.args.size() + 3);
  if (form == ScriptForm::evalsha) {
    append_bulk(out, "EVALSHA");
    append_bulk(out, s.sha);
  } else {
    append_bulk(out, "EVAL");
    append_bulk(out, s.body);
  }
  char num[16];
  auto [p, ec] = std::to_chars(num, num + sizeof num, cmd.numkeys);
  (void)ec;
  append_bulk(out, std::string_view(num, static_cast<std::size_t>(p - num)));
  for (const auto& a : cmd.args) append_bulk(out, a);
}

}  // namespace redlock::net::resp
