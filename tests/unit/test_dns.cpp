// The in-sandbox resolver's wire format (egress/dns.hpp) and Rules::check_name;
// the resolver and the transparent listener as the microVM bridge reaches
// them (unix sockets: queries framed as DNS over TCP, connections that begin
// with their destination), served live by a Proxy on its own thread.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <mutex>
#include <string>
#include <thread>

#include "egress/dns.hpp"
#include "egress/proxy.hpp"
#include "egress/rules.hpp"
#include "policy/policy.hpp"

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

// ---- served live: the stream resolver and the transparent relay listener ----

struct Audit : AuditSink {
  std::mutex mu;
  std::vector<nlohmann::json> lines;
  bool enabled() const override { return true; }
  void write(nlohmann::json j) override {
    std::lock_guard<std::mutex> g(mu);
    lines.push_back(std::move(j));
  }
  bool has(const std::function<bool(const nlohmann::json&)>& f) {
    for (int i = 0; i < 500; ++i) {
      {
        std::lock_guard<std::mutex> g(mu);
        for (const auto& j : lines)
          if (f(j)) return true;
      }
      ::usleep(10000);
    }
    return false;
  }
};

// A listening unix socket in the abstract namespace (nothing on disk).
int unix_listener(const std::string& name, sockaddr_un& sa) {
  sa = {};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path + 1, sizeof sa.sun_path - 1, "exg-test-%d-%s", ::getpid(), name.c_str());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  EXPECT_EQ(::listen(fd, 16), 0);
  return fd;
}

int connect_unix(const sockaddr_un& sa) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa), 0);
  return fd;
}

std::string read_until_eof(int fd, int ms = 10000) {
  std::string out;
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, ms) != 1) break;  // (a hang fails the comparison, never the run)
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r <= 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

std::string framed(const std::string& m) {
  return std::string{static_cast<char>(m.size() >> 8), static_cast<char>(m.size() & 0xff)} + m;
}

// A proxy with transparent egress whose only allowed name is localhost, its
// loopback address let through by a CIDR rule (so that a test server on
// 127.0.0.1 stands for an allowed upstream).
struct LiveProxy {
  boost::asio::io_context io{1};
  Audit audit;
  std::unique_ptr<Proxy> proxy;
  sockaddr_un dns_at{}, relay_at{};
  std::thread thread;
  LiveProxy() {
    policy::Network net;
    net.allowed_domains.push_back({"localhost", {}});
    net.allowed_cidrs.push_back({"127.0.0.0/8", {}});
    net.denied_domains.push_back({"denied.test", {}});
    auto rules = Rules::from_policy(net);
    EXPECT_TRUE(rules) << rules.error().str();
    ProxyConfig cfg;
    cfg.transparent = true;
    cfg.header_timeout = std::chrono::milliseconds(2000);
    proxy = std::make_unique<Proxy>(io, *rules, &audit, cfg);
    proxy->add_dns_stream_listener(unix_listener("dns", dns_at));
    proxy->add_transparent_relay_listener(unix_listener("relay", relay_at));
    thread = std::thread([this] {
      auto guard = boost::asio::make_work_guard(io);
      io.run();
    });
  }
  ~LiveProxy() {
    boost::asio::post(io, [this] { proxy->stop(); });
    boost::asio::post(io, [this] { io.stop(); });
    thread.join();
  }
  // The framed answers to `queries` (already framed, as sent) after the preamble naming who
  // asked (the guest's own 127.0.0.1 unless said), until the proxy ends the connection.
  std::vector<std::string> ask(const std::string& queries, const std::string& asker = std::string("\x7f\0\0\x01", 4)) {
    int c = connect_unix(dns_at);
    std::string wire = asker + queries;
    EXPECT_EQ(::send(c, wire.data(), wire.size(), MSG_NOSIGNAL), static_cast<ssize_t>(wire.size()));
    ::shutdown(c, SHUT_WR);
    std::string in = read_until_eof(c);
    ::close(c);
    std::vector<std::string> out;
    for (size_t pos = 0; pos + 2 <= in.size();) {
      size_t n = (static_cast<uint8_t>(in[pos]) << 8) | static_cast<uint8_t>(in[pos + 1]);
      if (pos + 2 + n > in.size()) break;
      out.push_back(in.substr(pos + 2, n));
      pos += 2 + n;
    }
    return out;
  }
};

