#include "sandbox/host_caps.hpp"
#include "util/proc_cgroup.hpp"

#include <dirent.h>
#include <grp.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/kvm.h>

#include "microvm/accel_probe.hpp"
#include "microvm/guest_image.hpp"
#include "microvm/snapshot.hpp"
#include "microvm/vmm.hpp"
#include <linux/magic.h>
#include <linux/mount.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include "oci/layer.hpp"
#include "process/landlock.hpp"
#include "util/unique_fd.hpp"

extern char** environ;

namespace exg::sandbox {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  if (!f) return {};
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

bool write_text(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

std::string err_name(int e) { return std::string(strerrorname_np(e) ? strerrorname_np(e) : "E?") + " (" + std::strerror(e) + ")"; }

// Waits for `pid` at most `timeout`; kills it (and reaps) when it overstays.
// Returns the wait status, or -1 after a timeout.
int wait_bounded(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(-pid, SIGKILL);  // its process group, when it made one (tools we run)
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    ::usleep(2000);
  }
}

struct ChildResult {
  int code = -1;     // exit code, -1 when it died or timed out
  std::string text;  // what it wrote to its pipe
};

// Runs fn in a forked child; fn writes its explanation to the fd it gets and
// returns the exit code. The child never returns into the caller's code.
ChildResult in_child(const std::function<int(int)>& fn,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return {-1, "pipe: " + err_name(errno)};
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::close(p[0]);
    ::close(p[1]);
    return {-1, "fork: " + err_name(e)};
  }
  if (pid == 0) {
    ::close(p[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::_exit(fn(p[1]) & 0xff);
  }
  ::close(p[1]);
  ChildResult r;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[512];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd pfd{p[0], POLLIN, 0};
    int n = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    ssize_t got = ::read(p[0], buf, sizeof buf);
    if (got <= 0) break;
    r.text.append(buf, static_cast<size_t>(got));
  }
  ::close(p[0]);
  int status = wait_bounded(pid, std::chrono::milliseconds(500) + std::max(
      std::chrono::milliseconds(0),
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())));
  if (status == -1) {
    r.text += r.text.empty() ? "timed out" : " (timed out)";
  } else if (WIFEXITED(status)) {
    r.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.text += (r.text.empty() ? "" : "; ") + std::string("probe died of signal ") + std::to_string(WTERMSIG(status));
  }
  return r;
}

void say(int fd, const std::string& s) { (void)!::write(fd, s.data(), s.size()); }

// Maps the caller's own uid/gid to 0 in the user namespace it just created.
bool map_self(uid_t uid, gid_t gid) {
  write_text("/proc/self/setgroups", "deny");
  return write_text("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") &&
         write_text("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1");
}

std::string sysctl_note() {
  std::string s;
  std::string max = trim(read_text("/proc/sys/user/max_user_namespaces"));
  if (!max.empty()) s += "max_user_namespaces=" + max;
  std::string unpriv = trim(read_text("/proc/sys/kernel/unprivileged_userns_clone"));
  if (!unpriv.empty()) s += (s.empty() ? "" : ", ") + std::string("unprivileged_userns_clone=") + unpriv;
  std::string aa = trim(read_text("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"));
  if (!aa.empty()) s += (s.empty() ? "" : ", ") + std::string("apparmor_restrict_unprivileged_userns=") + aa;
  return s;
}

