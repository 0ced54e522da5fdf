// An intercepted connection: for a CONNECT/SOCKS target that has secrets, the
// proxy speaks TLS to the client (a leaf of the sandbox's CA) and TLS to the
// upstream it already checked and connected to (verified against the host's
// trust store, never our CA; SNI and hostname check on the target), then
// relays one HTTP/1.1 request: its head parsed, placeholders of this host's
// secrets replaced by their values in the headers they are for (elsewhere they
// go on as placeholders, logged as placeholder_passed), another host's
// placeholders refused as exfiltration; body and response streamed with their framing, kept alive when
// both sides allow it. What comes back is masked: the values of this host's
// secrets in the status line, 1xx lines, header names and values and the body
// (decoded first when the upstream compressed it anyway; a coding that cannot
// be decoded is refused), in every spelling ValueMasker knows; trailers and
// chunk extensions are dropped (the body is re-framed).
//
// OpenSSL works on memory BIOs; the bytes move over the session's own sockets
// (so Session::close() and the deadline sweep end everything as for a tunnel).
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <array>
#include <utility>  // before asio/awaitable.hpp (it uses std::exchange)
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <climits>
#include <set>
#include <tuple>
#include <cstdio>
#include <strings.h>

#include "egress/interceptor.hpp"
#include "egress/openssl_handles.hpp"
#include "egress/proxy.hpp"
#include "egress/websocket_frame.hpp"
#include "egress/token_refresh.hpp"

namespace exg::egress::detail {

namespace {

std::string last_openssl_error() { return openssl_reason("connection closed"); }

std::string header_safe(std::string_view s) {
  std::string r;
  for (unsigned char c : s.substr(0, 300)) r += (c >= 0x20 && c < 0x7f) ? (char)c : '?';
  return r;
}

std::string response(int code, const char* status, const std::string& body, const std::string& refused = "") {
  std::string r = "HTTP/1.1 " + std::to_string(code) + " " + status +
                  "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " + std::to_string(body.size()) +
                  "\r\nConnection: close\r\n";
  if (!refused.empty()) r += "X-ExGuardian-Refused: " + header_safe(refused) + "\r\n";
  return r + "\r\n" + body;
}

}  // namespace

awaitable<bool> Interceptor::connect_upstream() {
  auto ctx = st().upstream_tls();
  if (!ctx) {
    upstream_refusal = "upstream trust store unusable: " + ctx.error().str();
    co_return false;
  }
  SslPtr ssl(SSL_new(*ctx));
  if (!ssl) {
    upstream_refusal = "upstream TLS: " + last_openssl_error();
    co_return false;
  }
  SSL_set_connect_state(ssl.get());
  const std::string& host = s_.out_.host;
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl.get());
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  bool literal = parse_ip(host).has_value();
  if (literal ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1
              : (SSL_set_tlsext_host_name(ssl.get(), host.c_str()) != 1 ||
                 X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size()) != 1)) {
    upstream_refusal = "upstream TLS: cannot check the name " + host;
    co_return false;
  }
  up_ = std::make_unique<TlsEnd>(s_.upstream_, std::move(ssl));
  s_.arm_timer(cfg().connect_timeout, "upstream TLS handshake");
  int r = co_await up_->run([this] { return SSL_do_handshake(up_->ssl()); });
  if (r > 0) co_return true;
  long v = SSL_get_verify_result(up_->ssl());
  if (v != X509_V_OK) upstream_refusal = std::string("upstream certificate not trusted: ") + X509_verify_cert_error_string(v);
  else upstream_refusal = "upstream TLS handshake failed: " + last_openssl_error();
  co_return false;
}

