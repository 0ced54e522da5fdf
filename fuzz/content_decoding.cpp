// Content codings of an upstream's answer (src/egress/content_decoding.cpp):
// on an intercepted connection the proxy undoes gzip and deflate to mask the
// secrets' values in the body. The first line of the input is the
// Content-Encoding value; the rest is the body, fed in pieces. Any bytes give
// plain text or "corrupt", never a crash; pieces and whole decode alike.
#include <cstdint>
#include <string>

#include "check.hpp"
#include "egress/proxy.hpp"

using namespace exg::egress::detail;

namespace {

// Decodes body; nullopt when the decoder says corrupt or truncated.
std::optional<std::string> decode(const std::vector<std::string>& codings, const std::vector<std::string_view>& parts) {
  auto d = BodyDecoder::make(codings);
  FUZZ_CHECK(d.has_value(), "the codings were accepted once");
  std::string out;
  for (std::string_view p : parts)
    if (!d->feed(p, out)) return std::nullopt;
  if (!d->finish(out)) return std::nullopt;
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t nl = in.find('\n');
  if (nl == std::string_view::npos || nl > 64) return 0;
  HttpHead resp;
  resp.status = 200;
  resp.headers.emplace_back("Content-Encoding", std::string(in.substr(0, nl)));
  auto codings = response_codings(resp);
  if (!BodyDecoder::make(codings)) return 0;
  std::string_view body = in.substr(nl + 1);
  auto whole = decode(codings, {body});
  auto parts = decode(codings, exg::fuzz::pieces(body, (uint8_t)nl, 300));
  // One feed() may not expand past kMaxFeedOutput (a bomb): a body that does in
  // one piece may pass in small ones, never the other way round.
  if (whole) FUZZ_CHECK(parts && *whole == *parts, "a body decodes the same in pieces and whole");
  if (parts && parts->size() <= BodyDecoder::kMaxFeedOutput / 2)
    FUZZ_CHECK(whole.has_value(), "a body is corrupt in pieces as it is whole");
  size_t total = parts ? parts->size() : whole ? whole->size() : 0;
  if (codings.size() == 1)
    FUZZ_CHECK(total <= (body.size() + 1) * 1100, "one gzip or deflate layer expands at most ~1032 times");
  return 0;
}
