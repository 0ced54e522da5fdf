#include "plan/host_sockets.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "plan/paths.hpp"

namespace exg::plan {

namespace {

bool read_file(const std::string& path, std::string& out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out.clear();
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return n == 0;
}

}  // namespace

std::vector<std::string> unix_table_paths(const std::string& table, size_t* relative) {
  // "Num RefCount Protocol Flags Type St Inode Path": the path is what follows
  // the seventh field (it may hold spaces); absent for unnamed sockets.
  std::vector<std::string> out;
  size_t pos = table.find('\n');  // header
  while (pos != std::string::npos && pos + 1 < table.size()) {
    size_t start = pos + 1;
    pos = table.find('\n', start);
    std::string line = table.substr(start, pos == std::string::npos ? std::string::npos : pos - start);
    size_t i = 0;
    for (int field = 0; field < 7 && i < line.size(); ++field) {
      while (i < line.size() && line[i] == ' ') ++i;
      while (i < line.size() && line[i] != ' ') ++i;
    }
    if (i >= line.size()) continue;
    std::string path = line.substr(i + 1);
    if (path.empty() || path[0] == '@') continue;  // abstract: the sandbox's own netns has none of the host's
    if (path[0] == '/') out.push_back(path);
    else if (relative) ++*relative;
  }
  return out;
}

HostSockets find_host_sockets() {
  HostSockets hs;
  std::set<std::string> namespaces;
  std::set<std::string> named;
  std::string table;
  auto read_ns = [&](const std::string& proc_dir) {
    // The namespace's identity from the link's text ("net:[4026531840]", the
    // nsfs inode number stat() would give): readlink formats it, where stat()
    // makes the kernel instantiate an nsfs inode for every process (measured:
    // 0.2 ms instead of 1.2-2.4 ms for 140 processes, on every run).
    char link[64];
    ssize_t n = ::readlink((proc_dir + "/ns/net").c_str(), link, sizeof link);
    if (n <= 0 || n >= static_cast<ssize_t>(sizeof link)) return;  // not ours to read, or gone
    if (!namespaces.insert(std::string(link, static_cast<size_t>(n))).second) return;
    if (!read_file(proc_dir + "/net/unix", table)) return;
    ++hs.netns;
    for (auto& p : unix_table_paths(table, &hs.relative)) named.insert(std::move(p));
  };
  read_ns("/proc/self");
  if (DIR* d = ::opendir("/proc")) {
    while (dirent* e = ::readdir(d))
      if (std::isdigit(static_cast<unsigned char>(e->d_name[0]))) read_ns(std::string("/proc/") + e->d_name);
    ::closedir(d);
  }
  std::set<std::string> found;
  for (const auto& p : named) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;  // unlinked, or another root's name
    if (auto c = canonical(p)) found.insert(*c);
  }
  hs.paths.assign(found.begin(), found.end());
  return hs;
}

}  // namespace exg::plan
