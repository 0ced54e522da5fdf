// Syntax checks for filesystem globs and network domain patterns. They only
// decide whether a pattern is well-formed; matching lives with the layers.
#include <arpa/inet.h>

#include <string>

#include "policy/policy.hpp"

namespace exg::policy {

namespace {

std::string in_quotes(std::string_view s) { return "\"" + std::string(s) + "\""; }

bool ascii_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// Canonical dotted quad only: shorthand forms ("127.1") are how host matching
// gets fooled, so a pattern must spell the address out.
bool is_ipv4(std::string_view s) {
  in_addr a{};
  std::string z(s);
  return inet_pton(AF_INET, z.c_str(), &a) == 1;
}

std::optional<std::string> check_port(std::string_view port) {
  if (!all_digits(port) || port.size() > 5 || port[0] == '0') {
    return "invalid port " + in_quotes(port) + " (expected 1-65535)";
  }
  if (std::stoul(std::string(port)) > 65535) return "invalid port " + in_quotes(port) + " (expected 1-65535)";
  return std::nullopt;
}

}  // namespace

std::optional<std::string> check_glob(std::string_view p) {
  if (p.empty()) return "empty path";
  if (p.find('\0') != std::string_view::npos) return "path contains a NUL byte";
  for (std::size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\') {
      if (i + 1 == p.size()) return "trailing backslash in " + in_quotes(p);
      ++i;  // escaped character
    } else if (c == '[') {
      std::size_t j = i + 1;
      if (j < p.size() && p[j] == '!') ++j;
      std::size_t first = j;
      bool closed = false;
      for (; j < p.size(); ++j) {
        if (p[j] == ']') {
          closed = true;
          break;
        }
        if (p[j] == '/') break;  // a class never spans components
        if (p[j] == '\\' && j + 1 < p.size()) ++j;
      }
      if (!closed) return "unclosed '[' in " + in_quotes(p);
      if (j == first) return "empty '[]' in " + in_quotes(p) + " matches nothing";
      for (std::size_t k = first; k + 2 < j; ++k) {
        if (p[k + 1] == '-' && p[k] > p[k + 2]) {
          return "reversed range '" + std::string(p.substr(k, 3)) + "' in " + in_quotes(p);
        }
      }
      i = j;
    } else if (c == '*' && i + 1 < p.size() && p[i + 1] == '*') {
      // "**" matches whole directories, so it must be a whole component.
      bool starts = i == 0 || p[i - 1] == '/';
      bool ends = i + 2 == p.size() || p[i + 2] == '/';
      if (!starts || !ends) return "'**' must be a whole path component (like a/**/b) in " + in_quotes(p);
      ++i;
    }
  }
  return std::nullopt;
}

std::optional<std::string> check_domain_pattern(std::string_view pattern, bool denied) {
  const std::string q = in_quotes(pattern);
  if (pattern.empty()) return std::string("empty domain");
  for (char c : pattern) {
    if (c == '\0' || c == '\r' || c == '\n') return "control character in domain " + q;
    if (c == ' ' || c == '\t' || c == '\v' || c == '\f') return "whitespace in domain " + q;
  }
  if (pattern.find("://") != std::string_view::npos) {
    return "domain " + q + " contains a URL scheme; write the host name only";
  }
  if (pattern.find('/') != std::string_view::npos) return "domain " + q + " contains a path; write the host name only";
  if (pattern.find('%') != std::string_view::npos) return "'%' is not allowed in domain " + q;
  // srt 0.0.83: "*:22" in deniedDomains denies every host on that port.
  if (denied && pattern.starts_with("*:")) {
    if (auto e = check_port(pattern.substr(2))) return *e + " in domain " + q;
    return std::nullopt;
  }
  if (pattern == "*") {
    if (denied) return std::nullopt;
    return std::string("a bare \"*\" in allowedDomains would allow every host; list the domains instead");
  }

  std::string_view host = pattern;
  std::string_view port;
  if (host.front() == '[') {  // [IPv6] or [IPv6]:port
    auto close = host.find(']');
    if (close == std::string_view::npos) return "unclosed '[' in domain " + q;
    std::string_view after = host.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return "unexpected text after ']' in domain " + q;
      port = after.substr(1);
      if (auto e = check_port(port)) return *e + " in domain " + q;
    }
    std::string addr(host.substr(1, close - 1));
    in6_addr a6{};
    if (inet_pton(AF_INET6, addr.c_str(), &a6) != 1) return "invalid IPv6 address in domain " + q;
    return std::nullopt;
  }
  if (auto colon = host.rfind(':'); colon != std::string_view::npos) {
    if (host.find(':') != colon) return "IPv6 addresses must be in brackets, like [::1], in domain " + q;
    port = host.substr(colon + 1);
    host = host.substr(0, colon);
    if (auto e = check_port(port)) return *e + " in domain " + q;
  }

  bool wildcard = host.starts_with("*.");
  std::string_view name = wildcard ? host.substr(2) : host;
  if (name.find('*') != std::string_view::npos) {
    return "'*' is only allowed as the whole first label (like *.example.com) in domain " + q;
  }
  if (name.empty()) return "empty host name in domain " + q;
  if (name.size() > 253) return "host name longer than 253 characters in domain " + q;

  std::size_t labels = 0;
  std::string_view last_label;
  for (std::size_t start = 0;;) {
    auto dot = name.find('.', start);
    std::string_view label = name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty()) return "empty label in domain " + q;
    if (label.size() > 63) return "label longer than 63 characters in domain " + q;
    for (char c : label) {
      if (!ascii_alnum(c) && c != '-' && c != '_') {
        return "invalid character '" + std::string(1, c) + "' in domain " + q;
      }
    }
    ++labels;
    last_label = label;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  // No top-level domain is all digits, so such a name must be an IPv4 address.
  if (all_digits(last_label)) {
    if (wildcard) return "a wildcard over an IP address is meaningless in domain " + q;
    if (!is_ipv4(name)) return "invalid IPv4 address in domain " + q + " (write all four parts)";
  }
  if (wildcard && labels < 2 && !denied) {
    return "wildcard " + q + " covers a whole top-level domain; name a domain under it";
  }
  return std::nullopt;
}

}  // namespace exg::policy
