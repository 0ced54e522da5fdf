// The egress proxy: an HTTP proxy (CONNECT and absolute-form) and a SOCKS5
// server (CONNECT only) on listening sockets the caller made (inside the
// sandbox's netns). Every request is decided by Rules twice: on the name, then
// on every address the proxy itself resolved; it connects only to an address
// that passed (no second lookup, no rebinding window). Tunnels move bytes with
// splice(2) where both ends are TCP sockets. One event loop: everything runs on
// the io_context the caller drives. Names the C library would answer from
// /etc/hosts are answered from a cached copy of it on the loop; other names go
// to getaddrinfo on asio's resolver thread, its completion back on the loop.
#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <map>
#include <nlohmann/json.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "egress/audit_sink.hpp"
#include "egress/host_addresses.hpp"
#include "egress/parent_proxy.hpp"
#include "egress/request_rules.hpp"
#include "egress/rules.hpp"
#include "egress/secrets.hpp"
#include "egress/transparent.hpp"
#include "util/error.hpp"

namespace exg::egress {

struct ProxyConfig {
  size_t max_header_bytes = 32 * 1024;  // request line + headers; larger -> 431 / close
  size_t max_connections = 4096;        // concurrent client connections; beyond -> 503 / SOCKS reply 1
  std::chrono::milliseconds header_timeout{10000}, connect_timeout{10000}, idle_timeout{300000};
  size_t tunnel_buffer = 64 * 1024;     // copy buffer (shared, used synchronously) when splice is unavailable
  size_t max_pipe = 1024 * 1024;        // a bulk direction's pipe grows up to this (F_SETPIPE_SZ, best effort)
  // Standalone proxy: clients of TCP listeners must present this token (HTTP
  // Proxy-Authorization Basic exguardian:TOKEN or Bearer TOKEN; SOCKS5 RFC 1929
  // user exguardian, password TOKEN). Empty: no authentication (the sandbox's
  // own listeners). Unix-socket listeners never ask for it.
  std::string token;
  // Credential injection (secrets.hpp): null means no secrets, no interception,
  // no exfiltration scanning.
  std::shared_ptr<const SecretsConfig> secrets;
  // srt 0.0.83's proxy settings and ExGuardian's request rules, from the
  // policy's network section (proxy_settings.cpp: config_from_policy).
  std::shared_ptr<const RequestRules> requests;  // network.rules / readOnly; null: none
  std::shared_ptr<const Upstreams> upstreams;    // parent / mitm proxies; null: direct
  bool refuse_opaque_tunnels = false;            // CONNECT not terminated, SOCKS: refused
  bool require_host_match = false;               // a Host naming another host: 421 instead of 403
  std::vector<std::string> strip_response_headers;  // folded: lower case, "_" and "." as "-"
  size_t max_terminated = 0;                     // TLS connections terminated at once; 0: no cap
  std::optional<std::chrono::milliseconds> handshake_timeout;  // the client's TLS handshake; else header_timeout
  // Transparent egress (transparent.hpp): the resolver answers allowed names
  // with addresses of its own, which the proxy (explicit and transparent
  // listeners alike) takes back to their names.
  bool transparent = false;
  // Names given their addresses before the first answer, in this order (the
  // plan's pinned_names, written into the sandbox's /etc/hosts).
  std::vector<std::string> pinned_names;
  // The host's own addresses, followed for the proxy's whole life (opened by
  // the caller in the host's network namespace, before anything runs): every
  // Rules given to the proxy checks this set, and every connection is checked
  // against it again once connected (host_addresses.hpp: the bound). Null:
  // only the fixed list the Rules carry (unit tests).
  std::shared_ptr<HostAddressWatch> host_addresses;
};

// What the policy's network section says of egress, built once from it: the
// domain and address rules and the proxy's settings (request rules, the user's
// proxies, srt's switches). The supervisor, the runtime's egress holder and
// `exguardian proxy` each take this and add their own (host addresses,
// secrets, token, listeners). Errors name the key.
struct Config {
  Rules rules;
  ProxyConfig proxy;
};
Result<Config> config_from_policy(const policy::Network& net);

struct ProxyStats {
  uint64_t allowed = 0, refused = 0, malformed = 0;
  uint64_t intercepted = 0;    // connections whose TLS the proxy terminated to put secrets in (also in allowed)
  uint64_t exfiltration = 0;   // refusals because a placeholder was on its way elsewhere (also in refused)
  uint64_t terminated_now = 0; // intercepted connections open at the moment (tlsTerminate.maxTunnels)
  std::map<std::string, uint64_t> refused_hosts;  // bounded (see proxy.cpp); "(other)" beyond
  std::map<std::string, std::string> refused_rules;  // host -> the rule that refused it first (run's summary)
  std::string summary() const;  // "egress: 3 allowed, 2 refused (denied.test x2), 0 malformed"
};

class Proxy {
 public:
  Proxy(boost::asio::io_context& io, const Rules& rules, AuditSink* audit, ProxyConfig cfg = {});
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  void add_http_listener(int listening_fd);  // takes ownership of the fd; TCP or AF_UNIX stream
  void add_socks_listener(int listening_fd);
  // The in-sandbox resolver (dns.cpp): a bound UDP socket; takes ownership.
  void add_dns_socket(int udp_fd);
  // Transparent egress: a listening TCP socket (127.0.0.1:15001 inside) that
  // the sandbox's netfilter redirects its outgoing TCP to; takes ownership.
  void add_transparent_listener(int listening_fd);
  // The same for connections relayed from elsewhere (the microVM guest's,
  // microvm/egress_bridge.hpp): a listening unix socket whose connections
  // begin with a destination preamble (transparent.hpp); takes ownership.
  void add_transparent_relay_listener(int listening_fd);
  // The resolver (dns.hpp) on a listening stream socket (a unix socket of the
  // microVM bridge): queries and answers framed as DNS over TCP (RFC 1035
  // 4.2.2, a 2-byte length before each); takes ownership.
  void add_dns_stream_listener(int listening_fd);
  const ProxyStats& stats() const;
  // cfg.max_connections, or less when RLIMIT_NOFILE cannot hold that many
  // (kFdsPerConnection each): past it clients get the clear refusal, not EMFILE.
  size_t max_connections() const;
  static constexpr size_t kFdsPerConnection = 4;  // client, upstream, a borrowed pipe's two ends
  void stop();  // close listeners and connections
  // Puts `rules` in force at once; safe from any thread. Connections judged
  // after this call use them. Connections already judged by older rules
  // (tunnels, requests being connected or resolved) are cut on the loop
  // shortly after: none keeps going on a decision the new rules might not
  // make. `audit_event` is written then with "cut": how many were.
  void replace_rules(Rules rules, nlohmann::json audit_event);

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// Parsers of untrusted bytes, kept apart from the sockets so unit tests and
// fuzzers can reach them (http_parse.cpp, socks_parse.cpp).
namespace detail {

struct HttpHead {
  std::string method, target, version;  // request: "GET", "http://a/b", "HTTP/1.1"
  int status = 0;                        // response: 200, version in `version`
  std::string reason;
  std::vector<std::pair<std::string, std::string>> headers;  // names as sent, values trimmed
  const std::string* find(std::string_view name) const;       // first, case-insensitive
  size_t count(std::string_view name) const;
};

// Length of the head including its terminating empty line, 0 when more bytes
// are needed. Bare-LF heads are not accepted (they stay incomplete and run into
// the size limit or the timeout).
size_t head_length(std::string_view buf);
// Whether what was received so far can still become a valid request head: the
// request line so far holds only visible ASCII and spaces (lets garbage be
// answered at once instead of at the header timeout).
bool plausible_request_prefix(std::string_view buf);

// Header fields a peer's head may carry; more is "too many headers". A head the
// proxy writes from one (below) carries at most kFieldsTheProxyAdds more: Host
// when missing and "Connection: close". So what the proxy sends parses with
// max_fields = kMaxHeaderFields + kFieldsTheProxyAdds (fuzz/http_request.cpp and
// fuzz/http_response.cpp check it).
inline constexpr size_t kMaxHeaderFields = 200;
inline constexpr size_t kFieldsTheProxyAdds = 2;
Result<HttpHead> parse_request_head(std::string_view head, size_t max_fields = kMaxHeaderFields);
Result<HttpHead> parse_response_head(std::string_view head, size_t max_fields = kMaxHeaderFields);

struct Authority {
  std::string host;  // as written, brackets removed from IPv6 literals
  uint16_t port = 0;
  bool port_given = false;
};
// "host", "host:port", "[v6]:port"; port required when default_port == 0.
Result<Authority> parse_authority(std::string_view s, uint16_t default_port);

struct AbsoluteTarget {
  Authority authority;
  std::string path;  // origin-form: "/x?y"
};
// "http://host[:port][/path]"; anything else (https://, userinfo, no scheme) is an error.
Result<AbsoluteTarget> parse_absolute_http(std::string_view target);

// Whether a Host header value names the same host and port as the request
// target (both normalised; the header's default port is 80, 443 inside TLS).
bool host_header_matches(std::string_view host_header, const Authority& target, uint16_t default_port = 80);

// Proxy authentication. base64_decode: standard alphabet, padding optional,
// nullopt on anything else. proxy_authorization_ok: "Basic base64(exguardian:TOKEN)"
// or "Bearer TOKEN" (scheme case-insensitive); constant-time in the token.
std::optional<std::string> base64_decode(std::string_view in);
bool constant_time_equal(std::string_view a, std::string_view b);
bool proxy_authorization_ok(const std::string* header, std::string_view token);

// The head sent to the origin: origin-form target, hop-by-hop headers removed
// (Connection and what it lists, Proxy-Connection, Proxy-Authorization,
// Keep-Alive, TE, Trailer, Upgrade), Host added when missing, "Connection: close".
std::string origin_request_head(const HttpHead& req, const AbsoluteTarget& t);
// The response head sent to the client: hop-by-hop headers removed, "Connection:
// close" (unless !close: an intercepted connection kept alive).
std::string client_response_head(const HttpHead& resp, bool close = true);
// Whether a Connection header lists `token` ("close", "keep-alive"), case-insensitive.
bool connection_has(const HttpHead& h, std::string_view token);

// Drops the headers named in `folded` (stripResponseHeaders: lower case, "_"
// and "." read as "-") from a response head (request_gate.cpp).
void strip_response_headers(HttpHead& resp, const std::vector<std::string>& folded);

// The head sent upstream on an intercepted (TLS-terminated) connection: the
// request line as sent (HTTP/1.1), hop-by-hop headers removed, "Connection: close"
// when `close` (the client's last request).
std::string forwarded_request_head(const HttpHead& req, bool close = true);

// How a response body ends (RFC 9112 6.3): none (HEAD, 1xx, 204, 304), a
// length, chunked, or when the server closes (also when the framing is odd).
struct ResponseFraming {
  enum Kind { None, Length, Chunked, UntilClose } kind = None;
  uint64_t length = 0;
};
ResponseFraming response_body_framing(const HttpHead& resp, std::string_view request_method);

struct BodyFraming {
  enum Kind { None, Length, Chunked } kind = None;
  uint64_t length = 0;
};
// Request body framing; conflicting or unknown framing is an error (no smuggling).
Result<BodyFraming> request_body_framing(const HttpHead& req);

// Follows a chunked body through its bytes without changing them.
class ChunkTracker {
 public:
  // Consumes bytes of `in` that belong to the body; returns how many, or -1 when
  // malformed. With `data`, the chunks' contents are appended to it (decoding).
  long feed(std::string_view in, std::string* data = nullptr);
  bool done() const { return state_ == Done; }

