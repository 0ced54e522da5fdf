#include "serve/multipart.hpp"

#include <algorithm>
#include <optional>

namespace exg::serve {

namespace {

std::optional<std::vector<Upload>> parse_multipart(const std::string& body, const std::string& boundary, std::string* err) {
  std::vector<Upload> out;
  const std::string delim = "--" + boundary;
  size_t pos = body.find(delim);
  if (pos == std::string::npos) {
    *err = "multipart body without its boundary";
    return std::nullopt;
  }
  for (;;) {
    pos += delim.size();
    if (body.compare(pos, 2, "--") == 0) break;  // the closing delimiter
    if (body.compare(pos, 2, "\r\n") != 0) {
      *err = "malformed multipart delimiter line";
      return std::nullopt;
    }
    pos += 2;
    size_t head_end = body.find("\r\n\r\n", pos);
    if (head_end == std::string::npos) {
      *err = "a multipart part without the end of its headers";
      return std::nullopt;
    }
    std::string headers = body.substr(pos, head_end - pos);
    size_t data_start = head_end + 4;
    size_t next = body.find("\r\n" + delim, data_start);
    if (next == std::string::npos) {
      *err = "a multipart part without its closing boundary";
      return std::nullopt;
    }
    std::string disposition;
    size_t hp = 0;
    while (hp < headers.size()) {
      size_t eol = headers.find("\r\n", hp);
      if (eol == std::string::npos) eol = headers.size();
      std::string line = headers.substr(hp, eol - hp);
      std::string lower = line;
      std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
      if (lower.starts_with("content-disposition:")) disposition = line.substr(20);
      hp = eol + 2;
    }
    if (header_param(disposition, "name") == "file")
      out.push_back({header_param(disposition, "filename"), body.substr(data_start, next - data_start)});
    pos = next + 2;
    if (out.size() > kMaxUploadFiles) {
      *err = "more than " + std::to_string(kMaxUploadFiles) + " files in one upload";
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace

std::string header_param(const std::string& header, const std::string& name) {
  size_t pos = 0;
  while ((pos = header.find(name + "=", pos)) != std::string::npos) {
    if (pos > 0 && header[pos - 1] != ' ' && header[pos - 1] != ';') {
      pos += name.size();
      continue;
    }
    pos += name.size() + 1;
    if (pos < header.size() && header[pos] == '"') {
      auto end = header.find('"', pos + 1);
      return header.substr(pos + 1, end == std::string::npos ? std::string::npos : end - pos - 1);
    }
    auto end = header.find(';', pos);
    std::string v = header.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    while (!v.empty() && v.back() == ' ') v.pop_back();
    return v;
  }
  return "";
}

std::expected<std::vector<Upload>, std::string> multipart_files(const std::string& content_type, const std::string& body) {
  std::string boundary = header_param(content_type, "boundary");
  if (boundary.empty() || boundary.size() > kMaxBoundary) return std::unexpected(std::string("multipart: no boundary"));
  std::string err;
  auto parts = parse_multipart(body, boundary, &err);
  if (!parts) return std::unexpected(err);
  if (parts->empty()) return std::unexpected(std::string("multipart: no part named \"file\""));
  return std::move(*parts);
}

}  // namespace exg::serve
