// Egress rules: host normalisation and the two decisions (by name, by
// address). See rules.hpp for the contract.
#include "egress/rules.hpp"

#include "egress/host_addresses.hpp"

#include <ifaddrs.h>
#include <idn2.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace exg::egress {

namespace {

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

Error bad_host(std::string_view raw, std::string why) {
  // Never echo control bytes into messages and logs.
  std::string shown;
  for (unsigned char c : raw.substr(0, 80)) {
    if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      shown += "\\x";
      shown += hex[c >> 4];
      shown += hex[c & 15];
    } else {
      shown += static_cast<char>(c);
    }
  }
  if (raw.size() > 80) shown += "...";
  return Error::msg("host " + quoted(shown), std::move(why));
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// WHATWG URL "ends in a number": the last label is all digits, or "0x"
// followed by hex digits (possibly none). Such a name can only be an IPv4
// address; if it is not a valid one, it is malformed (never a name).
bool looks_numeric(std::string_view name) {
  auto dot = name.rfind('.');
  std::string_view last = dot == std::string_view::npos ? name : name.substr(dot + 1);
  if (last.empty()) return false;
  if (std::all_of(last.begin(), last.end(), is_digit)) return true;
  if (last.size() >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X')) {
    return std::all_of(last.begin() + 2, last.end(), is_hex);
  }
  return false;
}

// inet_aton(3) forms: 1 to 4 parts, each decimal, octal (leading 0) or hex
// (0x, at least one digit); the last part fills the remaining bytes.
std::optional<IpAddress> parse_inet_aton(std::string_view s) {
  uint64_t parts[4];
  int n = 0;
  for (std::size_t start = 0;;) {
    if (n == 4) return std::nullopt;
    auto dot = s.find('.', start);
    std::string_view p = s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (p.empty()) return std::nullopt;
    int base = 10;
    if (p.size() >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
      base = 16;
      p.remove_prefix(2);
      if (p.empty()) return std::nullopt;
    } else if (p.size() >= 2 && p[0] == '0') {
      base = 8;
      p.remove_prefix(1);
    }
    uint64_t v = 0;
    for (char c : p) {
      int d;
      if (is_digit(c)) {
        d = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        d = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        d = c - 'A' + 10;
      } else {
        return std::nullopt;
      }
      if (d >= base) return std::nullopt;
      v = v * base + d;
      if (v > 0xffffffffull) return std::nullopt;
    }
    parts[n++] = v;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  uint64_t value = 0;
  for (int i = 0; i < n - 1; ++i) {
    if (parts[i] > 255) return std::nullopt;
    value |= parts[i] << (8 * (3 - i));
  }
  uint64_t last_max = 0xffffffffull >> (8 * (n - 1));
  if (parts[n - 1] > last_max) return std::nullopt;
  value |= parts[n - 1];
  IpAddress r;
  r.bytes[0] = static_cast<uint8_t>(value >> 24);
  r.bytes[1] = static_cast<uint8_t>(value >> 16);
  r.bytes[2] = static_cast<uint8_t>(value >> 8);
  r.bytes[3] = static_cast<uint8_t>(value);
  return r;
}

Host literal_host(const IpAddress& a) { return Host{a.str(), a}; }

bool refused_class(AddressClass c) {
  return c != AddressClass::Global && c != AddressClass::Documentation;
}

std::string class_phrase(const IpAddress& a, AddressClass c) {
  return a.str() + " is " + to_string(c);
}

Decision host_own_refusal(const IpAddress& a, const HostAddresses& own) {
  if (own.blind())
    return Decision{false, class_phrase(a, AddressClass::HostOwn) + " (the host's address list overflowed and could not be re-read)",
                    "resolved address may be an address of this host"};
  return Decision{false, class_phrase(a, AddressClass::HostOwn), "resolved address is an address of this host"};
}

// Split "name", "name:port", "[v6]", "[v6]:port" (patterns validated by the
// policy loader; here only re-checked as far as needed to be safe).
Result<std::pair<std::string_view, std::optional<uint16_t>>> split_port(std::string_view pattern,
                                                                        const std::string& what) {
  std::string_view host = pattern;
  std::string_view port;
  if (!host.empty() && host.front() == '[') {
    auto close = host.find(']');
    if (close == std::string_view::npos) return fail(Error::msg(what, "unclosed '['"));
    std::string_view after = host.substr(close + 1);
    host = host.substr(0, close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return fail(Error::msg(what, "unexpected text after ']'"));
      port = after.substr(1);
      if (port.empty()) return fail(Error::msg(what, "empty port"));
    }
  } else if (auto colon = host.rfind(':'); colon != std::string_view::npos) {
    if (host.find(':') != colon) return fail(Error::msg(what, "IPv6 addresses must be in brackets"));
    port = host.substr(colon + 1);
    host = host.substr(0, colon);
    if (port.empty()) return fail(Error::msg(what, "empty port"));
  }
  if (port.empty()) return std::pair{host, std::optional<uint16_t>{}};
  if (port.size() > 5 || port[0] == '0' || !std::all_of(port.begin(), port.end(), is_digit)) {
    return fail(Error::msg(what, "invalid port " + quoted(port)));
  }
  unsigned long p = std::strtoul(std::string(port).c_str(), nullptr, 10);
  if (p < 1 || p > 65535) return fail(Error::msg(what, "invalid port " + quoted(port)));
  return std::pair{host, std::optional<uint16_t>(static_cast<uint16_t>(p))};
}

}  // namespace

Result<Host> normalise_host(std::string_view raw) {
  if (raw.empty()) return fail(bad_host(raw, "empty host"));
  if (raw.size() > 1024) return fail(bad_host(raw, "host name too long"));
  for (unsigned char c : raw) {
    if (c == 0) return fail(bad_host(raw, "NUL byte in host"));
    if (c == '\r' || c == '\n') return fail(bad_host(raw, "line break in host"));
    if (c < 0x20 || c == 0x7f) return fail(bad_host(raw, "control character in host"));
    if (c == ' ') return fail(bad_host(raw, "space in host"));
    if (c == '%') return fail(bad_host(raw, "'%' in host (encoded names and zone ids are refused)"));
    if (c == '/') return fail(bad_host(raw, "'/' in host"));
    if (c == '@') return fail(bad_host(raw, "'@' in host (userinfo is refused)"));
    if (c == '\\') return fail(bad_host(raw, "'\\' in host"));
  }

  // IPv6, bracketed or bare.
  if (raw.front() == '[') {
    if (raw.back() != ']' || raw.size() < 3) return fail(bad_host(raw, "malformed bracketed IPv6 address"));
    auto a = parse_ip(raw.substr(1, raw.size() - 2));
    if (!a || !a->v6) return fail(bad_host(raw, "malformed bracketed IPv6 address"));
    return literal_host(*a);
  }
  if (raw.find(':') != std::string_view::npos) {
    auto a = parse_ip(raw);
    if (!a || !a->v6) return fail(bad_host(raw, "':' in host (not an IPv6 address; ports go separately)"));
    return literal_host(*a);
  }

  std::string name(raw);
  if (name.size() > 1 && name.back() == '.') name.pop_back();

  bool ascii = std::all_of(name.begin(), name.end(), [](unsigned char c) { return c < 0x80; });
  if (!ascii) {
    char* out = nullptr;
    int rc = idn2_to_ascii_8z(name.c_str(), &out, IDN2_NONTRANSITIONAL | IDN2_NFC_INPUT);
    std::unique_ptr<char, decltype(&idn2_free)> owned(out, &idn2_free);
    if (rc != IDN2_OK || !out) {
      return fail(bad_host(raw, std::string("invalid internationalised name: ") + idn2_strerror(rc)));
    }
    name = out;
    // UTS 46 maps ideographic full stops to '.', so a trailing one becomes a trailing dot.
    if (name.size() > 1 && name.back() == '.') name.pop_back();
  }
  for (char& c : name) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }

  // Checked after IDNA: full-width digits map to ASCII digits.
  if (looks_numeric(name)) {
    auto a = parse_inet_aton(name);
    if (!a) return fail(bad_host(raw, "malformed IPv4 address"));
    return literal_host(*a);
  }

  if (name.size() > 253) return fail(bad_host(raw, "host name longer than 253 characters"));
  for (std::size_t start = 0;;) {
    auto dot = name.find('.', start);
    std::size_t len = (dot == std::string::npos ? name.size() : dot) - start;
    if (len == 0) return fail(bad_host(raw, "empty label in host"));
    if (len > 63) return fail(bad_host(raw, "label longer than 63 characters in host"));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || is_digit(c) || c == '-' || c == '_' || c == '.';
    if (!ok) return fail(bad_host(raw, "invalid character '" + std::string(1, c) + "' in host"));
  }
  return Host{std::move(name), std::nullopt};
}

// ---- Rules ----

Result<Rules> Rules::from_policy(const policy::Network& net) {
  Rules r;
  auto domains = [](const std::vector<policy::DomainEntry>& list, const char* key, bool denied,
                    std::vector<DomainRule>* out) -> std::optional<Error> {
    for (std::size_t i = 0; i < list.size(); ++i) {
      const auto& e = list[i];
      std::string label = std::string(key) + "[" + std::to_string(i) + "] " + quoted(e.pattern);
      std::string what = (e.where.file.empty() ? "" : e.where.str() + ": ") + label;
      if (e.pattern == "*") {
        if (!denied) return Error::msg(what, "a bare \"*\" is allowed only in deniedDomains");
        out->push_back(DomainRule{"*", std::nullopt, label});
        continue;
      }
      auto split = split_port(e.pattern, what);
      if (!split) return split.error();
      auto [host, port] = *split;
      if (host == "*") {  // "*:22": every host on that port (deniedDomains only)
        if (!denied) return Error::msg(what, "a bare \"*\" is allowed only in deniedDomains");
        out->push_back(DomainRule{"*", port, label});
        continue;
      }
      bool wildcard = host.starts_with("*.");
      if (wildcard) host.remove_prefix(2);
      auto h = normalise_host(host);
      if (!h) return Error::msg(what, h.error().why);
      if (wildcard && h->literal) return Error::msg(what, "a wildcard over an IP address is meaningless");
      if (wildcard && h->name.find('.') == std::string::npos && !denied) {
        return Error::msg(what, "a wildcard over a whole top-level domain is refused in allowedDomains");
      }
      out->push_back(DomainRule{wildcard ? "*." + h->name : h->name, port, label});
    }
    return std::nullopt;
  };
  if (auto e = domains(net.allowed_domains, "allowedDomains", false, &r.allow_)) return fail(*e);
  if (auto e = domains(net.denied_domains, "deniedDomains", true, &r.deny_)) return fail(*e);
  // deniedDomainReasons: keyed by the entry exactly as written.
  for (std::size_t i = 0; i < net.denied_domains.size(); ++i)
    for (const auto& [entry, why] : net.denied_domain_reasons)
      if (entry == net.denied_domains[i].pattern) r.deny_[i].reason = why;
  for (std::size_t i = 0; i < net.denied_resolved_addresses.size(); ++i) {
    const auto& e = net.denied_resolved_addresses[i];
    std::string label = "deniedResolvedAddresses[" + std::to_string(i) + "] " + quoted(e.pattern);
    auto c = parse_cidr(e.pattern);
    if (!c) return fail(Error::msg((e.where.file.empty() ? "" : e.where.str() + ": ") + label, "invalid CIDR"));
    r.deny_resolved_.emplace_back(*c, label);
  }
  for (std::size_t i = 0; i < net.allowed_cidrs.size(); ++i) {
    const auto& e = net.allowed_cidrs[i];
    std::string label = "allowedCidrs[" + std::to_string(i) + "] " + quoted(e.pattern);
    auto c = parse_cidr(e.pattern);
    if (!c) {
      return fail(Error::msg((e.where.file.empty() ? "" : e.where.str() + ": ") + label,
                             "invalid CIDR (expected an address or address/prefix, host bits clear)"));
    }
    r.allow_cidrs_.emplace_back(*c, label);
  }
  return r;
}

