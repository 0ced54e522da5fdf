// Addresses, CIDR ranges and the classes of addresses the proxy refuses to
// connect to (see rules.hpp). Pure functions: no DNS, no sockets.
#include <arpa/inet.h>

#include <cstring>

#include "egress/rules.hpp"

namespace exg::egress {

namespace {

IpAddress v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  IpAddress r;
  r.bytes[0] = a;
  r.bytes[1] = b;
  r.bytes[2] = c;
  r.bytes[3] = d;
  return r;
}

uint32_t v4_value(const IpAddress& a) {
  return (uint32_t{a.bytes[0]} << 24) | (uint32_t{a.bytes[1]} << 16) | (uint32_t{a.bytes[2]} << 8) |
         uint32_t{a.bytes[3]};
}

// Does `a` start with the first `bits` bits of `prefix`?
bool prefix_match(const uint8_t* a, const uint8_t* prefix, int bits) {
  int full = bits / 8;
  if (std::memcmp(a, prefix, full) != 0) return false;
  int rest = bits % 8;
  if (rest == 0) return true;
  uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (a[full] & mask) == (prefix[full] & mask);
}

bool in4(uint32_t a, uint32_t base, int bits) {
  if (bits == 0) return true;
  uint32_t mask = bits == 32 ? 0xffffffffu : ~(0xffffffffu >> bits);
  return (a & mask) == (base & mask);
}

constexpr uint32_t ip4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return (a << 24) | (b << 16) | (c << 8) | d; }

AddressClass classify4(uint32_t a) {
  if (a == 0xffffffffu) return AddressClass::Broadcast;
  if (in4(a, ip4(0, 0, 0, 0), 8)) return AddressClass::Unspecified;  // "this network"
  if (in4(a, ip4(127, 0, 0, 0), 8)) return AddressClass::Loopback;
  if (in4(a, ip4(169, 254, 0, 0), 16)) return AddressClass::LinkLocal;
  if (in4(a, ip4(10, 0, 0, 0), 8)) return AddressClass::Private;
  if (in4(a, ip4(172, 16, 0, 0), 12)) return AddressClass::Private;
  if (in4(a, ip4(192, 168, 0, 0), 16)) return AddressClass::Private;
  if (in4(a, ip4(100, 64, 0, 0), 10)) return AddressClass::Cgnat;
  if (in4(a, ip4(224, 0, 0, 0), 4)) return AddressClass::Multicast;
  if (in4(a, ip4(240, 0, 0, 0), 4)) return AddressClass::Reserved;
  if (in4(a, ip4(192, 0, 0, 0), 24)) return AddressClass::Reserved;     // IETF protocol assignments
  if (in4(a, ip4(192, 88, 99, 0), 24)) return AddressClass::Reserved;   // 6to4 relay anycast (deprecated)
  if (in4(a, ip4(198, 18, 0, 0), 15)) return AddressClass::Reserved;    // benchmarking
  if (in4(a, ip4(192, 0, 2, 0), 24)) return AddressClass::Documentation;     // TEST-NET-1
  if (in4(a, ip4(198, 51, 100, 0), 24)) return AddressClass::Documentation;  // TEST-NET-2
  if (in4(a, ip4(203, 0, 113, 0), 24)) return AddressClass::Documentation;   // TEST-NET-3
  return AddressClass::Global;
}

}  // namespace

std::string IpAddress::str() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (!inet_ntop(v6 ? AF_INET6 : AF_INET, bytes, buf, sizeof buf)) return "?";
  return buf;
}

std::optional<IpAddress> IpAddress::from_sockaddr(const sockaddr* sa) {
  if (!sa) return std::nullopt;
  IpAddress r;
  if (sa->sa_family == AF_INET) {
    const auto* s = reinterpret_cast<const sockaddr_in*>(sa);
    std::memcpy(r.bytes, &s->sin_addr, 4);
    return r;
  }
  if (sa->sa_family == AF_INET6) {
    const auto* s = reinterpret_cast<const sockaddr_in6*>(sa);
    r.v6 = true;
    std::memcpy(r.bytes, &s->sin6_addr, 16);
    return r;
  }
  return std::nullopt;
}

std::optional<IpAddress> parse_ip(std::string_view s) {
  if (s.empty() || s.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  std::string z(s);
  IpAddress r;
  if (inet_pton(AF_INET, z.c_str(), r.bytes) == 1) return r;
  if (inet_pton(AF_INET6, z.c_str(), r.bytes) == 1) {
    r.v6 = true;
    return r;
  }
  return std::nullopt;
}

std::optional<IpAddress> embedded_v4(const IpAddress& a) {
  if (!a.v6) return std::nullopt;
  const uint8_t* b = a.bytes;
  auto zero = [&](int from, int to) {
    for (int i = from; i < to; ++i) {
      if (b[i] != 0) return false;
    }
    return true;
  };
  auto tail = [&] { return v4(b[12], b[13], b[14], b[15]); };
  if (zero(0, 10) && b[10] == 0xff && b[11] == 0xff) return tail();                  // ::ffff:a.b.c.d (mapped)
  if (zero(0, 8) && b[8] == 0xff && b[9] == 0xff && zero(10, 12)) return tail();    // ::ffff:0:a.b.c.d (SIIT)
  if (zero(0, 12)) return tail();                                                    // ::a.b.c.d (compatible)
  if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && zero(4, 12)) return tail();  // NAT64
  if (b[0] == 0x20 && b[1] == 0x02) return v4(b[2], b[3], b[4], b[5]);               // 6to4
  return std::nullopt;
}

