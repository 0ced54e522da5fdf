// The in-sandbox resolver's query parser (src/egress/dns.cpp): any datagram
// the sandboxed code sends to 127.0.0.53. A query parses, is refused with an
// rcode, or is dropped; the response built for it (with answers drawn from
// the input) fits in 512 bytes, echoes the id and the question, and is a response.
#include <cstdint>
#include <cstring>
#include <string>

#include "check.hpp"
#include "egress/dns.hpp"

using namespace exg::egress;
using namespace exg::egress::detail;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  DnsQuery q;
  DnsParse p = parse_dns_query(in, q);
  if (p.kind == DnsParse::Drop) return 0;
  FUZZ_CHECK(in.size() >= 12, "only a whole header is answered");
  std::vector<IpAddress> answers;
  if (p.kind == DnsParse::Query) {
    FUZZ_CHECK(!q.question.empty() && q.question.size() <= 12 + 255 + 4, "a question of a bounded size");
    FUZZ_CHECK(q.name.size() <= 254, "a name of at most 254 bytes");
    for (size_t i = 0; i + 17 <= in.size() && answers.size() < 64; i += 17) {
      IpAddress a;
      a.v6 = data[i] & 1;
      std::memcpy(a.bytes, data + i + 1, 16);
      if (!a.v6) std::memset(a.bytes + 4, 0, 12);
      answers.push_back(a);
    }
  }
  std::string r = dns_response(q, p.kind == DnsParse::Query ? kRcodeNoError : p.rcode, answers);
  FUZZ_CHECK(r.size() <= kDnsMaxUdp, "an answer fits in 512 bytes");
  FUZZ_CHECK(r.size() >= 12 && r.compare(0, 2, in.substr(0, 2)) == 0, "the id is echoed");
  FUZZ_CHECK((uint8_t)r[2] & 0x80, "a response");
  FUZZ_CHECK(r.compare(12, q.question.size(), q.question) == 0, "the question is echoed");
  DnsQuery again;
  FUZZ_CHECK(parse_dns_query(r, again).kind == DnsParse::Drop, "a response is never answered");
  (void)qtype_name(q.qtype);
  (void)rcode_name(p.rcode);
  return 0;
}
