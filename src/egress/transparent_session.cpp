// A connection the sandbox's netfilter redirected to the transparent listener
// (transparent.hpp): its destination recovered and judged like an explicit
// proxy request; what the client says first (within kFirstBytesWindow) checked
// against the name, then the upstream connected. A mismatch connects nothing.
#include <netinet/in.h>
#include <sys/socket.h>

#include <boost/asio/steady_timer.hpp>
#include <cstring>

#include "egress/proxy.hpp"
#include "egress/transparent.hpp"

namespace exg::egress::detail {
namespace {

using boost::asio::ip::tcp;

constexpr int kSoOriginalDst = 80;  // SO_ORIGINAL_DST (linux/netfilter_ipv4.h), level SOL_IP

// The destination the client connected to before the redirect; nullopt when
// the connection was not redirected (no NAT record: someone connected to the
// listener itself).
std::optional<std::pair<IpAddress, uint16_t>> original_destination(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  if (::getsockopt(fd, SOL_IP, kSoOriginalDst, &sa, &len) != 0 || sa.sin_family != AF_INET) return std::nullopt;
  auto a = IpAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&sa));
  if (!a) return std::nullopt;
  return std::pair{*a, ntohs(sa.sin_port)};
}

// Whether the first bytes can still be (or are) an HTTP/1 request line: a
// method token of capitals, then a space.
enum class HttpStart { No, Maybe, Yes };
HttpStart http_start(std::string_view in) {
  size_t i = 0;
  while (i < in.size() && i < 16 && in[i] >= 'A' && in[i] <= 'Z') ++i;
  if (i == in.size()) return i < 16 ? HttpStart::Maybe : HttpStart::No;
  return i > 0 && in[i] == ' ' ? HttpStart::Yes : HttpStart::No;
}

class TransparentSession : public Session {
 public:
  TransparentSession(std::shared_ptr<ProxyState> st, tcp::socket s, bool preamble)
      : Session(std::move(st), std::move(s), "transparent", false), preamble_(preamble) {}

  void start() override {
    if (preamble_) return read_preamble();
    auto dest = original_destination(client_.native_handle());
    if (!dest) return refuse_early("", 0, "not redirected", "a connection to the transparent listener itself");
    judge(dest->first, dest->second);
  }

  void refuse_over_limit() override {
    log_over_limit();
    close();
  }

 private:
  std::shared_ptr<TransparentSession> self() {
    return std::static_pointer_cast<TransparentSession>(shared_from_this());
  }

  // A relayed connection (the microVM bridge): the destination comes first,
  // then the client's own bytes, which stay in in_ for classify().
  void read_preamble() {
    if (in_.size() < kDestinationPreambleBytes) {
      arm_timer(st_->cfg.header_timeout, "header");
      return read_more([s = self()] { s->read_preamble(); });
    }
    cancel_timer();
    auto dest = parse_destination_preamble(in_);
    in_.erase(0, kDestinationPreambleBytes);
    if (forwarded_source(dest->source)) origin_address_ = dest->source.str();
    judge(dest->address, dest->port);
  }

  // The destination as the client meant it (SO_ORIGINAL_DST, or the guest's
  // preamble: the same claim of an untrusted client either way), judged at
  // once; nothing is connected yet.
  void judge(const IpAddress& addr, uint16_t port) {
    if (addr.bytes[0] == 127 && !addr.v6)  // the redirect never sends loopback here
      return refuse_early(addr.str(), port, "not redirected", "a loopback destination");
    std::string host = addr.str();
    if (HandedOutAddresses::in_range(addr)) {
      const std::string* name = st_->handed_out ? st_->handed_out->name_for(addr) : nullptr;
      if (!name)
        return refuse_early(host, port, "capture range",
                            "an address of the resolver's range (198.18.0.0/15) it never handed out");
      host = *name;
      by_name_ = true;
    }
    auto decided = decide(host, port);
    if (!decided) return on_failure(out_);
    decided_ = std::move(*decided);
    await_first_bytes();
  }

  void refuse_early(const std::string& host, uint16_t port, const std::string& rule, const std::string& reason) {
    log_refusal(host, port, Decision{false, rule, reason}, std::nullopt, {});
    close();
  }

  // The client learns of a refusal by the connection closing: what it meant
  // to speak is not known yet, so no protocol's error reply fits. The audit
  // line says why.
  void on_failure(const Outcome& o) {
    if (o.kind == Outcome::Refused || o.kind == Outcome::BadHost)
      log_refusal(o.host, o.port, o.decision, o.address, o.refused_addresses);
    else
      log_connect_failure(o);
    close();
  }

