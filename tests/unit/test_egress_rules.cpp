// Egress rules: host normalisation, name matching, address classes, CIDR
// overrides, the host's own addresses and literal targets.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "egress/rules.hpp"

namespace exg::egress {
namespace {

IpAddress ip(std::string_view s) {
  auto a = parse_ip(s);
  EXPECT_TRUE(a.has_value()) << s;
  return a.value_or(IpAddress{});
}

Host host(std::string_view raw) {
  auto h = normalise_host(raw);
  EXPECT_TRUE(h.has_value()) << raw << ": " << (h ? "" : h.error().str());
  return h.value_or(Host{});
}

std::vector<policy::DomainEntry> entries(std::initializer_list<const char*> list) {
  std::vector<policy::DomainEntry> out;
  for (const char* s : list) out.push_back(policy::DomainEntry{s, {}});
  return out;
}

Rules rules(std::initializer_list<const char*> allow, std::initializer_list<const char*> deny = {},
            std::initializer_list<const char*> cidrs = {}) {
  policy::Network net;
  net.allowed_domains = entries(allow);
  net.denied_domains = entries(deny);
  net.allowed_cidrs = entries(cidrs);
  auto r = Rules::from_policy(net);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().str());
  return r ? std::move(*r) : Rules{};
}

Decision check(const Rules& r, std::string_view raw, uint16_t port = 443) { return r.check_host(host(raw), port); }

// ---- normalisation ----

TEST(EgressNormalise, Names) {
  struct Case {
    const char* raw;
    const char* name;
  } cases[] = {
      {"example.com", "example.com"},
      {"Example.COM", "example.com"},
      {"example.com.", "example.com"},
      {"EXAMPLE.com.", "example.com"},
      {"bücher.example", "xn--bcher-kva.example"},
      {"BÜCHER.example", "xn--bcher-kva.example"},
      {"bücher.example.", "xn--bcher-kva.example"},
      {"xn--bcher-kva.example", "xn--bcher-kva.example"},
      {"XN--BCHER-KVA.example", "xn--bcher-kva.example"},
      {"a_b.example.com", "a_b.example.com"},
      {"localhost", "localhost"},
      {"0xdead.com", "0xdead.com"},  // last label is not numeric: a name
      {"1.2.3.com", "1.2.3.com"},
      {"0x1g", "0x1g"},  // not hex: an ordinary label
  };
  for (const auto& c : cases) {
    Host h = host(c.raw);
    EXPECT_EQ(h.name, c.name) << c.raw;
    EXPECT_FALSE(h.literal.has_value()) << c.raw;
  }
}

TEST(EgressNormalise, OddIpv4SpellingsBecomeLiterals) {
  for (const char* raw : {"127.0.0.1", "127.1", "127.0.1", "0x7f000001", "0X7F000001", "2130706433", "0x7f.1",
                          "0177.0.0.1", "0177.0.0.01", "0x7f.0.0.0x1", "017700000001", "127.0.0.1.",
                          "１２７.０.０.１"}) {
    Host h = host(raw);
    ASSERT_TRUE(h.literal.has_value()) << raw;
    EXPECT_FALSE(h.literal->v6) << raw;
    EXPECT_EQ(h.literal->str(), "127.0.0.1") << raw;
    EXPECT_EQ(h.name, "127.0.0.1") << raw;
  }
  EXPECT_EQ(host("0").name, "0.0.0.0");
  EXPECT_EQ(host("4294967295").name, "255.255.255.255");
  EXPECT_EQ(host("169.254.43518").name, "169.254.169.254");
}

TEST(EgressNormalise, Ipv6Literals) {
  Host h = host("[::1]");
  ASSERT_TRUE(h.literal.has_value());
  EXPECT_TRUE(h.literal->v6);
  EXPECT_EQ(h.name, "::1");
  h = host("::1");
  ASSERT_TRUE(h.literal.has_value());
  EXPECT_EQ(h.name, "::1");
  h = host("::ffff:127.0.0.1");
  ASSERT_TRUE(h.literal.has_value());
  EXPECT_TRUE(h.literal->v6);
  EXPECT_EQ(h.name, "::ffff:127.0.0.1");
  EXPECT_EQ(classify(*h.literal), AddressClass::Loopback);
  h = host("[2001:DB8::1]");
  ASSERT_TRUE(h.literal.has_value());
  EXPECT_EQ(h.name, "2001:db8::1");
}

TEST(EgressNormalise, Rejects) {
  const std::string nul("a\0b.com", 7);
  const std::string label64 = std::string(64, 'a') + ".com";
  std::string name254;
  while (name254.size() < 254) name254 += "abcdefghi.";
  name254.resize(254);
  if (name254.back() == '.') name254.back() = 'x';
  ASSERT_EQ(name254.size(), 254u);
  std::string name253 = name254.substr(1);
  EXPECT_TRUE(normalise_host(name253).has_value());
  EXPECT_TRUE(normalise_host(std::string(63, 'a') + ".com").has_value());

  for (const std::string& bad :
       {nul, std::string("a b"), std::string("a%2e"), std::string("a/b"), std::string("user@host"), label64,
        name254, std::string(""), std::string("a\r\nb"), std::string("a\nb"), std::string("."), std::string(".."),
        std::string("a..b"), std::string(".a"), std::string("1.2.3.4.5"), std::string("0x"), std::string("1.0x"),
        std::string("256.1.1.1"), std::string("1.2.3.256"), std::string("1.2.65536"), std::string("4294967296"),
        std::string("08.1.1.1"), std::string("foo.123"), std::string("a:b"),
        std::string("[::1"), std::string("[1.2.3.4]"), std::string("[fe80::1%eth0]"), std::string("fe80::1%25eth0"),
        std::string("a*b.com"), std::string("*.example.com"), std::string("a!.com"), std::string("a\\b"),
        std::string("a\tb")}) {
    EXPECT_FALSE(normalise_host(bad).has_value()) << "accepted: " << bad;
  }
  auto e = normalise_host(nul);
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().str(), "host \"a\\x00b.com\": NUL byte in host");
  EXPECT_EQ(normalise_host("1.2.3.4.5").error().str(), "host \"1.2.3.4.5\": malformed IPv4 address");
  EXPECT_EQ(normalise_host("0x").error().str(), "host \"0x\": malformed IPv4 address");
}