namespace {

// Does a (normalised) domain rule match the host? Literal rules match the same
// destination (an IPv4 rule also matches its IPv4-mapped spelling); name and
// wildcard rules never match literals.
bool pattern_matches(std::string_view pattern, const Host& host) {
  if (pattern == "*") return true;
  if (host.literal) {
    auto p = parse_ip(pattern);
    return p && unmapped(*p) == unmapped(*host.literal);
  }
  if (pattern.starts_with("*.")) {
    std::string_view suffix = pattern.substr(1);  // ".example.com"
    return host.name.size() > suffix.size() && std::string_view(host.name).ends_with(suffix);
  }
  return host.name == pattern;
}

}  // namespace

Decision Rules::check_host(const Host& host, uint16_t port) const {
  auto applies = [&](const DomainRule& r) { return (!r.port || *r.port == port) && pattern_matches(r.pattern, host); };
  for (const auto& r : deny_) {
    if (applies(r)) return Decision{false, r.label, r.reason.empty() ? "host is denied by policy" : r.reason};
  }
  if (host.literal) {
    for (const auto& [cidr, label] : allow_cidrs_) {
      if (cidr.contains(*host.literal)) return Decision{true, label, ""};
    }
    return Decision{false, "literal address without a CIDR rule",
                    "IP addresses are not allowed; use a host name or add a CIDR rule"};
  }
  for (const auto& r : allow_) {
    if (applies(r)) return Decision{true, r.label, ""};
  }
  return Decision{false, "default deny (not on the allow list)", "host is not on the allow list"};
}