uint8_t rcode_of(const std::string& response) { return response.size() >= 4 ? response[3] & 0xf : 0xff; }

TEST(DnsStream, FramedQueriesGetFramedAnswers) {
  LiveProxy p;
  // Three queries in one write, one of them malformed: three answers, each with its id.
  auto a = p.ask(framed(query("localhost")) + framed(query("denied.test")) + framed("\x12\x34\x01"));
  ASSERT_EQ(a.size(), 2u) << "the runt is dropped (too short to answer), the others answered";
  std::sort(a.begin(), a.end(), [](const std::string& x, const std::string& y) { return rcode_of(x) < rcode_of(y); });
  EXPECT_EQ(rcode_of(a[0]), kRcodeNoError);
  ASSERT_GE(a[0].size(), 4u);
  std::string addr = a[0].substr(a[0].size() - 4);
  EXPECT_EQ(static_cast<uint8_t>(addr[0]), 198);  // an address of the resolver's own range
  EXPECT_EQ(static_cast<uint8_t>(addr[1]) & 0xfe, 18);
  EXPECT_EQ(rcode_of(a[1]), kRcodeNxDomain);
  EXPECT_TRUE(p.audit.has([](const nlohmann::json& j) {
    return j.value("event", "") == "dns" && j.value("host", "") == "denied.test" && j.value("rcode", "") == "NXDOMAIN";
  }));
}

TEST(DnsStream, AnOversizedFrameEndsTheConnection) {
  LiveProxy p;
  std::string big(kDnsMaxStreamQuery + 1, 'x');
  auto a = p.ask(framed(big) + framed(query("localhost")));
  EXPECT_TRUE(a.empty()) << "nothing after a frame past the bound";
  EXPECT_TRUE(p.audit.has([](const nlohmann::json& j) {
    return j.value("event", "") == "dns" && j.value("rule", "") == "malformed query";
  }));
}

TEST(DnsStream, AQueryCutShortGetsNoAnswer) {
  LiveProxy p;
  std::string f = framed(query("localhost"));
  EXPECT_TRUE(p.ask(f.substr(0, f.size() - 3)).empty());
}

// The stream's preamble says who asked: a nested container's queries (an address outside
// 127/8, forwarded to the resolver inside the guest) are audited as its, the guest's own not.
TEST(DnsStream, ANestedContainersQueriesAreAuditedAsItsOwn) {
  LiveProxy p;
  ASSERT_EQ(p.ask(framed(query("localhost")) + framed(query("denied.test")), std::string("\xac\x11\0\x02", 4)).size(), 2u);
  ASSERT_EQ(p.ask(framed(query("denied.test"))).size(), 1u);
  auto nested = [](const char* host, const char* decision) {
    return [=](const nlohmann::json& j) {
      return j.value("event", "") == "dns" && j.value("host", "") == host && j.value("decision", "") == decision &&
             j.value("origin", "") == "nested container" && j.value("origin_address", "") == "172.17.0.2";
    };
  };
  EXPECT_TRUE(p.audit.has(nested("localhost", "allowed")));
  EXPECT_TRUE(p.audit.has(nested("denied.test", "refused")));
  std::lock_guard<std::mutex> g(p.audit.mu);
  int own = 0;
  for (const auto& j : p.audit.lines)
    if (j.value("host", "") == "denied.test" && !j.contains("origin") && !j.contains("origin_address")) ++own;
  EXPECT_EQ(own, 1) << "the guest's own query (127.0.0.1) carries no origin";
}