// ---- matching ----

TEST(EgressMatch, ExactAndCase) {
  Rules r = rules({"example.com", "GitHub.com"});
  EXPECT_TRUE(check(r, "example.com").allowed);
  EXPECT_TRUE(check(r, "EXAMPLE.com.").allowed);
  EXPECT_TRUE(check(r, "github.com").allowed);
  EXPECT_EQ(check(r, "github.com").rule, "allowedDomains[1] \"GitHub.com\"");
  EXPECT_FALSE(check(r, "www.example.com").allowed);
  EXPECT_FALSE(check(r, "example.com.evil.net").allowed);
  EXPECT_FALSE(check(r, "notexample.com").allowed);
  Decision d = check(r, "other.org");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, "default deny (not on the allow list)");
  EXPECT_EQ(d.reason, "host is not on the allow list");
}

TEST(EgressMatch, WildcardSubdomainsOnly) {
  Rules r = rules({"example.org", "*.github.com"});
  EXPECT_TRUE(check(r, "api.github.com").allowed);
  EXPECT_EQ(check(r, "api.github.com").rule, "allowedDomains[1] \"*.github.com\"");
  EXPECT_TRUE(check(r, "a.b.github.com").allowed);
  EXPECT_TRUE(check(r, "A.GitHub.Com.").allowed);
  EXPECT_FALSE(check(r, "github.com").allowed);
  EXPECT_FALSE(check(r, "evilgithub.com").allowed);
  EXPECT_FALSE(check(r, "github.com.evil.net").allowed);
}

TEST(EgressMatch, Ports) {
  Rules r = rules({"a.com:443", "*.b.com:8443", "c.com", "[2001:db8::1]:443"}, {}, {"2001:db8::/32"});
  EXPECT_TRUE(check(r, "a.com", 443).allowed);
  EXPECT_FALSE(check(r, "a.com", 80).allowed);
  EXPECT_TRUE(check(r, "x.b.com", 8443).allowed);
  EXPECT_FALSE(check(r, "x.b.com", 443).allowed);
  EXPECT_TRUE(check(r, "c.com", 1).allowed);
  EXPECT_TRUE(check(r, "c.com", 65535).allowed);

  Rules deny = rules({"a.com"}, {"a.com:25"});
  EXPECT_TRUE(check(deny, "a.com", 443).allowed);
  Decision d = check(deny, "a.com", 25);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, "deniedDomains[0] \"a.com:25\"");
}