 private:
  enum State { Size, Ext, SizeLf, Data, DataCr, DataLf, TrailerStart, Trailer, TrailerLf, EndLf, Done };
  State state_ = Size;
  uint64_t remaining_ = 0;
  int digits_ = 0;
};

// A response's content and transfer codings other than chunked and identity,
// in the order they were applied (content_decoding.cpp).
std::vector<std::string> response_codings(const HttpHead& resp);

// Undoes gzip / x-gzip / deflate codings of a body read in pieces (so that
// values in it can be masked); any other coding is an error from make().
// A bomb is corrupt too: one feed() that would expand past kMaxFeedOutput at
// any stage (3.5 KB of "gzip, gzip" make 2 GiB in one call; a read of 16 KiB
// of one gzip layer makes at most ~16 MiB), or more than kMaxStages codings.
class BodyDecoder {
 public:
  static constexpr size_t kMaxFeedOutput = 64 << 20;
  static constexpr size_t kMaxStages = 4;
  struct Stage {
    virtual ~Stage() = default;
    virtual bool feed(std::string_view in, std::string& out) = 0;
    virtual bool finish(std::string& out) = 0;
  };
  static Result<BodyDecoder> make(const std::vector<std::string>& codings);
  bool empty() const { return stages_.empty(); }
  bool feed(std::string_view in, std::string& out);  // false: corrupt
  bool finish(std::string& out);                     // false: corrupt or truncated