void probe_namespaces(std::vector<Capability>& out) {
  const uid_t uid = ::geteuid();
  const std::string who = "uid " + std::to_string(uid);
  std::string note = sysctl_note();
  // clone(CLONE_NEWUSER) used like fork: the child exits at once.
  long pid = ::syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
  bool userns = false;
  std::string detail;
  if (pid == 0) ::_exit(0);
  if (pid > 0) {
    int st = wait_bounded(static_cast<pid_t>(pid), std::chrono::milliseconds(2000));
    userns = st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    detail = userns ? "created one as " + who : "the child did not exit cleanly";
  } else {
    detail = "clone(CLONE_NEWUSER) as " + who + ": " + err_name(errno);
  }
  if (!note.empty()) detail += "; " + note;
  detail += userns ? "; the process layer runs every sandbox in its own" : "; the process layer needs them";
  out.push_back({"user namespaces", userns, detail});

  struct Ns {
    const char* name;
    int flag;
    const char* use;
  };
  static const Ns kNs[] = {
      {"mount namespaces", CLONE_NEWNS, "private root, binds and masks"},
      {"pid namespaces", CLONE_NEWPID, "sandbox's own pid 1; everything dies with it"},
      {"network namespaces", CLONE_NEWNET, "only loopback inside; egress through the proxy"},
      {"ipc namespaces", CLONE_NEWIPC, "no shared SysV IPC or POSIX queues with the host"},
      {"uts namespaces", CLONE_NEWUTS, "own hostname"},
      {"cgroup namespaces", CLONE_NEWCGROUP, "the host's cgroup tree stays hidden"},
  };
  auto r = in_child([&](int fd) {
    bool in_userns = ::unshare(CLONE_NEWUSER) == 0;
    if (!in_userns && ::geteuid() != 0) {
      say(fd, "no user namespace to try them in");
      return 0xff;
    }
    int bits = 0;
    std::string why;
    for (size_t i = 0; i < std::size(kNs); ++i) {
      if (::unshare(kNs[i].flag) != 0) {
        bits |= 1 << i;
        why += std::string(kNs[i].name) + ": " + err_name(errno) + "\n";
      }
    }
    say(fd, std::string(in_userns ? "U" : "R") + why);
    return bits;
  });
  const std::string where =
      r.text.starts_with("U") ? " inside a new user namespace" : r.text.starts_with("R") ? " as root, without a user namespace" : "";
  for (size_t i = 0; i < std::size(kNs); ++i) {
    Capability c{kNs[i].name, false, ""};
    if (r.code < 0 || r.code == 0xff) {
      c.detail = "not tried: " + (r.text.empty() ? std::string("probe failed") : r.text);
    } else if (r.code & (1 << i)) {
      auto at = r.text.find(kNs[i].name);
      std::string line = at == std::string::npos ? "" : r.text.substr(at, r.text.find('\n', at) - at);
      c.detail = "unshare failed" + where + ": " + line;
    } else {
      c.ok = true;
      c.detail = std::string("unshare worked") + where + ": " + kNs[i].use;
    }
    out.push_back(std::move(c));
  }
}

void probe_seccomp(std::vector<Capability>& out) {
  int mode = ::prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
  auto r = in_child([](int fd) {
    // getppid() -> ERRNO(77), everything else allowed.
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 77),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(std::size(filter)), filter};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
      say(fd, "no_new_privs: " + err_name(errno));
      return 1;
    }
    if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
      say(fd, "installing a test filter: " + err_name(errno));
      return 1;
    }
    errno = 0;
    if (::syscall(SYS_getppid) != -1 || errno != 77) {
      say(fd, "a test filter was installed but did not act");
      return 1;
    }
    return 0;
  });
  const scmp_version* v = ::seccomp_version();
  std::string lib = v ? "libseccomp " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                            std::to_string(v->micro)
                      : "libseccomp ?";
  std::string now = mode == 2 ? "; this process already runs under a filter (they stack)"
                    : mode < 0 ? "; PR_GET_SECCOMP: " + err_name(errno) : "";
  if (r.code == 0)
    out.push_back({"seccomp filters", true, "a test filter refused a syscall in a child (" + lib + ")" + now});
  else
    out.push_back({"seccomp filters", false, (r.text.empty() ? "probe failed" : r.text) + now});

  seccomp_notif_sizes sizes{};
  if (::syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) == 0) {
    std::uint32_t action = SECCOMP_RET_USER_NOTIF;
    bool avail = ::syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
    out.push_back({"seccomp user notification", avail,
                   avail ? "SECCOMP_RET_USER_NOTIF available (notif " + std::to_string(sizes.seccomp_notif) +
                               " bytes): a supervisor can see refused syscalls as they happen"
                         : "SECCOMP_GET_NOTIF_SIZES works but SECCOMP_RET_USER_NOTIF is not available"});
  } else {
    out.push_back({"seccomp user notification", false, "SECCOMP_GET_NOTIF_SIZES: " + err_name(errno)});
  }
}