TEST(EgressMatch, DenyBeatsAllow) {
  Rules r = rules({"evil.com", "*.example.com", "ok.example.com"}, {"evil.com", "*.example.com"});
  Decision d = check(r, "evil.com");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, "deniedDomains[0] \"evil.com\"");
  EXPECT_EQ(d.reason, "host is denied by policy");
  // A deny wildcard beats an allow exact entry.
  d = check(r, "ok.example.com");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, "deniedDomains[1] \"*.example.com\"");

  // A deny exact entry beats an allow wildcard; siblings stay allowed.
  Rules r2 = rules({"*.github.com"}, {"gist.github.com"});
  EXPECT_FALSE(check(r2, "gist.github.com").allowed);
  EXPECT_FALSE(check(r2, "GIST.github.com.").allowed);
  EXPECT_TRUE(check(r2, "api.github.com").allowed);
}

TEST(EgressMatch, BareStarDeniesAll) {
  Rules r = rules({"a.com"}, {"*"}, {"10.0.0.0/8"});
  Decision d = check(r, "a.com");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, "deniedDomains[0] \"*\"");
  EXPECT_FALSE(check(r, "10.0.0.5").allowed);
  EXPECT_FALSE(check(r, "[::1]").allowed);

  policy::Network net;
  net.allowed_domains = entries({"*"});
  auto bad = Rules::from_policy(net);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().str(), "allowedDomains[0] \"*\": a bare \"*\" is allowed only in deniedDomains");
}

TEST(EgressMatch, EmptyAllowListRefusesEverything) {
  Rules r = rules({});
  EXPECT_TRUE(r.empty());
  EXPECT_FALSE(check(r, "example.com").allowed);
  EXPECT_FALSE(check(r, "localhost", 80).allowed);
  EXPECT_FALSE(check(r, "8.8.8.8").allowed);
  EXPECT_EQ(check(r, "example.com").rule, "default deny (not on the allow list)");
  EXPECT_FALSE(rules({"a.com"}).empty());
  EXPECT_FALSE(rules({}, {}, {"10.0.0.0/8"}).empty());
  EXPECT_TRUE(rules({}, {"evil.com"}).empty());
}

TEST(EgressMatch, PatternsAreNormalised) {
  Rules r = rules({"bücher.example", "*.Example.NET"});
  EXPECT_TRUE(check(r, "xn--bcher-kva.example").allowed);
  EXPECT_TRUE(check(r, "BÜCHER.example.").allowed);
  EXPECT_TRUE(check(r, "a.example.net").allowed);
}

TEST(EgressMatch, BadPatternsNameTheEntry) {
  policy::Network net;
  net.allowed_domains = {policy::DomainEntry{"a.com", {"p.json", 3, 5}},
                         policy::DomainEntry{"1.2.3.4.5", {"p.json", 4, 5}}};
  auto r = Rules::from_policy(net);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().str(), "p.json:4:5: allowedDomains[1] \"1.2.3.4.5\": malformed IPv4 address");
  net = {};
  net.allowed_cidrs = {policy::DomainEntry{"10.0.0.1/8", {"p.json", 2, 3}}};
  r = Rules::from_policy(net);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().what, "p.json:2:3: allowedCidrs[0] \"10.0.0.1/8\"");
}

// ---- literal targets ----

TEST(EgressLiterals, RefusedWithoutCidrInEverySpelling) {
  Rules r = rules({"example.com", "127.0.0.1:3000", "[::1]:8080"});
  for (const char* raw : {"127.0.0.1", "127.1", "0x7f000001", "2130706433", "0x7f.1", "0177.0.0.1", "[::1]",
                          "::ffff:127.0.0.1", "8.8.8.8", "203.0.113.10", "[2001:db8::1]"}) {
    Decision d = check(r, raw, 3000);
    EXPECT_FALSE(d.allowed) << raw;
    EXPECT_EQ(d.rule, "literal address without a CIDR rule") << raw;
  }
}

