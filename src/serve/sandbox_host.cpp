#include "serve/sandbox_host.hpp"

#include <algorithm>
#include <cctype>

namespace exg::serve {

namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

}  // namespace

std::optional<SandboxHost> parse_sandbox_host(std::string_view host, std::string_view domain) {
  if (domain.empty()) return std::nullopt;
  if (auto colon = host.rfind(':'); colon != std::string_view::npos) host = host.substr(0, colon);
  if (!host.empty() && host.back() == '.') host.remove_suffix(1);  // an absolute name
  if (host.size() <= domain.size() + 1 || host[host.size() - domain.size() - 1] != '.' ||
      !same_name(host.substr(host.size() - domain.size()), domain))
    return std::nullopt;
  std::string_view label = host.substr(0, host.size() - domain.size() - 1);
  auto dash = label.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash > 5 || label.find('.') != std::string_view::npos) return std::nullopt;
  std::string_view port = label.substr(0, dash), id = label.substr(dash + 1);
  if (!std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  if (id.empty() || id.size() > 64 || !std::all_of(id.begin(), id.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
      }))
    return std::nullopt;
  SandboxHost out{std::string(port), std::string(id)};
  std::transform(out.id.begin(), out.id.end(), out.id.begin(), lower);
  return out;
}

std::string domain_error(std::string_view domain) {
  if (domain.empty() || domain.size() > 200) return "expected a host name of 1-200 characters";
  size_t start = 0;
  while (start <= domain.size()) {
    size_t dot = domain.find('.', start);
    std::string_view label = domain.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-' ||
        !std::all_of(label.begin(), label.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; }))
      return "not a host name (labels of letters, digits and '-' joined by '.')";
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return "";
}

}  // namespace exg::serve
