#include "util/mountinfo.hpp"


namespace exg::util {

namespace {

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ') ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

int number(std::string_view s) {
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace

std::string unescape_mountinfo(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      bool octal = true;
      int v = 0;
      for (size_t k = 1; k <= 3; ++k) {
        char c = s[i + k];
        if (c < '0' || c > '7') octal = false;
        else v = v * 8 + (c - '0');
      }
      if (octal) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

std::vector<MountInfo> parse_mountinfo(std::string_view text) {
  std::vector<MountInfo> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    auto f = fields(text.substr(pos, nl - pos));
    pos = nl + 1;
    // id parent dev root point options [optional...] - fstype source super
    size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (f.size() < 6 || dash + 2 >= f.size()) continue;
    MountInfo m;
    m.id = number(f[0]);
    m.parent = number(f[1]);
    m.dev = f[2];
    m.root = unescape_mountinfo(f[3]);
    m.mount_point = unescape_mountinfo(f[4]);
    m.options = f[5];
    m.fstype = f[dash + 1];
    m.source = unescape_mountinfo(f[dash + 2]);
    if (dash + 3 < f.size()) m.super_options = f[dash + 3];
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace exg::util