 private:
  std::vector<std::unique_ptr<Stage>> stages_;
};

// SOCKS5 (RFC 1928). Each returns the bytes consumed, 0 when more are needed,
// or a negative value when malformed.
long parse_socks_greeting(std::string_view in, bool& no_auth_offered);
long parse_socks_greeting(std::string_view in, bool& no_auth_offered, bool& userpass_offered);
struct SocksRequest {
  uint8_t cmd = 0, atyp = 0;
  std::string host;  // domain as sent, or the literal's text
  uint16_t port = 0;
};
// -1: not version 5; -2: unknown address type; -3: empty domain.
long parse_socks_request(std::string_view in, SocksRequest& req);
// RFC 1929 username/password request: bytes consumed, 0 when more are needed, -1 when malformed.
long parse_socks_userpass(std::string_view in, std::string& user, std::string& pass);

// Transforms one direction of a tunnel while it is not a plain byte stream
// (a request body to bound, a response head to rewrite).
class StreamFilter {
 public:
  enum class Status { More, Done, Passthrough, Error };
  virtual ~StreamFilter() = default;
  // Consumes `in`, appends what to send on to `out`. Done: the stream is complete
  // (what follows is dropped, the direction ends without a shutdown);
  // Passthrough: the rest of `in` was appended and what follows is raw;
  // Error: `out` holds a last message for the peer, then the tunnel closes.
  virtual Status feed(std::string_view in, std::string& out) = 0;
  virtual void eof(std::string& /*out*/) {}
  // After Error: why, for the audit line ("" = the data was malformed).
  virtual std::string error_reason() const { return {}; }
};

// What the loop's tunnels and sessions share: a small pool of empty pipes (a
// direction borrows one only while bytes are in flight, so an idle tunnel holds
// none) and a scratch buffer for reads that are consumed at once.
struct IoShared {
  ~IoShared();
  std::vector<std::pair<int, int>> pipes;  // empty, default-sized pipes (read end, write end)
  std::vector<char> scratch;
  char* scratch_for(size_t n) {
    if (scratch.size() < n) scratch.resize(n);
    return scratch.data();
  }
};

// Moves bytes both ways between a client and an upstream socket: splice(2)
// through a pipe per direction (borrowed from IoShared, grown up to max_pipe
// for bulk), or read/write through the shared scratch buffer while a filter is
// in place or splice is unavailable. Half-close is passed on (shutdown(SHUT_WR)
// when one side ends while the other still runs). Idle time is tracked in
// last_active(); the owner's deadline sweep closes idle tunnels.
class Tunnel : public std::enable_shared_from_this<Tunnel> {
 public:
  struct Outcome {
    uint64_t bytes_up = 0, bytes_down = 0;
    std::string error;  // empty when both sides ended normally
  };
  Tunnel(boost::asio::ip::tcp::socket client, boost::asio::ip::tcp::socket upstream, const ProxyConfig& cfg,
         std::shared_ptr<IoShared> shared, std::function<void(const Outcome&)> done);
  ~Tunnel();
  void set_up_filter(std::unique_ptr<StreamFilter> f);
  void set_down_filter(std::unique_ptr<StreamFilter> f);
  void end_when_down_done(bool v) { end_on_down_ = v; }
  // up_prefix/down_prefix go out first, as they are; up_initial is treated as
  // if it had been read from the client (it passes the up filter).
  void start(std::string up_prefix, std::string up_initial, std::string down_prefix);
  void close(const std::string& why = "stopped");
  std::chrono::steady_clock::time_point last_active() const { return last_; }
  bool closed() const { return closed_; }

