// network.rules / network.readOnly: allow or deny requests by method and path
// prefix. Deny rules match leniently (method in any case, path case-insensitive
// with unreserved percent-escapes decoded), allow rules exactly: a spelling
// that slips past one is refused by the other, never let through.
#include "egress/request_rules.hpp"

#include <algorithm>
#include <cctype>

namespace exg::egress {

namespace {

bool host_matches(const std::string& pattern, const Host& host) {
  if (host.literal) return pattern == host.name;
  if (pattern.starts_with("*.")) {
    std::string_view suffix = std::string_view(pattern).substr(1);
    return host.name.size() > suffix.size() && std::string_view(host.name).ends_with(suffix);
  }
  return host.name == pattern;
}

std::string upper(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = (char)std::toupper((unsigned char)c);
  return r;
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = (char)std::tolower((unsigned char)c);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

// Unreserved characters' escapes decoded ("%61" -> "a"), then lower case: how a
// lenient server may read the path, for deny rules.
std::string lenient(std::string_view p) {
  std::string out;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '%' && i + 2 < p.size() && hex(p[i + 1]) >= 0 && hex(p[i + 2]) >= 0) {
      char c = (char)(hex(p[i + 1]) * 16 + hex(p[i + 2]));
      if (std::isalnum((unsigned char)c) || c == '-' || c == '.' || c == '_' || c == '~') {
        out += (char)std::tolower((unsigned char)c);
        i += 2;
        continue;
      }
    }
    out += (char)std::tolower((unsigned char)p[i]);
  }
  return out;
}

// "%2e" as ".", "\" as "/" (and with `slashes`, "%2f" and "%5c" as "/").
std::string decode_separators(std::string_view p, bool slashes) {
  std::string out;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '%' && i + 2 < p.size()) {
      std::string e = upper(p.substr(i, 3));
      if (e == "%2E") { out += '.'; i += 2; continue; }
      if (slashes && (e == "%2F" || e == "%5C")) { out += '/'; i += 2; continue; }
    }
    out += p[i] == '\\' ? '/' : p[i];
  }
  return out;
}

// Dot segments resolved, runs of "/" collapsed; "/" stays the root.
std::string resolve(std::string_view p) {
  std::vector<std::string_view> segs;
  bool dir = false;  // it ends as a directory: "/a/", "/a/.", "/a/.."
  size_t i = 0;
  while (i < p.size()) {
    if (p[i] == '/') {
      ++i;
      dir = true;
      continue;
    }
    size_t j = std::min(p.find('/', i), p.size());
    std::string_view seg = p.substr(i, j - i);
    i = j;
    dir = seg == "." || seg == "..";
    if (seg == "..") {
      if (!segs.empty()) segs.pop_back();
    } else if (seg != ".") {
      segs.push_back(seg);
    }
  }
  std::string out;
  for (auto s : segs) out += "/" + std::string(s);
  if (out.empty() || dir) out += "/";
  return out;
}

}  // namespace

namespace detail {

NormalizedPath normalize_target(std::string_view target) {
  NormalizedPath n;
  size_t q = target.find_first_of("?#");
  std::string_view path = target.substr(0, q);
  if (q != std::string_view::npos) n.query = std::string(target.substr(q));
  n.path = resolve(decode_separators(path, false));
  // An upstream that decodes "%2f" first would find a dot segment where this one did not.
  std::string wide = decode_separators(path, true);
  n.ambiguous = n.path != path || resolve(wide) != wide;
  return n;
}

}  // namespace detail

Result<RequestRules> RequestRules::from_policy(const policy::Network& net) {
  RequestRules rr;
  rr.read_only_ = net.read_only.value_or(false);
  rr.normalize_ = net.normalize_targets.value_or(false);
  for (const auto& r : net.rules) {
    std::string_view h = r.host.pattern;
    bool wildcard = h.starts_with("*.");
    if (wildcard) h.remove_prefix(2);
    auto host = normalise_host(h);
    if (!host) return fail(Error::msg(r.host.where.str() + ": " + r.name, host.error().why));
    rr.rules_.push_back(Rule{r.name, (wildcard ? "*." : "") + host->name, r.deny, r.methods, r.paths});
  }
  return rr;
}

std::optional<std::string> RequestRules::governing(const Host& host) const {
  for (const auto& r : rules_)
    if (host_matches(r.pattern, host)) return r.name;
  if (read_only_) return std::string("network.readOnly");
  return std::nullopt;
}

RequestRules::Verdict RequestRules::check(const Host& host, std::string_view method, std::string_view target) const {
  Verdict v;
  auto refuse = [&](const std::string& rule, const std::string& why) {
    v.decision = Decision{false, rule, why};
    return v;
  };
  auto governs = governing(host);
  if (!governs) {
    v.decision = Decision{true, "", ""};
    return v;
  }
  std::string path(target);
  if (target != "*") {
    auto n = detail::normalize_target(target);
    if (n.ambiguous) {
      std::string wide = decode_separators(n.path, true);
      if (!normalize_ || resolve(wide) != wide) {
        v.ambiguous = true;
        return refuse(*governs + " (ambiguous request target)",
                      "the path reads as another one once normalized (dot segments, %2e, \\, //)");
      }
      v.normalized_target = n.path + n.query;
    }
    path = n.path;
  }
  const std::string m(method), loose_m = upper(method), loose_p = lenient(path);
  for (const auto& r : rules_) {
    if (!r.deny || !host_matches(r.pattern, host)) continue;
    bool method_hit = r.methods.empty() || std::find(r.methods.begin(), r.methods.end(), loose_m) != r.methods.end();
    bool path_hit = r.paths.empty() || std::any_of(r.paths.begin(), r.paths.end(), [&](const std::string& p) {
                      return loose_p.starts_with(lenient(p));
                    });
    if (method_hit && path_hit) return refuse(r.name, m + " " + path + " is denied by this rule");
  }
  if (read_only_ && m != "GET" && m != "HEAD" && m != "OPTIONS")
    return refuse("network.readOnly", m + " is not GET, HEAD or OPTIONS");
  const Rule* first_allow = nullptr;
  for (const auto& r : rules_) {
    if (r.deny || !host_matches(r.pattern, host)) continue;
    if (!first_allow) first_allow = &r;
    bool method_hit = r.methods.empty() || std::find(r.methods.begin(), r.methods.end(), m) != r.methods.end();
    bool path_hit = r.paths.empty() ||
                    (target != "*" && std::any_of(r.paths.begin(), r.paths.end(),
                                                  [&](const std::string& p) { return path.starts_with(p); }));
    if (method_hit && path_hit) {
      v.decision = Decision{true, r.name, ""};
      return v;
    }
  }
  if (first_allow) return refuse(first_allow->name, m + " " + path + " is not among what the rules for this host allow");
  v.decision = Decision{true, *governs, ""};
  return v;
}

}  // namespace exg::egress