void probe_landlock(std::vector<Capability>& out) {
  auto f = process::landlock_features();
  int e = errno;
  const std::string abi = "ABI " + std::to_string(f.abi);
  if (f.abi == 0) {
    out.push_back({"landlock", false,
                   e == EOPNOTSUPP ? "present but disabled at boot (add landlock to lsm= on the kernel command line)"
                                   : "not in this kernel (" + err_name(e) + "); the mounts remain the only filesystem wall"});
  } else {
    out.push_back({"landlock", true, abi + ": the best this kernel offers; the sandbox uses all of it"});
  }
  auto feature = [&](const char* name, bool ok, int need, const std::string& use) {
    out.push_back({name, ok,
                   (ok ? abi : "needs ABI " + std::to_string(need) + ", have " + std::to_string(f.abi)) + ": " + use});
  };
  feature("landlock filesystem", f.fs, 1, "a second filesystem wall mirroring the mount policy");
  feature("landlock truncate", f.truncate, 3, "truncating files outside writable paths is refused");
  feature("landlock network", f.net, 4,
          "TCP bind/connect by port; not used by default: in the sandbox's own network namespace every "
          "port is its own loopback (test servers must stay reachable)");
  feature("landlock ioctl on devices", f.ioctl_dev, 5, "device ioctls refused except on the sandbox's /dev (terminals)");
  feature("landlock scoping", f.scope, 6, "signals and abstract unix sockets cannot leave the sandbox");
  feature("landlock audit", f.audit_flags, 7, "denials can be logged by the kernel's audit subsystem");
}

std::string fs_type(const std::string& path) {
  struct statfs s{};
  if (::statfs(path.c_str(), &s) != 0) return "?";
  switch (static_cast<unsigned long>(s.f_type)) {
    case EXT4_SUPER_MAGIC: return "ext4";
    case TMPFS_MAGIC: return "tmpfs";
    case BTRFS_SUPER_MAGIC: return "btrfs";
    case XFS_SUPER_MAGIC: return "xfs";
    case OVERLAYFS_SUPER_MAGIC: return "overlayfs";
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "fs 0x%lx", static_cast<unsigned long>(s.f_type));
      return buf;
    }
  }
}