 private:
  struct Dir {
    boost::asio::ip::tcp::socket* src = nullptr;
    boost::asio::ip::tcp::socket* dst = nullptr;
    int pipe_r = -1, pipe_w = -1;
    uint32_t in_pipe = 0, pipe_cap = 0;
    std::string out;
    size_t out_off = 0;
    std::unique_ptr<StreamFilter> filter;
    bool use_splice = true, read_done = false, shut_dst = true, finished = false;
    bool grown = false, more = false, corked = false;
    uint64_t bytes = 0;
  };
  void pump(Dir& d);
  bool apply_filter(Dir& d, std::string_view data);
  void finish(Dir& d);
  void complete(const std::string& error);
  void wait(Dir& d, bool for_write);
  bool get_pipe(Dir& d);
  void release_pipes(Dir& d);

  boost::asio::ip::tcp::socket client_, upstream_;
  const ProxyConfig& cfg_;  // the ProxyState's, alive while done_ holds the session
  std::shared_ptr<IoShared> shared_;
  std::function<void(const Outcome&)> done_;
  Dir up_, down_;
  bool closed_ = false, end_on_down_ = false;
  std::chrono::steady_clock::time_point last_;
};

// ---- the sessions (proxy.cpp, http_session.cpp, socks_session.cpp) ----------------------------

class Session;

// What the listeners and every session share; outlives the Proxy while sessions run.
struct ProxyState {
  ProxyState(boost::asio::io_context& io, const Rules& rules, AuditSink* audit, ProxyConfig cfg);
  ~ProxyState();
  boost::asio::io_context& io;
  // The rules in force (replace_rules may swap them from another thread).
  std::shared_ptr<const Rules> rules() const;
  void set_rules(std::shared_ptr<const Rules> r);
  mutable std::mutex rules_mu;
  std::shared_ptr<const Rules> rules_now;
  AuditSink* audit;
  ProxyConfig cfg;
  ProxyStats stats;
  size_t active = 0;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions;
  std::shared_ptr<IoShared> shared = std::make_shared<IoShared>();
  // One timer for every deadline of every session (header, connect, reply,
  // tunnel idle): a sweep every sweep_period while sessions exist.
  boost::asio::steady_timer sweep_timer;
  std::chrono::milliseconds sweep_period{500};
  bool sweeping = false;
  struct HostsCache;
  std::unique_ptr<HostsCache> hosts;
  void count_refused(const std::string& host, const std::string& rule = {});
  bool audit_on() const;
  void audit_write(nlohmann::json j);
  void start_sweep(std::shared_ptr<ProxyState> self);
  void sweep(const std::shared_ptr<ProxyState>& self);
  // Addresses for a name the C library would answer from /etc/hosts ("hosts:
  // files ..." in nsswitch.conf); nullopt when getaddrinfo has to decide.
  std::optional<std::vector<IpAddress>> hosts_lookup(const std::string& name);
  // Credential injection (null without secrets): the index is built at
  // construction, and grows by OAuth refreshes (sessions read snapshots of it:
  // SharedSecretIndex); the upstream TLS context at the first interception.
  std::unique_ptr<SharedSecretIndex> secret_index;
  SslCtxPtr upstream_ctx;
  std::string upstream_ctx_error;
  Result<SSL_CTX*> upstream_tls();
  // Transparent egress (cfg.transparent): the names the resolver handed out
  // addresses for; null otherwise.
  std::unique_ptr<HandedOutAddresses> handed_out;
};

// One client connection: reads its request, decides, connects, hands over to a Tunnel.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<ProxyState> st, boost::asio::ip::tcp::socket client, const char* protocol, bool auth);
  virtual ~Session();
  virtual void start() = 0;
  virtual void refuse_over_limit() = 0;  // answer "too many connections" and close
  void register_self();
  void close();
  void check_deadline(std::chrono::steady_clock::time_point now);
  // The rules this session's connection was judged by; null before its decision.
  const std::shared_ptr<const Rules>& judged_by() const { return judged_by_; }