bool Rules::allow_list_matches(const Host& host, uint16_t port) const {
  for (const auto& r : allow_) {
    if ((!r.port || *r.port == port) && pattern_matches(r.pattern, host)) return true;
  }
  return false;
}

Decision Rules::check_name(const Host& host) const {
  if (host.literal) return Decision{false, "literal address", "an address is not a name to resolve"};
  for (const auto& r : deny_) {
    if (!r.port && pattern_matches(r.pattern, host))
      return Decision{false, r.label, r.reason.empty() ? "host is denied by policy" : r.reason};
  }
  for (const auto& r : allow_) {
    if (pattern_matches(r.pattern, host)) return Decision{true, r.label, ""};
  }
  return Decision{false, "default deny (not on the allow list)", "host is not on the allow list"};
}

Decision Rules::check_address(const IpAddress& addr) const {
  // A denied literal stays denied whatever name led to it (only rules without
  // a port: the port is not known here, the name step has checked it).
  Host as_host = literal_host(addr);
  for (const auto& r : deny_) {
    if (r.port || r.pattern == "*") continue;
    if (parse_ip(r.pattern) && pattern_matches(r.pattern, as_host)) {
      return Decision{false, r.label, r.reason.empty() ? "address is denied by policy" : r.reason};
    }
  }
  // deniedResolvedAddresses beat the CIDR rules, except one naming exactly this
  // address (srt: the literal itself listed as allowed).
  IpAddress bare = unmapped(addr);
  for (const auto& [cidr, label] : deny_resolved_) {
    if (!cidr.contains(bare) && !cidr.contains(addr)) continue;
    bool exact = std::any_of(allow_cidrs_.begin(), allow_cidrs_.end(), [&](const auto& a) {
      return a.first.prefix == (a.first.base.v6 ? 128 : 32) && (a.first.contains(bare) || a.first.contains(addr));
    });
    if (!exact) return Decision{false, label, "resolved address is denied by policy"};
  }
  // An explicit CIDR rule is the only way to any special range, and to the
  // host's own addresses.
  for (const auto& [cidr, label] : allow_cidrs_) {
    if (cidr.contains(addr)) return Decision{true, label, ""};
  }
  AddressClass c = classify(addr);
  // Documentation ranges (192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32)
  // are classified as such but ALLOWED, like global addresses: ExGuardian's own
  // tests run public-looking upstreams on TEST-NET addresses inside a private
  // network namespace, and no real host lives there.
  if (refused_class(c)) {
    return Decision{false, class_phrase(addr, c), std::string("resolved address is ") + to_string(c)};
  }
  if (own_ && own_->contains(addr)) return host_own_refusal(addr, *own_);
  return Decision{true, class_phrase(addr, c), ""};
}

void Rules::set_host_addresses(std::vector<IpAddress> own) { own_ = std::make_shared<const HostAddresses>(own); }

void Rules::follow_host_addresses(std::shared_ptr<const HostAddresses> own) { own_ = std::move(own); }

uint64_t Rules::host_mark() const { return own_ ? own_->mark() : 0; }

Decision Rules::recheck_host_own(const IpAddress& addr, uint64_t mark) const {
  for (const auto& [cidr, label] : allow_cidrs_)
    if (cidr.contains(addr)) return Decision{true, label, ""};
  if (own_ && own_->gained_since(addr, mark)) return host_own_refusal(addr, *own_);
  return Decision{true, "", ""};
}

Result<std::vector<IpAddress>> Rules::read_host_addresses() {
  std::vector<IpAddress> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return fail(Error::sys("list this host's addresses (getifaddrs)"));
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    auto a = IpAddress::from_sockaddr(i->ifa_addr);
    if (a && std::find(out.begin(), out.end(), *a) == out.end()) out.push_back(*a);
  }
  freeifaddrs(list);
  return out;
}

Result<void> Rules::refresh_host_addresses() {
  auto own = read_host_addresses();
  if (!own) return fail(Error::msg("egress", own.error().str() + ": the proxy refuses them, so it cannot start without them"));
  set_host_addresses(std::move(*own));
  return {};
}

bool Rules::empty() const { return allow_.empty() && allow_cidrs_.empty(); }

}  // namespace exg::egress
