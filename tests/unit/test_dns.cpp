// The in-sandbox resolver's wire format (egress/dns.hpp) and Rules::check_name.
#include <gtest/gtest.h>

#include <string>

#include "egress/dns.hpp"
#include "egress/rules.hpp"

namespace exg::egress::detail {
namespace {

std::string query(const std::string& name, uint16_t type = kDnsTypeA, uint16_t cls = kDnsClassIn,
                  uint16_t flags = 0x0100, uint16_t qd = 1) {
  std::string q = {'\x12', '\x34', static_cast<char>(flags >> 8), static_cast<char>(flags & 0xff),
                   0, static_cast<char>(qd), 0, 0, 0, 0, 0, 0};
  size_t start = 0;
  while (start <= name.size() && !name.empty()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    q.push_back(static_cast<char>(dot - start));
    q += name.substr(start, dot - start);
    start = dot + 1;
  }
  q.push_back(0);
  q += {static_cast<char>(type >> 8), static_cast<char>(type & 0xff), static_cast<char>(cls >> 8),
        static_cast<char>(cls & 0xff)};
  return q;
}

TEST(Dns, ParsesOneQuestion) {
  DnsQuery q;
  auto p = parse_dns_query(query("Allowed.Test"), q);
  EXPECT_EQ(p.kind, DnsParse::Query);
  EXPECT_EQ(q.id, 0x1234);
  EXPECT_TRUE(q.rd);
  EXPECT_EQ(q.name, "Allowed.Test");
  EXPECT_EQ(q.qtype, kDnsTypeA);
  EXPECT_FALSE(q.bad_name);
}

TEST(Dns, RejectsMalformedAndUnsupported) {
  DnsQuery q;
  EXPECT_EQ(parse_dns_query("short", q).kind, DnsParse::Drop);
  EXPECT_EQ(parse_dns_query(query("a.test", 1, 1, 0x8100), q).kind, DnsParse::Drop);  // a response
  auto p = parse_dns_query(query("a.test", 1, 1, 0x0100, 2), q);
  EXPECT_EQ(p.kind, DnsParse::Error);
  EXPECT_EQ(p.rcode, kRcodeFormErr);
  std::string cut = query("a.test");
  cut.resize(cut.size() - 3);
  p = parse_dns_query(cut, q);
  EXPECT_EQ(p.rcode, kRcodeFormErr);
  std::string ptr = query("a.test");
  ptr[12] = '\xc0';
  EXPECT_EQ(parse_dns_query(ptr, q).rcode, kRcodeFormErr);
  p = parse_dns_query(query("a.test", 1, 3), q);  // class CH
  EXPECT_EQ(p.kind, DnsParse::Error);
  EXPECT_EQ(p.rcode, kRcodeNotImp);
  p = parse_dns_query(query("a.test", 1, 1, 0x2100), q);  // opcode 4 (NOTIFY)
  EXPECT_EQ(p.rcode, kRcodeNotImp);
  parse_dns_query(query(""), q);
  EXPECT_TRUE(q.bad_name);
}

TEST(Dns, AnswersAndTruncates) {
  DnsQuery q;
  ASSERT_EQ(parse_dns_query(query("allowed.test"), q).kind, DnsParse::Query);
  auto a = parse_ip("203.0.113.10");
  ASSERT_TRUE(a);
  std::string r = dns_response(q, kRcodeNoError, {*a});
  ASSERT_GE(r.size(), 12u);
  EXPECT_EQ(static_cast<uint8_t>(r[2]) & 0x80, 0x80);  // QR
  EXPECT_EQ(static_cast<uint8_t>(r[7]), 1);            // one answer
  EXPECT_EQ(r.substr(r.size() - 4), std::string("\xcb\x00\x71\x0a", 4));
  EXPECT_EQ(r.substr(r.size() - 10, 4), std::string("\x00\x00\x00\x05", 4));  // TTL 5
  std::vector<IpAddress> many(40, *a);
  r = dns_response(q, kRcodeNoError, many);
  EXPECT_LE(r.size(), kDnsMaxUdp);
  EXPECT_EQ(static_cast<uint8_t>(r[2]) & 0x02, 0x02);  // TC
  r = dns_response(q, kRcodeNxDomain, {});
  EXPECT_EQ(static_cast<uint8_t>(r[3]) & 0x0f, kRcodeNxDomain);
}

TEST(Dns, CheckNameIgnoresPorts) {
  policy::Network net;
  net.allowed_domains = {{"allowed.test", {}}, {"port.test:8080", {}}, {"*.wild.test", {}}};
  net.denied_domains = {{"denied.test", {}}, {"allowed.test:25", {}}};
  auto rules = Rules::from_policy(net);
  ASSERT_TRUE(rules);
  auto n = [&](const char* s) { return rules->check_name(*normalise_host(s)).allowed; };
  EXPECT_TRUE(n("allowed.test"));
  EXPECT_TRUE(n("port.test"));
  EXPECT_TRUE(n("a.wild.test"));
  EXPECT_FALSE(n("wild.test"));
  EXPECT_FALSE(n("denied.test"));
  EXPECT_FALSE(n("other.test"));
  EXPECT_FALSE(n("203.0.113.10"));
}

}  // namespace
}  // namespace exg::egress::detail