TEST(EgressLiterals, AllowedWithCidr) {
  Rules r = rules({}, {}, {"203.0.113.0/24", "2001:db8::/32", "10.0.0.5"});
  Decision d = check(r, "203.0.113.10");
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.rule, "allowedCidrs[0] \"203.0.113.0/24\"");
  EXPECT_TRUE(check(r, "[2001:db8::7]").allowed);
  EXPECT_EQ(check(r, "[2001:db8::7]").rule, "allowedCidrs[1] \"2001:db8::/32\"");
  EXPECT_TRUE(check(r, "10.0.0.5").allowed);
  EXPECT_TRUE(check(r, "10.5").allowed);            // 10.0.0.5 spelled oddly
  EXPECT_TRUE(check(r, "::ffff:10.0.0.5").allowed);  // mapped: same destination
  EXPECT_FALSE(check(r, "10.0.0.6").allowed);
  EXPECT_FALSE(check(r, "203.0.114.1").allowed);
}

TEST(EgressLiterals, DeniedLiteralStaysDenied) {
  Rules r = rules({}, {"203.0.113.7", "[2001:db8::1]:443"}, {"203.0.113.0/24", "2001:db8::/32"});
  Decision d = check(r, "203.0.113.7");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, "deniedDomains[0] \"203.0.113.7\"");
  EXPECT_FALSE(check(r, "0xcb007107").allowed);
  EXPECT_FALSE(check(r, "::ffff:203.0.113.7").allowed);
  EXPECT_TRUE(check(r, "203.0.113.8").allowed);
  EXPECT_FALSE(check(r, "[2001:db8::1]", 443).allowed);
  EXPECT_TRUE(check(r, "[2001:db8::1]", 80).allowed);
  // Also after DNS: a name that resolves to a denied literal.
  d = r.check_address(ip("203.0.113.7"));
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, "deniedDomains[0] \"203.0.113.7\"");
  EXPECT_TRUE(r.check_address(ip("203.0.113.8")).allowed);
}

// ---- addresses ----

