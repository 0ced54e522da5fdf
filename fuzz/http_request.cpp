// The proxy's request side (src/egress/http_parse.cpp): what a client in the
// sandbox sends. A head either parses or is refused; a parsed request's
// rewritten heads (to the origin, or upstream inside TLS) parse again, carry
// no hop-by-hop field but our "Connection: close", and frame the body exactly
// as the client's head did (no smuggling through our rewriting). The body
// that follows goes through the chunk tracker, in pieces and whole alike.
#include <cstdint>
#include <string>

#include "check.hpp"
#include "egress/proxy.hpp"

using namespace exg::egress::detail;

namespace {

void same_framing(const HttpHead& a, const HttpHead& b) {
  auto fa = request_body_framing(a), fb = request_body_framing(b);
  FUZZ_CHECK(fa.has_value() == fb.has_value(), "a rewritten head is as acceptable as the client's");
  if (fa) FUZZ_CHECK(fa->kind == fb->kind && fa->length == fb->length, "a rewritten head frames the body alike");
}

void rewritten(const HttpHead& req, const std::string& wire) {
  FUZZ_CHECK(head_length(wire) == wire.size(), "a rewritten head is one whole head");
  // (With the fields the proxy adds: a client's head of kMaxHeaderFields grows by them.)
  auto again = parse_request_head(wire, kMaxHeaderFields + kFieldsTheProxyAdds);
  FUZZ_CHECK(again.has_value(), "a rewritten head parses");
  FUZZ_CHECK(again->headers.size() <= req.headers.size() + kFieldsTheProxyAdds, "the proxy adds at most Host and Connection");
  FUZZ_CHECK(again->method == req.method, "the method is kept");
  for (const auto& [name, value] : again->headers) {
    std::string n(name);
    for (char& c : n) c = (char)std::tolower((unsigned char)c);
    FUZZ_CHECK(n != "proxy-authorization" && n != "proxy-connection" && n != "upgrade" && n != "te",
               "hop-by-hop fields are not passed on");
  }
  FUZZ_CHECK(again->count("connection") == 1 && connection_has(*again, "close"), "one Connection: close");
  same_framing(req, *again);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)plausible_request_prefix(in);
  size_t n = head_length(in);
  auto req = parse_request_head(n ? in.substr(0, n) : in);
  if (!req) return 0;
  FUZZ_CHECK(n != 0, "only a whole head parses");
  FUZZ_CHECK(req->version == "HTTP/1.1" || req->version == "HTTP/1.0", "a known version");

  if (auto t = parse_absolute_http(req->target)) {
    FUZZ_CHECK(t->path.starts_with('/'), "the origin-form target is a path");
    FUZZ_CHECK(t->authority.port != 0, "a port");
    rewritten(*req, origin_request_head(*req, *t));
    if (const std::string* host = req->find("host")) (void)host_header_matches(*host, t->authority);
  }
  if (auto a = parse_authority(req->target, 0)) {
    FUZZ_CHECK(a->port != 0 && !a->host.empty(), "CONNECT names a host and a port");
    (void)exg::egress::normalise_host(a->host);
  }
  if (req->target.starts_with('/')) rewritten(*req, forwarded_request_head(*req, true));
  (void)proxy_authorization_ok(req->find("proxy-authorization"), "fuzz-token");

  auto framing = request_body_framing(*req);
  if (framing && framing->kind == BodyFraming::Chunked) {
    std::string_view body = in.substr(n);
    ChunkTracker whole;
    std::string whole_data;
    long used = whole.feed(body, &whole_data);
    ChunkTracker parts;
    std::string parts_data;
    long parts_used = 0;
    bool bad = false;
    for (std::string_view p : exg::fuzz::pieces(body, (uint8_t)size, 7)) {
      if (parts.done()) break;
      long u = parts.feed(p, &parts_data);
      if (u < 0) {
        bad = true;
        break;
      }
      parts_used += u;
      FUZZ_CHECK((size_t)u <= p.size(), "the tracker consumes at most what it is given");
    }
    FUZZ_CHECK((used < 0) == bad, "a chunked body is malformed in pieces as it is whole");
    if (used >= 0) {
      FUZZ_CHECK(used == parts_used && whole.done() == parts.done() && whole_data == parts_data,
                 "a chunked body reads the same in pieces and whole");
    }
  }
  return 0;
}