void probe_idmap(std::vector<Capability>& out) {
  if (::geteuid() != 0) {
    out.push_back({"idmapped mounts", false,
                   "not needed as uid " + std::to_string(::geteuid()) +
                       " (root only: lets a root-invoked sandbox write as an unused uid while files keep their owner)"});
    return;
  }
  std::vector<std::string> paths = {"/tmp"};
  struct stat tmp{}, cwd{};
  char buf[4096];
  if (::getcwd(buf, sizeof buf) && ::stat("/tmp", &tmp) == 0 && ::stat(buf, &cwd) == 0 && tmp.st_dev != cwd.st_dev)
    paths.push_back(buf);
  std::string ok_on, failed_on;
  for (const auto& path : paths) {
    auto r = in_child([&](int fd) {
      // Everything happens in a private mount namespace; the cloned tree is
      // detached, never attached, and closed when this child exits.
      if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
        say(fd, "private mount ns: " + err_name(errno));
        return 1;
      }
      int ready[2], hold[2];
      if (::pipe2(ready, O_CLOEXEC) != 0 || ::pipe2(hold, O_CLOEXEC) != 0) return 1;
      pid_t holder = ::fork();
      if (holder == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        ::close(fd);  // the probe's report pipe: the parent reads it to EOF
        ::close(ready[0]);
        ::close(hold[1]);  // so the read below ends when the prober closes its end
        char c = ::unshare(CLONE_NEWUSER) == 0 ? 'y' : 'n';
        (void)!::write(ready[1], &c, 1);
        (void)!::read(hold[0], &c, 1);
        ::_exit(0);
      }
      ::close(ready[1]);
      ::close(hold[0]);
      char c = 'n';
      (void)!::read(ready[0], &c, 1);
      int rc = 1;
      std::string p = "/proc/" + std::to_string(holder);
      if (c == 'y' && write_text(p + "/uid_map", "0 100000 1") && write_text(p + "/gid_map", "0 100000 1")) {
        int userns = ::open((p + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC);
        int tree = static_cast<int>(::syscall(SYS_open_tree, AT_FDCWD, path.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
        if (userns < 0 || tree < 0) {
          say(fd, "open_tree: " + err_name(errno));
        } else {
          mount_attr attr{};
          attr.attr_set = MOUNT_ATTR_IDMAP;
          attr.userns_fd = static_cast<std::uint64_t>(userns);
          if (::syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) == 0)
            rc = 0;
          else
            say(fd, "mount_setattr(MOUNT_ATTR_IDMAP): " + err_name(errno));
        }
      } else {
        say(fd, "could not make a user namespace to map through");
      }
      ::close(hold[1]);
      ::waitpid(holder, nullptr, 0);
      return rc;
    });
    std::string where = path + " (" + fs_type(path) + ")";
    if (r.code == 0)
      ok_on += (ok_on.empty() ? "" : ", ") + where;
    else
      failed_on += (failed_on.empty() ? "" : ", ") + where + ": " + (r.text.empty() ? "probe failed" : r.text);
  }
  bool ok = failed_on.empty();
  std::string detail = ok ? "an idmapped clone of " + ok_on + " was made"
                          : "failed on " + failed_on + (ok_on.empty() ? "" : "; worked on " + ok_on);
  detail += ": as root, writable paths are bound through one so the command runs as an unused uid";
  out.push_back({"idmapped mounts", ok, detail});
}

void probe_overlay(std::vector<Capability>& out) {
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  auto r = in_child([&](int fd) {
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
      say(fd, "new user+mount namespace: " + err_name(errno));
      return 1;
    }
    if (!map_self(uid, gid)) {
      say(fd, "uid map: " + err_name(errno));
      return 1;
    }
    // A tmpfs over /tmp in this private mount namespace: nothing touches the host's /tmp.
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("tmpfs", "/tmp", "tmpfs", 0, "mode=0700") != 0) {
      say(fd, "tmpfs: " + err_name(errno));
      return 1;
    }
    for (const char* d : {"/tmp/l", "/tmp/u", "/tmp/w", "/tmp/m"}) ::mkdir(d, 0700);
    const char* opts = "lowerdir=/tmp/l,upperdir=/tmp/u,workdir=/tmp/w";
    if (::mount("overlay", "/tmp/m", "overlay", 0, opts) != 0) {
      int e = errno;
      std::string o = std::string(opts) + ",userxattr";
      if (::mount("overlay", "/tmp/m", "overlay", 0, o.c_str()) != 0) {
        say(fd, "mount overlay: " + err_name(e));
        return 1;
      }
    }
    int f = ::open("/tmp/m/probe", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (f < 0) {
      say(fd, "writing through the overlay: " + err_name(errno));
      return 1;
    }
    ::close(f);
    return 0;
  });
  out.push_back({"overlayfs in a user namespace", r.code == 0,
                 r.code == 0 ? "mounted one over a tmpfs in a new user+mount namespace and wrote through it"
                             : (r.text.empty() ? "probe failed" : r.text)});
}

