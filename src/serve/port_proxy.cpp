// A request for a port of the sandbox other than envd's (the header
// E2b-Sandbox-Port, as the SDKs send to E2B_SANDBOX_URL: the code
// interpreter's 49999, a web app a command started): relayed to that port
// inside the sandbox. The connection is made by a small relay process the
// agent starts in the sandbox (port_relay.hpp), so it is made from the
// sandbox's own network namespace, as the sandbox's user, under its seccomp
// filter and counted by its cgroup: this server never connects anywhere for
// a sandbox, and a port is reachable only through the same checks as envd
// (Service::envd: the sandbox's access token, its traffic access token, or
// its tenant's key; another tenant's sandbox is answered as one that does
// not exist). The request goes up as HTTP/1.1 with Connection: close and
// without the caller's credentials; the answer comes back streamed (chunked)
// as the relay reads it, and a client that goes away kills the relay, which
// closes the connection inside (the code interpreter then interrupts its
// kernel).
#include <limits>

#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>

#include "serve/code_interpreter.hpp"
#include "serve/port_relay.hpp"
#include "serve/service.hpp"

namespace exg::serve {

namespace {

constexpr size_t kMaxRelayStderr = 4096;

// Headers that are this hop's, or the caller's credentials for this server:
// never passed into the sandbox.
bool kept_from_sandbox(boost::beast::string_view name) {
  static const char* const drop[] = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
                                     "proxy-authorization", "proxy-connection", "content-length", "host",
                                     "x-access-token", "x-api-key", "e2b-traffic-access-token", "e2b-sandbox-id",
                                     "e2b-sandbox-port"};
  for (const char* d : drop)
    if (boost::beast::iequals(name, d)) return true;
  return false;
}

// The answer's own framing headers: the answer goes out chunked from here.
bool framing(boost::beast::string_view name) {
  for (const char* d : {"connection", "keep-alive", "transfer-encoding", "content-length", "trailer"})
    if (boost::beast::iequals(name, d)) return true;
  return false;
}

// The Host the server inside sees: E2B's network.maskRequestHost (${PORT}: the port), else localhost:PORT.
std::string upstream_host(const Sandbox& sb, const std::string& port) {
  if (sb.mask_request_host.empty()) return "localhost:" + port;
  std::string h = sb.mask_request_host;
  for (size_t at; (at = h.find("${PORT}")) != std::string::npos;) h.replace(at, 7, port);
  return h;
}

std::string upstream_request(const Request& req, const Sandbox& sb, const std::string& port) {
  std::string out = std::string(req.method_string()) + " " + std::string(req.target()) + " HTTP/1.1\r\n";
  out += "Host: " + upstream_host(sb, port) + "\r\n";
  for (const auto& f : req)
    if (!kept_from_sandbox(f.name_string())) out += std::string(f.name_string()) + ": " + std::string(f.value()) + "\r\n";
  out += "Content-Length: " + std::to_string(req.body().size()) + "\r\nConnection: close\r\n\r\n";
  out += req.body();
  return out;
}

// One relayed exchange: the relay's stdout parsed as an HTTP answer and passed
// on as it comes.
struct PortExchange : std::enable_shared_from_this<PortExchange> {
  Service& svc;
  std::shared_ptr<Sandbox> sb;
  ExchangePtr ex;
  std::string port, route;
  int pid = 0;
  uint64_t token = 0;
  http::response_parser<http::buffer_body> parser;
  std::string pending;  // stdout not parsed yet
  std::string err;      // the relay's stderr (why it could not connect)
  bool head_sent = false, done = false;

  PortExchange(Service& s, std::shared_ptr<Sandbox> b, ExchangePtr e, std::string p)
      : svc(s), sb(std::move(b)), ex(std::move(e)), port(std::move(p)), route("envd port") {
    // A number, not boost::none: Boost 1.74 compares a Content-Length with an empty limit as exceeding it.
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    parser.eager(true);
  }

  void fail(http::status st, const std::string& why) {
    if (done) return;
    done = true;
    kill_relay();  // (a bad answer: the relay may still be connected)
    if (head_sent) return ex->end_stream();  // the answer was under way: cut short
    svc.reply(ex, route, Service::api_error(st, "port " + port + " of sandbox " + sb->id + ": " + why));
  }

  void send_head() {
    head_sent = true;
    auto& up = parser.get();
    Response head{up.result(), 11};
    head.reason(up.reason());
    for (const auto& f : up)
      if (!framing(f.name_string())) head.insert(f.name_string(), f.value());
    svc.count(route, up.result_int());
    ex->start_stream(std::move(head));
  }

