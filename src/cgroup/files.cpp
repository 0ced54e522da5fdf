#include "cgroup/files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

namespace exg::cgroup {

std::optional<std::string> read_text(const std::string& path) { return read_text_at(AT_FDCWD, path.c_str()); }

std::optional<std::string> read_text_at(int dirfd, const char* name) {
  int fd = ::openat(dirfd, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

int write_text(const std::string& path, std::string_view value) { return write_text_at(AT_FDCWD, path.c_str(), value); }

int write_text_at(int dirfd, const char* name, std::string_view value) {
  // O_TRUNC, as a shell's `echo 1 > file`: the cgroup filesystem ignores it;
  // a plain file laid out as a cgroup (serve's unit tests) reads what was written.
  int fd = ::openat(dirfd, name, O_WRONLY | O_CLOEXEC | O_TRUNC);
  if (fd < 0) return errno;
  int rc = 0;
  ssize_t n = ::write(fd, value.data(), value.size());
  if (n < 0) rc = errno;
  else if (static_cast<size_t>(n) != value.size()) rc = EIO;
  ::close(fd);
  return rc;
}

std::vector<std::string> words(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t')) ++i;
    size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\n' && s[j] != '\t') ++j;
    if (j > i) out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

std::string parent_dir(const std::string& p) {
  auto pos = p.find_last_of('/');
  if (pos == std::string::npos || pos == 0) return "/";
  return p.substr(0, pos);
}

bool contains(const std::vector<std::string>& v, std::string_view x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::optional<uint64_t> parse_number(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  if (text == "max") return UINT64_MAX;
  uint64_t v = 0;
  auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

std::optional<uint64_t> parse_keyed(std::string_view text, std::string_view key) {
  size_t start = 0;
  for (;;) {
    size_t nl = text.find('\n', start);
    std::string_view line = text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    auto sp = line.find(' ');
    if (sp != std::string_view::npos && line.substr(0, sp) == key) return parse_number(line.substr(sp + 1));
    if (nl == std::string_view::npos) return std::nullopt;
    start = nl + 1;
  }
}

}  // namespace exg::cgroup
