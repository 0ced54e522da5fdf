// The microVM layer's egress channel (microvm/guest/egress_mux.hpp), both ends in
// this process over a socketpair standing in for the virtio-serial port: a
// guest end with a listener on 127.0.0.1 (an ephemeral port), a host end
// whose "proxy" is a unix socketpair per stream held by the test. Bytes both
// ways with half closes, backpressure from a proxy that does not read, and
// the protocol's refusals (a stream past its window, a bad frame, an Open the
// guest side must not take).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <mutex>
#include <set>
#include <tuple>
#include <thread>
#include <vector>

#include "microvm/guest/egress_mux.hpp"

namespace exg::microvm::egress_mux {
namespace {

struct Pair {
  int a = -1, b = -1;
  Pair() {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    a = sv[0], b = sv[1];
  }
};

// A listening TCP socket on 127.0.0.1, an ephemeral port; its address in `sa`.
int loopback_listener(sockaddr_in& sa) {
  int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sa = {};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(l, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  EXPECT_EQ(::listen(l, 16), 0);
  socklen_t len = sizeof sa;
  ::getsockname(l, reinterpret_cast<sockaddr*>(&sa), &len);
  return l;
}

// Both ends of the channel running, each on its thread.
struct World {
  Pair channel;
  int stop_guest = ::eventfd(0, EFD_CLOEXEC), stop_host = ::eventfd(0, EFD_CLOEXEC);
  int listener = -1;
  uint16_t port = 0;
  std::mutex mu;
  std::vector<int> proxy_ends;  // the test's side of each stream the host opened
  std::atomic<int> refuse{0};
  std::future<std::string> guest, host;
  int host_sndbuf = 0;

  World() {
    sockaddr_in sa;
    listener = loopback_listener(sa);
    port = ntohs(sa.sin_port);
    guest = std::async(std::launch::async, [this] {
      Config c;
      c.channel = channel.a;
      c.stop_fd = stop_guest;
      c.listeners = {{listener, Target::Http}};
      return run(c);
    });
    host = std::async(std::launch::async, [this] {
      Config c;
      c.channel = channel.b;
      c.stop_fd = stop_host;
      c.connect = [this](Target t, std::string_view) {
        if (t != Target::Http || refuse) return -1;
        Pair p;
        if (host_sndbuf) ::setsockopt(p.a, SOL_SOCKET, SO_SNDBUF, &host_sndbuf, sizeof host_sndbuf);
        std::lock_guard<std::mutex> g(mu);
        proxy_ends.push_back(p.b);
        return p.a;
      };
      return run(c);
    });
  }
  ~World() {
    uint64_t one = 1;
    (void)!::write(stop_guest, &one, 8);
    (void)!::write(stop_host, &one, 8);
    guest.wait();
    host.wait();
    for (int fd : {channel.a, channel.b, stop_guest, stop_host, listener}) ::close(fd);
    for (int fd : proxy_ends) ::close(fd);
  }
  int client() {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(port);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    return fd;
  }
  int proxy_end(size_t i) {
    for (int k = 0; k < 500; ++k) {
      {
        std::lock_guard<std::mutex> g(mu);
        if (proxy_ends.size() > i) return proxy_ends[i];
      }
      ::usleep(10000);
    }
    return -1;
  }
};

std::string pattern(size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed) >> 3);
  return s;
}

void send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t w = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    ASSERT_GT(w, 0);
    off += static_cast<size_t>(w);
  }
}

std::string read_to_eof(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20000) != 1) break;  // (a hang fails the comparison, never the run)
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r <= 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

TEST(MicrovmEgressMux, BytesBothWaysWithHalfClosesPastManyWindows) {
  World w;
  int c = w.client();
  std::string up = pattern(6 * 1024 * 1024 + 17, 1), down = pattern(5 * 1024 * 1024 + 3, 2);
  std::thread writer([&] {
    send_all(c, up);
    ::shutdown(c, SHUT_WR);  // the client's end of request
  });
  int p = w.proxy_end(0);
  ASSERT_GE(p, 0);
  EXPECT_EQ(read_to_eof(p), up);  // the Eof travels after every byte
  writer.join();
  std::thread answer([&] {
    send_all(p, down);
    ::shutdown(p, SHUT_WR);
  });
  EXPECT_EQ(read_to_eof(c), down);
  answer.join();
  ::close(c);
}

