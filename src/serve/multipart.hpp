// multipart/form-data (RFC 7578) as the e2b SDK uploads files to envd's
// POST /files: the parts named "file", each with its filename and bytes.
// The body is the client's; a malformed one gets one error saying what is
// wrong. Used by envd_files.cpp and the fuzz target fuzz/multipart.cpp.
#pragma once
#include <cstddef>
#include <expected>
#include <string>
#include <vector>

namespace exg::serve {

struct Upload {
  std::string path;  // the part's filename (or the query's path)
  std::string data;
};

inline constexpr size_t kMaxUploadFiles = 1000;
inline constexpr size_t kMaxBoundary = 200;  // RFC 2046 allows 70; a little slack for odd clients

// A parameter of a header value such as Content-Type or Content-Disposition
// (name="value" or name=value); "" when it is absent.
std::string header_param(const std::string& header, const std::string& name);

// The Content-Type's boundary, then every part of the body; the parts named
// "file" (at least one, at most kMaxUploadFiles) in order.
std::expected<std::vector<Upload>, std::string> multipart_files(const std::string& content_type, const std::string& body);

}  // namespace exg::serve