TEST(EgressAddress, Classes) {
  struct Case {
    const char* addr;
    AddressClass c;
  } cases[] = {
      {"8.8.8.8", AddressClass::Global},
      {"1.1.1.1", AddressClass::Global},
      {"0.0.0.0", AddressClass::Unspecified},
      {"0.255.255.255", AddressClass::Unspecified},
      {"1.0.0.0", AddressClass::Global},
      {"9.255.255.255", AddressClass::Global},
      {"10.0.0.0", AddressClass::Private},
      {"10.255.255.255", AddressClass::Private},
      {"11.0.0.0", AddressClass::Global},
      {"100.63.255.255", AddressClass::Global},
      {"100.64.0.0", AddressClass::Cgnat},
      {"100.127.255.255", AddressClass::Cgnat},
      {"100.128.0.0", AddressClass::Global},
      {"126.255.255.255", AddressClass::Global},
      {"127.0.0.1", AddressClass::Loopback},
      {"127.255.255.255", AddressClass::Loopback},
      {"128.0.0.0", AddressClass::Global},
      {"169.253.255.255", AddressClass::Global},
      {"169.254.0.0", AddressClass::LinkLocal},
      {"169.254.169.254", AddressClass::LinkLocal},
      {"169.254.255.255", AddressClass::LinkLocal},
      {"169.255.0.0", AddressClass::Global},
      {"172.15.255.255", AddressClass::Global},
      {"172.16.0.0", AddressClass::Private},
      {"172.31.255.255", AddressClass::Private},
      {"172.32.0.0", AddressClass::Global},
      {"192.0.0.0", AddressClass::Reserved},
      {"192.0.0.255", AddressClass::Reserved},
      {"192.0.1.0", AddressClass::Global},
      {"192.0.2.1", AddressClass::Documentation},
      {"192.88.99.1", AddressClass::Reserved},
      {"192.167.255.255", AddressClass::Global},
      {"192.168.0.0", AddressClass::Private},
      {"192.168.255.255", AddressClass::Private},
      {"192.169.0.0", AddressClass::Global},
      {"198.17.255.255", AddressClass::Global},
      {"198.18.0.0", AddressClass::Reserved},
      {"198.19.255.255", AddressClass::Reserved},
      {"198.20.0.0", AddressClass::Global},
      {"198.51.100.1", AddressClass::Documentation},
      {"203.0.113.10", AddressClass::Documentation},
      {"223.255.255.255", AddressClass::Global},
      {"224.0.0.0", AddressClass::Multicast},
      {"239.255.255.255", AddressClass::Multicast},
      {"240.0.0.0", AddressClass::Reserved},
      {"255.255.255.254", AddressClass::Reserved},
      {"255.255.255.255", AddressClass::Broadcast},
      // IPv6
      {"::", AddressClass::Unspecified},
      {"::1", AddressClass::Loopback},
      {"::2", AddressClass::Unspecified},  // ::0.0.0.2, compatible form
      {"::127.0.0.1", AddressClass::Loopback},
      {"::8.8.8.8", AddressClass::Global},
      {"::ffff:127.0.0.1", AddressClass::Loopback},
      {"::ffff:169.254.169.254", AddressClass::LinkLocal},
      {"::ffff:10.0.0.1", AddressClass::Private},
      {"::ffff:8.8.8.8", AddressClass::Global},
      {"::ffff:0:127.0.0.1", AddressClass::Loopback},
      {"64:ff9b::a9fe:a9fe", AddressClass::LinkLocal},
      {"64:ff9b::7f00:1", AddressClass::Loopback},
      {"64:ff9b::808:808", AddressClass::Global},
      {"64:ff9b:1::1", AddressClass::Reserved},
      {"2002:a9fe:a9fe::", AddressClass::LinkLocal},
      {"2002:7f00:1::1", AddressClass::Loopback},
      {"2002:0a00:0001::1", AddressClass::Private},
      {"2002:808:808::1", AddressClass::Global},
      {"fe80::1", AddressClass::LinkLocal},
      {"febf:ffff::1", AddressClass::LinkLocal},
      {"fec0::1", AddressClass::Private},
      {"fc00::1", AddressClass::UniqueLocal},
      {"fd12:3456::1", AddressClass::UniqueLocal},
      {"fbff::1", AddressClass::Reserved},
      {"ff02::1", AddressClass::Multicast},
      {"ff05::2", AddressClass::Multicast},
      {"2001:db8::1", AddressClass::Documentation},
      {"2001::1", AddressClass::Reserved},  // Teredo
      {"100::1", AddressClass::Reserved},
      {"2001:4860:4860::8888", AddressClass::Global},
      {"2606:4700:4700::1111", AddressClass::Global},
  };
  for (const auto& c : cases) {
    EXPECT_STREQ(to_string(classify(ip(c.addr))), to_string(c.c)) << c.addr;
  }
}

TEST(EgressAddress, CheckRefusesSpecialRanges) {
  Rules r = rules({"example.com"});
  struct Case {
    const char* addr;
    const char* rule;
  } refused[] = {
      {"127.0.0.1", "127.0.0.1 is loopback"},
      {"169.254.169.254", "169.254.169.254 is link-local"},
      {"10.0.0.5", "10.0.0.5 is private"},
      {"172.16.0.0", "172.16.0.0 is private"},
      {"192.168.1.1", "192.168.1.1 is private"},
      {"100.64.0.0", "100.64.0.0 is CGNAT"},
      {"224.0.0.1", "224.0.0.1 is multicast"},
      {"255.255.255.255", "255.255.255.255 is broadcast"},
      {"0.0.0.0", "0.0.0.0 is unspecified"},
      {"240.0.0.1", "240.0.0.1 is reserved"},
      {"198.18.0.1", "198.18.0.1 is reserved"},
      {"192.0.0.8", "192.0.0.8 is reserved"},
      {"::1", "::1 is loopback"},
      {"::", ":: is unspecified"},
      {"::127.0.0.1", "::127.0.0.1 is loopback"},
      {"::ffff:169.254.169.254", "::ffff:169.254.169.254 is link-local"},
      {"64:ff9b::a9fe:a9fe", "64:ff9b::a9fe:a9fe is link-local"},
      {"2002:a9fe:a9fe::", "2002:a9fe:a9fe:: is link-local"},
      {"fe80::1", "fe80::1 is link-local"},
      {"fc00::1", "fc00::1 is unique-local"},
      {"ff02::1", "ff02::1 is multicast"},
  };
  for (const auto& c : refused) {
    Decision d = r.check_address(ip(c.addr));
    EXPECT_FALSE(d.allowed) << c.addr;
    EXPECT_EQ(d.rule, c.rule) << c.addr;
    EXPECT_FALSE(d.reason.empty()) << c.addr;
  }
  EXPECT_EQ(r.check_address(ip("169.254.169.254")).reason, "resolved address is link-local");

  for (const char* ok : {"8.8.8.8", "172.15.255.255", "100.63.255.255", "2001:4860:4860::8888", "::ffff:8.8.8.8"}) {
    EXPECT_TRUE(r.check_address(ip(ok)).allowed) << ok;
  }
  // Documentation ranges are allowed: the project's tests use them as public upstreams.
  for (const char* doc : {"203.0.113.10", "198.51.100.1", "192.0.2.1", "2001:db8::1"}) {
    Decision d = r.check_address(ip(doc));
    EXPECT_TRUE(d.allowed) << doc;
    EXPECT_EQ(d.rule, std::string(doc) + " is documentation") << doc;
  }
  EXPECT_EQ(r.check_address(ip("8.8.8.8")).rule, "8.8.8.8 is global");
}

