#include "plan/paths.hpp"

#include <dirent.h>
#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>

namespace exg::plan {

std::string expand_path(const std::string& path, const std::string& home,
                        const std::string& base_dir) {
  std::string p = path;
  if (p == "~")
    p = home;
  else if (p.starts_with("~/"))
    p = home + p.substr(1);
  else if (!p.starts_with("/"))
    p = base_dir + "/" + p;
  std::string out = std::filesystem::path(p).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::optional<std::string> canonical(const std::string& path) {
  // Most paths asked about (credential locations) do not exist: one stat says
  // so, where realpath(3) would readlink every component first.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) return std::nullopt;
  return std::string(buf);
}

bool is_within(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir || (path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/');
}

bool has_glob(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

namespace {

std::vector<std::string> split(const std::string& p) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < p.size()) {
    size_t j = p.find('/', i);
    if (j == std::string::npos) j = p.size();
    if (j > i) parts.push_back(p.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

bool is_dir_nofollow(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists_nofollow(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  return names;
}

std::string join(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

// Matches parts[i..] below `dir`, appending hits. Symlinked directories are not
// descended by "**" (no loops, no escapes from the tree being matched).
void match(const std::string& dir, const std::vector<std::string>& parts, size_t i,
           std::vector<std::string>& out) {
  if (i == parts.size()) {
    out.push_back(dir);
    return;
  }
  const std::string& part = parts[i];
  if (part == "**") {
    match(dir, parts, i + 1, out);  // zero components
    for (const auto& n : list_dir(dir)) {
      std::string sub = join(dir, n);
      if (is_dir_nofollow(sub)) match(sub, parts, i, out);
    }
    return;
  }
  if (!has_glob(part)) {
    std::string sub = join(dir, part);
    if (exists_nofollow(sub)) match(sub, parts, i + 1, out);
    return;
  }
  for (const auto& n : list_dir(dir)) {
    if (::fnmatch(part.c_str(), n.c_str(), FNM_PERIOD) == 0) match(join(dir, n), parts, i + 1, out);
  }
}

}  // namespace

std::vector<std::string> resolve_entry(const policy::PathEntry& e, const std::string& home) {
  std::string p = expand_path(e.path, home, e.base_dir);
  std::vector<std::string> hits;
  if (e.literal || !has_glob(p)) {
    if (auto c = canonical(p)) hits.push_back(*c);
    return hits;
  }
  std::vector<std::string> raw;
  match("/", split(p), 0, raw);
  for (const auto& r : raw)
    if (auto c = canonical(r)) hits.push_back(*c);
  std::sort(hits.begin(), hits.end());
  hits.erase(std::unique(hits.begin(), hits.end()), hits.end());
  return hits;
}

}  // namespace exg::plan
