// An upgraded intercepted connection: after the 101 of a WebSocket upgrade
// (the request carried the secret's value in the headers it is for, put in as
// for any request, and no extension: permessage-deflate would hide what the
// frames say), the frames both ways until either side ends.
//  - Client to upstream: each frame is unmasked to be read, and sent on as it
//    came (nothing is ever put in a frame). A placeholder of this host's own
//    secrets goes on as the placeholder (logged as placeholder_passed, where
//    "websocket frame"), as in a request body; another host's ends the
//    connection as exfiltration (the client gets a Close 1008 saying why).
//  - Upstream to client: the values of this host's secrets are masked in every
//    frame, in every spelling ValueMasker knows, wherever the server's framing
//    cuts them (reads, fragments, messages: websocket_masking.hpp); a data
//    frame's payload may change in length, so the message is re-framed.
//    Control frames are masked whole (cut at 125 bytes).
// A frame with a reserved bit or opcode, a server frame masked or a client
// frame not, ends the connection (fail closed: it cannot be judged).
#include <memory>
#include <utility>  // before asio/awaitable.hpp (it uses std::exchange)
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>

#include "egress/interceptor.hpp"
#include "egress/websocket_frame.hpp"
#include "egress/websocket_masking.hpp"

namespace exg::egress::detail {

namespace {
constexpr const char* kWhere = "websocket frame";

std::string close_frame(uint16_t code, std::string_view reason) {
  std::string p;
  p += (char)(code >> 8);
  p += (char)(code & 0xff);
  p += reason.substr(0, 123);
  return ws_frame_head(true, (uint8_t)WsOpcode::Close, p.size()) + p;
}
}  // namespace

// Reads until buf holds a frame head; nullopt at the end of the stream (why
// empty: the peer ended) or when the bytes are no frame (why says so).
awaitable<std::optional<WsFrameHead>> Interceptor::ws_head(TlsEnd& from, std::string& buf, std::string& why) {
  std::array<char, 16 * 1024> chunk;
  for (;;) {
    auto h = parse_ws_frame_head(buf, why);
    if (h || !why.empty()) co_return h;
    s_.arm_timer(cfg().idle_timeout, "websocket idle");
    long r = co_await from.read(chunk.data(), chunk.size());
    if (r <= 0 || closed()) co_return std::nullopt;
    buf.append(chunk.data(), (size_t)r);
  }
}

// The next up to `left` payload bytes of a frame, from buf or read; empty at the end.
awaitable<std::string> Interceptor::ws_payload(TlsEnd& from, std::string& buf, uint64_t left) {
  if (buf.empty()) {
    std::array<char, 16 * 1024> chunk;
    s_.arm_timer(cfg().idle_timeout, "websocket idle");
    long r = co_await from.read(chunk.data(), chunk.size());
    if (r <= 0 || closed()) co_return std::string();
    buf.assign(chunk.data(), (size_t)r);
  }
  size_t n = (size_t)std::min<uint64_t>(left, buf.size());
  std::string piece = buf.substr(0, n);
  buf.erase(0, n);
  co_return piece;
}

awaitable<bool> Interceptor::ws_client_to_upstream(std::string& why) {
  const std::string host = s_.out_.host;
  const uint16_t port = s_.out_.port;
  PlaceholderScanner scanner(*st().secret_index, ids_);  // (following the newest index)
  std::string buf = std::move(cbuf_);
  cbuf_.clear();
  for (;;) {
    auto h = co_await ws_head(*cl_, buf, why);
    if (!h) {
      if (!why.empty()) s_.log_malformed(why);
      co_return false;
    }
    if (!h->masked) {
      why = "websocket frame from the client not masked";
      s_.log_malformed(why);
      co_return false;
    }
    std::string out = buf.substr(0, h->head_size);
    buf.erase(0, h->head_size);
    for (uint64_t left = h->length, off = 0; left;) {
      std::string raw = co_await ws_payload(*cl_, buf, left);
      if (raw.empty()) co_return false;
      std::string plain = raw;
      ws_unmask(plain.data(), plain.size(), h->key, off);
      if (const Secret* sec = scanner.feed(plain)) {
        refused_ = true;
        s_.log_exfiltration(*sec, kWhere, host, port);
        why = "refused";
        co_await cl_->write(close_frame(1008, "exguardian: " + placeholder_refusal(*sec, host, kWhere)));
        co_return false;
      }
      for (size_t i : scanner.take_passed()) s_.log_placeholder_passed(scanner.index().secrets()[i], kWhere, host, port);
      out += raw;
      off += raw.size();
      left -= raw.size();
      if (!co_await up_->write(out)) co_return false;
      bytes_up_ += out.size();
      out.clear();
    }
    if (!out.empty()) {  // (a frame with no payload)
      if (!co_await up_->write(out)) co_return false;
      bytes_up_ += out.size();
    }
    ++ws_frames_up_;
    if (h->opcode == (uint8_t)WsOpcode::Close) co_return true;
  }
}

awaitable<bool> TlsEnd::readable_within(std::chrono::milliseconds wait) {
  if (eof_ || SSL_pending(ssl_.get()) > 0 || BIO_ctrl_pending(rbio_) > 0) co_return true;
  struct Wait {
    asio::steady_timer timer;
    bool ready = false;
  };
  auto w = std::make_shared<Wait>(Wait{asio::steady_timer(sock_.get_executor(), wait)});
  sock_.async_wait(tcp::socket::wait_read, [w](const boost::system::error_code& ec) {
    w->ready = !ec;
    w->timer.cancel();
  });
  boost::system::error_code ec;
  co_await w->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  co_return w->ready;
}

// Frames to the client, and what the masker masked for them noted.
awaitable<bool> Interceptor::ws_down(WsResponseMasker& masker, std::string frames) {
  for (auto& [name, form] : masker.take_hits()) masked_.emplace(std::move(name), std::move(form), kWhere);
  if (frames.empty()) co_return true;
  if (!co_await cl_->write(frames)) co_return false;
  bytes_down_ += frames.size();
  co_return true;
}

awaitable<bool> Interceptor::ws_upstream_to_client(std::string& why) {
  std::string buf = std::move(ubuf_);
  ubuf_.clear();
  WsResponseMasker masker(*idx_, ids_);  // data messages: across reads, fragments and messages
  for (;;) {
    // A message's end held (it may begin a value the next one ends): sent as it is when
    // nothing more comes soon.
    if (masker.holding() && buf.empty() && !co_await up_->readable_within(kHoldAtMessageEnd))
      if (!co_await ws_down(masker, masker.flush())) co_return false;
    auto h = co_await ws_head(*up_, buf, why);
    if (!h) {
      if (!why.empty()) s_.log_malformed(why);
      else (void)co_await ws_down(masker, masker.flush());  // (the server ended: what was held goes as it is)
      co_return false;
    }
    const bool data = !h->control();
    if (h->masked || (data && (h->opcode == 0) != masker.in_message())) {
      why = h->masked ? "websocket frame from the server masked" : "websocket message fragments out of order";
      s_.log_malformed(why);
      co_return false;
    }
    buf.erase(0, h->head_size);
    if (!data) {  // (at most 125 bytes: read whole, masked whole)
      std::string payload;
      while (payload.size() < h->length) {
        std::string piece = co_await ws_payload(*up_, buf, h->length - payload.size());
        if (piece.empty()) co_return false;
        payload += piece;
      }
      // (a control frame may come between a message's fragments: one whose end is
      // held is still open for the client; a Close ends the data, so it is sent first)
      if (h->opcode == (uint8_t)WsOpcode::Close && !co_await ws_down(masker, masker.flush())) co_return false;
      ValueMasker one(*idx_, ids_);
      std::string out = one.mask(payload).substr(0, 125);
      note_masked(one, kWhere);
      if (!co_await ws_down(masker, ws_frame_head(true, h->opcode, out.size()) + out)) co_return false;
      ++ws_frames_down_;
      if (h->opcode == (uint8_t)WsOpcode::Close) co_return true;
      continue;
    }
    masker.frame(*h);
    uint64_t left = h->length;
    do {
      std::string piece;
      if (left) {
        piece = co_await ws_payload(*up_, buf, left);
        if (piece.empty()) co_return false;
        left -= piece.size();
      }
      if (!co_await ws_down(masker, masker.feed(piece, left == 0))) co_return false;
    } while (left);
    ++ws_frames_down_;
  }
}

awaitable<Interceptor::Next> Interceptor::relay_websocket(HttpHead& resp) {
  std::string h = client_response_head(resp, false);
  h.insert(h.size() - 2, "Connection: Upgrade\r\nUpgrade: websocket\r\n");
  if (!co_await cl_->write(h)) co_return Next::Failed;
  bytes_down_ += h.size();
  websocket_ = true;
  // Both ways at once: the client's side in its own coroutine, waited for
  // before returning (it uses this object). A direction that ends badly ends
  // the session, so the other's read ends too; one that relayed a Close lets
  // the other finish the closing handshake.
  bool up_over = false, up_clean = false;
  std::string up_why, down_why;
  asio::steady_timer over(st().io, std::chrono::steady_clock::time_point::max());
  asio::co_spawn(st().io, [&, keep = keep_]() -> awaitable<void> {
    up_clean = co_await ws_client_to_upstream(up_why);
    up_over = true;
    if (!up_clean) s_.close();
    over.cancel();
  }, asio::detached);
  bool down_clean = co_await ws_upstream_to_client(down_why);
  if (!down_clean) s_.close();
  while (!up_over) {
    boost::system::error_code ec;
    co_await over.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (up_clean && down_clean) {
    co_await cl_->shutdown();
    co_await up_->shutdown();
    co_return Next::Done;
  }
  ws_end_ = !up_why.empty() ? up_why : down_why;
  co_return Next::Failed;
}

}  // namespace exg::egress::detail