TEST(EgressAddress, CidrOverrides) {
  Rules r = rules({"example.com"}, {}, {"10.0.0.0/8", "192.168.7.0/24", "fd00::/8", "169.254.169.254/32"});
  Decision d = r.check_address(ip("10.0.0.5"));
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.rule, "allowedCidrs[0] \"10.0.0.0/8\"");
  EXPECT_TRUE(r.check_address(ip("10.255.255.255")).allowed);
  EXPECT_TRUE(r.check_address(ip("::ffff:10.0.0.5")).allowed);
  EXPECT_TRUE(r.check_address(ip("11.0.0.0")).allowed);  // global anyway
  EXPECT_TRUE(r.check_address(ip("192.168.7.200")).allowed);
  EXPECT_FALSE(r.check_address(ip("192.168.8.1")).allowed);
  EXPECT_TRUE(r.check_address(ip("fd00::5")).allowed);
  EXPECT_FALSE(r.check_address(ip("fc00::5")).allowed);
  EXPECT_TRUE(r.check_address(ip("169.254.169.254")).allowed);
  EXPECT_FALSE(r.check_address(ip("169.254.169.253")).allowed);
  EXPECT_FALSE(r.check_address(ip("127.0.0.1")).allowed);

  Rules narrow = rules({"example.com"}, {}, {"10.0.0.0/16"});
  EXPECT_TRUE(narrow.check_address(ip("10.0.0.5")).allowed);
  EXPECT_TRUE(narrow.check_address(ip("10.0.255.255")).allowed);
  d = narrow.check_address(ip("10.1.0.0"));
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, "10.1.0.0 is private");

  // An IPv6 range does not hold IPv4 addresses, nor the reverse beyond mapped forms.
  Rules v6 = rules({"example.com"}, {}, {"::/0"});
  EXPECT_FALSE(v6.check_address(ip("10.0.0.1")).allowed);
  EXPECT_TRUE(v6.check_address(ip("fe80::1")).allowed);
}

TEST(EgressAddress, HostOwnAddresses) {
  Rules r = rules({"example.com"}, {}, {"203.0.113.0/25"});
  r.set_host_addresses({ip("198.51.100.1"), ip("203.0.113.5"), ip("2001:db8::5"), ip("8.8.4.4")});
  Decision d = r.check_address(ip("198.51.100.1"));
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, "198.51.100.1 is an address of this host");
  EXPECT_EQ(d.reason, "resolved address is an address of this host");
  EXPECT_FALSE(r.check_address(ip("2001:db8::5")).allowed);
  EXPECT_FALSE(r.check_address(ip("8.8.4.4")).allowed);
  EXPECT_FALSE(r.check_address(ip("::ffff:198.51.100.1")).allowed);   // mapped
  EXPECT_FALSE(r.check_address(ip("64:ff9b::c633:6401")).allowed);    // NAT64 of 198.51.100.1
  EXPECT_TRUE(r.check_address(ip("198.51.100.2")).allowed);
  // A CIDR rule that holds the address allows it.
  d = r.check_address(ip("203.0.113.5"));
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.rule, "allowedCidrs[0] \"203.0.113.0/25\"");

  // read_host_addresses sees at least loopback (every namespace has lo), and
  // what it returns is refused.
  auto own = Rules::read_host_addresses();
  ASSERT_TRUE(own) << own.error().str();
  Rules all = rules({"example.com"});
  all.set_host_addresses(*own);
  for (const auto& a : *own) EXPECT_FALSE(all.check_address(a).allowed) << a.str();
}

