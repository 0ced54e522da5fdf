#include "process/host_probe.hpp"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/mount.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <sstream>

#include "walls/landlock.hpp"
#include "util/namespace_setup_probe.hpp"
#include "util/proc_cgroup.hpp"

namespace exg::process {
namespace {

using util::Capability;
using util::err_name;
using util::in_child;
using util::read_text;
using util::say;
using util::trim;
using util::wait_bounded;

bool write_text(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

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

// What the sandbox's setup does once its user namespace is made (sethostname,
// a tmpfs, a fresh proc): a container engine's seccomp profile or masked /proc
// refuses these where the namespace itself is allowed (util/namespace_setup_probe.hpp).
void probe_setup_calls(std::vector<Capability>& out) {
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  auto r = in_child([&](int fd) {
    if (::unshare(CLONE_NEWUSER) != 0) {
      say(fd, "no user namespace to try them in: " + err_name(errno));
      return 0xff;
    }
    if (!map_self(uid, gid)) {
      say(fd, "no user namespace to try them in: its maps: " + err_name(errno));
      return 0xff;
    }
    auto p = util::try_namespace_setup_calls();
    if (p.step.empty()) return 0;
    say(fd, p.step + ": " + err_name(p.err));
    return 1;
  });
  Capability c{"namespace setup", r.code == 0, ""};
  if (r.code == 0)
    c.detail = "sethostname, a tmpfs, a sysfs and a fresh proc work in a new user namespace: the sandbox's setup";
  else if (r.code == 1)
    c.detail = r.text + ", in a new user namespace, where the sandbox's setup makes this call";
  else
    c.detail = "not tried: " + (r.text.empty() ? std::string("probe failed") : r.text);
  out.push_back(std::move(c));
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
  auto f = walls::landlock_features();
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

}  // namespace

void probe_host(std::vector<Capability>& out, bool all) {
  probe_namespaces(out);
  probe_setup_calls(out);
  probe_seccomp(out);
  probe_landlock(out);
  if (all) {
    probe_idmap(out);
    probe_overlay(out);
    probe_cgroups(out);
  }
}

}  // namespace exg::process
