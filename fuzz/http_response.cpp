// The proxy's response side (src/egress/http_parse.cpp, content codings): what
// an upstream answers on an intercepted connection. A parsed head rewritten for
// the client parses again; its framing is decided without a crash for any
// request method; the codings it names make a decoder or an error.
#include <cstdint>
#include <string>

#include "check.hpp"
#include "egress/proxy.hpp"

using namespace exg::egress::detail;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t n = head_length(in);
  auto resp = parse_response_head(n ? in.substr(0, n) : in);
  if (!resp) return 0;
  FUZZ_CHECK(resp->status >= 0 && resp->status <= 999, "a three-digit status");
  for (bool close : {true, false}) {
    std::string wire = client_response_head(*resp, close);
    auto again = parse_response_head(wire, kMaxHeaderFields + kFieldsTheProxyAdds);
    FUZZ_CHECK(again.has_value(), "a rewritten response head parses");
    FUZZ_CHECK(again->headers.size() <= resp->headers.size() + kFieldsTheProxyAdds, "the proxy adds at most Connection");
    FUZZ_CHECK(again->status == resp->status, "the status is kept");
    auto a = response_body_framing(*resp, "GET"), b = response_body_framing(*again, "GET");
    FUZZ_CHECK(a.kind == b.kind && a.length == b.length, "a rewritten response frames its body alike");
  }
  for (const char* method : {"GET", "HEAD", "POST", "head"}) (void)response_body_framing(*resp, method);
  auto codings = response_codings(*resp);
  for (const auto& c : codings) FUZZ_CHECK(!c.empty() && c != "chunked" && c != "identity", "codings to undo");
  auto decoder = BodyDecoder::make(codings);
  if (decoder) {
    std::string out;
    (void)(decoder->feed(in.substr(n), out) && decoder->finish(out));
  }
  return 0;
}