// A small cgroup reader: v1, v2 or hybrid, and where this user could create
// the sandbox's cgroup for each controller the limits need.
void probe_cgroups(std::vector<Capability>& out) {
  auto magic = [](const std::string& p) -> long {
    struct statfs s{};
    return ::statfs(p.c_str(), &s) == 0 ? static_cast<long>(s.f_type) : 0;
  };
  const long root = magic("/sys/fs/cgroup");
  std::string v2_base;
  std::string mode;
  if (root == CGROUP2_SUPER_MAGIC) {
    mode = "v2";
    v2_base = "/sys/fs/cgroup";
  } else if (root == TMPFS_MAGIC) {
    if (magic("/sys/fs/cgroup/unified") == CGROUP2_SUPER_MAGIC) {
      mode = "hybrid";
      v2_base = "/sys/fs/cgroup/unified";
    } else {
      mode = "v1";
    }
  }
  if (mode.empty()) {
    out.push_back({"cgroups", false, "no cgroup filesystem at /sys/fs/cgroup: no memory, pids or cpu limits"});
    for (const char* n : {"cgroup memory", "cgroup pids", "cgroup cpu"}) out.push_back({n, false, "no cgroups"});
    return;
  }
  // /proc/self/cgroup: "0::/path" (v2) and "N:ctrl,ctrl:/path" (v1).
  std::string v2_path;
  std::vector<std::pair<std::string, std::string>> v1;  // controller, own path
  for (const auto& l : util::read_proc_cgroup()) {
    if (l.v2()) {
      v2_path = l.path;
      continue;
    }
    for (const auto& c : l.controllers)
      if (!c.starts_with("name=")) v1.emplace_back(c, l.path);
  }
  std::vector<std::string> v2_ctrls;
  bool v2_writable = false;
  std::string v2_dir;
  if (!v2_base.empty()) {
    v2_dir = v2_base + (v2_path == "/" ? "" : v2_path);
    std::istringstream cs(read_text(v2_dir + "/cgroup.controllers"));
    for (std::string c; cs >> c;) v2_ctrls.push_back(c);
    v2_writable = ::access(v2_dir.c_str(), W_OK) == 0;
  }
  std::string summary = mode;
  if (!v1.empty()) {
    summary += ": v1 controllers";
    for (size_t i = 0; i < v1.size(); ++i) summary += (i ? "," : " ") + v1[i].first;
  }
  if (!v2_base.empty()) {
    summary += std::string(v1.empty() ? ": " : "; ") + "v2 at " + v2_dir + " with " +
               (v2_ctrls.empty() ? std::string("no controllers") : "controllers");
    for (size_t i = 0; i < v2_ctrls.size(); ++i) summary += (i ? "," : " ") + v2_ctrls[i];
    summary += v2_writable ? " (writable)" : " (not writable by this user)";
  }
  if (mode == "hybrid") summary += "; crun needs the v2 mount hidden in a private mount namespace";
  out.push_back({"cgroups", true, summary});

  struct Need {
    const char* name;
    const char* ctrl;
    const char* use;
  };
  static const Need kNeeds[] = {{"cgroup memory", "memory", "--memory (and swap)"},
                                {"cgroup pids", "pids", "--pids (fork bombs)"},
                                {"cgroup cpu", "cpu", "--cpus"}};
  for (const auto& n : kNeeds) {
    Capability c{n.name, false, ""};
    bool in_v2 = std::find(v2_ctrls.begin(), v2_ctrls.end(), n.ctrl) != v2_ctrls.end();
    if (in_v2 && v2_writable) {
      c.ok = true;
      c.detail = std::string("v2: ") + n.ctrl + " delegated in " + v2_dir + " (writable); for " + n.use;
    } else if (std::any_of(v1.begin(), v1.end(), [&](auto& p) { return p.first == n.ctrl; })) {
      std::string dir = std::string("/sys/fs/cgroup/") + n.ctrl;
      if (::access(dir.c_str(), W_OK) == 0) {
        c.ok = true;
        c.detail = "v1: " + dir + " writable; for " + n.use;
      } else {
        c.detail = "v1: " + dir + " not writable by uid " + std::to_string(::geteuid()) + " (" + err_name(errno) +
                   "); " + n.use + " cannot be enforced";
      }
    } else if (in_v2) {
      c.detail = "v2: " + v2_dir + " has " + n.ctrl + " but is not writable by this user (no delegation); " + n.use +
                 " cannot be enforced";
    } else {
      c.detail = std::string("controller ") + n.ctrl + " is not available to this process; " + n.use +
                 " cannot be enforced";
    }
    out.push_back(std::move(c));
  }
}