awaitable<bool> Interceptor::accept_client(std::string up_initial) {
  const SecretsConfig& sc = idx_->config();
  if (!sc.ca) co_return false;
  auto ctx = sc.ca->server_ctx_for(s_.out_.host);
  if (!ctx) co_return false;
  SslPtr ssl(SSL_new(*ctx));
  if (!ssl) co_return false;
  SSL_set_accept_state(ssl.get());
  cl_ = std::make_unique<TlsEnd>(s_.client_, std::move(ssl));
  cl_->feed(up_initial);
  s_.arm_timer(cfg().handshake_timeout.value_or(cfg().header_timeout), "client TLS handshake");
  int r = co_await cl_->run([this] { return SSL_do_handshake(cl_->ssl()); });
  if (r <= 0) {
    cl_.reset();  // nothing can be said to it over TLS
    co_return false;
  }
  if (cfg().require_host_match) {
    const char* sni = SSL_get_servername(cl_->ssl(), TLSEXT_NAMETYPE_host_name);
    auto named = sni ? normalise_host(sni) : Result<Host>(fail(Error::msg("sni", "none")));
    sni_mismatch_ = sni && (!named || named->name != s_.out_.host);
  }
  co_return true;
}

// Reads a head (bounded by max_header_bytes) into buf; what follows it stays in buf.
awaitable<std::optional<HttpHead>> Interceptor::read_head(TlsEnd& from, std::string& buf, bool request) {
  std::array<char, 16 * 1024> chunk;
  for (;;) {
    size_t n = head_length(buf);
    if (n && n <= cfg().max_header_bytes) {
      auto h = request ? parse_request_head(std::string_view(buf).substr(0, n))
                       : parse_response_head(std::string_view(buf).substr(0, n));
      if (!h) co_return std::nullopt;
      buf.erase(0, n);
      co_return std::move(*h);
    }
    if (buf.size() > cfg().max_header_bytes) co_return std::nullopt;
    // Between two requests of a kept-alive connection the client may idle.
    bool between = request && buf.empty() && requests_ > 0;
    s_.arm_timer(request && !between ? cfg().header_timeout : cfg().idle_timeout, request ? "header" : "response");
    long r = co_await from.read(chunk.data(), chunk.size());
    if (r <= 0 || closed()) co_return std::nullopt;
    buf.append(chunk.data(), (size_t)r);
  }
}

// Passes a request body on (framing as parsed); what follows it (a pipelined
// next request) stays in buf.
awaitable<bool> Interceptor::relay_request_body(std::string& buf, const BodyFraming& f, std::string* hold) {
  ChunkTracker ct;
  uint64_t left = f.length;
  std::array<char, 16 * 1024> chunk;
  std::string pending = std::move(buf);
  buf.clear();
  // Another host's placeholder in the body: the request is cut before it (the
  // client is told why). This host's own go on as they are (a body is never
  // put a value in): logged.
  PlaceholderScanner scanner(*st().secret_index, ids_);  // (following the newest index)
  for (;;) {
    if (f.kind == BodyFraming::None) {
      buf = std::move(pending);
      co_return true;
    }
    size_t n = pending.size();
    bool done = false;
    if (f.kind == BodyFraming::Length) {
      n = (size_t)std::min<uint64_t>(left, pending.size());
      left -= n;
      done = left == 0;
    } else {
      long m = ct.feed(pending, hold);
      if (m < 0) co_return false;
      n = (size_t)m;
      done = ct.done();
    }
    if (n) {
      if (const Secret* sec = scanner.feed(std::string_view(pending).substr(0, n))) {
        refused_ = true;
        s_.log_exfiltration(*sec, "body", s_.out_.host, s_.out_.port);
        co_await answer(response(403, "Forbidden", "exguardian: " + placeholder_refusal(*sec, s_.out_.host, "body") + "\n",
                                 "exfiltration"));
        co_return false;
      }
      for (size_t i : scanner.take_passed())
        s_.log_placeholder_passed(scanner.index().secrets()[i], "body", s_.out_.host, s_.out_.port);
      if (hold && f.kind == BodyFraming::Length) {
        hold->append(pending, 0, n);
      } else if (!hold) {
        if (!co_await up_->write(std::string_view(pending).substr(0, n))) co_return false;
        bytes_up_ += n;
      }
      if (hold && hold->size() > kMaxTokenResponse) {
        s_.log_malformed("request body to a host that gets a value in its body larger than 1 MiB");
        co_await answer(response(413, "Payload Too Large", "exguardian: a request body that gets a secret's value is held "
                                                           "whole, up to 1 MiB\n"));
        co_return false;
      }
    }
    if (done) {
      buf = pending.substr(n);
      co_return true;
    }
    s_.arm_timer(cfg().idle_timeout, "idle");
    long r = co_await cl_->read(chunk.data(), chunk.size());
    if (closed() || r <= 0) co_return false;
    pending.assign(chunk.data(), (size_t)r);
  }
}

