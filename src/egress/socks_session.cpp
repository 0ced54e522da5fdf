// The SOCKS5 front end (RFC 1928): no authentication, or RFC 1929
// username/password (user "exguardian", the token as password) when the
// listener requires the token; CONNECT with a domain, IPv4 or IPv6 address;
// BIND and UDP ASSOCIATE answered with 0x07.
#include <sys/socket.h>

#include <cerrno>

#include "egress/proxy.hpp"

namespace exg::egress::detail {
namespace {

using boost::asio::ip::tcp;

enum Reply : uint8_t {
  kSucceeded = 0, kGeneralFailure = 1, kNotAllowed = 2, kNetUnreachable = 3, kHostUnreachable = 4,
  kConnRefused = 5, kCmdUnsupported = 7, kAtypUnsupported = 8,
};

std::string reply(uint8_t code) { return std::string("\x05", 1) + (char)code + std::string("\x00\x01\0\0\0\0\0\0", 8); }

std::string success_reply(const tcp::endpoint& bound) {
  std::string r("\x05\x00\x00", 3);
  auto a = bound.address();
  if (a.is_v4()) {
    r += '\x01';
    auto b = a.to_v4().to_bytes();
    r.append((const char*)b.data(), b.size());
  } else {
    r += '\x04';
    auto b = a.to_v6().to_bytes();
    r.append((const char*)b.data(), b.size());
  }
  r += (char)(bound.port() >> 8);
  r += (char)(bound.port() & 0xff);
  return r;
}

class SocksSession : public Session {
 public:
  SocksSession(std::shared_ptr<ProxyState> st, tcp::socket s, bool auth)
      : Session(std::move(st), std::move(s), "socks5", auth) {}

  void start() override {
    arm_timer(st_->cfg.header_timeout, "header");
    greeting();
  }

  void refuse_over_limit() override {
    // Answer the whole handshake at once (method "no auth", then "general
    // failure"): clients read both in turn without another round trip from us.
    log_over_limit();
    reply_and_close(std::string("\x05\x00", 2) + reply(kGeneralFailure));
  }

 private:
  std::shared_ptr<SocksSession> self() { return std::static_pointer_cast<SocksSession>(shared_from_this()); }

  bool too_long() { return in_.size() > st_->cfg.max_header_bytes; }

  void greeting() {
    bool no_auth = false, userpass = false;
    long n = parse_socks_greeting(in_, no_auth, userpass);
    if (n < 0) {
      log_malformed("not a SOCKS5 greeting");
      return close();
    }
    if (n == 0) {
      if (too_long()) return close();
      return read_more([s = self()] { s->greeting(); });
    }
    in_.erase(0, (size_t)n);
    if (auth_) {
      if (!userpass) {
        log_auth_failure("", 0, "SOCKS5 client offers no username/password method");
        return reply_and_close(std::string("\x05\xff", 2));
      }
      return write_then(std::string("\x05\x02", 2), [](SocksSession& s) { s.userpass(); });
    }
    if (!no_auth) {
      log_malformed("SOCKS5 client offers no 'no authentication' method");
      return reply_and_close(std::string("\x05\xff", 2));
    }
    write_then(std::string("\x05\x00", 2), [](SocksSession& s) { s.request(); });
  }

