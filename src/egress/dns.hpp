// The in-sandbox resolver (network.resolver / `run --dns`): a UDP socket the
// child bound to 127.0.0.53:53 inside the sandbox's netns, served on the
// proxy's event loop. One question of class IN per query; A and AAAA are
// answered for names the rules allow (Rules::check_name), resolved the way the
// proxy resolves them (/etc/hosts fast path, else getaddrinfo), with only the
// addresses Rules::check_address allows, TTL 5. A name that is not allowed (or
// does not resolve) gets NXDOMAIN. Malformed queries get FORMERR, other
// opcodes and classes NOTIMP; other types of an allowed name get an empty
// answer (NODATA). Answers fit in 512 bytes (TC set when cut); no recursion
// beyond this. The same logic serves a stream listener too (the microVM
// guest's queries, relayed over its egress channel): a preamble first, the
// IPv4 address of the guest's client that asked (kDnsStreamPreambleBytes,
// the relay's claim: outside 127/8 a nested container's query, taken to the
// resolver by the guest's DNAT, whose audit lines then carry "origin":
// "nested container" and "origin_address", as its connections' do; it labels,
// never decides), then DNS over TCP framing
// (RFC 1035 4.2.2), each query and answer after a 2-byte length; bounded:
// a query of at most kDnsMaxStreamQuery bytes (a longer one ends the
// connection), kDnsStreamMaxPending lookups a connection (reading waits
// beyond), kDnsStreamMaxConnections at once (more are closed at once), and a
// connection idle for the header timeout with nothing in flight is closed. Every decision is one audit line {"event":"dns",...}.
// Without transparent egress there is still no route out: the answers only
// serve tools that want to resolve before they talk to the proxy. With it
// (ProxyConfig::transparent, the default), an allowed name whose addresses
// pass gets one IPv4 address of the resolver's own range instead (the same
// for the sandbox's life, transparent.hpp), AAAA an empty answer: connections
// to that address reach the proxy, which takes it back to the name.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "egress/rules.hpp"

namespace exg::egress::detail {

struct ProxyState;

inline constexpr uint16_t kDnsTypeA = 1, kDnsTypeAAAA = 28, kDnsClassIn = 1;
inline constexpr uint8_t kRcodeNoError = 0, kRcodeFormErr = 1, kRcodeServFail = 2, kRcodeNxDomain = 3,
                         kRcodeNotImp = 4, kRcodeRefused = 5;
inline constexpr size_t kDnsMaxUdp = 512;
inline constexpr uint32_t kDnsTtl = 5;
inline constexpr size_t kDnsMaxPending = 64;  // lookups in flight; further queries are dropped
inline constexpr size_t kDnsMaxStreamQuery = 512;
inline constexpr size_t kDnsStreamMaxPending = 16;
inline constexpr size_t kDnsStreamMaxConnections = 64;
inline constexpr size_t kDnsStreamPreambleBytes = 4;

struct DnsQuery {
  uint16_t id = 0;
  bool rd = false;
  std::string question;  // the question section as sent (name, type, class); empty when not parsed
  std::string name;      // labels joined with '.', as sent (not normalised)
  bool bad_name = false; // a label holds a '.' or the name is the root: never resolved
  uint16_t qtype = 0, qclass = 0;
  // Not from the query: the nested container that asked (its address, from a
  // stream's preamble), empty for the sandbox's own queries. For the audit.
  std::string nested_origin;
};

struct DnsParse {
  enum Kind { Query, Error, Drop } kind = Drop;  // Drop: too short to answer, or a response
  uint8_t rcode = kRcodeNoError;                  // for Error: FORMERR or NOTIMP
};
DnsParse parse_dns_query(std::string_view in, DnsQuery& q);

// A response to q: header (QR, RD copied, RA, rcode), the question when known,
// one answer per address (type A for IPv4, AAAA for IPv6, name by pointer to
// the question). Answers that do not fit in `max` bytes are dropped and TC is set.
std::string dns_response(const DnsQuery& q, uint8_t rcode, const std::vector<IpAddress>& answers,
                         uint32_t ttl = kDnsTtl, size_t max = kDnsMaxUdp);
const char* rcode_name(uint8_t rcode);
std::string qtype_name(uint16_t t);

class DnsServer;
// Takes ownership of udp_fd (a bound UDP socket); serves on st->io until stopped.
std::shared_ptr<DnsServer> start_dns_server(std::shared_ptr<ProxyState> st, int udp_fd);
// Takes ownership of a listening stream socket; serves framed queries on its connections.
std::shared_ptr<DnsServer> start_dns_stream_server(std::shared_ptr<ProxyState> st, int listening_fd);
void stop_dns_server(const std::shared_ptr<DnsServer>& s);

}  // namespace exg::egress::detail