 protected:
  struct Outcome {
    enum Kind { Connected, Refused, BadHost, DnsFailed, ConnectFailed, TimedOut } kind = Refused;
    std::string host;  // normalised when it could be
    uint16_t port = 0;
    Decision decision;
    std::optional<IpAddress> address;             // connected to, or the refused one
    std::vector<std::string> refused_addresses;   // resolved but refused by check_address
    boost::system::error_code connect_ec;
    std::string error;
    std::string via;  // the user's proxy it went through ("parentProxy http://proxy:3128"), empty: direct
    std::string request_rule;  // the network.rules entry that allowed a plain-HTTP request
  };
  // normalise_host -> check_host -> resolve (names only) -> check_address on every
  // address -> connect to those that passed, in order. `done` runs on the loop.
  // decide() then connect_decided().
  void decide_and_connect(const std::string& raw_host, uint16_t port, std::function<void(Outcome)> done);
  // The decision alone, no connection: normalise_host, the name a handed-out
  // address stands for, check_host, a tunnel's refusal, check_address of a
  // literal. The host to connect to; nullopt: refused (BadHost or Refused, in out_).
  std::optional<Host> decide(const std::string& raw_host, uint16_t port);
  // The connection to a host decide() allowed: resolve, check_address on every
  // address, connect (or through the user's proxy). `done` runs on the loop.
  void connect_decided(const Host& host, std::function<void(Outcome)> done);
  // Through the user's proxy instead of to the host (parent_proxy.cpp); sets out_.via.
  void connect_via(Via via, std::function<void(Outcome)> done);
  // Whether a tunnel to out_.host may open (request_gate.cpp): refused when the
  // host is under a request rule or refuseOpaqueTunnels holds and the proxy
  // would not see its requests (`terminated`: it will), or when it would be
  // terminated and tlsTerminate.maxTunnels are open. Allowed: nullopt.
  std::optional<Decision> tunnel_refusal(bool terminated) const;
  // Whether a tunnel to host:port is terminated here: it has secrets, or its
  // requests are under a rule and there is a CA to terminate with.
  bool terminates(const std::string& host, uint16_t port) const;
  static constexpr const char* kTooManyTunnels = "tlsTerminate.maxTunnels";
  // Whether a Host header or server name names another host: 421 with
  // requireHostMatch, else 403.
  int host_mismatch_status() const { return st_->cfg.require_host_match ? 421 : 403; }
  void run_tunnel(std::shared_ptr<Tunnel> t, std::string up_prefix, std::string up_initial, std::string down_prefix);
  std::function<void(const Tunnel::Outcome&)> tunnel_done();