IpAddress unmapped(const IpAddress& a) {
  if (!a.v6) return a;
  const uint8_t* b = a.bytes;
  for (int i = 0; i < 10; ++i) {
    if (b[i] != 0) return a;
  }
  if (b[10] != 0xff || b[11] != 0xff) return a;
  return v4(b[12], b[13], b[14], b[15]);
}

bool Cidr::contains(const IpAddress& a) const {
  if (base.v6 == a.v6) return prefix_match(a.bytes, base.bytes, prefix);
  // An IPv4 range also holds the IPv4-mapped spelling of its addresses: a
  // socket connected to ::ffff:10.0.0.5 reaches 10.0.0.5.
  if (!base.v6) {
    if (auto m = unmapped(a); !m.v6) return prefix_match(m.bytes, base.bytes, prefix);
  }
  return false;
}

std::string Cidr::str() const { return base.str() + "/" + std::to_string(prefix); }

std::optional<Cidr> parse_cidr(std::string_view s) {
  auto slash = s.find('/');
  std::string_view addr = s.substr(0, slash);
  if (addr.size() >= 2 && addr.front() == '[' && addr.back() == ']') addr = addr.substr(1, addr.size() - 2);
  auto base = parse_ip(addr);
  if (!base) return std::nullopt;
  int max = base->v6 ? 128 : 32;
  int prefix = max;
  if (slash != std::string_view::npos) {
    std::string_view p = s.substr(slash + 1);
    if (p.empty() || p.size() > 3 || (p.size() > 1 && p[0] == '0')) return std::nullopt;
    prefix = 0;
    for (char c : p) {
      if (c < '0' || c > '9') return std::nullopt;
      prefix = prefix * 10 + (c - '0');
    }
    if (prefix > max) return std::nullopt;
  }
  // Host bits set ("10.0.0.5/8") is most likely a mistake: refuse it rather
  // than guess which range was meant.
  int nbytes = max / 8;
  for (int bit = prefix; bit < nbytes * 8; ++bit) {
    if (base->bytes[bit / 8] & (0x80 >> (bit % 8))) return std::nullopt;
  }
  return Cidr{*base, prefix};
}

const char* to_string(AddressClass c) {
  switch (c) {
    case AddressClass::Global: return "global";
    case AddressClass::Loopback: return "loopback";
    case AddressClass::LinkLocal: return "link-local";
    case AddressClass::Private: return "private";
    case AddressClass::Cgnat: return "CGNAT";
    case AddressClass::UniqueLocal: return "unique-local";
    case AddressClass::Multicast: return "multicast";
    case AddressClass::Broadcast: return "broadcast";
    case AddressClass::Unspecified: return "unspecified";
    case AddressClass::Reserved: return "reserved";
    case AddressClass::Documentation: return "documentation";
    case AddressClass::HostOwn: return "an address of this host";
  }
  return "?";
}

AddressClass classify(const IpAddress& a) {
  if (!a.v6) return classify4(v4_value(a));
  const uint8_t* b = a.bytes;
  static const uint8_t kZero[16] = {};
  if (std::memcmp(b, kZero, 16) == 0) return AddressClass::Unspecified;
  if (std::memcmp(b, kZero, 15) == 0 && b[15] == 1) return AddressClass::Loopback;
  if (auto inner = embedded_v4(a)) return classify4(v4_value(*inner));
  auto in6 = [&](std::initializer_list<uint8_t> prefix_bytes, int bits) {
    uint8_t p[16] = {};
    int i = 0;
    for (uint8_t x : prefix_bytes) p[i++] = x;
    return prefix_match(b, p, bits);
  };
  if (in6({0xff}, 8)) return AddressClass::Multicast;
  if (in6({0xfe, 0x80}, 10)) return AddressClass::LinkLocal;
  if (in6({0xfe, 0xc0}, 10)) return AddressClass::Private;  // site-local (deprecated, RFC 3879)
  if (in6({0xfc}, 7)) return AddressClass::UniqueLocal;
  if (in6({0x20, 0x01, 0x0d, 0xb8}, 32)) return AddressClass::Documentation;
  if (in6({0x3f, 0xff}, 20)) return AddressClass::Documentation;  // RFC 9637
  if (in6({0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48)) return AddressClass::Reserved;  // local-use NAT64
  if (in6({0x01, 0x00}, 64)) return AddressClass::Reserved;                          // discard-only
  if (in6({0x20, 0x01}, 23)) return AddressClass::Reserved;  // IETF protocol assignments (Teredo, ORCHID, ...)
  if (!in6({0x20}, 3)) return AddressClass::Reserved;        // outside global unicast space
  return AddressClass::Global;
}

}  // namespace exg::egress
