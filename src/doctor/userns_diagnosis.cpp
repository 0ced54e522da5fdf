#include "doctor/userns_diagnosis.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "util/host_probe.hpp"
#include "util/namespace_setup_probe.hpp"
#include "util/unique_fd.hpp"

namespace exg::doctor {
namespace {

// The AppArmor profile `make install` and the .deb install (packaging/apparmor/exguardian).
constexpr const char* kProfileName = "exguardian";
constexpr const char* kProfileFile = "/etc/apparmor.d/exguardian";
constexpr const char* kProfilePaths = "/usr/bin/exguardian and /usr/local/bin/exguardian";

using util::read_text;

std::string first_line(const std::string& s) {
  std::string l = s.substr(0, s.find('\n'));
  while (!l.empty() && (l.back() == ' ' || l.back() == '\r')) l.pop_back();
  return l;
}

std::string squeeze(const std::string& s) {
  std::istringstream in(s);
  std::string out;
  for (std::string w; in >> w;) out += (out.empty() ? "" : " ") + w;
  return out;
}

std::string errno_text(int e) {
  const char* name = ::strerrorname_np(e);
  return std::string(name ? name : "E?") + " (" + std::strerror(e) + ")";
}

bool exists(const char* path) {
  struct stat st{};
  return ::stat(path, &st) == 0;
}

// Which container this process runs in, and what said so (the first hint found).
void find_container(UsernsFacts& f) {
  if (exists("/.dockerenv")) {
    f.container = "docker";
    f.container_evidence = "/.dockerenv";
    return;
  }
  if (exists("/run/.containerenv")) {
    f.container = "podman";
    f.container_evidence = "/run/.containerenv";
    return;
  }
  // systemd-nspawn, LXC, podman and others set container= in pid 1's environment;
  // it is often passed on (and /proc/1/environ is readable by root).
  if (const char* c = std::getenv("container"); c && *c) {
    f.container = c;
    f.container_evidence = std::string("container=") + c + " in the environment";
    return;
  }
  std::string env1 = read_text("/proc/1/environ");
  for (size_t at = 0; at < env1.size();) {
    size_t end = env1.find('\0', at);
    std::string kv = env1.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (kv.starts_with("container=") && kv.size() > 10) {
      f.container = kv.substr(10);
      f.container_evidence = kv + " in pid 1's environment";
      return;
    }
    if (end == std::string::npos) break;
    at = end + 1;
  }
  std::string cg = read_text("/proc/self/cgroup");
  for (const char* engine : {"kubepods", "docker", "libpod", "lxc", "containerd"}) {
    if (cg.find(engine) != std::string::npos) {
      f.container = std::string(engine) == "kubepods" ? "kubernetes" : std::string(engine) == "libpod" ? "podman" : engine;
      f.container_evidence = std::string("cgroup path with ") + engine + " (/proc/self/cgroup)";
      return;
    }
  }
}

}  // namespace

UsernsFacts read_userns_facts(std::string container_runtime) {
  UsernsFacts f;
  f.euid = ::geteuid();
  // (as walls/landlock.cpp landlock_abi() asks it; this room does not include the process layer)
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, 1U /* LANDLOCK_CREATE_RULESET_VERSION */);
  f.landlock_abi = abi < 0 ? 0 : static_cast<int>(abi);
  f.max_user_namespaces = first_line(read_text("/proc/sys/user/max_user_namespaces"));
  f.unprivileged_userns_clone = first_line(read_text("/proc/sys/kernel/unprivileged_userns_clone"));
  f.apparmor_restrict = first_line(read_text("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"));
  f.apparmor_active = exists("/sys/kernel/security/apparmor") ||
                      first_line(read_text("/sys/module/apparmor/parameters/enabled")) == "Y";
  // Lines "NAME (MODE)"; readable by root only on some kernels.
  std::istringstream profiles(read_text("/sys/kernel/security/apparmor/profiles"));
  for (std::string line; std::getline(profiles, line);)
    if (line.starts_with(std::string(kProfileName) + " ")) f.apparmor_profile_loaded = true;
  f.apparmor_profile_installed = exists(kProfileFile);
  if (f.apparmor_active) {
    f.apparmor_label = first_line(read_text("/proc/self/attr/apparmor/current"));
    if (f.apparmor_label.empty()) f.apparmor_label = first_line(read_text("/proc/self/attr/current"));
  }
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) f.exe.assign(exe, static_cast<size_t>(n));
  std::istringstream status(read_text("/proc/self/status"));
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("Seccomp:")) f.seccomp_mode = std::atoi(line.c_str() + 8);
  f.uid_map = squeeze(first_line(read_text("/proc/self/uid_map")));
  f.nested_userns = !f.uid_map.empty() && f.uid_map != "0 0 4294967295";
  f.setgroups = first_line(read_text("/proc/self/setgroups"));
  find_container(f);
  f.container_runtime = std::move(container_runtime);
  return f;
}