// A relayed captured connection: the preamble stands for SO_ORIGINAL_DST.
struct Upstream {
  int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  uint16_t port = 0;
  Upstream() {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(l, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    EXPECT_EQ(::listen(l, 4), 0);
    socklen_t len = sizeof sa;
    ::getsockname(l, reinterpret_cast<sockaddr*>(&sa), &len);
    port = ntohs(sa.sin_port);
  }
  ~Upstream() { ::close(l); }
};

// Connections the upstream has been sent so far (accepted and closed here).
int accepted_now(const Upstream& up) {
  int n = 0;
  ::fcntl(up.l, F_SETFL, O_NONBLOCK);
  for (int fd; (fd = ::accept4(up.l, nullptr, nullptr, SOCK_CLOEXEC)) >= 0; ++n) ::close(fd);
  ::fcntl(up.l, F_SETFL, 0);
  return n;
}

// What one read of fd gives within 10 s ("" on a hang or the end).
std::string read_some(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 10000) != 1) return "";
  char buf[256];
  ssize_t n = ::read(fd, buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// The destination's four bytes and port, then the client's own address (the
// guest's own processes: 127.0.0.1; a nested container: its bridge's address).
std::string preamble(const std::string& four, uint16_t port, const std::string& source = std::string("\x7f\0\0\x01", 4)) {
  return four + std::string{static_cast<char>(port >> 8), static_cast<char>(port & 0xff)} + source;
}

TEST(TransparentRelay, ThePreambleNamesTheDestinationAndTheSessionGoesOnAsCaptured) {
  ASSERT_EQ(parse_destination_preamble(std::string("\xc6\x12\x00", 3)), std::nullopt);
  ASSERT_EQ(parse_destination_preamble(std::string("\xcb\x00\x71\x0a\x01\xbb", 6)), std::nullopt);  // no source
  auto d = parse_destination_preamble(std::string("\xcb\x00\x71\x0a\x01\xbb\x0a\x58\x00\x02", 10));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->address.str(), "203.0.113.10");
  EXPECT_EQ(d->port, 443);
  EXPECT_EQ(d->source.str(), "10.88.0.2");
  EXPECT_TRUE(forwarded_source(d->source));
  EXPECT_FALSE(forwarded_source(parse_destination_preamble(preamble(std::string("\xcb\x00\x71\x0a", 4), 80))->source));

  LiveProxy p;
  Upstream up;
  // localhost's handed-out address, from the stream resolver.
  auto a = p.ask(framed(query("localhost")));
  ASSERT_EQ(a.size(), 1u);
  std::string mine = a[0].substr(a[0].size() - 4);

  // Allowed: the preamble in two pieces, the client's bytes right behind it.
  int c = connect_unix(p.relay_at);
  std::string pre = preamble(mine, up.port);
  ASSERT_EQ(::send(c, pre.data(), 3, MSG_NOSIGNAL), 3);
  ::usleep(50000);
  std::string rest = pre.substr(3) + "hello upstream";
  ASSERT_EQ(::send(c, rest.data(), rest.size(), MSG_NOSIGNAL), static_cast<ssize_t>(rest.size()));
  pollfd pf{up.l, POLLIN, 0};
  ASSERT_EQ(::poll(&pf, 1, 10000), 1) << "the proxy connected to localhost's address";
  int s = ::accept4(up.l, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(s, 0);
  char buf[64];
  pollfd ps{s, POLLIN, 0};
  ASSERT_EQ(::poll(&ps, 1, 10000), 1);
  ssize_t n = ::read(s, buf, sizeof buf);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "hello upstream");  // no preamble upstream
  ::close(s);
  ::close(c);

  // A Host header of another name on localhost's address: a mismatch, closed.
  c = connect_unix(p.relay_at);
  std::string req = preamble(mine, up.port) + "GET / HTTP/1.1\r\nHost: denied.test\r\n\r\n";
  ASSERT_EQ(::send(c, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  EXPECT_EQ(read_until_eof(c), "");
  ::close(c);
  EXPECT_TRUE(p.audit.has([](const nlohmann::json& j) {
    return j.value("protocol", "") == "transparent" && j.value("rule", "") == "Host header mismatch";
  }));

  // The guest's claim is judged like any literal: the metadata address is refused.
  c = connect_unix(p.relay_at);
  req = preamble(std::string("\xa9\xfe\xa9\xfe", 4), 80) + "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(c, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  EXPECT_EQ(read_until_eof(c), "");
  ::close(c);
  EXPECT_TRUE(p.audit.has([](const nlohmann::json& j) {
    return j.value("protocol", "") == "transparent" && j.value("host", "") == "169.254.169.254" &&
           j.value("decision", "") == "refused" && !j.contains("origin");
  }));
  // The same from a nested container (a source off loopback): refused, and its
  // audit line says where it came from.
  c = connect_unix(p.relay_at);
  req = preamble(std::string("\xa9\xfe\xa9\xfe", 4), 81, std::string("\x0a\x58\x00\x07", 4)) + "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(c, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  EXPECT_EQ(read_until_eof(c), "");
  ::close(c);
  EXPECT_TRUE(p.audit.has([](const nlohmann::json& j) {
    return j.value("host", "") == "169.254.169.254" && j.value("port", 0) == 81 && j.value("decision", "") == "refused" &&
           j.value("origin", "") == "nested container" && j.value("origin_address", "") == "10.88.0.7";
  }));
  // An address of the range never handed out, and a loopback claim.
  for (auto four : {std::string("\xc6\x13\xff\x01", 4), std::string("\x7f\x00\x00\x01", 4)}) {
    c = connect_unix(p.relay_at);
    req = preamble(four, up.port);
    ASSERT_EQ(::send(c, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
    EXPECT_EQ(read_until_eof(c), "");
    ::close(c);
  }
  EXPECT_TRUE(p.audit.has([](const nlohmann::json& j) { return j.value("rule", "") == "capture range"; }));
  EXPECT_TRUE(p.audit.has([](const nlohmann::json& j) {
    return j.value("rule", "") == "not redirected" && j.value("host", "") == "127.0.0.1";
  }));
  // None of them was ever connected: the mismatch was decided on the client's first bytes
  // before any upstream connection, the others on their destination alone.
  EXPECT_EQ(accepted_now(up), 0) << "a refused connection reached the upstream";
}

// A server-first protocol (SSH, SMTP): the client says nothing, so after kFirstBytesWindow
// the upstream is connected and speaks first. A client that closes without a word within
// the window never gets an upstream connection.
TEST(TransparentRelay, ASilentClientGetsTheServerFirstAndAClientThatLeavesGetsNothing) {
  LiveProxy p;
  Upstream up;
  auto a = p.ask(framed(query("localhost")));
  ASSERT_EQ(a.size(), 1u);
  std::string pre = preamble(a[0].substr(a[0].size() - 4), up.port);

  int c = connect_unix(p.relay_at);
  ASSERT_EQ(::send(c, pre.data(), pre.size(), MSG_NOSIGNAL), static_cast<ssize_t>(pre.size()));
  pollfd pf{up.l, POLLIN, 0};
  ASSERT_EQ(::poll(&pf, 1, 10000), 1) << "the proxy connected after the silent window";
  int s = ::accept4(up.l, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(s, 0);
  const std::string banner = "SSH-2.0-exg-test\r\n";
  ASSERT_EQ(::send(s, banner.data(), banner.size(), MSG_NOSIGNAL), static_cast<ssize_t>(banner.size()));
  EXPECT_EQ(read_some(c), banner);
  ASSERT_EQ(::send(c, "SSH-2.0-client\r\n", 16, MSG_NOSIGNAL), 16);
  EXPECT_EQ(read_some(s), "SSH-2.0-client\r\n");
  ::close(s);
  ::close(c);
  EXPECT_TRUE(p.audit.has([](const nlohmann::json& j) {
    return j.value("protocol", "") == "transparent" && j.value("host", "") == "localhost" &&
           j.value("decision", "") == "allowed";
  }));

  c = connect_unix(p.relay_at);
  ASSERT_EQ(::send(c, pre.data(), pre.size(), MSG_NOSIGNAL), static_cast<ssize_t>(pre.size()));
  ::shutdown(c, SHUT_WR);
  EXPECT_EQ(read_until_eof(c), "");
  ::close(c);
  EXPECT_EQ(accepted_now(up), 0) << "a client that left without a word got an upstream connection";
}

TEST(TransparentRelay, APreambleCutShortIsClosed) {
  LiveProxy p;
  int c = connect_unix(p.relay_at);
  ASSERT_EQ(::send(c, "\xc6\x12", 2, MSG_NOSIGNAL), 2);
  ::shutdown(c, SHUT_WR);
  EXPECT_EQ(read_until_eof(c), "");
  ::close(c);
}

}  // namespace
}  // namespace exg::egress::detail