// The response body from the upstream to the client: decoded per `rf` and its
// codings (`decoder`; a body it cannot decode is cut: fail closed), masked,
// re-framed (chunked_out: chunked; else delimited by the close). Bytes after
// the body stay in buf.
void Interceptor::note_masked(ValueMasker& masker, const char* where) {
  for (auto& [name, form] : masker.take_hits()) masked_.emplace(std::move(name), std::move(form), where);
}

awaitable<bool> Interceptor::relay_response_body(std::string& buf, const ResponseFraming& rf, BodyDecoder& decoder,
                                                 ValueMasker& masker, bool chunked_out, const std::set<std::string>& learn) {
  std::string whole;  // learn: the decoded body so far
  ChunkTracker ct;
  uint64_t left = rf.length;
  std::array<char, 16 * 1024> chunk;
  std::string pending = std::move(buf);
  buf.clear();
  bool eof = false;
  for (;;) {
    std::string data, out;
    size_t used = pending.size();
    bool done = eof;
    if (rf.kind == ResponseFraming::Length) {
      used = (size_t)std::min<uint64_t>(left, pending.size());
      data = pending.substr(0, used);
      left -= used;
      done = done || left == 0;
    } else if (rf.kind == ResponseFraming::Chunked) {
      long m = ct.feed(pending, &data);
      if (m < 0) co_return false;
      used = (size_t)m;
      done = done || ct.done();
    } else {
      data = std::move(pending);
    }
    std::string plain;
    if (!decoder.feed(data, plain) || (done && !decoder.finish(plain))) {
      body_failure_ = "response body not decodable: cut before it could carry a value unmasked";
      co_return false;
    }
    if (learn.empty()) {
      masker.feed(plain, out);
      if (done) masker.finish(out);
      note_masked(masker, "body");
    } else {
      whole += plain;
      if (whole.size() > kMaxTokenResponse) {
        body_failure_ = "response that may carry refreshed tokens larger than 1 MiB: cut before it could carry one unmasked";
        co_return false;
      }
      if (done) {
        if (!learn_tokens(whole, learn)) {
          body_failure_ = "refreshed token could not be kept outside: cut before it could reach the sandbox";
          co_return false;
        }
        ValueMasker fresh(*idx_, ids_);  // the new tokens' values too
        fresh.feed(whole, out);
        fresh.finish(out);
        note_masked(fresh, "body");
      }
    }
    std::string frame;
    if (!chunked_out) {
      frame = std::move(out);
    } else if (!out.empty()) {
      char size[24];
      std::snprintf(size, sizeof size, "%zx\r\n", out.size());
      frame = size + out + "\r\n";
    }
    if (done && chunked_out) frame += "0\r\n\r\n";
    if (!frame.empty()) {
      if (!co_await cl_->write(frame)) co_return false;
      bytes_down_ += frame.size();
    }
    if (done) {
      if (rf.kind != ResponseFraming::UntilClose && used < pending.size()) buf = pending.substr(used);
      co_return true;
    }
    s_.arm_timer(cfg().idle_timeout, "idle");
    long r = co_await up_->read(chunk.data(), chunk.size());
    if (closed() || r < 0) co_return false;
    if (r == 0) {
      // The server closed: the end of a close-delimited body; else a truncated one.
      if (rf.kind != ResponseFraming::UntilClose) co_return false;
      eof = true;
      pending.clear();
      continue;
    }
    pending.assign(chunk.data(), (size_t)r);
  }
}

// One request and its response. Keep-alive when both the client and the
// upstream allow it (HTTP/1.1, no "Connection: close", a framed response).
std::set<std::string> Interceptor::refresh_fields() const {
  std::set<std::string> r;
  for (size_t i : ids_)
    if (const auto& f = idx_->secrets()[i].refresh_field; !f.empty()) r.insert(f);
  return r;
}