UsernsProbe try_user_namespace() {
  // The child makes the namespace; this process writes its maps (as the
  // process layer's supervisor does); the child then makes a mount namespace
  // inside. Its exit code is the step that failed (0: none), the errno comes
  // over the pipe.
  int to_parent[2], to_child[2];
  if (::pipe2(to_parent, O_CLOEXEC) != 0) return {false, "pipe", errno};
  if (::pipe2(to_child, O_CLOEXEC) != 0) {
    int e = errno;
    ::close(to_parent[0]);
    ::close(to_parent[1]);
    return {false, "pipe", e};
  }
  UniqueFd up_r(to_parent[0]), up_w(to_parent[1]), down_r(to_child[0]), down_w(to_child[1]);
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  pid_t pid = ::fork();
  if (pid < 0) return {false, "fork", errno};
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    int e = 0;
    char step = 0;
    if (::unshare(CLONE_NEWUSER) != 0) {
      e = errno;
      step = 1;
    }
    (void)!::write(up_w.get(), &e, sizeof e);
    if (step) ::_exit(step);
    char go = 0;
    if (::read(down_r.get(), &go, 1) != 1 || go != 'g') ::_exit(9);
    // What the setup does inside (a mount, UTS and pid namespace, sethostname,
    // a tmpfs, a fresh proc): its errno, then the step's name.
    auto setup = util::try_namespace_setup_calls();
    e = setup.step.empty() ? 0 : (setup.err ? setup.err : EIO);
    (void)!::write(up_w.get(), &e, sizeof e);
    if (e == 0) ::_exit(0);
    unsigned char n = static_cast<unsigned char>(std::min<size_t>(setup.step.size(), 200));
    (void)!::write(up_w.get(), &n, 1);
    (void)!::write(up_w.get(), setup.step.data(), n);
    ::_exit(2);
  }
  up_w.reset();
  down_r.reset();
  UsernsProbe p;
  int e = 0;
  bool made = ::read(up_r.get(), &e, sizeof e) == static_cast<ssize_t>(sizeof e) && e == 0;
  if (made) {
    const std::string base = "/proc/" + std::to_string(pid);
    auto write_map = [&](const std::string& file, const std::string& text) {
      UniqueFd fd(::open((base + "/" + file).c_str(), O_WRONLY | O_CLOEXEC));
      if (!fd || ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
        p.step = "write /proc/PID/" + file + " of a new user namespace";
        p.err = errno;
        return false;
      }
      return true;
    };
    if (write_map("setgroups", "deny") && write_map("uid_map", "0 " + std::to_string(uid) + " 1") &&
        write_map("gid_map", "0 " + std::to_string(gid) + " 1")) {
      (void)!::write(down_w.get(), "g", 1);
      int inner = 0;
      if (::read(up_r.get(), &inner, sizeof inner) == static_cast<ssize_t>(sizeof inner) && inner != 0) {
        unsigned char n = 0;
        char step[256] = {};
        if (::read(up_r.get(), &n, 1) == 1) (void)!::read(up_r.get(), step, n);
        p.step = std::string(step[0] ? step : "the sandbox's setup") + " inside a new user namespace";
        p.err = inner;
      }
    }
  } else {
    p.step = "clone(CLONE_NEWUSER)";
    p.err = e ? e : EIO;
  }
  down_w.reset();
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  p.ok = p.step.empty() && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!p.ok && p.step.empty()) {
    p.step = "a probe child in a new user namespace";
    p.err = EIO;
  }
  return p;
}