std::string find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path && *path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  for (std::string d; std::getline(dirs, d, ':');) {
    if (d.empty()) continue;
    std::string full = d + "/" + name;
    if (::access(full.c_str(), X_OK) == 0) return full;
  }
  return {};
}

// The first non-empty line `exe --version` prints, bounded in time; `answered`
// is false when the tool could not be run or did not finish in time.
std::string version_line(const std::string& exe, bool* answered, const char* flag = "--version") {
  auto r = in_child(
      [&](int fd) {
        ::setpgid(0, 0);  // so a timeout kills whatever the tool started too
        int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) ::dup2(null, 0);
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        char* argv[] = {const_cast<char*>(exe.c_str()), const_cast<char*>(flag), nullptr};
        ::execve(exe.c_str(), argv, environ);
        return 127;
      },
      std::chrono::milliseconds(3000));
  *answered = r.code >= 0 && r.code != 127;
  if (r.code < 0) return "no answer to " + std::string(flag) + (r.text.find("timed out") != std::string::npos ? " within 3 s" : "");
  std::istringstream lines(r.text);
  for (std::string line; std::getline(lines, line);) {
    line = trim(line);
    if (!line.empty()) return line;
  }
  return "(no version printed)";
}

void probe_tool(std::vector<Capability>& out, const std::string& name, const std::string& use) {
  std::string exe = find_in_path(name);
  if (exe.empty()) {
    out.push_back({name, false, "not in PATH; " + use});
    return;
  }
  bool answered = false;
  std::string version = version_line(exe, &answered);
  out.push_back({name, answered, exe + ": " + version + "; " + use});
}

// qemu as the microVM layer runs it: at its one path (microvm/vmm.hpp), not
// wherever PATH finds one (the layer would not start with that one).
void probe_qemu(std::vector<Capability>& out) {
  const std::string name = "qemu-system-x86_64";
  if (::access(microvm::kQemuBinary, X_OK) != 0) {
    std::string other = find_in_path(name);
    out.push_back({name, false, std::string(microvm::kQemuBinary) + " not found" +
                                    (other.empty() || other == microvm::kQemuBinary ? "" : " (" + other +
                                        " is in PATH, but the microVM layer runs only " + microvm::kQemuBinary + ")") +
                                    "; microVM layer"});
    return;
  }
  bool answered = false;
  std::string version = version_line(microvm::kQemuBinary, &answered);
  out.push_back({name, answered, std::string(microvm::kQemuBinary) + ": " + version + "; microVM layer"});
}

// The microVM layer's own guest (built by `make` from Debian's kernel package).
void probe_guest_kernel(std::vector<Capability>& out) {
  auto g = microvm::find_guest_image();
  if (!g) {
    out.push_back({"guest kernel", false, g.error().str()});
    return;
  }
  out.push_back({"guest kernel", true, g->kernel + " (" + g->kernel_version + ") and " + g->initramfs +
                                           ": the microVM layer's guest"});
}

// Under real KVM the guest reaches its init in well under a second.
constexpr int kKvmProofTimeoutMs = 5000;