  // The client first (TLS, HTTP, an ssh client's banner, most protocols): its
  // first bytes are checked before any upstream is connected, so a mismatch
  // reaches nothing at all. Silent for kFirstBytesWindow: a server-first
  // protocol (SMTP, FTP, MySQL), whose upstream is connected to speak.
  void await_first_bytes() {
    if (!in_.empty()) return client_spoke();  // (a relayed connection's first bytes came with its preamble)
    window_.expires_after(kFirstBytesWindow);
    window_.async_wait([s = self()](const boost::system::error_code& ec) {
      if (ec || s->closed_ || s->spoke_) return;
      s->silent_ = true;
      boost::system::error_code e;
      s->client_.cancel(e);
      s->connect_then([s] { s->wait_first_speaker(); });
    });
    client_.async_wait(tcp::socket::wait_read, [s = self()](const boost::system::error_code& ec) {
      if (s->closed_ || s->silent_) return;
      if (ec) return s->close();
      s->window_.cancel();
      s->client_spoke();
    });
  }

  // The rest of the hello or request head comes within header_timeout, as on the explicit proxy.
  void client_spoke() {
    spoke_ = true;
    arm_timer(st_->cfg.header_timeout, "header");
    if (!in_.empty()) return classify();
    read_more([s = self()] { s->classify(); });
  }

  void connect_then(std::function<void()> next) {
    connect_decided(*decided_, [s = self(), next = std::move(next)](Outcome o) {
      if (o.kind != Outcome::Connected) return s->on_failure(o);
      s->out_ = std::move(o);
      s->connected_ = true;
      next();
    });
  }