bool layer_needs_userns(layer::Kind kind, bool root) {
  // Container as root: no user namespace for the runtime, but one as the idmap
  // of each writable path's mount (process/launch.hpp idmap_userns).
  (void)root;
  return kind != layer::Kind::Landlock;  // the one layer without namespaces
}

std::vector<std::string> explain_userns_refusal(const UsernsFacts& f, const UsernsProbe& probe,
                                                const std::string& failed_call) {
  std::vector<std::string> out;
  const bool root = f.euid == 0;
  const bool setgroups_denied = failed_call == "setgroups" && root && f.setgroups == "deny";
  if (probe.ok && !setgroups_denied) return out;
  const std::string who = "uid " + std::to_string(f.euid);
  const std::string where = f.nested_userns ? " in this user namespace" : "";
  std::vector<std::string> ways;
  bool explained = false;

  // The namespace was made, what the setup does in it was refused.
  const bool in_setup = !probe.ok && probe.step.ends_with("inside a new user namespace") &&
                        !probe.step.starts_with("unshare(CLONE_NEWNS)") && !probe.step.starts_with("unshare(CLONE_NEWNS|");
  out.push_back(in_setup ? "the process layer cannot run here: every sandbox starts in a user namespace of its own and "
                           "sets itself up there, and this host refuses that setup (nothing ran; the layers have no mode "
                           "without it)"
                         : "the process layer cannot run here: every sandbox starts in a user namespace of its own, and "
                           "this host refuses one (nothing ran; the layers have no mode without it)");
  if (setgroups_denied) {
    explained = true;
    out.push_back("cause: setgroups(0) as root of a user namespace whose setgroups is denied (/proc/self/setgroups: deny, "
                  "uid_map \"" + f.uid_map + "\"): the supervisor cannot drop its supplementary groups, which would "
                  "follow the command in");
    ways.push_back("run exguardian where setgroups is allowed: as root on the host, or in a user namespace whose "
                   "gid_map its privileged parent wrote (newgidmap, or the container engine's --userns)");
  }
  if (!probe.ok)
    out.push_back("cause: " + probe.step + " as " + who + ": " + errno_text(probe.err));

  if (f.max_user_namespaces == "0") {
    explained = true;
    out.push_back("cause: user.max_user_namespaces is 0" + where +
                  " (/proc/sys/user/max_user_namespaces): no user namespace may be made here, by any user");
    ways.push_back(f.nested_userns
                       ? "sysctl -w user.max_user_namespaces=15000 as root of this user namespace (it was set here, "
                         "below the one that made it), or have the engine that made it stop setting it to 0"
                       : "sudo sysctl -w user.max_user_namespaces=15000 (and a file in /etc/sysctl.d/ to keep it)");
  } else if (!probe.ok && probe.err == ENOSPC) {
    explained = true;
    out.push_back("cause: ENOSPC from clone(CLONE_NEWUSER): a user.max_user_namespaces limit is reached" +
                  std::string(f.nested_userns ? " in a user namespace above this one (its limit cannot be read from here; "
                                                "this one's is " + f.max_user_namespaces + ")"
                                              : " (" + f.max_user_namespaces + ", /proc/sys/user/max_user_namespaces)"));
    ways.push_back("raise user.max_user_namespaces where it is reached" +
                   std::string(f.nested_userns ? ": on the host that made this user namespace" : ": sudo sysctl -w user.max_user_namespaces=15000"));
  }
  if (f.unprivileged_userns_clone == "0" && !root) {
    explained = true;
    out.push_back("cause: kernel.unprivileged_userns_clone is 0 (Debian's switch, /proc/sys/kernel/unprivileged_userns_clone): "
                  "only root may make user namespaces");
    ways.push_back("sudo sysctl -w kernel.unprivileged_userns_clone=1");
  }
  if (f.apparmor_restrict == "1" && !root) {
    explained = true;
    std::string profile =
        f.apparmor_profile_loaded
            ? "the exguardian AppArmor profile is loaded, but this process's label is \"" + f.apparmor_label +
                  "\": " + (f.exe.empty() ? "this binary" : f.exe) + " is not where it attaches (" + kProfilePaths + ")"
        : f.apparmor_profile_installed ? std::string("the exguardian AppArmor profile is installed (") + kProfileFile +
                                             ") but not loaded"
                                       : std::string("no exguardian AppArmor profile is installed (") + kProfileFile + ")";
    out.push_back("cause: kernel.apparmor_restrict_unprivileged_userns is 1 (Ubuntu 23.10+): AppArmor lets an unconfined "
                  "program make a user namespace but takes its capabilities there unless a profile grants it `userns`; " +
                  profile);
    if (f.apparmor_profile_loaded)
      ways.push_back(std::string("run the installed exguardian (") + kProfilePaths + "), or add this path to " + kProfileFile +
                     " and reload it: sudo apparmor_parser -r " + kProfileFile);
    else if (f.apparmor_profile_installed)
      ways.push_back(std::string("load the profile: sudo apparmor_parser -r ") + kProfileFile);
    else
      ways.push_back(std::string("install the profile (make install, or the .deb, puts it at ") + kProfileFile +
                     "), then: sudo apparmor_parser -r " + kProfileFile);
  }
  if (f.seccomp_mode == 2 && !probe.ok && probe.err == EPERM && probe.step.starts_with("clone")) {
    explained = true;
    out.push_back("cause: this process runs under a seccomp filter (Seccomp: 2 in /proc/self/status)" +
                  std::string(f.container.empty() ? "" : ", as a container engine sets one") +
                  ": Docker's and Podman's default profiles refuse clone/unshare with CLONE_NEWUSER (EPERM)");
    ways.push_back("start the container with a seccomp profile that allows clone/unshare with CLONE_NEWUSER: "
                   "docker run --security-opt seccomp=unconfined, podman run --security-opt seccomp=unconfined, "
                   "or the engine's default profile with those calls allowed (--security-opt seccomp=FILE)");
  }
  if (in_setup && probe.err == EPERM && (probe.step.starts_with("sethostname") || probe.step.starts_with("mount tmpfs")) &&
      f.seccomp_mode == 2) {
    explained = true;
    out.push_back("cause: this process runs under a seccomp filter (Seccomp: 2 in /proc/self/status)" +
                  std::string(f.container.empty() ? "" : ", as a container engine sets one") +
                  ": Docker's and Podman's default profiles let clone(CLONE_NEWUSER) through but allow sethostname "
                  "and mount only with CAP_SYS_ADMIN of the host, so the sandbox's setup is refused (EPERM) even "
                  "as root of its own user namespace");
    ways.push_back("start the container with --security-opt seccomp=unconfined (docker run or podman run; ExGuardian "
                   "puts its own filter on everything it runs), or with the engine's default profile plus "
                   "sethostname, mount, umount2, pivot_root, fsopen, fsconfig, fsmount, move_mount, open_tree and "
                   "mount_setattr allowed (--security-opt seccomp=FILE)");
  }
  // Paths mounted over in /proc and /sys (a container engine's masks): a fresh
  // proc or sysfs is refused in a user namespace while they are there. (The
  // kernel's own mounts on empty directories, cgroups and the like, do not
  // count: they are left out of the list.)
  std::vector<std::string> masked;
  std::istringstream mi(read_text("/proc/self/mountinfo"));
  for (std::string line; std::getline(mi, line);) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, point;
    if (!(fields >> id >> parent >> devno >> root >> point)) continue;
    bool proc = point.starts_with("/proc/") && !point.starts_with("/proc/sys/fs/binfmt_misc");
    bool sys = point.starts_with("/sys/") && !point.starts_with("/sys/fs/cgroup") && !point.starts_with("/sys/kernel/") &&
               !point.starts_with("/sys/fs/bpf") && !point.starts_with("/sys/fs/fuse") && !point.starts_with("/sys/fs/pstore");
    if (proc || sys) masked.push_back(point);
  }
  std::string list;
  for (size_t i = 0; i < masked.size() && i < 4; ++i) list += (list.empty() ? "" : ", ") + masked[i];
  if (masked.size() > 4) list += ", and " + std::to_string(masked.size() - 4) + " more";
  const std::string unmask_way =
      "start the container with /proc and /sys unmasked: podman run --security-opt unmask=ALL, docker run "
      "--security-opt systempaths=unconfined, or on Kubernetes securityContext.procMount: Unmasked (each sandbox "
      "masks again what it must in its own /proc and /sys)";
  const bool mount_refused = probe.step.starts_with("mount proc") || probe.step.starts_with("mount sysfs");
  if (in_setup && probe.err == EPERM && !mount_refused && !masked.empty()) {
    out.push_back("also: /proc or /sys has paths mounted over here (" + list + "): once those calls are allowed, "
                  "a fresh proc or sysfs for the sandbox would be refused too");
    ways.push_back("and " + unmask_way);
  }
  if (in_setup && probe.err == EPERM && mount_refused) {
    explained = true;
    const char* fs = probe.step.starts_with("mount proc") ? "proc" : "sysfs";
    out.push_back(std::string("cause: a fresh ") + fs + " for the sandbox is refused (EPERM): the kernel lets a user "
                  "namespace mount " + fs + " only where a whole one is visible, and /proc or /sys has paths mounted "
                  "over here" + (list.empty() ? std::string() : " (" + list + ")") +
                  (f.container.empty() ? std::string() : ", as a container engine masks them"));
    ways.push_back(unmask_way);
  }
  if (!f.container.empty())
    out.push_back("inside: a " + f.container + " container (" + f.container_evidence + ")");
  if (f.nested_userns)
    out.push_back("inside: a user namespace (uid_map \"" + f.uid_map + "\"): the limits of the namespaces above it apply too");
  if (!explained)
    out.push_back("cause: not one of user.max_user_namespaces, kernel.unprivileged_userns_clone, AppArmor's "
                  "restriction, a seccomp filter or a masked /proc (EPERM also comes from a chroot; EUSERS from 32 "
                  "nested user namespaces)");

  // The layers: each makes a user namespace of its own as this caller (measured
  // in tests/integration/test_userns_refused.sh: the container layer as root too).
  if (f.landlock_abi >= 6)
    out.push_back("layers that would run here: landlock, as " + who + " (no namespaces: Landlock ABI " +
                  std::to_string(f.landlock_abi) + " and seccomp; weaker than process, see docs/layers.md); "
                  "every other one makes a user namespace and sets itself up in it");
  else
    out.push_back("layers that would run here: none, as " + who + " (each one makes a user namespace and sets itself up "
                  "in it; landlock, which makes none, needs Landlock ABI 6 and this kernel has " +
                  (f.landlock_abi ? "ABI " + std::to_string(f.landlock_abi) : std::string("no Landlock")) + ")");
  out.push_back(std::string("layers that would not: process (its own user namespace), microvm (qemu runs inside the "
                            "process layer), gvisor (runsc's host runs in a user namespace), container (") +
                (root ? "as root: its writable paths are idmapped mounts, made through a user namespace"
                      : "rootless: crun in a user namespace") +
                (f.container_runtime.empty() ? "; and no crun or runc is installed" : "") + ")");
  for (const auto& w : ways) out.push_back("way out: " + w);
  if (f.landlock_abi >= 6)
    out.push_back("way out: --layer landlock (or --layer auto), if its weaker walls will do: no namespaces, the host's "
                  "processes and network visible (docs/layers.md)");
  return out;
}

std::vector<std::string> userns_refusal_for(layer::Kind kind, const std::string& failed_call,
                                           const std::string& container_runtime) {
  if (!layer_needs_userns(kind, ::geteuid() == 0) && failed_call != "setgroups") return {};
  return explain_userns_refusal(read_userns_facts(container_runtime), try_user_namespace(), failed_call);
}

}  // namespace exg::doctor