bool Interceptor::learn_tokens(const std::string& body, const std::set<std::string>& fields) {
  const std::string& host = s_.out_.host;
  auto hn = normalise_host(host);
  if (!hn) return false;
  bool kept = true;
  for (auto& [field, value] : refreshed_tokens(body, fields)) {
    // Too short to tell apart, or not fit for a header: not a token, left as it is.
    if (value.size() < 8 || value.find_first_of(std::string("\0\r\n", 3)) != std::string::npos) continue;
    nlohmann::json j = s_.audit_base(host, s_.out_.port);
    j["event"] = "token_refreshed";
    j["field"] = field;
    auto learned = st().secret_index->learn(*hn, s_.out_.port, field, value);
    if (!learned) {
      kept = false;
      j["error"] = learned.error().str();
    } else {
      idx_ = learned->index;
      ids_ = idx_->with_successors(std::move(ids_));
      if (!learned->successor) continue;  // known already (a refresh answered twice)
      const Secret& old = idx_->secrets()[*learned->of];
      j["secret"] = old.name;
      if (!old.source_file.empty()) {
        // The next run reads the file: it must hold the token the vendor now expects.
        auto w = write_back_token(old.source_file, old.value, value);
        j["file"] = old.source_file;
        if (!w) j["write_back_error"] = w.error().str();
      }
    }
    if (st().audit_on()) st().audit_write(std::move(j));
  }
  return kept;
}

