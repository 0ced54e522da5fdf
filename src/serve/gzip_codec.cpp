// gzip for envd's /files: decoding with the proxy's decoder, encoding with zlib in
// gzip mode over whole buffers (the bodies are bounded by the server's limits).
#include "serve/gzip_codec.hpp"

#include <zlib.h>

#include <cctype>

#include "egress/proxy.hpp"

namespace exg::serve {

std::optional<std::string> gunzip(std::string_view in, size_t limit) {
  // The proxy's decoder (egress/content_decoding.cpp: members, truncation, a
  // bomb's one-call growth), fed in pieces so the limit is checked as it grows.
  if (in.empty()) return std::nullopt;  // no gzip member at all
  auto dec = egress::detail::BodyDecoder::make({"gzip"});
  if (!dec) return std::nullopt;
  std::string out;
  constexpr size_t kPiece = 16 << 10;
  for (size_t off = 0; off < in.size(); off += kPiece) {
    if (!dec->feed(in.substr(off, kPiece), out) || out.size() > limit) return std::nullopt;
  }
  if (!dec->finish(out) || out.size() > limit) return std::nullopt;
  return out;
}

std::string gzip(std::string_view in) {
  z_stream z{};
  deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, static_cast<uLong>(in.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

bool accepts_gzip(std::string_view v) {
  while (!v.empty()) {
    size_t comma = v.find(',');
    std::string_view item = v.substr(0, comma);
    v = comma == std::string_view::npos ? std::string_view{} : v.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    std::string_view name = item.substr(0, item.find(';'));
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    std::string lower;
    for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower != "gzip" && lower != "x-gzip") continue;
    auto q = item.find("q=");
    return q == std::string_view::npos || item.substr(q + 2).find_first_not_of("0. ") != std::string_view::npos;
  }
  return false;
}

}  // namespace exg::serve
