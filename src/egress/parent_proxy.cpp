// Upstreams: which proxy of the user's an allowed connection goes through, and
// Session::connect_via: reaching the host through it (HTTP CONNECT or SOCKS5),
// on the session's loop, under its connect deadline.
#include "egress/parent_proxy.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <utility>  // before asio/awaitable.hpp (it uses std::exchange)
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "egress/parent_tls.hpp"
#include "egress/proxy.hpp"
#include "egress/secrets.hpp"

namespace exg::egress {

namespace {

bool matches(const std::string& pattern, const Host& host) {
  if (host.literal) return false;
  if (pattern.starts_with("*.")) {
    std::string_view suffix = std::string_view(pattern).substr(1);
    return host.name.size() > suffix.size() && std::string_view(host.name).ends_with(suffix);
  }
  return host.name == pattern;
}

Result<Via> via_url(const std::string& url, const char* key, const std::string& ca_file) {
  auto u = policy::parse_proxy_url(url);
  if (!u) return fail(Error::msg(std::string("network.parentProxy.") + key, u.error().message));
  Via v;
  v.host = u->host;
  v.port = u->port;
  if (u->tls) {
    auto ctx = make_parent_tls_ctx(ca_file);
    if (!ctx) return fail(Error::msg(std::string("network.parentProxy.") + key, ctx.error().str()));
    v.tls = std::move(*ctx);
  }
  if (u->credentials)
    v.authorization = "Basic " + base64_encode(u->credentials->first + ":" + u->credentials->second);
  v.label = std::string("parentProxy ") + policy::redacted_proxy_url(url);
  return v;
}

}  // namespace

Result<Upstreams> Upstreams::from_policy(const policy::Network& net) {
  Upstreams u;
  if (net.mitm_proxy) {
    Mitm m{net.mitm_proxy->socket_path, {}};
    for (const auto& d : net.mitm_proxy->domains) {
      std::string_view h = d.pattern;
      bool wildcard = h.starts_with("*.");
      if (wildcard) h.remove_prefix(2);
      auto host = normalise_host(h);
      if (!host) return fail(Error::msg("network.mitmProxy.domains " + d.pattern, host.error().why));
      m.patterns.push_back((wildcard ? "*." : "") + host->name);
    }
    u.mitm_ = std::move(m);
  }
  u.http_port_ = net.http_proxy_port;
  u.socks_port_ = net.socks_proxy_port;
  if (const auto& p = net.parent_proxy) {
    if (!p->http.empty()) {
      auto v = via_url(p->http, "http", p->ca_file);
      if (!v) return fail(v.error());
      u.parent_http_ = std::move(*v);
    }
    if (!p->https.empty()) {
      auto v = via_url(p->https, "https", p->ca_file);
      if (!v) return fail(v.error());
      u.parent_https_ = std::move(*v);
    }
    auto np = policy::parse_no_proxy(p->no_proxy);
    if (!np) return fail(Error::msg("network.parentProxy.noProxy", np.error().message));
    u.no_proxy_ = std::move(*np);
    for (const auto& c : u.no_proxy_.cidrs) {
      auto cidr = parse_cidr(c);
      if (!cidr) return fail(Error::msg("network.parentProxy.noProxy", "invalid address range \"" + c + "\""));
      u.no_proxy_cidrs_.push_back(*cidr);
    }
  }
  return u;
}

std::optional<Via> Upstreams::route(const Host& host, bool tunnel, bool socks) const {
  if (mitm_)
    for (const auto& p : mitm_->patterns)
      if (matches(p, host)) return Via{Via::Kind::HttpConnect, "", 0, mitm_->socket, "", "mitmProxy " + mitm_->socket};
  // httpProxyPort / socksProxyPort: the user's proxy for that kind of client.
  if (socks && socks_port_)
    return Via{Via::Kind::Socks5, "127.0.0.1", *socks_port_, "", "", "socksProxyPort " + std::to_string(*socks_port_)};
  if (!socks && http_port_)
    return Via{Via::Kind::HttpConnect, "127.0.0.1", *http_port_, "", "", "httpProxyPort " + std::to_string(*http_port_)};
  if (!parent_http_ && !parent_https_) return std::nullopt;
  if (no_proxy_.all) return std::nullopt;
  if (host.literal) {
    IpAddress a = unmapped(*host.literal);
    for (const auto& c : no_proxy_cidrs_)
      if (c.contains(a)) return std::nullopt;
  } else {
    for (const auto& s : no_proxy_.suffixes)
      if (host.name == s || (host.name.size() > s.size() && host.name.ends_with("." + s))) return std::nullopt;
  }
  // srt: tunnels through the https proxy (else the http one), plain HTTP through the http one only.
  if (tunnel) return parent_https_ ? parent_https_ : parent_http_;
  return parent_http_;
}

namespace detail {

namespace asio = boost::asio;
using asio::awaitable;
using asio::ip::tcp;

namespace {

// Waits until the socket has bytes and peeks at up to `max` of them, without
// consuming: the caller takes exactly the proxy's answer, nothing the host sent after it.
awaitable<std::string> peek(tcp::socket& s, size_t max, size_t have) {
  std::string buf(max, '\0');
  for (;;) {
    ssize_t n = ::recv(s.native_handle(), buf.data(), max, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) co_return std::string();
    if (n > 0 && static_cast<size_t>(n) > have) {
      buf.resize(static_cast<size_t>(n));
      co_return buf;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) co_return std::string();
    boost::system::error_code ec;
    co_await s.async_wait(tcp::socket::wait_read, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return std::string();
  }
}

bool consume(tcp::socket& s, size_t n) {
  std::string sink(n, '\0');
  return ::recv(s.native_handle(), sink.data(), n, MSG_DONTWAIT) == static_cast<ssize_t>(n);
}

// "CONNECT host:port": the proxy's answer head, consumed; its status or an error.
awaitable<std::string> http_connect(tcp::socket& s, const Via& via, const std::string& host, uint16_t port) {
  std::string authority = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  std::string req = "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n";
  if (!via.authorization.empty()) req += "Proxy-Authorization: " + via.authorization + "\r\n";
  req += "\r\n";
  boost::system::error_code ec;
  co_await asio::async_write(s, asio::buffer(req), asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return "writing to it: " + ec.message();
  constexpr size_t kMax = 16 * 1024;
  size_t have = 0;
  for (;;) {
    std::string seen = co_await peek(s, kMax, have);
    if (seen.empty()) co_return std::string("it closed the connection");
    size_t n = head_length(seen);
    if (!n) {
      if (seen.size() >= kMax) co_return std::string("its answer's head is too large");
      have = seen.size();
      continue;
    }
    auto head = parse_response_head(std::string_view(seen).substr(0, n));
    if (!consume(s, n)) co_return std::string("reading its answer failed");
    if (!head) co_return "malformed answer: " + head.error().why;
    if (head->status / 100 != 2)
      co_return "it answered " + std::to_string(head->status) + " " + head->reason.substr(0, 100);
    co_return std::string();
  }
}

// SOCKS5, no authentication, CONNECT by name (or address).
awaitable<std::string> socks_connect(tcp::socket& s, const std::string& host, uint16_t port) {
  boost::system::error_code ec;
  std::string req("\x05\x01\x00", 3);
  co_await asio::async_write(s, asio::buffer(req), asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return "writing to it: " + ec.message();
  std::string got = co_await peek(s, 2, 1);
  if (got.size() < 2 || !consume(s, 2)) co_return std::string("it closed the connection");
  if (got[0] != 5 || got[1] != 0) co_return std::string("it wants an authentication method ExGuardian does not offer");
  std::string r("\x05\x01\x00", 3);
  auto ip = parse_ip(host);
  if (ip && !ip->v6) r += '\x01', r.append(reinterpret_cast<const char*>(ip->bytes), 4);
  else if (ip) r += '\x04', r.append(reinterpret_cast<const char*>(ip->bytes), 16);
  else r += '\x03', r += static_cast<char>(host.size()), r += host;
  r += static_cast<char>(port >> 8), r += static_cast<char>(port & 0xff);
  co_await asio::async_write(s, asio::buffer(r), asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return "writing to it: " + ec.message();
  size_t have = 0;
  for (;;) {
    std::string seen = co_await peek(s, 262, have);
    if (seen.size() < 5) {
      if (seen.empty()) co_return std::string("it closed the connection");
      have = seen.size();
      continue;
    }
    if (seen[0] != 5) co_return std::string("malformed SOCKS5 reply");
    if (seen[1] != 0) co_return "it refused (SOCKS5 reply " + std::to_string((int)(unsigned char)seen[1]) + ")";
    size_t len = seen[3] == 1 ? 10 : seen[3] == 4 ? 22 : seen[3] == 3 ? 7 + (unsigned char)seen[4] : 0;
    if (!len) co_return std::string("malformed SOCKS5 reply");
    if (seen.size() < len) {
      have = seen.size();
      continue;
    }
    if (!consume(s, len)) co_return std::string("reading its reply failed");
    co_return std::string();
  }
}

}  // namespace

void Session::connect_via(Via via, std::function<void(Outcome)> done) {
  out_.via = via.label;
  auto self = shared_from_this();
  asio::co_spawn(st_->io, [self, this, via = std::move(via), done = std::move(done)]() mutable -> awaitable<void> {
    boost::system::error_code ec;
    auto failed = [&](const std::string& why) {
      cancel_timer();
      out_.kind = timed_out_ ? Outcome::TimedOut : Outcome::ConnectFailed;
      out_.error = via.label + ": " + why;
      done(std::move(out_));
    };
    if (!via.unix_path.empty()) {
      // Non-blocking: a listener whose backlog is full fails the connection (EAGAIN), never stalls the loop.
      int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      sockaddr_un sa{};
      sa.sun_family = AF_UNIX;
      via.unix_path.copy(sa.sun_path, sizeof sa.sun_path - 1);
      if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
        std::string why = std::string("connect: ") + std::strerror(errno);
        if (fd >= 0) ::close(fd);
        co_return failed(why);
      }
      if (upstream_.is_open()) upstream_.close(ec);
      upstream_.assign(tcp::v4(), fd, ec);  // a stream socket all the same: splice and reads work alike
      if (ec) {
        ::close(fd);
        co_return failed("assign: " + ec.message());
      }
    } else {
      std::vector<IpAddress> addrs;
      if (auto a = parse_ip(via.host)) {
        addrs = {*a};
      } else if (auto h = st_->hosts_lookup(via.host)) {
        addrs = *h;
      } else {
        if (!resolver_) resolver_ = std::make_unique<tcp::resolver>(st_->io);
        auto res = co_await resolver_->async_resolve(via.host, std::to_string(via.port), tcp::resolver::numeric_service,
                                                     asio::redirect_error(asio::use_awaitable, ec));
        if (closed_) co_return;
        if (ec) co_return failed("cannot resolve it: " + ec.message());
        for (const auto& e : res)
          if (auto a = IpAddress::from_sockaddr(e.endpoint().data())) addrs.push_back(*a);
      }
      bool connected = false;
      for (const auto& a : addrs) {
        asio::ip::address addr;
        if (a.v6) {
          asio::ip::address_v6::bytes_type b;
          std::copy(a.bytes, a.bytes + 16, b.begin());
          addr = asio::ip::address_v6(b);
        } else {
          asio::ip::address_v4::bytes_type b;
          std::copy(a.bytes, a.bytes + 4, b.begin());
          addr = asio::ip::address_v4(b);
        }
        if (upstream_.is_open()) upstream_.close(ec);
        co_await upstream_.async_connect(tcp::endpoint(addr, via.port), asio::redirect_error(asio::use_awaitable, ec));
        if (closed_) co_return;
        if (!ec) {
          connected = true;
          break;
        }
        if (timed_out_) break;
      }
      if (!connected) co_return failed("connect: " + (ec ? ec.message() : std::string("no address")));
      upstream_.set_option(tcp::no_delay(true), ec);
      if (via.tls) {  // https://: what follows goes through TLS to the proxy
        std::string why = co_await tls_to_parent(upstream_, via);
        if (closed_) co_return;
        if (!why.empty()) co_return failed(why);
      }
    }
    // (Not one conditional expression over two co_awaits: g++ 12 frees a temporary of it twice.)
    std::string why;
    if (via.kind == Via::Kind::Socks5) why = co_await socks_connect(upstream_, out_.host, out_.port);
    else why = co_await http_connect(upstream_, via, out_.host, out_.port);
    if (closed_) co_return;
    if (!why.empty()) co_return failed(why);
    cancel_timer();
    out_.kind = Outcome::Connected;
    done(std::move(out_));
  }, asio::detached);
}

}  // namespace detail
}  // namespace exg::egress
