// TLS to a parent proxy (an https:// URL in srt's network.parentProxy): the
// handshake on the session's connection to the proxy (its certificate verified
// against the system's trust store and the policy's caFile, its name against
// the URL's host, SNI sent), then a relay that carries the session's plain
// bytes through that TLS channel. The session gets the other end of a socket
// pair as its upstream, so CONNECT, its answer and the tunnel after it work
// exactly as over a TCP connection to the proxy (splice included).
//
// The relay is a small state machine on the session's loop: OpenSSL reads and
// writes the proxy's socket itself (non-blocking), the relay waits for
// whichever readiness it asked for. It ends when both directions have ended,
// on an error of either side, or when the session closes its end (HUP).
#include "egress/parent_tls.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>

#include <utility>  // before asio/awaitable.hpp (it uses std::exchange)
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "egress/openssl_handles.hpp"
#include "egress/secrets.hpp"
#include "util/lazy_libs.hpp"

namespace exg::egress {

using detail::openssl_reason;

Result<std::shared_ptr<SSL_CTX>> make_parent_tls_ctx(const std::string& ca_file) {
  if (auto r = load_shared_libs(); !r) return fail(r.error());
  auto c = make_upstream_ctx("");  // the system's store, TLS >= 1.2, peer verification
  if (!c) return fail(c.error());
  if (!ca_file.empty() && SSL_CTX_load_verify_locations(c->get(), ca_file.c_str(), nullptr) != 1)
    return fail(Error::msg("network.parentProxy.caFile " + ca_file, "cannot load it: " + openssl_reason()));
  return std::shared_ptr<SSL_CTX>(c->release(), SSL_CTX_free);
}

namespace detail {

namespace asio = boost::asio;
using asio::awaitable;
using asio::ip::tcp;

namespace {

class TlsRelay : public std::enable_shared_from_this<TlsRelay> {
 public:
  TlsRelay(tcp::socket outer, SslPtr ssl, tcp::socket inner)
      : outer_(std::move(outer)), inner_(std::move(inner)), ssl_(std::move(ssl)) {}
  void start() { pump(); }

 private:
  enum Wait { InnerRead, InnerWrite, InnerHup, OuterRead, OuterWrite, kWaits };

  void pump() {
    if (done_) return;
    bool need[kWaits] = {};
    if (!up(need) || !down(need)) return close();
    if (inner_eof_ && up_.empty() && outer_eof_ && down_off_ == down_.size()) return close();
    if (inner_eof_) {
      // The session may have closed its end altogether (not only shut its writing side):
      // nothing more can go to it, so the proxy's side is let go too.
      pollfd p{inner_.native_handle(), POLLOUT, 0};
      if (::poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR))) return close();
      need[InnerHup] = true;
    }
    for (int w = 0; w < kWaits; ++w)
      if (need[w]) arm(static_cast<Wait>(w));
  }

  // The session's bytes into the TLS channel.
  bool up(bool* need) {
    for (;;) {
      if (up_.empty() && !inner_eof_) {
        ssize_t n = ::recv(inner_.native_handle(), buf_.data(), buf_.size(), MSG_DONTWAIT);
        if (n > 0) up_.assign(buf_.data(), static_cast<size_t>(n));
        else if (n == 0) inner_eof_ = true;
        else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) need[InnerRead] = true;
        else return false;
      }
      if (!up_.empty()) {
        ERR_clear_error();
        int r = SSL_write(ssl_.get(), up_.data(), static_cast<int>(up_.size()));
        if (r > 0) {
          up_.erase(0, static_cast<size_t>(r));
          continue;
        }
        int e = SSL_get_error(ssl_.get(), r);
        if (e == SSL_ERROR_WANT_WRITE) need[OuterWrite] = true;
        else if (e == SSL_ERROR_WANT_READ) need[OuterRead] = true;
        else return false;
        return true;
      }
      if (inner_eof_ && !notified_) {  // close_notify: the proxy's cue that nothing more comes
        notified_ = true;
        ERR_clear_error();
        SSL_shutdown(ssl_.get());
      }
      return true;
    }
  }

