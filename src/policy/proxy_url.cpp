// Parent proxy settings (srt's network.parentProxy): the proxy's URL and the
// NO_PROXY list, read the way srt reads them.
#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "policy/policy.hpp"

namespace exg::policy {

namespace {

PolicyError bad(std::string_view url, const std::string& why) {
  return PolicyError{"parent proxy URL " + redacted_proxy_url(url) + ": " + why};
}

std::optional<std::string> percent_decoded(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size() || !std::isxdigit((unsigned char)s[i + 1]) || !std::isxdigit((unsigned char)s[i + 2]))
      return std::nullopt;
    out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
    i += 2;
  }
  return out;
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = (char)std::tolower((unsigned char)c);
  return r;
}

}  // namespace

std::string redacted_proxy_url(std::string_view url) {
  auto scheme = url.find("://");
  size_t from = scheme == std::string_view::npos ? 0 : scheme + 3;
  auto at = url.find('@', from);
  auto slash = url.find('/', from);
  if (at == std::string_view::npos || (slash != std::string_view::npos && slash < at)) return std::string(url);
  return std::string(url.substr(0, from)) + "***" + std::string(url.substr(at));
}

PResult<ProxyUrl> parse_proxy_url(std::string_view url) {
  auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::unexpected(bad(url, "expected http://HOST[:PORT]"));
  std::string scheme = lower(url.substr(0, scheme_end));
  if (scheme != "http" && scheme != "https")
    return std::unexpected(bad(url, "unsupported scheme \"" + scheme + "\" (expected http:// or https://)"));
  std::string_view rest = url.substr(scheme_end + 3);
  if (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.find_first_of("/?#") != std::string_view::npos)
    return std::unexpected(bad(url, "a proxy URL has no path, query or fragment"));
  ProxyUrl u;
  u.tls = scheme == "https";
  if (u.tls) u.port = 443;
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view info = rest.substr(0, at);
    rest = rest.substr(at + 1);
    auto colon = info.find(':');
    auto user = percent_decoded(info.substr(0, colon));
    auto pass = percent_decoded(colon == std::string_view::npos ? std::string_view() : info.substr(colon + 1));
    if (!user || !pass) return std::unexpected(bad(url, "malformed percent-encoding in the credentials"));
    if (user->find_first_of(std::string("\0\r\n:", 4)) != std::string::npos ||
        pass->find_first_of(std::string("\0\r\n", 3)) != std::string::npos)
      return std::unexpected(bad(url, "the credentials hold a character a Basic header cannot carry"));
    u.credentials = std::make_pair(*user, *pass);
  }
  std::string_view port;
  if (rest.starts_with('[')) {
    auto close = rest.find(']');
    if (close == std::string_view::npos) return std::unexpected(bad(url, "unclosed \"[\""));
    u.host = std::string(rest.substr(1, close - 1));
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return std::unexpected(bad(url, "unexpected text after \"]\""));
      port = after.substr(1);
    }
    unsigned char b[16];
    if (inet_pton(AF_INET6, u.host.c_str(), b) != 1) return std::unexpected(bad(url, "invalid IPv6 address"));
  } else {
    auto colon = rest.rfind(':');
    u.host = lower(rest.substr(0, colon));
    if (colon != std::string_view::npos) port = rest.substr(colon + 1);
    if (u.host.empty() || !std::all_of(u.host.begin(), u.host.end(), [](char c) {
          return std::isalnum((unsigned char)c) || c == '-' || c == '.' || c == '_';
        }))
      return std::unexpected(bad(url, "invalid host"));
  }
  if (u.host.empty()) return std::unexpected(bad(url, "no host"));
  if (!port.empty() || (rest.find(':') != std::string_view::npos && !rest.starts_with('['))) {
    bool digits = !port.empty() && port.size() <= 5 &&
                  std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || std::stoul(std::string(port)) == 0 || std::stoul(std::string(port)) > 65535)
      return std::unexpected(bad(url, "invalid port (expected 1-65535)"));
    u.port = static_cast<std::uint16_t>(std::stoul(std::string(port)));
  }
  return u;
}

PResult<NoProxy> parse_no_proxy(std::string_view list) {
  NoProxy np;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string_view e = list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    start = comma == std::string_view::npos ? list.size() + 1 : comma + 1;
    while (!e.empty() && std::isspace((unsigned char)e.front())) e.remove_prefix(1);
    while (!e.empty() && std::isspace((unsigned char)e.back())) e.remove_suffix(1);
    if (e.empty()) continue;
    if (e == "*") {
      np.all = true;
      continue;
    }
    std::string v = lower(e);
    if (v.find('/') != std::string::npos) {
      np.cidrs.push_back(v);
      continue;
    }
    if (v.starts_with('[')) {  // [v6] or [v6]:port
      auto close = v.find(']');
      if (close == std::string::npos) return std::unexpected(PolicyError{"noProxy entry \"" + v + "\": unclosed \"[\""});
      np.cidrs.push_back(v.substr(1, close - 1));
      continue;
    }
    unsigned char b[16];
    if (inet_pton(AF_INET6, v.c_str(), b) == 1) {
      np.cidrs.push_back(v);
      continue;
    }
    if (auto colon = v.rfind(':'); colon != std::string::npos) v.resize(colon);  // a port: ignored, as srt does
    if (inet_pton(AF_INET, v.c_str(), b) == 1) {
      np.cidrs.push_back(v);
      continue;
    }
    if (v.starts_with("*.")) v = v.substr(2);
    else if (v.starts_with('.')) v = v.substr(1);
    if (v.empty() || !std::all_of(v.begin(), v.end(), [](char c) {
          return std::isalnum((unsigned char)c) || c == '-' || c == '.' || c == '_';
        }))
      return std::unexpected(PolicyError{"noProxy entry \"" + std::string(e) + "\" is not a name or address range"});
    np.suffixes.push_back(v);
  }
  return np;
}

}  // namespace exg::policy
