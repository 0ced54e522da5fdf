// The HTTP proxy front end: CONNECT host:port (a tunnel) and absolute-form
// http:// requests (forwarded as origin-form, one request per connection,
// streamed both ways). Anything else is answered with 400 and closed.
#include "egress/proxy.hpp"

namespace exg::egress::detail {
namespace {

using boost::asio::ip::tcp;

std::string header_safe(std::string_view s) {
  std::string r;
  for (unsigned char c : s.substr(0, 300)) r += (c >= 0x20 && c < 0x7f) ? (char)c : '?';
  return r;
}

std::string response(int code, const char* status, const std::string& body, const std::string& refused_rule = "",
                     const char* extra = nullptr) {
  std::string r = "HTTP/1.1 " + std::to_string(code) + " " + status +
                  "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " + std::to_string(body.size()) +
                  "\r\nConnection: close\r\n";
  if (!refused_rule.empty()) r += "X-ExGuardian-Refused: " + header_safe(refused_rule) + "\r\n";
  if (extra) r += extra;
  return r + "\r\n" + body;
}

// Passes exactly the request body on (Content-Length or chunked framing), then
// ends the direction: a pipelined second request never reaches the origin.
class BodyFilter : public StreamFilter {
 public:
  explicit BodyFilter(BodyFraming f) : f_(f), left_(f.length) {}
  Status feed(std::string_view in, std::string& out) override {
    switch (f_.kind) {
      case BodyFraming::None: return Status::Done;
      case BodyFraming::Length: {
        size_t n = (size_t)std::min<uint64_t>(left_, in.size());
        out.append(in.substr(0, n));
        left_ -= n;
        return left_ ? Status::More : Status::Done;
      }
      case BodyFraming::Chunked: {
        long n = ct_.feed(in);
        if (n < 0) return Status::Error;
        out.append(in.substr(0, (size_t)n));
        return ct_.done() ? Status::Done : Status::More;
      }
    }
    return Status::Error;
  }

 private:
  BodyFraming f_;
  uint64_t left_;
  ChunkTracker ct_;
};

// Reads the origin's response head (bounded), passes 1xx heads through,
// rewrites the final head (hop-by-hop headers out, "Connection: close"), then
// lets the body stream raw.
class ResponseFilter : public StreamFilter {
 public:
  ResponseFilter(size_t max, const std::vector<std::string>& strip) : max_(max), strip_(strip) {}
  Status feed(std::string_view in, std::string& out) override {
    buf_.append(in);
    for (;;) {
      size_t n = head_length(buf_);
      if (!n) {
        if (buf_.size() > max_) return bad(out, "response head too large");
        return Status::More;
      }
      auto h = parse_response_head(std::string_view(buf_).substr(0, n));
      if (!h) return bad(out, "malformed response head");
      if (h->status >= 100 && h->status < 200 && h->status != 101) {
        out.append(buf_, 0, n);
        buf_.erase(0, n);
        continue;
      }
      strip_response_headers(*h, strip_);
      out += client_response_head(*h);
      out.append(buf_, n);
      buf_.clear();
      return Status::Passthrough;
    }
  }
  void eof(std::string& out) override {
    out += response(502, "Bad Gateway", "exguardian: the origin closed without a complete response\n");
  }

 private:
  Status bad(std::string& out, const char* why) {
    out += response(502, "Bad Gateway", std::string("exguardian: ") + why + "\n");
    return Status::Error;
  }
  size_t max_;
  const std::vector<std::string>& strip_;  // the ProxyState's, alive while the tunnel is
  std::string buf_;
};

class HttpSession : public Session {
 public:
  HttpSession(std::shared_ptr<ProxyState> st, tcp::socket s, bool auth)
      : Session(std::move(st), std::move(s), "http", auth) {}

  void start() override {
    arm_timer(st_->cfg.header_timeout, "header");
    read_head();
  }

  void refuse_over_limit() override {
    log_over_limit();
    reply_and_close(response(503, "Service Unavailable", "exguardian: too many connections\n"));
  }

 private:
  std::shared_ptr<HttpSession> self() { return std::static_pointer_cast<HttpSession>(shared_from_this()); }

  void read_head() {
    size_t n = head_length(in_);
    if (n && n <= st_->cfg.max_header_bytes) return on_head(n);
    if (!plausible_request_prefix(in_)) return malformed("not an HTTP request");
    if (in_.size() > st_->cfg.max_header_bytes || n) {
      log_malformed("request head larger than " + std::to_string(st_->cfg.max_header_bytes) + " bytes");
      return reply_and_close(response(431, "Request Header Fields Too Large", "exguardian: request head too large\n"));
    }
    read_more([s = self()] { s->read_head(); });
  }