  // The proxy's bytes out of the TLS channel, to the session.
  bool down(bool* need) {
    for (;;) {
      if (down_off_ == down_.size() && !outer_eof_) {
        down_.clear();
        down_off_ = 0;
        ERR_clear_error();
        int r = SSL_read(ssl_.get(), buf_.data(), static_cast<int>(buf_.size()));
        if (r > 0) {
          down_.assign(buf_.data(), static_cast<size_t>(r));
        } else {
          int e = SSL_get_error(ssl_.get(), r);
          if (e == SSL_ERROR_ZERO_RETURN) outer_eof_ = true;
          else if (e == SSL_ERROR_WANT_READ) need[OuterRead] = true;
          else if (e == SSL_ERROR_WANT_WRITE) need[OuterWrite] = true;
          else return false;
        }
      }
      if (down_off_ < down_.size()) {
        ssize_t n = ::send(inner_.native_handle(), down_.data() + down_off_, down_.size() - down_off_,
                           MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
          down_off_ += static_cast<size_t>(n);
          continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) need[InnerWrite] = true;
        else return false;
        return true;
      }
      if (outer_eof_ && !inner_shut_) {
        inner_shut_ = true;
        ::shutdown(inner_.native_handle(), SHUT_WR);
      }
      return true;
    }
  }

  void arm(Wait w) {
    if (waiting_[w]) return;
    waiting_[w] = true;
    tcp::socket& s = w == OuterRead || w == OuterWrite ? outer_ : inner_;
    auto type = w == InnerRead || w == OuterRead ? tcp::socket::wait_read
                : w == InnerHup                  ? tcp::socket::wait_error
                                                 : tcp::socket::wait_write;
    s.async_wait(type, [self = shared_from_this(), w](const boost::system::error_code&) {
      self->waiting_[w] = false;
      self->pump();
    });
  }

  void close() {
    done_ = true;
    boost::system::error_code ec;
    outer_.close(ec);
    inner_.close(ec);
  }

  tcp::socket outer_, inner_;
  SslPtr ssl_;
  std::string up_, down_;
  size_t down_off_ = 0;
  std::array<char, 16 * 1024> buf_{};
  bool waiting_[kWaits] = {};
  bool inner_eof_ = false, outer_eof_ = false, notified_ = false, inner_shut_ = false, done_ = false;
};

}  // namespace

awaitable<std::string> tls_to_parent(tcp::socket& upstream, const Via& via) {
  SslPtr ssl(SSL_new(via.tls.get()));
  if (!ssl) co_return "TLS: " + openssl_reason();
  boost::system::error_code ec;
  upstream.native_non_blocking(true, ec);
  if (ec || SSL_set_fd(ssl.get(), upstream.native_handle()) != 1) co_return std::string("TLS: cannot use the socket");
  SSL_set_connect_state(ssl.get());
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl.get());
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  bool literal = parse_ip(via.host).has_value();
  // SNI is a name, never an address (RFC 6066 3); an address is checked against the certificate's IP entries.
  if (literal ? X509_VERIFY_PARAM_set1_ip_asc(param, via.host.c_str()) != 1
              : (SSL_set_tlsext_host_name(ssl.get(), via.host.c_str()) != 1 ||
                 X509_VERIFY_PARAM_set1_host(param, via.host.c_str(), via.host.size()) != 1))
    co_return "TLS: cannot check the name " + via.host;
  for (;;) {
    ERR_clear_error();
    int r = SSL_do_handshake(ssl.get());
    if (r == 1) break;
    int e = SSL_get_error(ssl.get(), r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
      co_await upstream.async_wait(e == SSL_ERROR_WANT_READ ? tcp::socket::wait_read : tcp::socket::wait_write,
                                   asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return "TLS handshake: " + ec.message();
      continue;
    }
    long v = SSL_get_verify_result(ssl.get());
    if (v != X509_V_OK) co_return std::string("TLS: certificate not trusted: ") + X509_verify_cert_error_string(v);
    co_return "TLS handshake failed: " + openssl_reason();
  }
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0)
    co_return std::string("socketpair: ") + std::strerror(errno);
  auto io = upstream.get_executor();
  tcp::socket outer(std::move(upstream)), session_end(io), relay_end(io);
  // Stream sockets all the same: asio's waits, splice and reads work on them as on TCP.
  session_end.assign(tcp::v4(), sv[0], ec);
  if (ec) ::close(sv[0]);
  boost::system::error_code ec2;
  relay_end.assign(tcp::v4(), sv[1], ec2);
  if (ec2) ::close(sv[1]);
  if (ec || ec2) co_return "socketpair: " + (ec ? ec : ec2).message();
  upstream = std::move(session_end);
  std::make_shared<TlsRelay>(std::move(outer), std::move(ssl), std::move(relay_end))->start();
  co_return std::string();
}

}  // namespace detail
}  // namespace exg::egress