  // A short handshake reply: sent at once (the socket is writable), then `next`.
  void write_then(std::string bytes, void (*next)(SocksSession&)) {
    ssize_t n = ::send(client_.native_handle(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == (ssize_t)bytes.size()) return next(*this);
    if (n > 0) bytes.erase(0, (size_t)n);
    else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return close();
    auto buf = std::make_shared<std::string>(std::move(bytes));
    boost::asio::async_write(client_, boost::asio::buffer(*buf),
                             [s = self(), buf, next](const boost::system::error_code& ec, size_t) {
                               if (s->closed_) return;
                               if (ec) return s->close();
                               next(*s);
                             });
  }

  void userpass() {
    std::string user, pass;
    long n = parse_socks_userpass(in_, user, pass);
    if (n < 0) {
      log_malformed("malformed SOCKS5 username/password request");
      return reply_and_close(std::string("\x01\x01", 2));
    }
    if (n == 0) {
      if (too_long()) return close();
      return read_more([s = self()] { s->userpass(); });
    }
    in_.erase(0, (size_t)n);
    bool ok = constant_time_equal(user, "exguardian") & constant_time_equal(pass, st_->cfg.token);
    if (!ok) {
      log_auth_failure("", 0, "wrong SOCKS5 username or password");
      return reply_and_close(std::string("\x01\x01", 2));
    }
    write_then(std::string("\x01\x00", 2), [](SocksSession& s) { s.request(); });
  }

  void request() {
    SocksRequest r;
    long n = parse_socks_request(in_, r);
    if (n == -2) {
      log_malformed("SOCKS5 address type unsupported");
      return reply_and_close(reply(kAtypUnsupported));
    }
    if (n < 0) {
      log_malformed("malformed SOCKS5 request");
      return reply_and_close(reply(kGeneralFailure));
    }
    if (n == 0) {
      if (too_long()) return close();
      return read_more([s = self()] { s->request(); });
    }
    std::string rest = in_.substr((size_t)n);
    std::string().swap(in_);
    if (r.cmd != 1) {
      Outcome o;
      o.host = r.host;
      o.port = r.port;
      o.decision = Decision{false, r.cmd == 2 ? "socks5 BIND is not supported" : r.cmd == 3 ? "socks5 UDP ASSOCIATE is not supported" : "socks5 command unsupported", "command not supported"};
      log_refusal(o.host, o.port, o.decision, std::nullopt, {});
      return reply_and_close(reply(kCmdUnsupported));
    }
    if (exfiltration_in(r.host, "socks target", r.host, r.port)) return reply_and_close(reply(kNotAllowed));
    decide_and_connect(r.host, r.port, [s = self(), rest = std::move(rest)](Outcome o) mutable {
      if (o.kind != Outcome::Connected) return s->on_failure(o);
      s->out_ = o;
      boost::system::error_code ec;
      auto bound = s->upstream_.local_endpoint(ec);
      // A host that has secrets (or requests under a rule): TLS is terminated here (never tunnelled).
      if (s->terminates(o.host, o.port)) {
        auto ids = s->secrets_for(o.host, o.port);
        if (!s->st_->secret_index->now()->config().ca) {
          o.kind = Outcome::Refused;
          o.decision = Decision{false, "secrets without a certificate authority", "cannot intercept"};
          return s->on_failure(o);
        }
        return s->intercept(std::move(ids), success_reply(bound), std::move(rest));
      }
      auto t = std::make_shared<Tunnel>(std::move(s->client_), std::move(s->upstream_), s->st_->cfg, s->st_->shared,
                                        s->tunnel_done());
      if (auto f = s->exfiltration_filter(o.host, o.port)) t->set_up_filter(std::move(f));
      s->run_tunnel(t, "", std::move(rest), success_reply(bound));
    });
  }

  void on_failure(const Outcome& o) {
    switch (o.kind) {
      case Outcome::Refused:
      case Outcome::BadHost:
        log_refusal(o.host, o.port, o.decision, o.address, o.refused_addresses);
        return reply_and_close(reply(kNotAllowed));
      case Outcome::DnsFailed:
      case Outcome::TimedOut:
        log_connect_failure(o);
        return reply_and_close(reply(kHostUnreachable));
      default: {
        log_connect_failure(o);
        namespace err = boost::asio::error;
        uint8_t code = o.connect_ec == err::connection_refused   ? kConnRefused
                       : o.connect_ec == err::network_unreachable ? kNetUnreachable
                                                                  : kHostUnreachable;
        return reply_and_close(reply(code));
      }
    }
  }
};

}  // namespace

std::shared_ptr<Session> make_socks_session(std::shared_ptr<ProxyState> st, tcp::socket s, bool auth) {
  return std::make_shared<SocksSession>(std::move(st), std::move(s), auth);
}

}  // namespace exg::egress::detail