TEST(MicrovmEgressMux, AProxyThatDoesNotReadStopsTheClientWithinBoundedBuffers) {
  World w;
  int c = w.client();
  int fl = 1;
  ::setsockopt(c, SOL_SOCKET, SO_SNDBUF, &fl, sizeof fl);  // (the kernel's minimum)
  std::string chunk(65536, 'x');
  size_t sent = 0;
  // Until the client's send would block for a second: the mux stopped reading it.
  for (;;) {
    pollfd p{c, POLLOUT, 0};
    if (::poll(&p, 1, 1000) != 1) break;
    ssize_t n = ::send(c, chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) sent += static_cast<size_t>(n);
    ASSERT_LT(sent, 64u * 1024 * 1024) << "no backpressure: the mux buffers without bound";
  }
  EXPECT_GE(sent, static_cast<size_t>(kWindow) / 2);  // (it did carry a window's worth first)
  ::close(c);
}

TEST(MicrovmEgressMux, ARefusedConnectClosesTheGuestsClient) {
  World w;
  w.refuse = 1;
  int c = w.client();
  EXPECT_EQ(read_to_eof(c), "");  // closed, nothing read
  ::close(c);
}

// The host end alone, spoken to with raw frames.
struct HostOnly {
  Pair channel;
  int stop = ::eventfd(0, EFD_CLOEXEC);
  std::vector<int> ends;
  std::mutex mu;
  std::vector<std::pair<Target, std::string>> opened;  // what connect() was asked for
  std::future<std::string> host;
  HostOnly() {
    host = std::async(std::launch::async, [this] {
      Config c;
      c.channel = channel.b;
      c.stop_fd = stop;
      c.connect = [this](Target t, std::string_view destination) {
        {
          std::lock_guard<std::mutex> g(mu);
          opened.push_back({t, std::string(destination)});
        }
        Pair p;
        int small = 4096;
        ::setsockopt(p.a, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
        ends.push_back(p.b);  // never read: what the host writes stays unwritten
        return p.a;
      };
      return run(c);
    });
  }
  ~HostOnly() {
    uint64_t one = 1;
    (void)!::write(stop, &one, 8);
    if (host.valid()) host.wait();
    for (int fd : {channel.a, channel.b, stop}) ::close(fd);
    for (int fd : ends) ::close(fd);
  }
  // The frames that come back within `ms`, as (type, stream) pairs.
  std::vector<std::pair<char, uint32_t>> replies(int ms) {
    std::string in;
    char buf[65536];
    for (;;) {
      pollfd p{channel.a, POLLIN, 0};
      if (::poll(&p, 1, ms) != 1) break;
      ssize_t r = ::read(channel.a, buf, sizeof buf);
      if (r <= 0) break;
      in.append(buf, static_cast<size_t>(r));
    }
    std::vector<std::pair<char, uint32_t>> out;
    for (size_t pos = 0; pos + kHeaderBytes <= in.size();) {
      auto u = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(in[pos + i])); };
      uint32_t id = u(1) << 24 | u(2) << 16 | u(3) << 8 | u(4), n = u(5) << 24 | u(6) << 16 | u(7) << 8 | u(8);
      out.push_back({in[pos], id});
      pos += kHeaderBytes + n;
    }
    return out;
  }
};

TEST(MicrovmEgressMux, AStreamPastItsWindowIsAborted) {
  HostOnly h;
  char t = static_cast<char>(Target::Http);
  send_all(h.channel.a, encode(Type::Open, 7, &t, 1));
  std::string data(kMaxData, 'd');
  for (uint32_t sent = 0; sent <= kWindow; sent += kMaxData) send_all(h.channel.a, encode(Type::Data, 7, data.data(), data.size()));
  auto r = h.replies(500);
  bool closed = false;
  for (auto& [type, id] : r) closed |= type == static_cast<char>(Type::Close) && id == 7;
  EXPECT_TRUE(closed) << "a peer past the window must see its stream aborted";
  EXPECT_EQ(h.host.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);  // the channel goes on
}

