#include "agent/file_metadata.hpp"

#include <sys/xattr.h>

#include <cerrno>
#include <string_view>
#include <vector>

namespace exg::agent {

namespace {

constexpr std::string_view kPrefix = "user.e2b.";

// The attribute names of a file (listxattr's NUL-separated list), or empty.
template <typename List>
std::vector<std::string> names_of(List list) {
  std::vector<std::string> out;
  for (int attempt = 0; attempt < 3; ++attempt) {  // the list may grow between the two calls
    ssize_t n = list(nullptr, 0);
    if (n <= 0) return out;
    std::string buf(static_cast<size_t>(n), '\0');
    n = list(buf.data(), buf.size());
    if (n < 0 && errno == ERANGE) continue;
    if (n < 0) return out;
    for (size_t pos = 0; pos < static_cast<size_t>(n);) {
      size_t end = buf.find('\0', pos);
      if (end == std::string::npos) end = static_cast<size_t>(n);
      out.emplace_back(buf, pos, end - pos);
      pos = end + 1;
    }
    return out;
  }
  return out;
}

}  // namespace

nlohmann::json read_file_metadata(const std::string& path) {
  nlohmann::json out = nlohmann::json::object();
  auto names = names_of([&](char* b, size_t n) { return ::llistxattr(path.c_str(), b, n); });
  for (const auto& name : names) {
    if (!name.starts_with(kPrefix) || name.size() == kPrefix.size()) continue;
    char value[4096];
    ssize_t n = ::lgetxattr(path.c_str(), name.c_str(), value, sizeof value);
    if (n < 0) continue;  // gone meanwhile, or larger than any value E2B's SDK sends
    out[name.substr(kPrefix.size())] = std::string(value, static_cast<size_t>(n));
  }
  return out;
}

int replace_file_metadata(int fd, const std::map<std::string, std::string>& pairs) {
  for (const auto& name : names_of([&](char* b, size_t n) { return ::flistxattr(fd, b, n); }))
    if (name.starts_with(kPrefix) && ::fremovexattr(fd, name.c_str()) != 0 && errno != ENODATA) return errno;
  for (const auto& [k, v] : pairs) {
    std::string name = std::string(kPrefix) + k;
    if (::fsetxattr(fd, name.c_str(), v.data(), v.size(), 0) != 0) return errno;
  }
  return 0;
}

}  // namespace exg::agent