awaitable<Interceptor::Next> Interceptor::relay_request() {
  const std::string host = s_.out_.host;
  const uint16_t port = s_.out_.port;
  auto head = co_await read_head(*cl_, cbuf_, true);
  if (!head) {
    if (closed()) co_return Next::Failed;
    if (cbuf_.empty()) co_return requests_ ? Next::Done : Next::Failed;  // the client ended between requests
    s_.log_malformed("intercepted request head malformed or too large");
    co_await answer(response(400, "Bad Request", "exguardian: malformed request head\n"));
    co_return Next::Failed;
  }
  ++requests_;
  // Taken now, not before the head was read: on a kept-alive connection the
  // head may carry a placeholder a refresh on another connection handed out
  // while this one waited.
  take_snapshot();
  if (!upstream_refusal.empty()) {
    refused_ = true;
    s_.log_refusal(host, port, Decision{false, "upstream TLS", upstream_refusal}, s_.out_.address, {});
    std::string why = upstream_refusal.starts_with("upstream certificate not trusted")
                          ? "upstream certificate not trusted" : "upstream TLS failed";
    co_await answer(response(502, "Bad Gateway", "exguardian: " + host + ": " + upstream_refusal + "\n", why));
    co_return Next::Failed;
  }
  // The value goes to the host the client connected to, and only there: a Host
  // header or an absolute target naming another one (a front end that routes by
  // Host could pass it on to someone else's site) is refused.
  {
    Authority self{host, port, true};
    const std::string* hv = head->find("host");
    bool origin_form = head->target.starts_with('/') || (head->target == "*" && head->method == "OPTIONS");
    if (!origin_form || head->count("host") > 1 || (hv && !host_header_matches(*hv, self, 443)) || sni_mismatch_) {
      refused_ = true;
      Decision d{false, sni_mismatch_ ? "TLS server name mismatch" : "Host header mismatch",
                 "the request names another host than the connection"};
      s_.log_refusal(host, port, d, s_.out_.address, {});
      int status = s_.host_mismatch_status();
      co_await answer(response(status, status == 421 ? "Misdirected Request" : "Forbidden",
                               "exguardian: " + d.reason + " (" + host + ")\n", d.rule));
      co_return Next::Failed;
    }
  }
  // network.rules / readOnly: this request's method and path.
  if (cfg().requests) {
    auto hn = normalise_host(host);
    auto v = hn ? cfg().requests->check(*hn, head->method, head->target) : RequestRules::Verdict{};
    if (!hn || !v.decision.allowed) {
      refused_ = true;
      if (!hn) v.decision = Decision{false, "invalid host", "invalid host"};
      s_.log_refusal(host, port, v.decision, s_.out_.address, {});
      co_await answer(response(v.ambiguous ? 400 : 403, v.ambiguous ? "Bad Request" : "Forbidden",
                               "exguardian: " + head->method + " " + head->target.substr(0, 200) + " to " + host +
                                   " refused: " + v.decision.reason + " (" + v.decision.rule + ")\n",
                               v.decision.rule));
      co_return Next::Failed;
    }
    if (v.normalized_target) head->target = *v.normalized_target;
  }
  // (The body bytes that came with the head are looked at before anything is
  // sent; later ones as they pass: relay_request_body.)
  auto found = s_.exfiltration_in_headers(*head, host, port, ids_);
  if (!found) found = s_.exfiltration_in(cbuf_, "body", host, port, ids_);
  if (found) {
    refused_ = true;
    co_await answer(response(403, "Forbidden", "exguardian: " + placeholder_refusal(*found->secret, host, found->where) + "\n",
                             "exfiltration"));
    co_return Next::Failed;
  }
  auto framing = request_body_framing(*head);
  if (!framing) {
    s_.log_malformed(framing.error().why);
    co_await answer(response(400, "Bad Request", "exguardian: " + framing.error().why + "\n"));
    co_return Next::Failed;
  }
  const bool client_close = head->version != "HTTP/1.1" || connection_has(*head, "close");
  // (A secret limited to some headers is put in those only; anywhere else its
  // placeholder goes on as it is: what is left after injection is logged.)
  for (auto& [name, value] : head->headers) value = inject_secrets(value, *idx_, idx_->allowed_in_header(ids_, name));
  s_.note_placeholders_passed(*head, host, port, ids_);
  // Headers the proxy sets itself (E2B's network.rules): the client's own of that name are replaced.
  for (auto& [name, value] : idx_->headers_to_set(ids_, host)) {
    std::erase_if(head->headers, [&](const auto& h) { return strcasecmp(h.first.c_str(), name.c_str()) == 0; });
    head->headers.emplace_back(name, value);
    ++headers_set_;
  }
  // A WebSocket upgrade goes on as one, without extensions (permessage-deflate
  // would hide the frames from the checks of intercept_websocket.cpp).
  const bool upgrade = asks_websocket_upgrade(*head);
  if (upgrade)
    std::erase_if(head->headers, [](const auto& h) { return strcasecmp(h.first.c_str(), "sec-websocket-extensions") == 0; });
  // Uncompressed answers, so that values in them can be masked (see below).
  std::erase_if(head->headers, [](const auto& h) { return strcasecmp(h.first.c_str(), "accept-encoding") == 0; });
  head->headers.emplace_back("Accept-Encoding", "identity");
  // "Expect: 100-continue" is answered here: the body follows at once.
  bool expect = false;
  std::erase_if(head->headers, [&](const auto& h) {
    return strcasecmp(h.first.c_str(), "expect") == 0 && (expect = true);
  });
  if (expect && framing->kind != BodyFraming::None && !co_await cl_->write("HTTP/1.1 100 Continue\r\n\r\n"))
    co_return Next::Failed;
  // A secret meant for this host's bodies (bodyHosts: an OAuth refresh token in
  // the token request): the body is held whole, its placeholders replaced, sent
  // with its new length.
  auto hn = normalise_host(host);
  std::vector<size_t> body_ids = hn ? idx_->in_body(ids_, *hn, port) : std::vector<size_t>{};
  if (!body_ids.empty() && framing->kind != BodyFraming::None) {
    std::string body;
    if (!co_await relay_request_body(cbuf_, *framing, &body)) co_return Next::Failed;
    for (size_t i : body_ids) {
      const Secret& sec = idx_->secrets()[i];
      for (size_t pos = 0; (pos = body.find(sec.placeholder, pos)) != std::string::npos; pos += sec.value.size()) {
        body.replace(pos, sec.placeholder.size(), sec.value);
        ++values_in_body_;
      }
    }
    std::erase_if(head->headers, [](const auto& h) {
      return strcasecmp(h.first.c_str(), "content-length") == 0 || strcasecmp(h.first.c_str(), "transfer-encoding") == 0;
    });
    head->headers.emplace_back("Content-Length", std::to_string(body.size()));
    std::string fwd = forwarded_request_head(*head, client_close) + body;
    if (!co_await up_->write(fwd)) co_return Next::Failed;
    bytes_up_ += fwd.size();
  } else {
    std::string fwd = forwarded_request_head(*head, client_close && !upgrade);
    if (upgrade) fwd.insert(fwd.size() - 2, "Connection: Upgrade\r\nUpgrade: websocket\r\n");
    if (!co_await up_->write(fwd)) co_return Next::Failed;
    bytes_up_ += fwd.size();
    if (!co_await relay_request_body(cbuf_, *framing)) co_return Next::Failed;
  }

  for (;;) {
    auto resp = co_await read_head(*up_, ubuf_, false);
    if (!resp) {
      if (!closed())
        co_await answer(response(502, "Bad Gateway", "exguardian: no valid response from " + host + "\n"));
      co_return Next::Failed;
    }
    if (resp->status >= 100 && resp->status < 200) {
      if (resp->status == 101) {
        // Only a WebSocket the client asked for (anything else: a broken upstream).
        if (!upgrade || !switches_to_websocket(*resp)) co_return Next::Failed;
        if (resp->find("sec-websocket-extensions")) {
          refused_ = true;
          Decision d{false, "websocket extension", "the upstream granted a WebSocket extension that was not asked for"};
          s_.log_refusal(host, port, d, s_.out_.address, {});
          co_await answer(response(502, "Bad Gateway", "exguardian: " + host + ": " + d.reason + "\n", d.rule));
          co_return Next::Failed;
        }
        ValueMasker masker(*idx_, ids_);
        resp->reason = masker.mask(resp->reason);
        for (auto& [name, value] : resp->headers) name = masker.mask(name), value = masker.mask(value);
        note_masked(masker, "header");
        strip_response_headers(*resp, cfg().strip_response_headers);
        co_return co_await relay_websocket(*resp);
      }
      if (expect) continue;                              // the client had its 100 from us
      // (A 1xx's headers are not passed on; its reason phrase is masked.)
      ValueMasker masker(*idx_, ids_);
      std::string h = resp->version + " " + std::to_string(resp->status) + " " + masker.mask(resp->reason) + "\r\n\r\n";
      note_masked(masker, "1xx reason");
      if (!co_await cl_->write(h)) co_return Next::Failed;
      continue;
    }
    // The values of this host's secrets go back into the sandbox as placeholders
    // (headers and body): the body is decoded, masked and sent chunked (or up to
    // the close for an HTTP/1.0 client), as its length may change.
    ValueMasker masker(*idx_, ids_);
    resp->reason = masker.mask(resp->reason);
    note_masked(masker, "reason");
    for (auto& [name, value] : resp->headers) name = masker.mask(name), value = masker.mask(value);
    note_masked(masker, "header");
    auto rf = response_body_framing(*resp, head->method);
    // Compressed although we asked for identity: decoded (gzip, deflate) and sent
    // plain, or refused (a coding we cannot look into could carry the value).
    auto decoder = BodyDecoder::make(response_codings(*resp));
    if (!decoder && rf.kind != ResponseFraming::None) {
      refused_ = true;
      Decision d{false, "response encoding", decoder.error().why};
      s_.log_refusal(host, port, d, s_.out_.address, {});
      co_await answer(response(502, "Bad Gateway", "exguardian: " + host + ": " + d.reason + "\n", d.rule));
      co_return Next::Failed;
    }
    if (decoder && !decoder->empty())
      std::erase_if(resp->headers, [](const auto& h) { return strcasecmp(h.first.c_str(), "content-encoding") == 0; });
    const bool chunked_out = head->version == "HTTP/1.1";
    const bool last = client_close || resp->version != "HTTP/1.1" || connection_has(*resp, "close") ||
                      rf.kind == ResponseFraming::UntilClose || (rf.kind != ResponseFraming::None && !chunked_out);
    if (rf.kind != ResponseFraming::None) {
      std::erase_if(resp->headers, [](const auto& h) {
        return strcasecmp(h.first.c_str(), "content-length") == 0 || strcasecmp(h.first.c_str(), "transfer-encoding") == 0;
      });
      if (chunked_out) resp->headers.emplace_back("Transfer-Encoding", "chunked");
    }
    strip_response_headers(*resp, cfg().strip_response_headers);
    resp->version = "HTTP/1.1";  // what we speak to the client, whatever the upstream spoke
    std::string h = client_response_head(*resp, last);
    if (!co_await cl_->write(h)) co_return Next::Failed;
    bytes_down_ += h.size();
    // A response that may carry refreshed tokens (JSON, form-encoded or untyped,
    // from a host whose secrets name a refresh field) is held whole, however it
    // is framed (a chunked one too); a stream (text/event-stream) is not.
    std::set<std::string> learn = refresh_fields();
    if (const std::string* ct = resp->find("content-type")) {
      std::string t = *ct;
      for (char& c : t) c = (char)std::tolower((unsigned char)c);
      if (t.find("json") == std::string::npos && !t.starts_with("text/plain") &&
          !t.starts_with("application/x-www-form-urlencoded"))
        learn.clear();
    }
    if (rf.kind != ResponseFraming::None &&
        !co_await relay_response_body(ubuf_, rf, *decoder, masker, chunked_out, learn))
      co_return Next::Failed;
    if (last || !ubuf_.empty()) {  // (bytes after a complete response: the upstream is out of step)
      co_await cl_->shutdown();
      co_await up_->shutdown();
      co_return Next::Done;
    }
    co_return Next::Again;
  }
}

