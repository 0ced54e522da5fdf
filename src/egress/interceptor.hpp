// The intercepting side of a session (intercept_session.cpp): TLS to the
// client and to the upstream, one HTTP/1.1 request at a time, and a WebSocket
// once a request was upgraded (intercept_websocket.cpp).
#pragma once

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <array>
#include <utility>  // before asio/awaitable.hpp (it uses std::exchange)
#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <climits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "egress/openssl_handles.hpp"
#include "egress/proxy.hpp"
#include "egress/websocket_frame.hpp"

namespace exg::egress::detail {

// One TLS end over a socket: OpenSSL reads from and writes to memory BIOs,
// this moves those bytes over the socket with asio's waits.
namespace asio = boost::asio;
using asio::awaitable;
using asio::ip::tcp;

class TlsEnd {
 public:
  TlsEnd(tcp::socket& sock, SslPtr ssl) : sock_(sock), ssl_(std::move(ssl)) {
    rbio_ = BIO_new(BIO_s_mem());
    wbio_ = BIO_new(BIO_s_mem());
    BIO_set_mem_eof_return(rbio_, -1);
    SSL_set_bio(ssl_.get(), rbio_, wbio_);  // owned by the SSL from here
  }
  SSL* ssl() const { return ssl_.get(); }
  void feed(std::string_view bytes) {
    if (!bytes.empty()) BIO_write(rbio_, bytes.data(), (int)bytes.size());
  }

  // Runs an SSL operation to completion: > 0 done, 0 the peer ended, < 0 error.
  template <class Op>
  awaitable<int> run(Op op) {
    for (;;) {
      ERR_clear_error();
      int r = op();
      int e = r > 0 ? SSL_ERROR_NONE : SSL_get_error(ssl_.get(), r);
      if (!co_await flush()) co_return -1;
      if (r > 0) co_return r;
      if (e == SSL_ERROR_ZERO_RETURN) co_return 0;
      if (e == SSL_ERROR_WANT_READ) {
        if (eof_) co_return 0;
        boost::system::error_code ec;
        size_t n = co_await sock_.async_read_some(asio::buffer(buf_), asio::redirect_error(asio::use_awaitable, ec));
        if (ec == asio::error::eof) {
          eof_ = true;
          BIO_set_mem_eof_return(rbio_, 0);
          continue;
        }
        if (ec) co_return -1;
        BIO_write(rbio_, buf_.data(), (int)n);
        continue;
      }
      if (e == SSL_ERROR_WANT_WRITE) continue;
      co_return -1;
    }
  }

  awaitable<long> read(char* p, size_t n) {
    co_return co_await run([&] { return SSL_read(ssl_.get(), p, (int)std::min<size_t>(n, INT_MAX)); });
  }
  // Whether there is something to read now or within `wait` (decrypted bytes
  // held, bytes not yet decrypted, the socket readable, or its end). The wait
  // on the socket is not cancelled when the time is up (a cancel would end the
  // other direction's write on it too): it ends, unseen, when bytes come.
  awaitable<bool> readable_within(std::chrono::milliseconds wait);  // (intercept_websocket.cpp)
  awaitable<bool> write(std::string_view d) {
    while (!d.empty()) {
      int r = co_await run([&] { return SSL_write(ssl_.get(), d.data(), (int)std::min<size_t>(d.size(), 1 << 20)); });
      if (r <= 0) co_return false;
      d.remove_prefix((size_t)r);
    }
    co_return true;
  }
  // close_notify, best effort (the socket closes right after).
  awaitable<void> shutdown() {
    if (SSL_is_init_finished(ssl_.get())) {
      SSL_shutdown(ssl_.get());
      co_await flush();
    }
  }

 private:
  // One flush at a time: once a WebSocket is relayed, both directions write
  // (a read may answer a key update); a second caller's bytes stay in the BIO
  // and the flush under way sends them after its own.
  awaitable<bool> flush() {
    if (flushing_) co_return true;
    flushing_ = true;
    struct Done {
      bool& f;
      ~Done() { f = false; }
    } done{flushing_};
    while (BIO_ctrl_pending(wbio_) > 0) {
      int n = BIO_read(wbio_, out_.data(), (int)out_.size());
      if (n <= 0) break;
      boost::system::error_code ec;
      co_await asio::async_write(sock_, asio::buffer(out_.data(), (size_t)n),
                                 asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return false;
    }
    co_return true;
  }

  tcp::socket& sock_;
  SslPtr ssl_;
  BIO* rbio_ = nullptr;
  BIO* wbio_ = nullptr;
  bool eof_ = false, flushing_ = false;
  std::array<char, 16 * 1024> buf_{}, out_{};
};

class WsResponseMasker;  // (websocket_masking.hpp)

class Interceptor {
 public:
  Interceptor(std::shared_ptr<Session> s, std::vector<size_t> ids) : keep_(s), s_(*s), ids_(std::move(ids)) {
    ++st().stats.terminated_now;  // tlsTerminate.maxTunnels counts these
    take_snapshot();
  }
  ~Interceptor() { --st().stats.terminated_now; }

