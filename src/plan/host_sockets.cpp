#include "plan/host_sockets.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "plan/paths.hpp"
#include "util/proc_text.hpp"
#include "util/unique_fd.hpp"

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

namespace {

// A process's network namespace, as the text of its /proc/PID/ns/net link
// ("net:[4026531840]", the nsfs inode number stat() would give): readlink
// formats it, where stat() makes the kernel instantiate an nsfs inode for every
// process (measured: 0.2 ms instead of 1.2-2.4 ms for 140 processes, on every
// run). Relative to an open /proc: measured 3.3-5.1 us per process against
// 4.7-7.4 by the absolute path (a desktop has 500-1000 processes, each read on
// every start). Empty when not ours to read, or gone.
struct NetnsLink {
  char text[40];
  unsigned char len = 0;
};

void read_netns_link(int proc_fd, const char* pid, NetnsLink* out) {
  char path[sizeof(dirent::d_name) + 8];
  std::snprintf(path, sizeof path, "%s/ns/net", pid);
  ssize_t n = ::readlinkat(proc_fd, path, out->text, sizeof out->text);
  out->len = n > 0 && n < static_cast<ssize_t>(sizeof out->text) ? static_cast<unsigned char>(n) : 0;
}

constexpr unsigned long kPfKthread = 0x00200000;  // PF_KTHREAD (include/linux/sched.h)

// The flags field (the 9th) of a /proc/PID/stat text; the name before it, in
// parentheses, may hold spaces and parentheses, so the fields start after the last ')'.
bool stat_says_kthread(const std::string& stat) {
  size_t at = stat.rfind(')');
  if (at == std::string::npos) return false;
  // After ") ": state ppid pgrp session tty_nr tpgid flags
  const char* p = stat.c_str() + at + 1;
  for (int field = 0; field < 6; ++field) {
    while (*p == ' ') ++p;
    while (*p && *p != ' ') ++p;
  }
  char* end = nullptr;
  unsigned long flags = std::strtoul(p, &end, 10);
  return end != p && (flags & kPfKthread);
}

}  // namespace

std::vector<int> kernel_thread_pids() {
  std::vector<int> out;
  if (!stat_says_kthread(util::read_proc_text("/proc/2/stat"))) return out;
  std::string children = util::read_proc_text("/proc/2/task/2/children");
  if (children.empty()) return out;
  out.push_back(2);
  const char* p = children.c_str();
  while (*p) {
    char* end = nullptr;
    long pid = std::strtol(p, &end, 10);
    if (end == p) break;
    if (pid > 0) out.push_back(static_cast<int>(pid));
    p = end;
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<HostSockets> find_host_sockets() {
  HostSockets hs;
  std::set<std::string> namespaces;
  std::set<std::string> named;
  std::string table;
  UniqueFd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!proc) return fail(Error::sys("open /proc"));
  auto read_table = [&](const char* pid, const NetnsLink& link) {
    if (link.len == 0 || !namespaces.insert(std::string(link.text, link.len)).second) return;
    if (!read_file(std::string("/proc/") + pid + "/net/unix", table)) return;
    ++hs.netns;
    for (auto& p : unix_table_paths(table, &hs.relative)) named.insert(std::move(p));
  };
  NetnsLink self;
  read_netns_link(proc.get(), "self", &self);
  read_table("self", self);
  if (hs.netns == 0) return fail(Error::msg("/proc/self/net/unix", "cannot be read (is /proc mounted?)"));

  // Listed before the scan: a kernel thread started meanwhile is read
  // (harmless); a listed pid reused meanwhile by some process would be skipped,
  // but pids are handed out in turn up to pid_max, so that takes millions of
  // forks within the scan.
  const std::vector<int> kthreads = kernel_thread_pids();
  if (DIR* d = ::fdopendir(::openat(proc.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC))) {
    NetnsLink link;
    while (dirent* e = ::readdir(d)) {
      if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
      if (!kthreads.empty() &&
          std::binary_search(kthreads.begin(), kthreads.end(), static_cast<int>(std::strtol(e->d_name, nullptr, 10))))
        continue;
      read_netns_link(proc.get(), e->d_name, &link);
      read_table(e->d_name, link);
    }
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
