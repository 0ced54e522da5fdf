// Transparent egress (network.transparent, on by default): clients that ignore
// the proxy variables. The in-sandbox resolver answers an allowed name with an
// address of its own from kCaptureRange, remembered here; inside the sandbox
// every TCP connection to a non-loopback address is redirected by netfilter to
// the transparent listener (process/transparent_capture.hpp), where a
// TransparentSession recovers the destination (SO_ORIGINAL_DST): a handed-out
// address stands for its name, any other address is a literal judged by the
// CIDR rules. The session decides like the explicit proxy (rules on the name),
// then waits for what the client says first and checks it against that name
// BEFORE any upstream is connected: a TLS ClientHello's SNI or an HTTP Host
// header naming another host is a mismatch, refused and logged, and reaches
// nothing. Only then does it connect (the proxy's own DNS, rules on every
// address), or at once when the client stays silent (kFirstBytesWindow).
// The microVM layer's guest has its own kernel, so its captured connections
// reach the proxy over the egress bridge (microvm/egress_bridge.hpp) on a unix
// socket instead: each begins with a destination preamble (below) that stands
// for SO_ORIGINAL_DST; from there the session goes on exactly the same way.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "egress/rules.hpp"

namespace exg::egress {

// 198.18.0.0/15 (RFC 2544, benchmarking; what fake-IP resolvers use): never a
// destination a sandbox needs by address, and not loopback, so that tools
// that treat 127/8 as "local" (no proxy, no TLS checks) do not.
inline constexpr uint32_t kCaptureRangeBase = 0xc6120000;  // 198.18.0.0
inline constexpr int kCaptureRangePrefix = 15;
inline constexpr uint16_t kTransparentPort = 15001;  // the listener inside (127.0.0.1)

// How long a captured connection waits for the client's first bytes before it
// is taken for a server-first protocol (SMTP, FTP, MySQL: the client waits for
// a greeting) and its upstream connected with the name its address stands for.
// Client-first protocols (TLS, HTTP, ssh, whose client sends its banner at
// once) send within a few milliseconds of connect(), gVisor's netstack and the
// microVM's bridge included, so this is never waited out for them; 300 ms is
// ten times more than the scheduling stalls of a loaded 2-core host. Longer
// would only delay server-first protocols (by this much, once per connection,
// well inside their clients' own timeouts of seconds). A client slower than
// this loses nothing but the guarantee that its mismatch connects nowhere: its
// upstream (the allowed name it resolved) is connected, and its first bytes are
// still checked before one of them goes up.
inline constexpr std::chrono::milliseconds kFirstBytesWindow{300};

// The destination preamble of a relayed captured connection: the IPv4 address
// (4 bytes) and the port (2, big-endian) the client connected to, then the
// client's own IPv4 address (4) as the guest's listener saw it, written by
// the microVM bridge before anything of the client's. Only the bridge reaches
// that listener; what the preamble says is still the guest's claim, untrusted:
// the destination is judged like any address a client names (the CIDR rules,
// or the name the resolver handed that address out for); the source only says
// in the audit where the connection came from. A source outside 127/8 was
// forwarded inside the guest (the guest has no NIC: its root's nested
// containers on podman's or dockerd's bridge, or another netns it made), so
// its audit lines carry "origin": "nested container" and "origin_address".
inline constexpr size_t kDestinationPreambleBytes = 10;

struct RelayedDestination {
  IpAddress address;
  uint16_t port = 0;
  IpAddress source;
  bool operator==(const RelayedDestination&) const = default;
};
// A source address that says the connection was forwarded inside the guest.
inline bool forwarded_source(const IpAddress& source) { return source.v6 || source.bytes[0] != 127; }

// Names the resolver handed out addresses for, both ways. One per sandbox, on
// the proxy's loop (no locking). An address once given to a name stays its
// address for the sandbox's life (clients cache answers past their TTL).
class HandedOutAddresses {
 public:
  static bool in_range(const IpAddress& a);
  // The address for a normalised name, given now if it had none; nullopt when
  // the range is used up (128 Ki names).
  std::optional<IpAddress> address_for(const std::string& name);
  // The name an address of the range was handed out for; nullptr otherwise.
  const std::string* name_for(const IpAddress& a) const;
  size_t size() const { return by_index_.size(); }

 private:
  std::unordered_map<std::string, uint32_t> by_name_;
  std::unordered_map<uint32_t, std::string> by_index_;
  uint32_t next_ = 1;  // .0.0 is skipped (a network address to some tools)
};

namespace detail {

// The server name of a TLS ClientHello at the start of `in` (one handshake
// record, the hello inside it). NeedMore: not all of the record yet; NotTls:
// not a handshake record; NoSni: a hello without a host_name entry; Malformed.
struct ClientHelloSni {
  enum Kind { NeedMore, NotTls, NoSni, Sni, Malformed } kind = NeedMore;
  std::string name;
};
ClientHelloSni parse_client_hello_sni(std::string_view in);

// The destination of a preamble (the first kDestinationPreambleBytes of `in`);
// nullopt when `in` is shorter.
std::optional<RelayedDestination> parse_destination_preamble(std::string_view in);

}  // namespace detail
}  // namespace exg::egress