  void arm_timer(std::chrono::milliseconds d, const char* what);
  void cancel_timer() { deadline_ = std::chrono::steady_clock::time_point::max(); }
  void read_more(std::function<void()> then);  // appends to in_, at most max_header_bytes + 1 in all
  void reply_and_close(std::string bytes);
  void log_refusal(const std::string& host, uint16_t port, const Decision& d, const std::optional<IpAddress>& addr,
                   const std::vector<std::string>& refused_addrs);
  void log_malformed(const std::string& why);
  void log_connect_failure(const Outcome& o);
  void log_over_limit();
  void log_header_timeout();
  void log_auth_failure(const std::string& host, uint16_t port, const char* why);
  nlohmann::json audit_base(const std::string& host, uint16_t port) const;
  long elapsed_ms() const;

  // ---- secrets (exfiltration.cpp, intercept_session.cpp) ----
  // The secrets whose hosts match host:port (none without secrets), in the
  // newest index (the checks below take in successors learned since: an id list
  // from an older index still names them).
  std::vector<size_t> secrets_for(const std::string& host, uint16_t port) const;
  // A placeholder refused: whose, and where it was found ("url", "header X", "body", ...).
  struct PlaceholderFound {
    const Secret* secret;
    std::string where;
    std::shared_ptr<const SecretIndex> index;  // the snapshot *secret is in (kept alive)
  };
  // A placeholder (of a secret not in `allowed`: the secrets of the host it is
  // going to) in s: counted, logged as {"event":"exfiltration", ...}; the caller
  // refuses (placeholder_refusal says why). nullopt: none.
  std::optional<PlaceholderFound> exfiltration_in(std::string_view s, const std::string& where, const std::string& host,
                                                  uint16_t port, const std::vector<size_t>& allowed = {});
  // As exfiltration_in, over a request head: the target, header names and values
  // (also inside Basic credentials).
  std::optional<PlaceholderFound> exfiltration_in_headers(const HttpHead& h, const std::string& host, uint16_t port,
                                                          const std::vector<size_t>& allowed = {});
  void log_exfiltration(const Secret& s, const std::string& where, const std::string& host, uint16_t port);
  // Placeholders of the host's own secrets (`own`) still in a request head that
  // goes on (after injection where there is one: what is left was not put in,
  // and travels as the placeholder): each logged once per connection as
  // {"event":"placeholder_passed", "secret", "host", "where"}.
  void note_placeholders_passed(const HttpHead& h, const std::string& host, uint16_t port, const std::vector<size_t>& own);
  void log_placeholder_passed(const Secret& s, const std::string& where, const std::string& host, uint16_t port);
  // Up filter of a tunnel that is not intercepted (or of a plain-HTTP request
  // body, around `inner`): scans the first bytes the client sends for
  // placeholders; those of `allowed` pass (logged as placeholder_passed), any
  // other closes the stream. Returns `inner` when there are no secrets.
  std::unique_ptr<StreamFilter> exfiltration_filter(const std::string& host, uint16_t port,
                                                    std::unique_ptr<StreamFilter> inner = nullptr,
                                                    std::vector<size_t> allowed = {},
                                                    std::string where = "tunnel");
  // Instead of a Tunnel for a host that has secrets (out_ holds the decision and
  // the connected upstream): TLS to both sides, placeholders swapped in request heads.
  void intercept(std::vector<size_t> secret_ids, std::string down_prefix, std::string up_initial);
  friend class Interceptor;