awaitable<void> Interceptor::run(std::string down_prefix, std::string up_initial) {
  ++st().stats.intercepted;
  boost::system::error_code ec;
  s_.arm_timer(cfg().connect_timeout, "reply");
  co_await asio::async_write(s_.client_, asio::buffer(down_prefix), asio::redirect_error(asio::use_awaitable, ec));
  if (ec || closed()) co_return finish("client gone before TLS");
  co_await connect_upstream();
  if (closed()) co_return finish("closed");
  if (!co_await accept_client(std::move(up_initial))) {
    if (!upstream_refusal.empty() && !closed()) {
      s_.log_refusal(s_.out_.host, s_.out_.port, Decision{false, "upstream TLS", upstream_refusal}, s_.out_.address, {});
      co_return finish("refused");
    }
    co_return finish(closed() ? "closed" : "client TLS handshake failed (does the client trust the sandbox CA?)");
  }
  Next n;
  while ((n = co_await relay_request()) == Next::Again) {
  }
  bool ok = n == Next::Done;
  if (refused_) co_return finish("refused");
  finish(ok ? "" : !ws_end_.empty() ? ws_end_ : closed() ? "closed" : !body_failure_.empty() ? body_failure_ : "request not completed");
}

// One audit line per intercepted connection (refusals wrote their own).
void Interceptor::finish(const std::string& end) {
  if (finished_) return;
  finished_ = true;
  if (end != "refused") {
    ++st().stats.allowed;
    if (st().audit_on()) {
      const auto& out = s_.out_;
      nlohmann::json j = s_.audit_base(out.host, out.port);
      if (out.address) j["address"] = out.address->str();
      j["decision"] = "allowed";
      j["rule"] = out.decision.rule;
      if (!out.via.empty()) j["via"] = out.via;
      j["intercepted"] = true;
      std::vector<std::string> names;
      for (size_t i : ids_)  // (a successor has its original's name)
        if (const auto& n = idx_->secrets()[i].name; std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
      j["secrets"] = names;
      j["requests"] = requests_;
      if (headers_set_) j["headers_set"] = headers_set_;
      if (values_in_body_) j["values_in_body"] = values_in_body_;
      // What came back with a value in it (never the value): the client saw placeholders there.
      if (!masked_.empty()) {
        nlohmann::json m = nlohmann::json::array();
        for (const auto& [name, form, where] : masked_) m.push_back({{"secret", name}, {"form", form}, {"where", where}});
        j["masked"] = std::move(m);
      }
      if (websocket_) j["websocket"] = {{"frames_up", ws_frames_up_}, {"frames_down", ws_frames_down_}};
      j["bytes_up"] = bytes_up_;
      j["bytes_down"] = bytes_down_;
      j["duration_ms"] = s_.elapsed_ms();
      if (!end.empty()) j["end"] = end;
      st().audit_write(std::move(j));
    }
  }
  s_.close();
}

void Session::intercept(std::vector<size_t> secret_ids, std::string down_prefix, std::string up_initial) {
  auto it = std::make_shared<Interceptor>(shared_from_this(), std::move(secret_ids));
  asio::co_spawn(st_->io, [it, d = std::move(down_prefix), u = std::move(up_initial)]() mutable -> awaitable<void> {
    co_await it->run(std::move(d), std::move(u));
  }, asio::detached);
}

}  // namespace exg::egress::detail