  void malformed(const std::string& why) {
    log_malformed(why);
    reply_and_close(response(400, "Bad Request", "exguardian: " + why + "\n"));
  }

  // 403, or `status` (400 for a malformed host, 421 a Host naming another one,
  // 503 past tlsTerminate.maxTunnels).
  void refuse(const Outcome& o, int status = 403) {
    log_refusal(o.host, o.port, o.decision, o.address, o.refused_addresses);
    std::string body = "exguardian: " + o.host + ":" + std::to_string(o.port) + " refused: " +
                       (o.decision.reason.empty() ? "not allowed" : o.decision.reason) + " (" + o.decision.rule + ")\n";
    if (o.kind == Outcome::BadHost) status = 400;
    if (o.decision.rule.starts_with(kTooManyTunnels))
      return reply_and_close(response(503, "Service Unavailable", body, o.decision.rule,
                                      "X-Proxy-Error: too-many-tunnels\r\n"));
    const char* phrase = status == 400 ? "Bad Request" : status == 421 ? "Misdirected Request" : "Forbidden";
    reply_and_close(response(status, phrase, body, o.decision.rule));
  }

  // After log_exfiltration (which counted it).
  void refuse_exfiltration(const PlaceholderFound& f, const std::string& host) {
    reply_and_close(response(403, "Forbidden", "exguardian: " + placeholder_refusal(*f.secret, host, f.where) + "\n",
                             "exfiltration"));
  }

  void on_outcome_failure(const Outcome& o) {
    switch (o.kind) {
      case Outcome::Refused:
      case Outcome::BadHost: return refuse(o);
      case Outcome::DnsFailed:
        log_connect_failure(o);
        return reply_and_close(response(502, "Bad Gateway", "exguardian: cannot resolve " + o.host + ": " + o.error + "\n"));
      case Outcome::TimedOut:
        log_connect_failure(o);
        return reply_and_close(response(504, "Gateway Timeout", "exguardian: connecting to " + o.host + " timed out\n"));
      default:
        log_connect_failure(o);
        return reply_and_close(response(502, "Bad Gateway", "exguardian: cannot connect to " + o.host + ": " + o.error + "\n"));
    }
  }

