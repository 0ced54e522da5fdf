// Host names and addresses as clients spell them (src/egress/rules.cpp,
// addr.cpp): the CONNECT target, the absolute URI's host, the SOCKS domain.
// Normalising is idempotent; a literal is an address whatever its spelling and
// is never allowed by a name rule; a name is allowed only by the rule it
// equals (exactly, or as a subdomain of a "*." rule).
#include <cstdint>
#include <string>

#include "check.hpp"
#include "egress/rules.hpp"

using namespace exg::egress;

namespace {

const Rules& rules() {
  static const Rules r = [] {
    exg::policy::Network net;
    net.allowed_domains = {{"example.com", {}}, {"*.example.org", {}}, {"api.test:8443", {}}};
    net.denied_domains = {{"bad.example.org", {}}};
    net.allowed_cidrs = {{"203.0.113.0/24", {}}};
    auto built = Rules::from_policy(net);
    FUZZ_CHECK(built.has_value(), "the rules build");
    return std::move(*built);
  }();
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (auto ip = parse_ip(in)) {
    FUZZ_CHECK(parse_ip(ip->str()) == ip, "an address reads back from its text");
    (void)classify(*ip);
    (void)embedded_v4(*ip);
  }
  if (auto c = parse_cidr(in)) FUZZ_CHECK(parse_cidr(c->str()).has_value(), "a CIDR reads back from its text");
  auto h = normalise_host(in);
  if (!h) return 0;
  auto again = normalise_host(h->name);
  FUZZ_CHECK(again.has_value() && again->name == h->name, "normalising is idempotent");
  FUZZ_CHECK(again->literal == h->literal, "a literal stays a literal");
  const std::string& n = h->name;
  FUZZ_CHECK(!n.empty() && n.size() <= 253 + 2, "a name of a bounded length");
  Decision d = rules().check_host(*h, 443);
  if (h->literal) {
    FUZZ_CHECK(parse_ip(n).has_value(), "a literal's text is its address");
    // The mapped IPv6 form of an address is the same destination.
    static const Cidr cidr = *parse_cidr("203.0.113.0/24");
    FUZZ_CHECK(d.allowed == cidr.contains(unmapped(*h->literal)), "a literal is allowed by its CIDR rule only");
    (void)rules().check_address(*h->literal);
    return 0;
  }
  for (char c : n) FUZZ_CHECK((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.',
                              "a normalised name is lower-case ASCII");
  bool sub = n.size() > 12 && n.ends_with(".example.org") && n != "bad.example.org";
  FUZZ_CHECK(d.allowed == (n == "example.com" || sub), "a name is allowed by its rule only");
  FUZZ_CHECK(!rules().check_host(*h, 443).allowed || rules().check_name(*h).allowed, "an allowed host resolves");
  FUZZ_CHECK(rules().check_host(*h, 8443).allowed == (d.allowed || n == "api.test"), "ports are matched");
  return 0;
}