  // Feeds what the relay wrote; the head goes out once whole, the body as it is parsed.
  void feed(const std::string& data) {
    if (done) return;
    pending += data;
    while (!done) {
      boost::beast::error_code ec;
      char buf[65536];
      parser.get().body().data = buf;
      parser.get().body().size = sizeof buf;
      size_t n = parser.put(boost::asio::buffer(pending), ec);
      pending.erase(0, n);
      if (ec && ec != http::error::need_more && ec != http::error::need_buffer)
        return fail(http::status::bad_gateway, std::string(head_sent ? "a bad HTTP answer: " : "not an HTTP answer: ") + ec.message());
      if (parser.is_header_done() && !head_sent) send_head();
      size_t got = sizeof buf - parser.get().body().size;
      if (got) ex->write_chunk(std::string(buf, got));
      if (parser.is_done()) return finish();
      if (ec == http::error::need_more || (n == 0 && got == 0)) return;
    }
  }

  void finish() {
    if (done) return;
    done = true;
    ex->end_stream();
    kill_relay();
  }

  void kill_relay() {
    if (pid > 0 && sb->agent) sb->agent->call(agent::request::signal(pid, "KILL"), {}, [](const agent::Frame&) {});
  }

  void on_event(const agent::Frame& f) {
    std::string ev = f.header.value("event", "");
    if (ev == "stdout") return feed(f.payload);
    if (ev == "stderr") {
      err += f.payload.substr(0, kMaxRelayStderr - std::min(err.size(), kMaxRelayStderr));
      return;
    }
    if (ev != "exit" && ev != "closed") return;
    if (sb->agent) sb->agent->unsubscribe(token);
    ex->on_close = nullptr;  // (it holds this exchange, which holds ex)
    if (ev == "closed") return fail(http::status::bad_gateway, "the sandbox ended");
    if (done) return;
    if (head_sent) {  // an answer that ends with its connection (no length, not chunked)
      boost::beast::error_code ec;
      parser.put_eof(ec);
      done = true;
      return ex->end_stream();
    }
    while (!err.empty() && err.back() == '\n') err.pop_back();
    fail(http::status::bad_gateway, err.empty() ? "the connection closed before an answer" : err);
  }
};

}  // namespace

void Service::count(const std::string& route, unsigned status) { metrics_.count_request(route, status); }

void Service::port_proxy(Call& c, const std::string& port) {
  const std::string route = "envd port";
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end || p < 1 || p > 65535 || port[0] == '0')
    return reply(c.ex, route, api_error(http::status::bad_request, "E2b-Sandbox-Port: " + port.substr(0, 16) + ": expected a port 1..65535"));
  auto px = std::make_shared<PortExchange>(*this, c.sb, c.ex, port);
  // A just-created code interpreter may not listen yet: its relay waits for it.
  int wait_s = c.sb->tmpl.code_interpreter && port == kCodeInterpreterPort ? 15 : 0;
  std::string up = upstream_request(c.req, *c.sb, port);
  // The relay `pid` runs: `input` to its stdin, its output the answer.
  auto relay = [px](int pid, std::string input) {
    px->pid = pid;
    auto& agent = px->sb->agent;
    if (!px->ex->open()) {  // the caller left while the relay started: nothing is sent up
      px->done = true;
      return px->kill_relay();
    }
    px->token = agent->subscribe_process(px->pid, [px](const agent::Frame& f) { px->on_event(f); });
    px->ex->on_close = [px] {
      px->done = true;
      px->kill_relay();
    };
    agent->call(agent::request::input(px->pid), std::move(input), [](const agent::Frame&) {});
    agent->call(agent::request::close_stdin(px->pid), {}, [](const agent::Frame&) {});
  };
  // A spare started ahead (a code interpreter's sandbox keeps one): taken, and the next one started.
  if (int spare = std::exchange(c.sb->spare_relay, 0); spare > 0) {
    keep_spare_relay(c.sb);
    return relay(spare, spare_relay_head(port, wait_s) + up);
  }
  agent::request::Start h{.argv = port_relay_argv(port, wait_s)};
  c.sb->agent->call(agent::request::start(h), {}, [px, relay, up = std::move(up)](const agent::Frame& r) mutable {
    if (!r.header.value("ok", false)) {
      std::string why = reply_errno(r) == "ENOENT" ? "the relay needs python3 inside the sandbox (" + reply_error_text(r) + ")"
                                                    : "the relay did not start: " + reply_error_text(r);
      return px->fail(http::status::bad_gateway, why);
    }
    relay(r.header.value("pid", 0), std::move(up));
  });
}

}  // namespace exg::serve