TEST(MicrovmEgressMux, ABadFrameEndsTheChannel) {
  HostOnly h;
  send_all(h.channel.a, std::string("Z\0\0\0\1\0\0\0\0", 9));
  ASSERT_EQ(h.host.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_NE(h.host.get().find("bad frame (type 0x5a"), std::string::npos);
}

TEST(MicrovmEgressMux, AnOversizedFrameEndsTheChannel) {
  HostOnly h;
  std::string hdr = encode(Type::Data, 1, nullptr, 0);
  hdr[5] = 0x7f;  // length 2 GiB
  send_all(h.channel.a, hdr);
  ASSERT_EQ(h.host.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_NE(h.host.get().find("bad frame"), std::string::npos);
}

TEST(MicrovmEgressMux, TheGuestEndRefusesAnOpenFromTheHost) {
  Pair ch;
  int stop = ::eventfd(0, EFD_CLOEXEC);
  auto guest = std::async(std::launch::async, [&] {
    Config c;
    c.channel = ch.b;
    c.stop_fd = stop;  // no connect: the guest side opens nothing on request
    return run(c);
  });
  char t = static_cast<char>(Target::Http);
  send_all(ch.a, encode(Type::Open, 3, &t, 1));
  char buf[64];
  pollfd p{ch.a, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  ASSERT_EQ(::read(ch.a, buf, sizeof buf), static_cast<ssize_t>(kHeaderBytes));
  EXPECT_EQ(std::string(buf, kHeaderBytes), encode(Type::Close, 3, nullptr, 0));
  uint64_t one = 1;
  (void)!::write(stop, &one, 8);
  guest.wait();
  for (int fd : {ch.a, ch.b, stop}) ::close(fd);
}

// Open's payload: the target alone, or for Transparent the target and the
// 10-byte destination (and source), for Dns the target and the 4-byte asker;
// any other is refused with Close and connects nothing.
TEST(MicrovmEgressMux, OpenPayloadsPerTarget) {
  HostOnly h;
  const std::string dest("\xc6\x12\x00\x01\x01\xbb\x7f\x00\x00\x01", kDestinationBytes);  // 198.18.0.1:443 from 127.0.0.1
  auto open = [&](uint32_t id, const std::string& payload) {
    send_all(h.channel.a, encode(Type::Open, id, payload.data(), payload.size()));
  };
  open(1, "T" + dest);             // transparent with its destination: connected
  const std::string asker("\x0a\x58\x00\x02", kDnsSourceBytes);  // 10.88.0.2
  open(2, "N" + asker);            // dns with who asked: connected
  open(3, "T");                    // transparent without a destination
  open(4, "T" + dest + "x");       // one byte too many
  open(5, "T" + dest.substr(0, 9));  // one too few
  open(6, "H" + dest);             // a destination for a target that takes none
  open(7, "Q");                    // an unknown target
  open(8, "");                     // no target at all
  open(9, "S");                    // socks: connected
  open(10, "N");                   // dns without who asked
  open(11, "N" + asker + "x");     // one byte too many
  open(12, "T" + asker);           // an asker for a target that takes a destination
  auto r = h.replies(500);
  std::set<uint32_t> closed;
  for (auto& [type, id] : r)
    if (type == static_cast<char>(Type::Close)) closed.insert(id);
  EXPECT_EQ(closed, (std::set<uint32_t>{3, 4, 5, 6, 7, 8, 10, 11, 12}));
  std::lock_guard<std::mutex> g(h.mu);
  ASSERT_EQ(h.opened.size(), 3u);
  EXPECT_EQ(h.opened[0].first, Target::Transparent);
  EXPECT_EQ(h.opened[0].second, dest);
  EXPECT_EQ(h.opened[1].first, Target::Dns);
  EXPECT_EQ(h.opened[1].second, asker);
  EXPECT_EQ(h.opened[2].first, Target::Socks);
  EXPECT_EQ(h.host.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);  // the channel goes on
}

// The guest end with a transparent listener: a connection that netfilter did
// not redirect (here: any, the test makes no NAT) has no destination of its
// own. With no conntrack entry for it, it is closed without a stream; where
// the kernel tracks it anyway, its destination is the listener itself, which
// the proxy refuses as a loopback destination. Never anything else.
TEST(MicrovmEgressMux, AConnectionToTheTransparentListenerItselfNamesNothingElse) {
  Pair ch;
  int stop = ::eventfd(0, EFD_CLOEXEC);
  sockaddr_in sa;
  int l = loopback_listener(sa);
  auto guest = std::async(std::launch::async, [&] {
    Config c;
    c.channel = ch.b;
    c.stop_fd = stop;
    c.listeners = {{l, Target::Transparent}};
    return run(c);
  });
  int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(c, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  char buf[64];
  pollfd p{ch.a, POLLIN, 0};
  if (::poll(&p, 1, 500) == 1) {
    ssize_t n = ::read(ch.a, buf, sizeof buf);
    ASSERT_EQ(n, static_cast<ssize_t>(kHeaderBytes + 1 + kDestinationBytes));
    EXPECT_EQ(buf[0], static_cast<char>(Type::Open));
    std::string want = "T" + std::string(reinterpret_cast<const char*>(&sa.sin_addr.s_addr), 4) +
                       std::string(reinterpret_cast<const char*>(&sa.sin_port), 2) +
                       std::string("\x7f\x00\x00\x01", 4);  // from 127.0.0.1: not a nested container
    EXPECT_EQ(std::string(buf + kHeaderBytes, 1 + kDestinationBytes), want);
  } else {
    EXPECT_EQ(read_to_eof(c), "");  // closed, nothing read, no Open
  }
  uint64_t one = 1;
  (void)!::write(stop, &one, 8);
  guest.wait();
  for (int fd : {ch.a, ch.b, stop, l, c}) ::close(fd);
}

// The guest end's resolver socket: a query becomes a Dns stream (Open, the
// query framed with its length, Eof); the host's framed answer goes back to
// the client as one datagram and the stream is closed. Runts and oversized
// datagrams open nothing; an answer longer than a DNS message aborts.
struct GuestDns {
  Pair ch;
  int stop = ::eventfd(0, EFD_CLOEXEC);
  int dns = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int client = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in at{};
  std::future<std::string> guest;
  std::string in;  // frames read from the guest, not yet taken
  GuestDns() {
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(dns, reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
    socklen_t len = sizeof at;
    ::getsockname(dns, reinterpret_cast<sockaddr*>(&at), &len);
    guest = std::async(std::launch::async, [this] {
      Config c;
      c.channel = ch.b;
      c.stop_fd = stop;
      c.dns_socket = dns;
      return run(c);
    });
  }
  ~GuestDns() {
    uint64_t one = 1;
    (void)!::write(stop, &one, 8);
    guest.wait();
    for (int fd : {ch.a, ch.b, stop, dns, client}) ::close(fd);
  }
  void ask(const std::string& q) {
    ::sendto(client, q.data(), q.size(), 0, reinterpret_cast<sockaddr*>(&at), sizeof at);
  }
  // The next frame from the guest within `ms`: (type, id, payload); type 0 when none.
  std::tuple<char, uint32_t, std::string> frame(int ms) {
    for (;;) {
      if (in.size() >= kHeaderBytes) {
        auto u = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(in[i])); };
        uint32_t id = u(1) << 24 | u(2) << 16 | u(3) << 8 | u(4), n = u(5) << 24 | u(6) << 16 | u(7) << 8 | u(8);
        if (in.size() >= kHeaderBytes + n) {
          std::tuple<char, uint32_t, std::string> f{in[0], id, in.substr(kHeaderBytes, n)};
          in.erase(0, kHeaderBytes + n);
          return f;
        }
      }
      pollfd p{ch.a, POLLIN, 0};
      if (::poll(&p, 1, ms) != 1) return {0, 0, ""};
      char buf[4096];
      ssize_t r = ::read(ch.a, buf, sizeof buf);
      if (r <= 0) return {0, 0, ""};
      in.append(buf, static_cast<size_t>(r));
    }
  }
  std::string answer(int ms) {
    pollfd p{client, POLLIN, 0};
    if (::poll(&p, 1, ms) != 1) return "";
    char buf[1024];
    ssize_t r = ::recv(client, buf, sizeof buf, 0);
    return r > 0 ? std::string(buf, static_cast<size_t>(r)) : "";
  }
};

std::string framed(const std::string& m) {
  return std::string{static_cast<char>(m.size() >> 8), static_cast<char>(m.size() & 0xff)} + m;
}

TEST(MicrovmEgressMux, AResolverQueryTravelsAsAFramedStream) {
  GuestDns g;
  const std::string q = "\x12\x34" + std::string(10, '\0') + "query";
  g.ask(q);
  auto [t1, id, p1] = g.frame(5000);
  EXPECT_EQ(t1, static_cast<char>(Type::Open));
  EXPECT_EQ(p1, std::string("N\x7f\x00\x00\x01", 1 + kDnsSourceBytes)) << "the target, then who asked (127.0.0.1 here)";
  auto [t2, id2, p2] = g.frame(5000);
  EXPECT_EQ(t2, static_cast<char>(Type::Data));
  EXPECT_EQ(id2, id);
  EXPECT_EQ(p2, framed(q));
  auto [t3, id3, p3] = g.frame(5000);
  EXPECT_EQ(t3, static_cast<char>(Type::Eof));
  EXPECT_EQ(id3, id);
  // The answer in two pieces: nothing goes to the client before it is whole.
  const std::string a = "\x12\x34" + std::string(10, '\1') + "answer";
  std::string f = framed(a);
  send_all(g.ch.a, encode(Type::Data, id, f.data(), 5));
  EXPECT_EQ(g.answer(200), "");
  send_all(g.ch.a, encode(Type::Data, id, f.data() + 5, f.size() - 5));
  EXPECT_EQ(g.answer(5000), a);
  auto [t4, id4, p4] = g.frame(5000);
  EXPECT_EQ(t4, static_cast<char>(Type::Close));
  EXPECT_EQ(id4, id);
}

TEST(MicrovmEgressMux, ResolverDatagramsOutOfBoundsAndOversizedAnswers) {
  GuestDns g;
  g.ask("runt");                                 // below a DNS header
  g.ask(std::string(kMaxDnsMessage + 1, 'x'));  // above a DNS message over UDP
  EXPECT_EQ(std::get<0>(g.frame(300)), 0) << "no stream for a datagram out of bounds";
  g.ask(std::string(kMinDnsMessage, 'q'));
  auto [t, id, p] = g.frame(5000);
  ASSERT_EQ(t, static_cast<char>(Type::Open));
  g.frame(5000);  // Data
  g.frame(5000);  // Eof
  std::string big = "\x02\x01";  // an answer of 513 bytes claimed
  send_all(g.ch.a, encode(Type::Data, id, big.data(), big.size()));
  auto [t2, id2, p2] = g.frame(5000);
  EXPECT_EQ(t2, static_cast<char>(Type::Close));
  EXPECT_EQ(id2, id);
  EXPECT_EQ(g.answer(200), "");
  // An Eof before a whole answer: aborted too, nothing sent.
  g.ask(std::string(kMinDnsMessage, 'r'));
  auto [t3, id3, p3] = g.frame(5000);
  ASSERT_EQ(t3, static_cast<char>(Type::Open));
  g.frame(5000);
  g.frame(5000);
  send_all(g.ch.a, encode(Type::Eof, id3, nullptr, 0));
  auto [t4, id4, p4] = g.frame(5000);
  EXPECT_EQ(t4, static_cast<char>(Type::Close));
  EXPECT_EQ(id4, id3);
  EXPECT_EQ(g.answer(200), "");
}

}  // namespace
}  // namespace exg::microvm::egress_mux