void probe_kvm(std::vector<Capability>& out) {
  struct stat st{};
  if (::stat("/dev/kvm", &st) != 0) {
    out.push_back({"/dev/kvm", false, "absent: a microVM would run under TCG emulation (slower)"});
    out.push_back({"kvm guest boot", false, "not tried (no /dev/kvm): the microVM layer uses TCG (software emulation)"});
    return;
  }
  UniqueFd fd(::open("/dev/kvm", O_RDWR | O_CLOEXEC));
  if (!fd) {
    out.push_back({"/dev/kvm", false, "present but not openable by uid " + std::to_string(::geteuid()) + ": " +
                                          err_name(errno) + "; a microVM would run under TCG"});
    out.push_back({"kvm guest boot", false, "not tried (/dev/kvm not openable): the microVM layer uses TCG (software emulation)"});
    return;
  }
  int api = ::ioctl(fd.get(), KVM_GET_API_VERSION, 0);
  out.push_back({"/dev/kvm", true, "openable, KVM API " + std::to_string(api)});
  // The device node proves nothing (a nested PVM host opens it and runs no
  // ordinary guest): a real boot of the guest image does (microvm/accel_probe.hpp).
  auto proof = microvm::prove_kvm(kKvmProofTimeoutMs);
  out.push_back({"kvm guest boot", proof.kvm_boots,
                 proof.detail + (proof.from_cache ? " (tried earlier on this host boot)" : "") +
                     (proof.kvm_boots ? ": the microVM layer uses KVM" : ": the microVM layer uses TCG (software emulation)")});
}

// The container and gVisor layers as a run would set them up here: which
// runtime, what about the host's cgroup mounts, gVisor's platform and why, and
// what a caller of this uid gets (rootless).
void probe_oci_layers(std::vector<Capability>& out) {
  const bool root = ::geteuid() == 0;
  auto cg = oci::decide_cgroup_view(read_text("/proc/self/mountinfo"));
  out.push_back({"runtime cgroups", true, cg.why + "; the container stays in the sandbox's cgroup"});
  if (auto c = oci::choose_runtime(layer::Kind::Container, ""); c) {
    std::string d = c->describe();
    for (const auto& n : c->notes) d += "; " + n;
    bool ok = root || c->runtime == oci::Runtime::Crun;
    d += root ? "; as root: the runtime sets the mounts up, the command runs as its uid"
              : (ok ? "; rootless: crun in a user namespace that maps only the command's uid"
                    : "; rootless needs crun (runc maps only root into a rootless container)");
    out.push_back({"container runtime", ok, d});
  } else {
    out.push_back({"container runtime", false, c.error().str()});
  }
  if (auto g = oci::choose_runtime(layer::Kind::Gvisor, ""); g) {
    std::string d = g->describe();
    for (const auto& n : g->notes) d += "; " + n;
    auto platforms = oci::runsc_platforms(g->path);
    if (std::find(platforms.begin(), platforms.end(), "kvm") != platforms.end())
      d += "; kvm is not chosen without EXGUARDIAN_GVISOR_PLATFORM=kvm (a nested host can hang in it)";
    if (root) {
      d += "; runsc runs as an unused high uid, the command as its own";
    } else {
      passwd* pw = ::getpwuid(::getuid());
      std::string name = pw ? pw->pw_name : "";
      bool sub = oci::subordinate_start(read_text("/etc/subuid"), ::getuid(), name) &&
                 oci::subordinate_start(read_text("/etc/subgid"), ::getuid(), name) &&
                 ::access("/usr/bin/newuidmap", X_OK) == 0 && ::access("/usr/bin/newgidmap", X_OK) == 0;
      d += sub ? "; rootless: runsc as your first subordinate uid, the command as your uid"
               : "; rootless without /etc/subuid range or newuidmap: the command runs as gVisor's uid 0 (no capabilities)";
    }
    out.push_back({"gvisor runtime", true, d});
  } else {
    out.push_back({"gvisor runtime", false, g.error().str()});
  }
}

