#include "microvm/guest/walls_apply.hpp"

#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "walls/landlock.hpp"
#include "walls/rlimits.hpp"
#include "walls/seccomp.hpp"

namespace exg::microvm::guest {

namespace {

constexpr char kCgroupMount[] = "/exg-cgroup";  // in the initramfs, unmounted before the view is entered
constexpr char kSandboxCgroup[] = "/exg-cgroup/sandbox";

std::string failed(const std::string& what, int err = errno) { return what + ": " + std::strerror(err); }

bool write_file(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  int e = errno;
  ::close(fd);
  errno = e;
  return ok;
}

}  // namespace

std::string make_pids_cgroup(uint32_t max, PidsCgroup& out) {
  ::mkdir(kCgroupMount, 0700);
  if (::mount("cgroup2", kCgroupMount, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    return failed("mount cgroup2 for the pids limit");
  std::string err;
  if (!write_file(std::string(kCgroupMount) + "/cgroup.subtree_control", "+pids"))
    err = failed("enable the pids controller");
  else if (::mkdir(kSandboxCgroup, 0755) != 0 && errno != EEXIST)
    err = failed(std::string("mkdir ") + kSandboxCgroup);
  else if (!write_file(std::string(kSandboxCgroup) + "/pids.max", std::to_string(max)))
    err = failed("set pids.max to " + std::to_string(max));
  if (err.empty()) {
    out.procs = ::open((std::string(kSandboxCgroup) + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    out.events = ::open((std::string(kSandboxCgroup) + "/pids.events").c_str(), O_RDONLY | O_CLOEXEC);
    out.notify = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (out.procs < 0 || out.events < 0 || out.notify < 0 ||
        ::inotify_add_watch(out.notify, (std::string(kSandboxCgroup) + "/pids.events").c_str(), IN_MODIFY) < 0)
      err = failed("open the pids cgroup's files");
  }
  // The descriptors keep the mount alive; no path leads to it any more.
  ::umount2(kCgroupMount, MNT_DETACH);
  return err;
}

std::string enter_limits(const PidsCgroup& cg, uint32_t pids, WallReport& report) {
  if (cg.procs >= 0) {
    if (::write(cg.procs, "0", 1) != 1) return failed("join the pids cgroup");
    report.emplace_back("pids", "limit " + std::to_string(pids) + " (the guest's cgroup)");
  } else {
    report.emplace_back("pids", "no limit");
  }
  walls::RlimitPlan rl;  // no core dumps (they would write the sandbox's memory into its view), 65536 files
  if (int r = walls::apply_rlimits(rl); r != 0) return failed("set resource limits", -r);
  report.emplace_back("rlimits", "no core dumps, " + std::to_string(rl.nofile) + " open files");
  return "";
}

std::vector<int> pin_writable_dirs(const Walls& w) {
  std::vector<int> fds;
  if (!w.landlock) return fds;
  for (const auto& p : w.landlock->read_write) {
    int fd = ::open(p.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) fds.push_back(fd);
  }
  return fds;
}

std::string apply_walls(const Walls& w, WallReport& report) {
  if (w.landlock) {
    std::string text;
    if (int r = walls::apply_landlock(*w.landlock, &text); r < 0) return failed("apply Landlock (" + text + ")", -r);
    if (text.starts_with("landlock: ")) text.erase(0, 10);
    report.emplace_back("landlock", text);
  } else {
    report.emplace_back("landlock", "not applied (root inside the guest)");
  }
  // Last: everything above needs calls the filter refuses.
  if (w.seccomp) {
    if (walls::install_seccomp_errno(walls::prebuilt_seccomp_errno_program()) != 0)
      return failed("install the seccomp filter");
    report.emplace_back("seccomp", "ExGuardian's filter, errno-only (refusals are answered in the guest, not audited)");
  } else {
    report.emplace_back("seccomp", "off");
  }
  return "";
}

}  // namespace exg::microvm::guest
