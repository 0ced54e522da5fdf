// The microVM layer's egress channel: TCP connections made inside the guest
// (to its 127.0.0.1:3128 and :1080, and with transparent egress those its
// netfilter redirects to 127.0.0.1:15001) and the queries to its resolver
// (UDP 127.0.0.53:53) carried as streams over one byte stream,
// the virtio-serial port `exg.egress`, to the host, where each becomes a
// connection to the supervisor's egress proxy (the same rules, audit and
// credential injection as on every layer). The guest has no network device:
// this is its only way out, and everything on it meets the proxy.
//
// One engine for both ends (run()): the guest side accepts on its listeners
// and opens streams; the host side connects each opened stream to the proxy.
// Plain syscalls and no exg_core, so that the static guest init links it.
//
// Wire format, both ways: frames of a 9-byte header, type (1), stream id
// (4, big-endian), payload length (4, big-endian), then the payload.
//   Open   guest -> host  payload: 1 byte, the target (Http, Socks, Dns), or
//                         for Transparent that byte and the destination the
//                         client connected to (kDestinationBytes: IPv4
//                         address, port big-endian, from SO_ORIGINAL_DST, then
//                         the client's own IPv4 address, accept's peer: not
//                         127/8 for a nested container's forwarded connection,
//                         127.0.0.1 for any of the guest's own addresses, as
//                         a VPN's tun address is the guest's own connection's);
//                         for Dns that byte and the asking client's IPv4
//                         address (kDnsSourceBytes, recvfrom's: not 127/8 for
//                         a nested container's query, taken to the resolver by
//                         the guest's DNAT); any other payload is refused (Close)
//   Data   both           payload: bytes, at most kMaxData
//   Credit both           payload: u32, bytes of the stream the sender has
//                         written on (its receive window opens again by that)
//   Eof    both           the sender's side read end of stream (half close)
//   Close  both           the stream is aborted (connect failed, an error)
// Flow control: each direction of a stream may have at most kWindow bytes
// sent and not yet credited; a peer that sends more, or a frame that breaks
// the format, is a protocol error (that stream is aborted; a broken frame
// ends the channel). So the memory held is bounded: kWindow a stream and
// direction, kMaxStreams streams, and the channel's own output queue, which
// stops the reading of stream sockets past kOutHigh and of the channel itself
// past kOutHard (a peer that never reads cannot grow it).
// A Dns stream has no socket in the guest: the relay takes a datagram from
// the resolver's UDP socket (kMinDnsMessage..kMaxDnsMessage bytes, others are
// dropped), opens the stream and sends the query framed as DNS over TCP (a
// 2-byte length first), then Eof; the host's first framed answer goes back to
// the client's address with sendto and the stream is closed (Close). At most
// kMaxDnsStreams at once: further datagrams wait in the socket's buffer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace exg::microvm::egress_mux {

enum class Type : uint8_t { Open = 'O', Data = 'D', Credit = 'C', Eof = 'F', Close = 'X' };
enum class Target : uint8_t { Http = 'H', Socks = 'S', Transparent = 'T', Dns = 'N' };

inline constexpr size_t kHeaderBytes = 9;
inline constexpr size_t kMaxData = 64 * 1024;
inline constexpr uint32_t kWindow = 256 * 1024;
inline constexpr size_t kMaxStreams = 128;
inline constexpr size_t kOutHigh = 1024 * 1024;
inline constexpr size_t kOutHard = 4 * 1024 * 1024;
inline constexpr size_t kDestinationBytes = 10;  // egress/transparent.hpp: kDestinationPreambleBytes
inline constexpr size_t kDnsSourceBytes = 4;     // egress/dns.hpp: kDnsStreamPreambleBytes
inline constexpr size_t kMinDnsMessage = 12, kMaxDnsMessage = 512;
inline constexpr size_t kMaxDnsStreams = 32;

// The frame's bytes (tests and the engine).
std::string encode(Type t, uint32_t stream, const char* data, size_t n);

struct Config {
  int channel = -1;   // the stream to the other end (made non-blocking here); not closed
  int stop_fd = -1;   // readable: stop (an eventfd); -1: none
  // Guest side: listening TCP sockets and what their connections reach
  // (a Transparent listener's get their destination from SO_ORIGINAL_DST;
  // one that has none, a connection to the listener itself, is closed).
  std::vector<std::pair<int, Target>> listeners;
  int dns_socket = -1;  // guest side: the resolver's bound UDP socket, or -1
  // Host side: a connected, non-blocking stream socket to the proxy for an
  // opened stream, or -1 (the stream is refused: Close). `destination`: the
  // kDestinationBytes of a Transparent stream, the kDnsSourceBytes of a Dns
  // one (the guest's claims), else empty.
  std::function<int(Target, std::string_view destination)> connect;
};

// Carries streams until the channel ends, fails or breaks the format, or
// stop_fd is readable; then closes every stream's socket. Returns why it
// ended, for a message ("channel closed", "bad frame type 0x41", ...).
std::string run(const Config& cfg);

}  // namespace exg::microvm::egress_mux