// As root, a run first drops its supplementary groups (cli/host_setup.hpp),
// for every layer: where that is refused (root of a user namespace whose
// setgroups is denied, as `unshare --map-root-user` makes), nothing runs.
Capability probe_supplementary_groups() {
  const std::string name = "supplementary groups";
  if (::geteuid() != 0) return {name, true, "not root: a run has none of root's groups to drop"};
  auto r = in_child([](int fd) {
    if (::setgroups(0, nullptr) == 0) return 0;
    say(fd, "setgroups(0): " + err_name(errno));
    return 1;
  });
  if (r.code == 0) return {name, true, "as root, a run drops its supplementary groups first: setgroups(0) works"};
  std::string sg = trim(read_text("/proc/self/setgroups"));
  return {name, false,
          "as root, a run drops its supplementary groups first, and " + (r.text.empty() ? "probe failed" : r.text) +
              (sg == "deny" ? " (/proc/self/setgroups is deny in this user namespace)" : "")};
}

}  // namespace

const Capability* find_capability(const std::vector<Capability>& caps, const std::string& name) {
  for (const auto& c : caps)
    if (c.name == name) return &c;
  return nullptr;
}

Capability template_cache_capability() {
  const std::string name = "microvm templates";
  if (!microvm::snapshots_enabled()) return {name, true, "EXG_MICROVM_SNAPSHOT=off: none saved, every microVM boots cold"};
  std::string dir = microvm::template_write_dir();
  if (dir.empty()) return {name, false, "no cache directory (no HOME): every microVM boots cold"};
  auto limit = microvm::template_cache_limit();
  if (!limit) return {name, false, limit.error().str() + ": no template is saved, every microVM boots cold"};
  uint64_t bytes = 0;
  size_t count = 0;
  for (const auto& t : microvm::list_templates(dir)) bytes += t.bytes, count += t.partial ? 0 : 1;
  auto mib = [](uint64_t b) { return std::to_string((b + (1 << 20) / 2) >> 20) + " MiB"; };
  return {name, true,
          dir + ": " + std::to_string(count) + (count == 1 ? " template, " : " templates, ") + mib(bytes) +
              " of at most " + mib(*limit) +
              " (EXG_MICROVM_SNAPSHOT_MAX; past it a new save removes the least recently used)"};
}

namespace {

// The probes, in doctor's order; `all` false: only those layer_status() reads
// (without idmap, overlay, cgroups, the template cache and nft).
std::vector<Capability> run_probes(bool all) {
  std::vector<Capability> out;
  probe_namespaces(out);
  probe_seccomp(out);
  probe_landlock(out);
  if (all) {
    probe_idmap(out);
    probe_overlay(out);
    probe_cgroups(out);
  }
  probe_tool(out, "crun", "container layer (OCI runtime, fast)");
  probe_tool(out, "runc", "container layer (OCI runtime)");
  probe_tool(out, "runsc", "gVisor layer (user-space kernel)");
  probe_oci_layers(out);
  probe_qemu(out);
  probe_guest_kernel(out);
  probe_kvm(out);
  if (all) {
    out.push_back(template_cache_capability());
    std::string nft = find_in_path("nft");
    if (nft.empty()) {
      out.push_back({"nftables", false, "nft not in PATH; only needed for layers that route through a veth"});
    } else {
      bool answered = false;
      std::string version = version_line(nft, &answered);
      out.push_back({"nftables", answered, nft + ": " + version + "; for container/microVM egress rules"});
    }
  }
  out.push_back(probe_supplementary_groups());
  return out;
}

}  // namespace

std::vector<Capability> probe_host() { return run_probes(true); }

// The probes layer_status() reads, as probe_host() makes them (same names).
std::vector<Capability> probe_for_layers() { return run_probes(false); }

}  // namespace exg::sandbox