  std::shared_ptr<ProxyState> st_;
  boost::asio::ip::tcp::socket client_, upstream_;
  std::string in_;  // bytes read from the client, not yet consumed
  bool closed_ = false;
  Outcome out_;
  const char* protocol_;  // "http", "connect", "socks5": the audit's protocol
  // Set: the connection came from a nested container (its address there, the
  // microVM guest's claim: transparent.hpp), said in every audit line of it.
  std::string origin_address_;
  bool auth_;             // the client must present cfg.token
  std::shared_ptr<const Rules> judged_by_;  // taken at the decision, kept for its name and address checks
  uint64_t host_mark_ = 0;                   // judged_by_->host_mark() then (recheck_host_own)

 private:
  void on_timeout(const char* what);
  void on_read_error(const boost::system::error_code& ec);
  void drain(size_t seen);
  void on_resolved(const boost::system::error_code& ec, boost::asio::ip::tcp::resolver::results_type res,
                   std::function<void(Outcome)> done);
  void on_addresses(const std::vector<IpAddress>& addrs, std::function<void(Outcome)> done);
  void connect_next(std::function<void(Outcome)> done);

  std::unique_ptr<boost::asio::ip::tcp::resolver> resolver_;  // only for names not in /etc/hosts
  std::set<std::pair<std::string, std::string>> passed_logged_;  // (secret, where): placeholder_passed written
  std::chrono::steady_clock::time_point started_, deadline_ = std::chrono::steady_clock::time_point::max();
  const char* deadline_what_ = "";
  std::vector<IpAddress> candidates_;
  std::weak_ptr<Tunnel> tunnel_;
  bool timed_out_ = false;
};

std::shared_ptr<Session> make_http_session(std::shared_ptr<ProxyState> st, boost::asio::ip::tcp::socket s, bool auth);
std::shared_ptr<Session> make_socks_session(std::shared_ptr<ProxyState> st, boost::asio::ip::tcp::socket s, bool auth);
// preamble: the destination comes first on the connection (kDestinationPreambleBytes), not from SO_ORIGINAL_DST.
std::shared_ptr<Session> make_transparent_session(std::shared_ptr<ProxyState> st, boost::asio::ip::tcp::socket s,
                                                  bool preamble);

}  // namespace detail
}  // namespace exg::egress
