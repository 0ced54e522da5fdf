#include "microvm/run_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "util/unique_fd.hpp"

namespace exg::microvm {

namespace {

constexpr char kPrefix[] = "exguardian-microvm-";

// "<pid>-<starttime>-XXXXXX" after the prefix; false for any other name
// (the egress bridge's "egress-XXXXXX", which leaves nothing on disk, and
// directories of older versions, which are left alone).
bool parse_owner(const std::string& rest, int& pid, unsigned long long& start) {
  char tail[32];
  unsigned long long p = 0;
  if (std::sscanf(rest.c_str(), "%llu-%llu-%31s", &p, &start, tail) != 3) return false;
  if (p == 0 || p > 4194304 || std::string(tail).size() != 6) return false;
  pid = static_cast<int>(p);
  return true;
}

// Removes the sockets in `name` (under `tmp_fd`) and then the directory.
// Opened without following links: /tmp is shared, and a name there is only a hint.
bool remove_sockets_dir(int tmp_fd, const std::string& name) {
  UniqueFd d(::openat(tmp_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!d) return false;
  struct stat st{};
  if (::fstat(d.get(), &st) != 0) return false;
  if (::geteuid() != 0 && st.st_uid != ::geteuid()) return false;
  DIR* dir = ::fdopendir(::dup(d.get()));
  if (!dir) return false;
  while (dirent* e = ::readdir(dir)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    struct stat es{};
    if (::fstatat(d.get(), n.c_str(), &es, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(es.st_mode))
      ::unlinkat(d.get(), n.c_str(), 0);
  }
  ::closedir(dir);
  return ::unlinkat(tmp_fd, name.c_str(), AT_REMOVEDIR) == 0;
}

}  // namespace

unsigned long long process_start_ticks(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  auto close = line.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return 0;
  std::istringstream fields(line.substr(close + 1));
  std::string f;
  for (int i = 3; i <= 22; ++i)  // field 3 (state) is the first after the name
    if (!(fields >> f)) return 0;
  return std::strtoull(f.c_str(), nullptr, 10);
}

void RunDir::remove() {
  for (const auto& s : socks) ::unlink(s.c_str());
  if (!dir.empty()) ::rmdir(dir.c_str());
  socks.clear(), dir.clear();
}

int reap_stale_run_dirs(const std::string& tmp) {
  UniqueFd tmp_fd(::open(tmp.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!tmp_fd) return 0;
  DIR* dir = ::fdopendir(::dup(tmp_fd.get()));
  if (!dir) return 0;
  std::vector<std::string> stale;
  while (dirent* e = ::readdir(dir)) {
    std::string n = e->d_name;
    if (n.rfind(kPrefix, 0) != 0) continue;
    int pid = 0;
    unsigned long long start = 0;
    if (!parse_owner(n.substr(sizeof kPrefix - 1), pid, start)) continue;
    if (process_start_ticks(pid) == start) continue;  // its launcher still runs
    stale.push_back(n);
  }
  ::closedir(dir);
  int removed = 0;
  for (const auto& n : stale) removed += remove_sockets_dir(tmp_fd.get(), n) ? 1 : 0;
  return removed;
}

Result<void> make_run_dir(RunDir& run) {
  reap_stale_run_dirs();
  const int self = static_cast<int>(::getpid());
  unsigned long long start = process_start_ticks(self);
  if (start == 0) return fail(Error::msg("microvm", "cannot read this process's start time in /proc/self/stat"));
  std::string tmpl = "/tmp/" + std::string(kPrefix) + std::to_string(self) + "-" + std::to_string(start) + "-XXXXXX";
  if (!::mkdtemp(tmpl.data())) return fail(Error::sys("microvm: mkdtemp " + tmpl));
  run.dir = tmpl;
  return {};
}

}  // namespace exg::microvm
