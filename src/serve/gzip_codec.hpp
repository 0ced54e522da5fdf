// gzip for envd's /files (Content-Encoding / Accept-Encoding: gzip): the SDK's
// `gzip: true` compresses uploads and asks for compressed downloads.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace exg::serve {

// The decompressed bytes of a gzip body (members one after another), or
// nullopt when it is not gzip or would grow past `limit` bytes (a small body
// that inflates to gigabytes is refused, not held).
std::optional<std::string> gunzip(std::string_view in, size_t limit);

// `in` compressed as one gzip member.
std::string gzip(std::string_view in);

// Whether an Accept-Encoding header value accepts gzip (a q=0 refuses it).
bool accepts_gzip(std::string_view accept_encoding);

}  // namespace exg::serve