// When the kernel will not list the host's addresses (here: no descriptor is
// left for getifaddrs' netlink socket), that is an error, not an empty list
// that would let the host's own public addresses through the proxy.
TEST(EgressRules, HostAddressesUnlistedIsAnError) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int highest = ::open("/dev/null", O_RDONLY);  // the lowest free descriptor
    if (highest < 0) ::_exit(10);
    rlimit rl{static_cast<rlim_t>(highest + 1), static_cast<rlim_t>(highest + 1)};
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) ::_exit(11);
    auto own = Rules::read_host_addresses();
    if (own) ::_exit(1);
    Rules r = rules({"example.com"});
    auto refreshed = r.refresh_host_addresses();
    if (refreshed || refreshed.error().str().find("getifaddrs") == std::string::npos) ::_exit(2);
    ::_exit(0);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "1: listed with no descriptor left; 2: refresh did not say getifaddrs; 10-11: set-up";
}

// ---- CIDR parsing and address helpers ----

TEST(EgressCidr, Parse) {
  auto c = parse_cidr("10.0.0.0/8");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->str(), "10.0.0.0/8");
  EXPECT_TRUE(c->contains(ip("10.1.2.3")));
  EXPECT_FALSE(c->contains(ip("11.0.0.0")));
  EXPECT_EQ(parse_cidr("192.0.2.1")->str(), "192.0.2.1/32");
  EXPECT_EQ(parse_cidr("fc00::/7")->str(), "fc00::/7");
  EXPECT_EQ(parse_cidr("2001:db8::1")->str(), "2001:db8::1/128");
  EXPECT_EQ(parse_cidr("[2001:db8::]/32")->str(), "2001:db8::/32");
  EXPECT_TRUE(parse_cidr("0.0.0.0/0")->contains(ip("8.8.8.8")));
  EXPECT_TRUE(parse_cidr("fc00::/7")->contains(ip("fdff::1")));
  EXPECT_FALSE(parse_cidr("fc00::/7")->contains(ip("fe00::1")));
  for (const char* bad : {"", "10.0.0.0/33", "10.0.0.5/8", "10.1/16", "10.0.0.0/", "10.0.0.0/08", "::/129",
                          "fe80::1%eth0", "example.com/8", "10.0.0.0/8/8", "10.0.0.0/-1"}) {
    EXPECT_FALSE(parse_cidr(bad).has_value()) << bad;
  }
}

TEST(EgressCidr, SockaddrAndStr) {
  sockaddr_in s4{};
  s4.sin_family = AF_INET;
  s4.sin_addr.s_addr = htonl(0xcb00710a);
  auto a = IpAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&s4));
  ASSERT_TRUE(a.has_value());
  EXPECT_FALSE(a->v6);
  EXPECT_EQ(a->str(), "203.0.113.10");
  sockaddr_in6 s6{};
  s6.sin6_family = AF_INET6;
  s6.sin6_addr = in6addr_loopback;
  a = IpAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&s6));
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->v6);
  EXPECT_EQ(a->str(), "::1");
  sockaddr su{};
  su.sa_family = AF_UNIX;
  EXPECT_FALSE(IpAddress::from_sockaddr(&su).has_value());
  EXPECT_FALSE(IpAddress::from_sockaddr(nullptr).has_value());
  EXPECT_EQ(unmapped(ip("::ffff:1.2.3.4")), ip("1.2.3.4"));
  EXPECT_EQ(unmapped(ip("64:ff9b::102:304")), ip("64:ff9b::102:304"));
  EXPECT_EQ(embedded_v4(ip("64:ff9b::102:304")), ip("1.2.3.4"));
  EXPECT_FALSE(embedded_v4(ip("2001:db8::1")).has_value());
  EXPECT_FALSE(parse_ip("127.1").has_value());  // strict
}

}  // namespace
}  // namespace exg::egress