  awaitable<void> run(std::string down_prefix, std::string up_initial);

 private:
  ProxyState& st() { return *s_.st_; }
  const ProxyConfig& cfg() { return s_.st_->cfg; }
  bool closed() const { return s_.closed_; }
  awaitable<bool> connect_upstream();
  awaitable<bool> accept_client(std::string up_initial);
  awaitable<std::optional<HttpHead>> read_head(TlsEnd& from, std::string& buf, bool request);
  enum class Next { Again, Done, Failed };
  awaitable<Next> relay_request();
  // After a 101 to a WebSocket upgrade (`resp`, masked, not yet sent): the
  // frames both ways until either side closes (intercept_websocket.cpp).
  awaitable<Next> relay_websocket(HttpHead& resp);
  // Its two directions: true when a Close frame was relayed, false when the
  // stream ended otherwise (why: what was wrong with it, "refused" after an
  // exfiltration was refused; empty: the peer ended).
  awaitable<bool> ws_client_to_upstream(std::string& why);
  awaitable<bool> ws_upstream_to_client(std::string& why);
  awaitable<bool> ws_down(WsResponseMasker& masker, std::string frames);
  awaitable<std::optional<WsFrameHead>> ws_head(TlsEnd& from, std::string& buf, std::string& why);
  awaitable<std::string> ws_payload(TlsEnd& from, std::string& buf, uint64_t left);
  // learn: the refresh fields of this host's secrets (token_refresh.hpp): the
  // body is held whole, its new tokens learned, then masked and sent.
  awaitable<bool> relay_response_body(std::string& buf, const ResponseFraming& rf, BodyDecoder& decoder,
                                      ValueMasker& masker, bool chunked_out, const std::set<std::string>& learn);
  // The refresh fields of this host's secrets; empty: none.
  std::set<std::string> refresh_fields() const;
  // Every new token of a refresh response kept as a successor secret, written
  // back to its credential file, audited; idx_ and ids_ then hold the
  // successors too. False: one could not be kept (the response must not go on).
  bool learn_tokens(const std::string& body, const std::set<std::string>& fields);
  // idx_: the newest index; ids_ with the successors a refresh on any
  // connection brought since.
  void take_snapshot() {
    idx_ = st().secret_index->now();
    ids_ = idx_->with_successors(std::move(ids_));
  }
  // Records what `masker` masked (for the audit line) under `where`.
  void note_masked(ValueMasker& masker, const char* where);
  // hold: the body (chunks decoded) is appended there instead of being sent.
  awaitable<bool> relay_request_body(std::string& buf, const BodyFraming& f, std::string* hold = nullptr);
  awaitable<void> answer(const std::string& bytes) {
    if (cl_) {
      co_await cl_->write(bytes);
      co_await cl_->shutdown();
    }
  }
  void finish(const std::string& end);

  std::shared_ptr<Session> keep_;
  Session& s_;
  std::vector<size_t> ids_;  // the host's secrets, indices into idx_
  // The index this request is handled with (a snapshot: another session's
  // refresh does not change it under us); taken again at each request head.
  std::shared_ptr<const SecretIndex> idx_;
  std::unique_ptr<TlsEnd> up_, cl_;
  std::string cbuf_, ubuf_;      // bytes read from the client / the upstream, not yet used
  std::string upstream_refusal;  // why the upstream is not trusted / not reachable over TLS
  std::string body_failure_;     // why a response body could not be decoded (the connection is cut)
  std::set<std::tuple<std::string, std::string, std::string>> masked_;  // (secret, form, where)
  uint64_t headers_set_ = 0;     // headers the proxy set itself (set_header secrets), over all requests
  uint64_t values_in_body_ = 0;  // placeholders replaced in request bodies (bodyHosts), over all requests
  uint64_t bytes_up_ = 0, bytes_down_ = 0;
  int requests_ = 0;
  bool finished_ = false, refused_ = false;  // refused_: the refusal wrote its own audit line
  bool sni_mismatch_ = false;
  bool websocket_ = false;       // the connection was upgraded to a WebSocket
  uint64_t ws_frames_up_ = 0, ws_frames_down_ = 0;
  std::string ws_end_;           // why the WebSocket ended other than by a Close  // the client's TLS server name names another host (requireHostMatch)
};

}  // namespace exg::egress::detail
