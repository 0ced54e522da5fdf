#include "mcp/serve_http.hpp"

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "util/json_parse.hpp"

namespace exg::mcp {

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using Socket = asio::generic::stream_protocol::socket;

struct Exchange : HttpCall, std::enable_shared_from_this<Exchange> {
  Exchange(asio::io_context& io, ServeEndpoint e) : ep(std::move(e)), sock(io), timer(io) {}

  ServeEndpoint ep;
  Socket sock;
  asio::steady_timer timer;
  boost::beast::flat_buffer buf;
  http::request<http::string_body> req;
  http::response_parser<http::string_body> parser;
  std::function<void(HttpAnswer)> done;
  std::function<void(const nlohmann::json&)> on_message;  // set: a stream
  // The stream's bytes not yet a whole envelope; the parser calls chunk_body with each piece.
  std::string pending;
  std::function<size_t(uint64_t, boost::beast::string_view, boost::beast::error_code&)> chunk_body;
  HttpAnswer answer;
  bool finished = false;

  void cancel() override {
    finished = true;
    close();
  }

  void close() {
    boost::system::error_code ec;
    timer.cancel();
    sock.close(ec);
  }

  void finish() {
    if (finished) return;
    finished = true;
    close();
    auto d = std::move(done);
    done = nullptr;
    on_message = nullptr;
    d(std::move(answer));
  }

  void transport(const std::string& why) {
    answer.status = 0;
    answer.transport_error = why;
    finish();
  }

  void start(const HttpRequest& r) {
    req.method(r.method);
    req.target(r.target);
    req.version(11);
    req.set(http::field::host, ep.host_header());
    req.set(http::field::user_agent, "exguardian-mcp");
    for (auto& [k, v] : r.headers) req.set(k, v);
    if (!r.content_type.empty()) req.set(http::field::content_type, r.content_type);
    if (!r.body.empty() || r.method == http::verb::post || r.method == http::verb::put) req.body() = r.body;
    req.prepare_payload();
    if (on_message) {
      parser.body_limit(boost::none);  // a command's output for as long as it runs: handed over, never held
      chunk_body = [this](uint64_t, boost::beast::string_view piece, boost::beast::error_code&) -> size_t {
        if (parser.get().result_int() != 200) answer.body.append(piece.data(), piece.size());  // an error answer, chunked
        else envelopes(piece);
        return piece.size();
      };
      parser.on_chunk_body(chunk_body);
    } else {
      parser.body_limit(ServeHttp::kMaxAnswer);
    }
    auto self = shared_from_this();
    if (r.deadline) {
      timer.expires_after(*r.deadline);
      timer.async_wait([self, secs = std::chrono::duration_cast<std::chrono::seconds>(*r.deadline).count()](boost::system::error_code ec) {
        if (!ec) self->transport("exguardian serve at " + self->ep.url + ": no answer within " + std::to_string(secs) + " s");
      });
    }
    asio::generic::stream_protocol::endpoint where =
        ep.unix_path.empty() ? asio::generic::stream_protocol::endpoint(asio::ip::tcp::endpoint(asio::ip::make_address(ep.address), ep.port))
                             : asio::generic::stream_protocol::endpoint(asio::local::stream_protocol::endpoint(ep.unix_path));
    sock.async_connect(where, [self](boost::system::error_code ec) {
      if (self->finished) return;
      if (ec) return self->transport("cannot connect to exguardian serve at " + self->ep.url + ": " + ec.message());
      http::async_write(self->sock, self->req, [self](boost::system::error_code ec, size_t) {
        if (self->finished) return;
        if (ec) return self->transport("exguardian serve at " + self->ep.url + ": sending the request failed: " + ec.message());
        http::async_read(self->sock, self->buf, self->parser, [self](boost::system::error_code ec, size_t) { self->read_done(ec); });
      });
    });
  }

  void read_done(boost::system::error_code ec) {
    if (finished) return;
    if (ec == http::error::body_limit) return transport("exguardian serve's answer is larger than " + std::to_string(ServeHttp::kMaxAnswer >> 20) + " MiB");
    if (ec) {
      // A stream cut after its end message lost nothing.
      if (on_message && answer.stream_ended) return finish();
      return transport("exguardian serve at " + ep.url + ": the connection ended before the answer did: " + ec.message());
    }
    answer.status = parser.get().result_int();
    if (!on_message || answer.status != 200) answer.body += parser.get().body();
    else if (!answer.stream_ended)
      answer.transport_error = pending.empty() ? "exguardian serve's stream ended without its end message"
                                               : "exguardian serve's stream ended inside a message";
    finish();
  }

  // Connect's envelopes: a flags byte, a 4-byte big-endian length, the JSON; flag 0x02 marks the end.
  void envelopes(boost::beast::string_view piece) {
    if (finished) return;
    pending.append(piece.data(), piece.size());
    size_t at = 0;
    while (!finished && pending.size() - at >= 5) {
      auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(pending[at + i])); };
      uint32_t len = (byte(1) << 24) | (byte(2) << 16) | (byte(3) << 8) | byte(4);
      if (len > ServeHttp::kMaxMessage) return protocol_error("a stream message of " + std::to_string(len) + " bytes");
      if (pending.size() - at - 5 < len) break;
      bool end = byte(0) & 0x02;
      auto j = parse_json(std::string_view(pending).substr(at + 5, len));
      at += 5 + len;
      if (!j.is_object()) return protocol_error("a stream message that is not a JSON object");
      if (end) {
        answer.stream_ended = true;
        if (auto e = j.find("error"); e != j.end() && e->is_object())
          answer.rpc_error = RpcEnd{e->value("code", "unknown"), e->value("message", "")};
      } else if (on_message) {
        on_message(j);  // may cancel this call
      }
    }
    if (!finished) pending.erase(0, at);
  }

  void protocol_error(const std::string& what) {
    answer.status = 0;
    answer.transport_error = "exguardian serve at " + ep.url + " sent " + what;
    finish();
  }
};

}  // namespace

HttpCallPtr ServeHttp::request(HttpRequest r, std::function<void(HttpAnswer)> done) {
  auto x = std::make_shared<Exchange>(io_, ep_);
  x->done = std::move(done);
  x->start(r);
  return x;
}

HttpCallPtr ServeHttp::stream(HttpRequest r, std::function<void(const nlohmann::json&)> on_message, std::function<void(HttpAnswer)> done) {
  auto x = std::make_shared<Exchange>(io_, ep_);
  x->done = std::move(done);
  x->on_message = std::move(on_message);
  x->start(r);
  return x;
}

}  // namespace exg::mcp
