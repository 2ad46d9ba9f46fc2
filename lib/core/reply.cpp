#include "core/reply.hpp"

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
      return str.size() <= 64 ? str : str.substr(0, 64) + "...";
    case Type::error:
      return "(error) " + (str.size() <= 200 ? str : str.substr(0, 200) + "...");
    case Type::integer:
      return "(integer) " + std::to_string(integer);
    case Type::string:
      return "(string of " + std::to_string(str.size()) + " bytes)";
    case Type::array:
      return "(array of " + std::to_string(elements.size()) + ")";
  }
  return "(?)";
}

std::string auth_error_text(std::string_view server_text, std::string_view password) {
  std::string text(server_text.substr(0, server_text.find("with args")));
  while (!text.empty() && (text.back() == ' ' || text.back() == ',')) text.pop_back();
  if (password.empty()) return text;
  for (auto at = text.find(password); at != std::string::npos; at = text.find(password, at + 3))
    text.replace(at, password.size(), "***");
  return text;
}

}  // namespace redlock::detail