  // Connected after a silent window; nothing is relayed until one side speaks.
  // The client (a slow one, after all): its first bytes are still checked
  // before a byte goes up. The server (SSH, SMTP): there is nothing of the
  // client's to check.
  void wait_first_speaker() {
    arm_timer(st_->cfg.idle_timeout, "idle");
    // Bytes the client sent while the upstream was being reached make it the
    // first speaker, whatever the upstream did meanwhile: both ready at one
    // turn of the loop must not be a coin toss.
    char probe;
    if (::recv(client_.native_handle(), &probe, 1, MSG_PEEK | MSG_DONTWAIT) == 1) return client_spoke();
    client_.async_wait(tcp::socket::wait_read, [s = self()](const boost::system::error_code& ec) {
      if (s->closed_ || s->spoke_) return;
      if (ec) return s->close();
      boost::system::error_code e;
      s->upstream_.cancel(e);
      s->client_spoke();
    });
    upstream_.async_wait(tcp::socket::wait_read, [s = self()](const boost::system::error_code& ec) {
      if (s->closed_ || s->spoke_) return;
      if (ec) return s->close();
      s->spoke_ = true;
      boost::system::error_code e;
      s->client_.cancel(e);
      // The upstream ended before either side said a word: nothing to relay.
      char b;
      if (::recv(s->upstream_.native_handle(), &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0) return s->close();
      if (s->opaque_refusal()) return;
      s->relay({}, false);
    });
  }

  bool too_long() const { return in_.size() > st_->cfg.max_header_bytes; }

  void classify() {
    auto hello = parse_client_hello_sni(in_);
    switch (hello.kind) {
      case ClientHelloSni::NeedMore:
        if (too_long()) return malformed("TLS ClientHello larger than " + std::to_string(st_->cfg.max_header_bytes) + " bytes");
        return read_more([s = self()] { s->classify(); });
      case ClientHelloSni::Malformed: return malformed("malformed TLS ClientHello");
      case ClientHelloSni::Sni:
        if (!name_matches(hello.name, "TLS server name")) return;
        return go_on({}, Carries::Tls);
      case ClientHelloSni::NoSni: return go_on({}, Carries::Tls);
      case ClientHelloSni::NotTls: break;
    }
    switch (http_start(in_)) {
      case HttpStart::No: return go_on({}, Carries::Other);  // another protocol: relayed as it is
      case HttpStart::Maybe: return read_more([s = self()] { s->classify(); });
      case HttpStart::Yes: break;
    }
    size_t n = head_length(in_);
    if (!n) {
      if (too_long()) return malformed("request head larger than " + std::to_string(st_->cfg.max_header_bytes) + " bytes");
      return read_more([s = self()] { s->classify(); });
    }
    auto head = parse_request_head(std::string_view(in_).substr(0, n));
    if (!head) return malformed(head.error().why);
    if (head->count("host") > 1) return malformed("more than one Host header");
    if (const std::string* hv = head->find("host")) {
      auto a = parse_authority(*hv, out_.port);
      if (!a) return malformed("Host header: " + a.error().why);
      if (!name_matches(a->host, "Host header")) return;
    }
    // A captured plain-HTTP connection is relayed as a stream, not request by
    // request: where requests are judged (network.rules) or response headers
    // stripped, it is refused; clients that use HTTP_PROXY get that done.
    if (auto rule = stream_refusal()) {
      log_refusal(out_.host, out_.port,
                  Decision{false, *rule, "a captured plain-HTTP connection is relayed as a stream; requests to this "
                                         "host go through the proxy (HTTP_PROXY) to be judged one by one"},
                  out_.address, {});
      return close();
    }
    // Plain HTTP: no secret is put in (it would travel in clear text): the
    // host's own placeholders go on as they are (logged), another host's are
    // refused, as on the explicit proxy.
    auto own = secrets_for(out_.host, out_.port);
    if (exfiltration_in_headers(*head, out_.host, out_.port, own)) return close();
    note_placeholders_passed(*head, out_.host, out_.port, own);
    go_on(std::move(own), Carries::Http);
  }

  // For an address the resolver handed out: the name the client says must be
  // the name the address stands for. For a literal address, whatever name the
  // client says (its rules were the CIDR rules) is only written down.
  bool name_matches(const std::string& said, const char* what) {
    if (!by_name_) return true;
    auto h = normalise_host(said);
    if (h && h->name == out_.host) return true;
    std::string shown = h ? h->name : said.substr(0, 100);
    log_refusal(out_.host, out_.port,
                Decision{false, std::string(what) + " mismatch",
                         std::string(what) + " " + shown + " on the address handed out for " + out_.host},
                out_.address, {});
    close();
    return false;
  }

  void malformed(const std::string& why) {
    log_malformed(why + " (transparent " + out_.host + ":" + std::to_string(out_.port) + ")");
    close();
  }

  // What the first bytes carry passed their checks. Refused here, before any
  // upstream is connected, where the stream would escape a rule (request_gate.cpp);
  // else connected (unless a silent window already did) and relayed.
  enum class Carries { Tls, Http, Other };
  void go_on(std::vector<size_t> allowed, Carries what) {
    bool intercepted = what == Carries::Tls && terminates(out_.host, out_.port);
    if (intercepted) {
      if (auto r = tunnel_refusal(true)) {  // tlsTerminate.maxTunnels
        log_refusal(out_.host, out_.port, *r, out_.address, {});
        return close();
      }
      if (!st_->secret_index->now()->config().ca) {
        log_refusal(out_.host, out_.port, Decision{false, "secrets without a certificate authority", "cannot intercept"},
                    out_.address, {});
        return close();
      }
    } else if (what != Carries::Http && opaque_refusal()) {
      return;
    }
    if (connected_) return relay(std::move(allowed), intercepted);
    connect_then([s = self(), allowed = std::move(allowed), intercepted]() mutable {
      s->relay(std::move(allowed), intercepted);
    });
  }

  // The bytes read so far go first (through the up filter). A TLS host that
  // has secrets (or requests under a rule) is intercepted, as after CONNECT.
  void relay(std::vector<size_t> allowed, bool intercepted) {
    cancel_timer();  // the tunnel's idle sweep, or the interception, from here
    std::string first = std::move(in_);
    in_.clear();
    if (intercepted) return intercept(secrets_for(out_.host, out_.port), "", std::move(first));
    auto t = std::make_shared<Tunnel>(std::move(client_), std::move(upstream_), st_->cfg, st_->shared, tunnel_done());
    if (auto f = exfiltration_filter(out_.host, out_.port, nullptr, std::move(allowed))) t->set_up_filter(std::move(f));
    run_tunnel(t, "", std::move(first), "");
  }

  // A stream the proxy will not see into (TLS it does not terminate, another
  // protocol): refused, as a tunnel would be, where a request rule or
  // refuseOpaqueTunnels says so (request_gate.cpp). Logged and closed: true.
  bool opaque_refusal() {
    auto r = tunnel_refusal(false);
    if (!r) return false;
    log_refusal(out_.host, out_.port, *r, out_.address, {});
    close();
    return true;
  }

  // The rule a captured plain-HTTP stream would escape, if any.
  std::optional<std::string> stream_refusal() const {
    if (st_->cfg.requests)
      if (auto h = normalise_host(out_.host))
        if (auto rule = st_->cfg.requests->governing(*h)) return rule;
    if (!st_->cfg.strip_response_headers.empty()) return std::string("stripResponseHeaders");
    return std::nullopt;
  }

  bool preamble_;         // the destination comes as a preamble (kDestinationPreambleBytes), not SO_ORIGINAL_DST
  boost::asio::steady_timer window_{client_.get_executor()};  // kFirstBytesWindow
  std::optional<Host> decided_;  // the destination, allowed by decide(); connected only when it must be
  bool by_name_ = false;    // the destination was an address the resolver handed out
  bool spoke_ = false;      // one side spoke first (the other's wait is cancelled)
  bool silent_ = false;     // the client said nothing within kFirstBytesWindow
  bool connected_ = false;  // upstream_ is connected
};

}  // namespace

std::optional<RelayedDestination> parse_destination_preamble(std::string_view in) {
  if (in.size() < kDestinationPreambleBytes) return std::nullopt;
  RelayedDestination d;
  std::memcpy(d.address.bytes, in.data(), 4);
  d.port = static_cast<uint16_t>((static_cast<uint8_t>(in[4]) << 8) | static_cast<uint8_t>(in[5]));
  std::memcpy(d.source.bytes, in.data() + 6, 4);
  return d;
}

std::shared_ptr<Session> make_transparent_session(std::shared_ptr<ProxyState> st, tcp::socket s, bool preamble) {
  return std::make_shared<TransparentSession>(std::move(st), std::move(s), preamble);
}

}  // namespace exg::egress::detail
