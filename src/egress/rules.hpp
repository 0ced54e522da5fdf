// Egress rules: which (host, port) the sandbox may reach, decided twice: once
// on the name as the client spelled it, once on every address it resolves to.
// Deny beats allow; exact names case-insensitive; "*.example.com" matches
// subdomains only; optional ":port"; IP literals only through CIDR rules;
// loopback, link-local (all of 169.254/16, fe80::/10), private, CGNAT, ULA,
// multicast, broadcast, unspecified, IPv4-mapped/-compatible forms and the
// host's own interface addresses are refused unless a CIDR rule allows them.
#pragma once
#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/policy.hpp"
#include "util/error.hpp"

namespace exg::egress {

class HostAddresses;  // host_addresses.hpp

// An IPv4 or IPv6 address (IPv4 stored as such, never as mapped IPv6).
struct IpAddress {
  bool v6 = false;
  uint8_t bytes[16] = {};  // v4 uses the first 4
  std::string str() const;  // "203.0.113.10", "2001:db8::1"
  bool operator==(const IpAddress&) const = default;
  static std::optional<IpAddress> from_sockaddr(const sockaddr* sa);
};

struct Cidr {
  IpAddress base;
  int prefix = 0;
  bool contains(const IpAddress& a) const;
  std::string str() const;
};
std::optional<Cidr> parse_cidr(std::string_view s);  // "10.0.0.0/8", "fc00::/7", "192.0.2.1" (= /32)
// Refused by parse_cidr: host bits set ("10.0.0.5/8"), odd IPv4 spellings, zones,
// prefixes with leading zeros. "[2001:db8::]/32" is accepted.

// A strictly written address: canonical dotted quad or IPv6 text (no brackets,
// no zone, no shorthand IPv4).
std::optional<IpAddress> parse_ip(std::string_view s);
// The IPv4 address an IPv6 form carries: mapped (::ffff:0:0/96), SIIT
// (::ffff:0:0:0/96), compatible (::/96), NAT64 (64:ff9b::/96), 6to4 (2002::/16).
std::optional<IpAddress> embedded_v4(const IpAddress& a);
// The same destination without the IPv4-mapped wrapping: ::ffff:a.b.c.d becomes
// a.b.c.d, anything else is returned unchanged.
IpAddress unmapped(const IpAddress& a);

// A host as a client may spell it. Names are lower-cased, a trailing dot is
// dropped, IDNA U-labels become A-labels ("xn--..."); IPv4 in any inet_aton
// spelling (127.1, 0x7f.1, 2130706433, 0177.0.0.1) becomes a literal; "[::1]"
// and "::1" become IPv6 literals. Refused: empty, NUL/CR/LF/space/"%"/"/"/"@",
// labels > 63 or names > 253, characters outside [a-z0-9-_.].
struct Host {
  std::string name;                // normalised name, or the literal's text
  std::optional<IpAddress> literal;
};
Result<Host> normalise_host(std::string_view raw);

enum class AddressClass {
  Global, Loopback, LinkLocal, Private, Cgnat, UniqueLocal, Multicast, Broadcast, Unspecified,
  Reserved, Documentation, HostOwn,
};
const char* to_string(AddressClass c);
// Class of an address; IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d),
// NAT64 (64:ff9b::/96) and 6to4 (2002::/16) forms are judged by the IPv4 inside.
AddressClass classify(const IpAddress& a);

struct Decision {
  bool allowed = false;
  std::string rule;    // what decided: "allowedDomains[2] *.github.com", "deniedDomains[0] evil.com",
                       // "default deny", "address 169.254.169.254 is link-local", "allowedCidrs[0] 10.0.0.0/8"
  std::string reason;  // short, for the client: "host is not on the allow list"
};

class Rules {
 public:
  // From the merged policy: network.allowedDomains / deniedDomains (and the CIDR
  // list). Patterns were validated by the policy loader; errors here name the entry.
  static Result<Rules> from_policy(const policy::Network& net);

  // Step 1, before any DNS: the name (or literal) and port the client asked for.
  // A literal is allowed only when a CIDR rule contains it (and is not denied).
  Decision check_host(const Host& host, uint16_t port) const;

  // The in-sandbox resolver's question: may this name be looked up at all?
  // As check_host without a port: denied by a deny rule without a port,
  // allowed by any allow rule whatever its port (the proxy still checks the
  // port on every connection). Literals are refused (nothing to resolve).
  Decision check_name(const Host& host) const;

  // Step 2, after DNS, for every resolved address of an allowed name: special
  // ranges and the host's own addresses are refused unless a CIDR rule allows
  // the address; deniedResolvedAddresses are refused unless an allowedCidrs
  // entry is exactly that one address. The proxy connects only to an address
  // that passed.
  Decision check_address(const IpAddress& addr) const;

  // The host's own interface addresses, included in check_address as
  // AddressClass::HostOwn: a fixed list (set_host_addresses), or the set a
  // HostAddressWatch keeps current (follow_host_addresses: what every proxy
  // uses, ProxyConfig::host_addresses; host_addresses.hpp states the bound).
  void set_host_addresses(std::vector<IpAddress> own);
  void follow_host_addresses(std::shared_ptr<const HostAddresses> own);
  // Where the followed set's history stands now (0 without one): taken when a
  // connection is judged, for recheck_host_own after it is connected.
  uint64_t host_mark() const;
  // After the proxy connected to `addr` (and read the kernel's queued
  // notifications): refused when addr is the host's now, or became the host's
  // after `mark`, unless an allowedCidrs entry holds it (as check_address).
  Decision recheck_host_own(const IpAddress& addr, uint64_t mark) const;
  // An error when the kernel would not list them (no netlink socket: the fd
  // limit, a seccomp filter): the proxy would then let the host's own public
  // addresses through, so its callers do not start (fail closed).
  static Result<std::vector<IpAddress>> read_host_addresses();
  // read_host_addresses(), then set_host_addresses(); the error names the step.
  Result<void> refresh_host_addresses();

  // Whether an allowedDomains entry matches host:port, as check_host matches
  // them (literal entries match the same literal), deny rules and CIDRs aside.
  // Secrets' host lists are matched with this (secrets.cpp).
  bool allow_list_matches(const Host& host, uint16_t port) const;

  bool empty() const;  // no allow rule at all: everything is refused

 private:
  struct DomainRule {
    std::string pattern;  // normalised, without port; "*.x.com" kept with the "*."
    std::optional<uint16_t> port;
    std::string label;    // "allowedDomains[2] *.github.com"
    std::string reason;   // deniedDomainReasons' for this entry; empty: the generic one
  };
  std::vector<DomainRule> allow_, deny_;
  std::vector<std::pair<Cidr, std::string>> allow_cidrs_;
  std::vector<std::pair<Cidr, std::string>> deny_resolved_;  // deniedResolvedAddresses
  std::shared_ptr<const HostAddresses> own_;  // null: none known
};

}  // namespace exg::egress