  void on_head(size_t n) {
    auto head = parse_request_head(std::string_view(in_).substr(0, n));
    if (!head) return malformed(head.error().why);
    std::string rest = in_.substr(n);
    std::string().swap(in_);
    if (auth_ && !proxy_authorization_ok(head->find("proxy-authorization"), st_->cfg.token)) {
      // Before any look at the target: without the token a client learns nothing about the rules.
      const bool given = head->find("proxy-authorization") != nullptr;
      std::string host;
      uint16_t port = 0;
      if (head->method == "CONNECT") {
        if (auto a = parse_authority(head->target, 0)) host = a->host, port = a->port;
      } else if (auto t = parse_absolute_http(head->target)) {
        host = t->authority.host, port = t->authority.port;
      }
      if (head->method == "CONNECT") protocol_ = "connect";
      log_auth_failure(host, port, given ? "wrong proxy token" : "no proxy token");
      return reply_and_close(response(407, "Proxy Authentication Required",
                                      "exguardian: proxy authentication required\n", "",
                                      "Proxy-Authenticate: Basic realm=\"exguardian\"\r\n"));
    }
    if (head->method == "CONNECT") {
      protocol_ = "connect";
      auto a = parse_authority(head->target, 0);
      if (auto f = exfiltration_in(head->target, "connect target", a ? a->host : "", a ? a->port : 0))
        return refuse_exfiltration(*f, a ? a->host : "");
      if (!a) return malformed("CONNECT target: " + a.error().why);
      return decide_and_connect(a->host, a->port, [s = self(), rest = std::move(rest)](Outcome o) mutable {
        if (o.kind != Outcome::Connected) return s->on_outcome_failure(o);
        s->out_ = o;
        const std::string established = "HTTP/1.1 200 Connection established\r\n\r\n";
        // A host that has secrets (or requests under a rule): TLS is terminated here (never tunnelled).
        if (s->terminates(o.host, o.port)) {
          auto ids = s->secrets_for(o.host, o.port);
          if (!s->st_->secret_index->now()->config().ca) {
            o.decision = Decision{false, "secrets without a certificate authority", "cannot intercept"};
            return s->refuse(o);
          }
          return s->intercept(std::move(ids), established, std::move(rest));
        }
        auto t = std::make_shared<Tunnel>(std::move(s->client_), std::move(s->upstream_), s->st_->cfg, s->st_->shared,
                                          s->tunnel_done());
        if (auto f = s->exfiltration_filter(o.host, o.port)) t->set_up_filter(std::move(f));
        s->run_tunnel(t, "", std::move(rest), established);
      });
    }
    if (!head->target.starts_with("http://") && !head->target.starts_with("HTTP://")) {
      if (head->target.starts_with("https://"))
        return malformed("https:// in absolute form: use CONNECT for TLS");
      return malformed("not a proxy request (origin-form target " + head->target.substr(0, 64) + ")");
    }
    auto t = parse_absolute_http(head->target);
    if (!t) return malformed(t.error().why);
    if (head->count("host") > 1) return malformed("more than one Host header");
    if (const std::string* hv = head->find("host")) {
      if (!host_header_matches(*hv, t->authority)) {
        auto tn = normalise_host(t->authority.host);
        Outcome o;
        o.kind = Outcome::Refused;
        o.host = tn ? tn->name : t->authority.host;
        o.port = t->authority.port;
        o.decision = Decision{false, "Host header mismatch", "the Host header names another host than the request target"};
        return refuse(o, host_mismatch_status());
      }
    }
    {
      // Plain HTTP: no secret is put in (it would travel in clear text): the
      // host's own placeholders go on as they are (logged), another host's are refused.
      auto tn = normalise_host(t->authority.host);
      std::string host = tn ? tn->name : t->authority.host;
      auto own = secrets_for(host, t->authority.port);
      // The body bytes that came with the head too (later ones: the tunnel's filter).
      auto f = exfiltration_in_headers(*head, host, t->authority.port, own);
      if (!f) f = exfiltration_in(rest, "body", host, t->authority.port, own);
      if (f) return refuse_exfiltration(*f, host);
      note_placeholders_passed(*head, host, t->authority.port, own);
    }
    // network.rules / readOnly: the method and path, as the origin will read them.
    std::string request_rule;
    if (st_->cfg.requests) {
      if (auto tn = normalise_host(t->authority.host)) {
        auto v = st_->cfg.requests->check(*tn, head->method, t->path);
        if (!v.decision.allowed) {
          Outcome o;
          o.kind = Outcome::Refused;
          o.host = tn->name;
          o.port = t->authority.port;
          o.decision = v.decision;
          return refuse(o, v.ambiguous ? 400 : 403);
        }
        if (v.normalized_target) t->path = *v.normalized_target;
        request_rule = v.decision.rule;
      }
    }
    auto framing = request_body_framing(*head);
    if (!framing) return malformed(framing.error().why);
    std::string fwd = origin_request_head(*head, *t);
    decide_and_connect(t->authority.host, t->authority.port,
                       [s = self(), rest = std::move(rest), fwd = std::move(fwd), f = *framing,
                        request_rule = std::move(request_rule)](Outcome o) mutable {
                         if (o.kind != Outcome::Connected) return s->on_outcome_failure(o);
                         s->out_ = o;
                         s->out_.request_rule = std::move(request_rule);
                         auto tun = std::make_shared<Tunnel>(std::move(s->client_), std::move(s->upstream_),
                                                             s->st_->cfg, s->st_->shared, s->tunnel_done());
                         // The body is scanned too (its first 64 KiB): a placeholder closes the request.
                         tun->set_up_filter(s->exfiltration_filter(s->out_.host, s->out_.port,
                                                                   std::make_unique<BodyFilter>(f),
                                                                   s->secrets_for(s->out_.host, s->out_.port), "body"));
                         tun->set_down_filter(std::make_unique<ResponseFilter>(s->st_->cfg.max_header_bytes,
                                                                               s->st_->cfg.strip_response_headers));
                         tun->end_when_down_done(true);
                         s->run_tunnel(tun, std::move(fwd), std::move(rest), "");
                       });
  }
};

}  // namespace

std::shared_ptr<Session> make_http_session(std::shared_ptr<ProxyState> st, tcp::socket s, bool auth) {
  return std::make_shared<HttpSession>(std::move(st), std::move(s), auth);
}

}  // namespace exg::egress::detail
