#include "runtime/container_cgroups.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cgroup/cgroup.hpp"
#include "cgroup/freezer.hpp"
#include "util/clock.hpp"
#include "util/mountinfo.hpp"
#include "util/proc_cgroup.hpp"
#include "util/proc_text.hpp"

namespace exg::runtime {

namespace {

bool has_token(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    auto comma = list.find(',');
    if (list.substr(0, comma) == token) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

// p is anc or below it.
bool same_or_below(const std::string& p, const std::string& anc) {
  return anc == "/" || p == anc || p.starts_with(anc + "/");
}

// Where the mount m shows the cgroup at path of its hierarchy ("" when it
// does not: a mount of another subtree).
std::string dir_under(const util::MountInfo& m, const std::string& path) {
  if (m.root == "/") return m.mount_point + path;
  if (path == m.root) return m.mount_point;
  if (path.starts_with(m.root + "/")) return m.mount_point + path.substr(m.root.size());
  return "";
}

using util::now_ms;
using util::sleep_ms;

bool write_file(const std::string& path, std::string_view text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

// dir and every cgroup below it, the deepest first (nothing when dir is gone).
void subtree(const std::string& dir, std::vector<std::string>& out) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> children;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    bool is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st;
      is_dir = ::fstatat(::dirfd(d), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
    }
    if (is_dir) children.push_back(dir + "/" + n);
  }
  ::closedir(d);
  for (const auto& c : children) subtree(c, out);
  out.push_back(dir);
}

std::string pid_list(const std::vector<pid_t>& pids) {
  std::string s;
  for (size_t i = 0; i < pids.size() && i < 8; ++i) s += (i ? " " : "") + std::to_string(pids[i]);
  if (pids.size() > 8) s += " ...";
  return s;
}

}  // namespace

std::vector<std::string> container_cgroup_dirs(std::string_view init_cgroup, std::string_view self_cgroup,
                                               std::string_view mountinfo) {
  const auto self = util::parse_proc_cgroup(self_cgroup);
  const auto mounts = util::parse_mountinfo(mountinfo);
  std::vector<std::string> out;
  for (const auto& c : util::parse_proc_cgroup(init_cgroup)) {
    // "/.." parts: a cgroup outside our cgroup namespace, never under our mounts.
    if (!c.path.starts_with("/") || c.path == "/" || c.path.find("/..") != std::string::npos) continue;
    const util::ProcCgroup* own = nullptr;
    for (const auto& s : self)
      if (s.hierarchy == c.hierarchy && s.controllers == c.controllers) own = &s;
    if (!own || same_or_below(own->path, c.path)) continue;
    for (const auto& m : mounts) {
      bool shows = c.v2() ? m.fstype == "cgroup2"
                          : m.fstype == "cgroup" && std::all_of(c.controllers.begin(), c.controllers.end(),
                                                                [&](const std::string& k) { return has_token(m.super_options, k); });
      std::string dir = shows ? dir_under(m, c.path) : "";
      if (dir.empty()) continue;
      if (std::find(out.begin(), out.end(), dir) == out.end()) out.push_back(dir);
      break;  // another mount of the hierarchy shows the same directory
    }
  }
  return out;
}

std::vector<std::string> container_cgroup_dirs(pid_t init) {
  std::string own = util::read_proc_text(("/proc/" + std::to_string(init) + "/cgroup").c_str());
  if (own.empty()) return {};
  return container_cgroup_dirs(own, util::read_proc_text("/proc/self/cgroup"),
                               util::read_proc_text("/proc/self/mountinfo"));
}

Result<void> remove_container_cgroups(const std::vector<std::string>& dirs, bool kill) {
  std::vector<std::string> all, tops;  // every cgroup to remove (deepest first), the recorded ones still there
  for (const auto& d : dirs) {
    size_t before = all.size();
    subtree(d, all);
    if (all.size() > before) tops.push_back(d);
  }
  if (all.empty()) return {};
  auto procs = [&] {
    std::vector<pid_t> p;
    for (const auto& d : all)
      for (pid_t x : cgroup::cgroup_procs(d))
        if (std::find(p.begin(), p.end(), x) == p.end()) p.push_back(x);
    return p;
  };
  std::vector<pid_t> left = procs();
  if (!left.empty() && !kill)
    return fail(Error::msg("cgroup " + tops[0], "still holds processes (" + pid_list(left) + ")"));
  const uint64_t deadline = now_ms() + 5000;
  while (!left.empty() && now_ms() < deadline) {
    std::vector<std::string> frozen;
    for (const auto& t : tops) {
      if (write_file(t + "/cgroup.kill", "1")) continue;  // v2 (Linux 5.14+): the whole tree at once
      // Frozen, none can fork while the others are killed (the process layer's freeze).
      if (!cgroup::freeze_v1(t, 200)) continue;
      frozen.push_back(t);
    }
    for (pid_t p : procs()) ::kill(p, SIGKILL);
    for (const auto& f : frozen) write_file(f + "/freezer.state", "THAWED");
    for (int i = 0; i < 50 && !(left = procs()).empty(); ++i) sleep_ms(2);
  }
  if (!left.empty())
    return fail(Error::msg("cgroup " + tops[0], "processes still inside after SIGKILL (" + pid_list(left) + ")"));
  // EBUSY for a moment after the last task left: it may still be charged.
  const uint64_t rm_deadline = now_ms() + 2000;
  std::string first, why;
  size_t stayed = 0;
  for (const auto& d : all) {
    while (::rmdir(d.c_str()) != 0 && errno != ENOENT) {
      if (errno != EBUSY || now_ms() >= rm_deadline) {
        if (stayed++ == 0) first = d, why = std::strerror(errno);
        break;
      }
      sleep_ms(5);
    }
  }
  if (stayed > 1) why += " (and " + std::to_string(stayed - 1) + " more)";
  if (stayed) return fail(Error::msg("remove cgroup " + first, why));
  return {};
}

}  // namespace exg::runtime
