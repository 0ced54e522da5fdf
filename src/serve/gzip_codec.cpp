// zlib in gzip mode, whole buffers (the bodies are bounded by the server's limits).
#include "serve/gzip_codec.hpp"

#include <zlib.h>

#include <cctype>

namespace exg::serve {

std::optional<std::string> gunzip(std::string_view in, size_t limit) {
  std::string out;
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return std::nullopt;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  char buf[65536];
  int rc = Z_OK;
  while (true) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) break;
    out.append(buf, sizeof buf - z.avail_out);
    if (out.size() > limit) break;
    if (rc == Z_STREAM_END) {
      if (z.avail_in == 0) break;
      inflateReset(&z);  // the next member
      continue;
    }
    if (z.avail_in == 0 && z.avail_out != 0) break;  // truncated: no end seen
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END || z.avail_in != 0 || out.size() > limit) return std::nullopt;
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
