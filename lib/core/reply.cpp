#include "core/reply.hpp"

#include "core/server_text.hpp"

namespace redlock::detail {

void Reply::clear() noexcept {
  type = Type::nil;
  integer = 0;
  // Small capacity is kept for the next reply; what one large reply needed is given back.
  if (str.capacity() > 64 * 1024) {
    std::string().swap(str);
  } else {
    str.clear();
  }
  if (elements.capacity() > 1024) {
    std::vector<Reply>().swap(elements);
  } else {
    elements.clear();
  }
}

std::string Reply::describe() const {
  switch (type) {
    case Type::nil:
      return "(nil)";
    case Type::status:
      return server_text(str, 64);
    case Type::error:
      return "(error) " + server_text(str);
    case Type::integer:
      return "(integer) " + std::to_string(integer);
    case Type::string:
      return "(string of " + std::to_string(str.size()) + " bytes)";
    case Type::array:
      return "(array of " + std::to_string(elements.size()) + ")";
  }
  return "(?)";
}

std::string auth_error_text(std::string_view server_said, std::string_view password) {
  // The password is replaced in the server's own bytes, before server_text() escapes them and
  // cuts the echo of the arguments off.
  std::string text(server_said);
  if (!password.empty()) {
    for (auto at = text.find(password); at != std::string::npos; at = text.find(password, at + 3))
      text.replace(at, password.size(), "***");
  }
  return server_text(text);
}

}  // namespace redlock::detail
