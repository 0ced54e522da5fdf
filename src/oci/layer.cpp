// The container and gVisor layers: the parent side (bundle, staging list,
// clone of the runtime host) and the runtime host itself. Design: layer.hpp.
#include "oci/layer.hpp"
#include "util/mountinfo.hpp"
#include "util/proc_cgroup.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "pid1/image.hpp"
#include "pid1/provide.hpp"
#include "process/handshake.hpp"
#include "process/netns_setup.hpp"
#include "process/transparent_capture.hpp"
#include "util/boot_id.hpp"
#include "util/syscalls.hpp"
#include "oci/kill_coalescer.hpp"
#include "oci/writable_ids.hpp"
#include "process/id_map.hpp"
#include "process/launch.hpp"
#include "process/spawn.hpp"
#include "util/fd_passing.hpp"
#include "util/pty_size.hpp"
#include "util/step_timer.hpp"

namespace exg::oci {

namespace {

// Everything of a run lives under a private tmpfs the runtime host mounts over
// /run in its own mount namespace (gone with it, whatever way it ends).
constexpr const char* kRunTmpfs = "/run";
constexpr const char* kBase = "/run/exguardian-oci";
constexpr const char* kPid1 = "/run/exguardian/init";  // the container's pid 1 (pid1/image.hpp), bound by adjust_spec
constexpr const char* kPid1Copy = "/run/exguardian-oci/pid1";  // its private copy when none is installed

std::string staged(size_t i) { return std::string(kBase) + "/m/" + std::to_string(i); }

bool within(const std::string& p, const std::string& dir) {
  return p == dir || (p.size() > dir.size() && p.compare(0, dir.size(), dir) == 0 && p[dir.size()] == '/');
}

// What the runtime host prepares before it runs the runtime.
struct StagedMount {
  size_t step = 0;
  enum Kind { Idmapped, Overlay } kind = Idmapped;
  std::string path;  // where it is attached (the bind source the spec uses)
  bool is_dir = true;
};

// The runtime host's user namespace (decide_host_ids).
struct HostIds {
  bool userns = false;
  bool two_ids = false;         // 0 -> root_uid and cmd_uid -> cmd_uid; else 0 -> root_uid only
  bool with_newuidmap = false;  // not root: through newuidmap/newgidmap and /etc/subuid
  uid_t root_uid = 0;           // the host uid behind the runtime host's 0
  gid_t root_gid = 0;
  uid_t cmd_uid = 0;            // the command's uid as the runtime host sees it
  gid_t cmd_gid = 0;
  std::string why;
};

struct HostArgs {
  const plan::Plan* plan = nullptr;
  int sync_fd = -1;
  int parent_pidfd = -1;
  bool host_userns = false;  // the runtime host has a user namespace (HostIds)
  uid_t cmd_uid = 0;         // the command's ids as the runtime host sees them
  gid_t cmd_gid = 0;
  bool want_pty = false;
  bool tty_fds[3] = {false, false, false};
  // runsc with process.terminal: the pty is runsc's own, its master sent to
  // this socket (--console-socket) and on to the supervisor; else the pty is
  // made here (pty()).
  std::string console_socket;
  CgroupView cgroups;
  std::string config_json;
  std::vector<std::string> skeleton_dirs;   // in the rootfs skeleton (absolute paths)
  std::vector<std::string> skeleton_files;
  std::vector<std::pair<std::string, std::string>> skeleton_links;  // path -> target
  std::vector<StagedMount> staged;
  std::vector<std::string> seal;  // read-only binds with submounts: made read-only as whole trees here
  std::vector<HostBind> host_binds;  // made in the skeleton root before the runtime starts (take_host_binds)
  std::map<size_t, int> idmapped;  // step -> detached idmapped tree (root only)
  std::vector<std::string> runtime_argv;
  std::vector<std::string> kill_prefix;  // runtime argv up to the verb, for `kill ID SIG`
  std::string id;
  bool relay_regular_files = false;  // gVisor: stdout/stderr files through a pipe
  bool fresh_sysfs = false;          // rootless crun: /sys of our netns for its fallback bind
  std::string seccomp_socket;        // crun/runc: where the runtime hands over the seccomp listener
  bool seccomp_program_annotation = false;  // crun: the filter in run.oci.seccomp_bpf_data (SpecOptions)
  // Generated files (File steps: the trust bundle, masked credential copies;
  // the resolver's resolv.conf): staged path -> content, bound read-only.
  std::vector<std::pair<std::string, std::string>> files;
  bool pid1_copy = false;  // write the embedded pid-1 program to kPid1Copy (none installed)
  StepTimer* timer = nullptr;  // LaunchOptions::timer: the runtime host's marks go to its shared page
  int agent_fd = -1;  // LaunchOptions::agent: the agent's end of its channel, fd 3 of the container's pid 1
  bool agent_on_stdin = false;  // runsc: the channel is the container's stdin instead (no --preserve-fds)
};

bool mkdir_p(const std::string& path, mode_t mode) {
  std::string cur;
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += "/" + part;
    if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) return false;
  }
  return true;
}

bool write_text(const std::string& path, const std::string& text, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

class RuntimeHost {
 public:
  explicit RuntimeHost(const HostArgs& a) : a_(a), plan_(*a.plan) {}
  [[noreturn]] void run();

 private:
  const HostArgs& a_;
  const plan::Plan& plan_;
  int slave_ = -1;
  int seccomp_sock_ = -1;
  int console_sock_ = -1;

  [[noreturn]] void fail(const std::string& what, int err = errno) { process::die(a_.sync_fd, what, err); }
  int listen_at(const std::string& path, const char* what);
  int receive_fd(int& sock, pid_t runtime);
  void hand_over_console(pid_t runtime, int runtime_stderr);

  void mounts();
  void seal();
  void network();
  void pty();
  void stage();
  void bundle();
  void host_binds();
  [[noreturn]] void supervise_runtime();
};

void RuntimeHost::mounts() {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail("make mounts private");
  // The runtime resolves pids (and /proc/1/ns/net) in the new pid namespace.
  if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) fail("mount /proc");
  if (a_.fresh_sysfs) {
    // crun in a user namespace below ours cannot mount a sysfs for our netns
    // and binds /sys instead: make that ours (the host's would list the host's
    // interfaces), with the cgroup filesystems moved over.
    int cg = sys::open_tree(AT_FDCWD, "/sys/fs/cgroup", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    if (cg < 0) fail("clone /sys/fs/cgroup");
    if (::mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, nullptr) != 0)
      fail("mount a sysfs for the sandbox's network namespace");
    if (sys::move_mount(cg, "", AT_FDCWD, "/sys/fs/cgroup", MOVE_MOUNT_F_EMPTY_PATH) != 0) fail("put /sys/fs/cgroup back");
    ::close(cg);
  }
  if (a_.cgroups.hide_unified) {
    if (::mount("exguardian-hide", a_.cgroups.unified_path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
                "size=4k,mode=0555") != 0)
      fail("hide " + a_.cgroups.unified_path + " (hybrid cgroups)");
  }
  if (::mount("exguardian-oci", kRunTmpfs, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) fail("mount tmpfs on /run");
  for (const char* d : {"", "/bundle", "/state", "/m"})
    if (::mkdir((std::string(kBase) + d).c_str(), 0755) != 0) fail(std::string("mkdir ") + kBase + d);
}

// A read-only bind's submounts (docker/podman storage under /var, ...) must be
// read-only too. crun as root says "rro", runc as root binds each one; here
// the runtime may not even reach them (0700 directories of an unmapped owner),
// so the whole tree is cloned, made read-only recursively (no path walk) and
// put over the source in our mount namespace, where the runtime binds it from.
void RuntimeHost::seal() {
  for (const auto& src : a_.seal) {
    int tree = sys::open_tree(AT_FDCWD, src.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    if (tree < 0) fail("clone " + src + " to make it read-only");
    mount_attr attr{};
    attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    if (sys::mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr) != 0) fail("make " + src + " read-only");
    if (sys::move_mount(tree, "", AT_FDCWD, src.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0) fail("put read-only " + src + " in place");
    ::close(tree);
  }
}

void RuntimeHost::host_binds() {
  for (const auto& b : a_.host_binds) {
    unsigned clone = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (b.recursive ? AT_RECURSIVE : 0);
    int tree = sys::open_tree(AT_FDCWD, b.source.c_str(), clone);
    if (tree < 0) fail("clone " + b.source + " for the root");
    mount_attr attr{};
    attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (b.noexec ? MOUNT_ATTR_NOEXEC : 0);
    if (sys::mount_setattr(tree, "", AT_EMPTY_PATH | (b.recursive ? AT_RECURSIVE : 0), &attr) != 0)
      fail("make " + b.source + " read-only");
    if (sys::move_mount(tree, "", AT_FDCWD, b.target.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
      fail("bind " + b.source + " into the root at " + b.target);
    ::close(tree);
  }
}

void RuntimeHost::network() {
  if (auto what = process::bring_loopback_up(); !what.empty()) fail(what);
  if (auto what = process::hand_over_sock_diag(a_.sync_fd); !what.empty()) fail(what);
  if (!plan_.proxy.enabled) return;
  int fds[3];
  std::string what;
  int n = process::make_proxy_listeners(plan_.proxy, fds, &what);
  if (n < 0) fail(what);
  if (!send_fds(a_.sync_fd, process::kMsgListeners, fds, static_cast<size_t>(n)))
    fail("hand the proxy listeners to the supervisor");
  for (int k = 0; k < n; ++k) ::close(fds[k]);
  if (auto w = process::hand_over_transparent_capture(plan_.proxy, a_.sync_fd); !w.empty()) fail(w);
}

// A pty on the host's devpts: the master goes to the supervisor's relay, the
// slave becomes the runtime's (and so the command's) terminal.
void RuntimeHost::pty() {
  int ptmx = ::open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (ptmx < 0) fail("open /dev/ptmx");
  int unlock = 0;
  if (::ioctl(ptmx, TIOCSPTLCK, &unlock) != 0) fail("unlock pty");
  slave_ = ::ioctl(ptmx, TIOCGPTPEER, O_RDWR | O_NOCTTY);
  if (slave_ < 0) fail("open pty peer");
  size_pty_as_caller(ptmx, a_.tty_fds);
  if (!send_fds(a_.sync_fd, process::kMsgPty, &ptmx, 1)) fail("send pty to supervisor");
  ::close(ptmx);
}

// Idmapped binds and overlays, attached under kBase/m where the spec binds them.
void RuntimeHost::stage() {
  if (!a_.files.empty() && !mkdir_p(std::string(kBase) + "/f", 0755)) fail("mkdir " + std::string(kBase) + "/f");
  for (const auto& [path, content] : a_.files)
    if (!write_text(path, content, 0444)) fail("write " + path);
  if (a_.pid1_copy && !pid1::write_private_copy(kPid1Copy))
    fail(std::string("write the sandbox's pid 1 (") + std::string(pid1::name()) + ") to " + kPid1Copy);
  int n = 0;
  for (const auto& sm : a_.staged) {
    const plan::Step& s = plan_.steps[sm.step];
    if (sm.kind == StagedMount::Idmapped) {
      if (sm.is_dir ? ::mkdir(sm.path.c_str(), 0755) != 0 : !write_text(sm.path, "", 0644)) fail("mkdir " + sm.path);
      int tree = a_.idmapped.at(sm.step);
      int t = ::open(sm.path.c_str(), O_PATH | O_CLOEXEC);
      if (t < 0 || sys::move_mount(tree, "", t, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
        fail("attach the idmapped mount of " + s.source);
      ::close(t);
      ::close(tree);
      continue;
    }
    // Overlay: lower = the host dir (or its idmapped clone), upper = a host
    // dir (workspace overlay/discard) or a throwaway tmpfs (HOME).
    std::string base = std::string(kBase) + "/ovl" + std::to_string(n++);
    std::string lower = s.source, upper = s.upper_dir, work = s.work_dir;
    if (::mkdir(base.c_str(), 0755) != 0) fail("mkdir " + base);
    if (a_.idmapped.count(sm.step)) {
      lower = base + "/lower";
      if (::mkdir(lower.c_str(), 0755) != 0) fail("mkdir " + lower);
      int tree = a_.idmapped.at(sm.step);
      int t = ::open(lower.c_str(), O_PATH | O_CLOEXEC);
      if (t < 0 || sys::move_mount(tree, "", t, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
        fail("attach the idmapped lower of " + s.source);
      ::close(t);
      ::close(tree);
    }
    if (upper.empty()) {
      // Owned by the command's uid as this namespace sees it.
      uid_t u = a_.cmd_uid;
      gid_t g = a_.cmd_gid;
      std::string up = base + "/up";
      if (::mkdir(up.c_str(), 0755) != 0) fail("mkdir " + up);
      std::string opts = "mode=0755,uid=" + std::to_string(u) + ",gid=" + std::to_string(g);
      if (::mount("exguardian-upper", up.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0)
        fail("mount overlay upper tmpfs for " + s.target);
      upper = up + "/upper";
      work = up + "/work";
      if (::mkdir(upper.c_str(), 0755) != 0 || ::mkdir(work.c_str(), 0755) != 0) fail("mkdir overlay dirs for " + s.target);
      if (::chown(upper.c_str(), u, g) != 0 || ::chown(work.c_str(), u, g) != 0) fail("chown overlay dirs");
      if (struct stat st; ::stat(s.source.c_str(), &st) == 0) (void)::chmod(upper.c_str(), st.st_mode & 07777);
    }
    if (::mkdir(sm.path.c_str(), 0755) != 0) fail("mkdir " + sm.path);
    std::string opts = "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work + (a_.host_userns ? ",userxattr" : "");
    if (::mount("exguardian-overlay", sm.path.c_str(), "overlay", MS_NOSUID | MS_NODEV, opts.c_str()) != 0)
      fail("mount overlay for " + s.target);
  }
}

void RuntimeHost::bundle() {
  for (const auto& d : a_.skeleton_dirs)
    if (!mkdir_p(d, 0755)) fail("mkdir " + d);
  for (const auto& f : a_.skeleton_files)
    if (!write_text(f, "", 0644)) fail("create " + f);
  for (const auto& [path, target] : a_.skeleton_links)
    if (::symlink(target.c_str(), path.c_str()) != 0 && errno != EEXIST) fail("symlink " + path);
  if (!write_text(std::string(kBase) + "/bundle/config.json", a_.config_json, 0644)) fail("write config.json");
}

// A socket the runtime connects to, to send a descriptor (the seccomp
// listener, the console's pty master), in the run's private /run.
int RuntimeHost::listen_at(const std::string& path, const char* what) {
  int sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (sock < 0 || path.size() >= sizeof addr.sun_path) fail(what);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(sock, 1) != 0)
    fail("listen on " + path);
  return sock;
}

// The first descriptor of the runtime's connection to SOCK (then closed);
// -1 when the runtime exited first or took longer than 30 s. A SIGCHLD of
// the runtime is left pending for the main loop.
int RuntimeHost::receive_fd(int& sock, pid_t runtime) {
  for (int waited_ms = 0; waited_ms < 30000; waited_ms += 100) {
    pollfd pfd{sock, POLLIN, 0};
    if (::poll(&pfd, 1, 100) > 0) {
      int conn = ::accept4(sock, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) continue;
      std::vector<char> state(1 << 16);
      iovec iov{state.data(), state.size()};
      alignas(cmsghdr) char ctrl[CMSG_SPACE(4 * sizeof(int))];
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = ctrl;
      msg.msg_controllen = sizeof ctrl;
      ssize_t n = ::recvmsg(conn, &msg, MSG_CMSG_CLOEXEC);
      ::close(conn);
      int fd = -1;
      if (n >= 0)
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
          if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            const int* fds = reinterpret_cast<const int*>(CMSG_DATA(c));
            for (size_t k = 0; k < count; ++k) {
              if (fd < 0) fd = fds[k];
              else ::close(fds[k]);
            }
          }
      if (fd >= 0) {
        ::close(sock);
        sock = -1;
        return fd;
      }
      continue;
    }
    // Still running? (Reaped only by the main loop.)
    siginfo_t si{};
    if (::waitid(P_PID, static_cast<id_t>(runtime), &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == runtime) return -1;
  }
  return -1;
}

// runsc's pty (--console-socket): its master goes to the supervisor's relay,
// sized as the caller's terminal (still this process's 0..2) before the
// command can ask. runsc made the slave the controlling terminal of its
// sandbox process, so the host's line discipline sends Ctrl-C, Ctrl-Z and
// SIGWINCH there, and gVisor passes them to the terminal's foreground group.
void RuntimeHost::hand_over_console(pid_t runtime, int runtime_stderr) {
  int master = receive_fd(console_sock_, runtime);
  if (master < 0) {
    ::kill(runtime, SIGKILL);
    char buf[4096];  // runsc's own words first (its stderr is a pipe here, non-blocking)
    for (ssize_t n; (n = ::read(runtime_stderr, buf, sizeof buf)) > 0;)
      if (::write(2, buf, static_cast<size_t>(n)) != n) break;
    fail("runsc did not send its terminal (--console-socket)", 0);
  }
  size_pty_as_caller(master, a_.tty_fds);
  if (!send_fds(a_.sync_fd, process::kMsgPty, &master, 1)) fail("send pty to supervisor");
  ::close(master);
}

[[noreturn]] void RuntimeHost::supervise_runtime() {
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT, SIGALRM, SIGWINCH, SIGCHLD})
    sigaddset(&mask, s);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  int sigfd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);  // woken by the relays too: never block on it
  if (sigfd < 0) fail("signalfd");

  // gVisor imports a regular file given as stdout/stderr with an offset of its
  // own, from 0: `run ... > log` would overwrite the file's start. Such fds go
  // through a pipe that this process appends to the file from. With runsc's
  // console, runsc's own stderr (its error messages) goes through one too:
  // no process of runsc holds the caller's terminal.
  int relay_rd[3] = {-1, -1, -1}, relay_wr[3] = {-1, -1, -1};
  if (a_.relay_regular_files) {
    for (int k = 1; k <= 2; ++k) {
      struct stat st;
      bool console_err = k == 2 && console_sock_ >= 0;
      if (!console_err && (::fstat(k, &st) != 0 || !S_ISREG(st.st_mode))) continue;
      int p[2];
      if (::pipe2(p, O_CLOEXEC) != 0) fail("pipe for stdio");
      relay_rd[k] = p[0];
      ::fcntl(p[0], F_SETFL, O_NONBLOCK);  // a final drain must not wait on a leftover writer
      relay_wr[k] = p[1];
    }
  }
  pid_t rt = ::fork();
  if (rt < 0) fail("fork the runtime");
  if (rt == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (slave_ >= 0)
      for (int k = 0; k < 3; ++k)
        if (a_.tty_fds[k]) ::dup2(slave_, k);
    if (console_sock_ >= 0) {
      // The sandbox gets runsc's pty; runsc's own stdin and stdout are
      // nothing (its stderr is the relay's pipe, below).
      int null = ::open("/dev/null", O_RDWR);
      if (null < 0 || ::dup2(null, 0) < 0 || ::dup2(null, 1) < 0) ::_exit(125);
    }
    for (int k = 1; k <= 2; ++k)
      if (relay_wr[k] >= 0) ::dup2(relay_wr[k], k);
    sigset_t none;
    sigemptyset(&none);
    for (int s = 1; s < NSIG; ++s) std::signal(s, SIG_DFL);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (a_.agent_fd >= 0 && a_.agent_on_stdin) {
      // runsc: the channel is the container's stdin (runsc imports its stdio
      // into the sandbox; it donates no other descriptor). Its stdout goes
      // nowhere: the host's terminal or pipe has no business in the sandbox.
      int null = ::open("/dev/null", O_WRONLY);
      if (::dup2(a_.agent_fd, 0) < 0 || null < 0 || ::dup2(null, 1) < 0) ::_exit(125);
      ::close_range(3, ~0U, 0);
    } else if (a_.agent_fd >= 0) {
      // The runtime passes fd 3 on to the container's pid 1 (--preserve-fds=1).
      if (::dup2(a_.agent_fd, 3) < 0) ::_exit(125);
      ::close_range(4, ~0U, 0);
    } else {
      ::close_range(3, ~0U, 0);
    }
    std::vector<char*> argv;
    for (const auto& s : a_.runtime_argv) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    std::fprintf(stderr, "exguardian: exec %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(125);
  }
  if (slave_ >= 0) ::close(slave_);
  if (a_.agent_fd >= 0) ::close(a_.agent_fd);  // the container's pid 1 has it now
  if (console_sock_ >= 0) hand_over_console(rt, relay_rd[2]);
  // The seccomp listener (SCMP_ACT_NOTIFY rules): the runtime connects to
  // listenerPath once the filter is in place and sends its fd (SCM_RIGHTS)
  // with the container's state; the supervisor answers and logs the refusals
  // as on the process layer. A syscall the filter catches meanwhile waits.
  int listener = -1;
  if (seccomp_sock_ >= 0) {
    listener = receive_fd(seccomp_sock_, rt);
    if (listener < 0) {
      ::kill(rt, SIGKILL);
      fail(a_.seccomp_program_annotation
               ? "crun did not hand over the seccomp listener (a crun older than 0.18 ignores "
                 "run.oci.seccomp_bpf_data, which carries the filter, and the config's own profile then stops it: nothing ran)"
               : "the runtime did not hand over the seccomp listener",
           0);
    }
  }
  if (a_.timer) {
    a_.timer->child_mark("runtime start");  // until its seccomp listener arrived (crun, runc), or its fork (runsc)
    a_.timer->child_done();
  }
  process::send_ready(a_.sync_fd, listener);
  if (listener >= 0) ::close(listener);
  ::close(a_.sync_fd);

  for (int k = 1; k <= 2; ++k)
    if (relay_wr[k] >= 0) ::close(relay_wr[k]);
  auto drain = [&](int k, bool all) {
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(relay_rd[k], buf, sizeof buf);
      if (n <= 0) {
        if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          ::close(relay_rd[k]);
          relay_rd[k] = -1;
        }
        return;
      }
      for (ssize_t off = 0; off < n;) {
        ssize_t w = ::write(k, buf + off, static_cast<size_t>(n - off));
        if (w <= 0) break;
        off += w;
      }
      if (!all) return;
    }
  };
  // On to the container's pid 1 (oci-init), which forwards to the command.
  KillCoalescer kills;
  auto send_kill = [&](int s) {
    std::vector<std::string> k = a_.kill_prefix;
    k.insert(k.end(), {"kill", a_.id, std::to_string(s)});
    pid_t kp = ::fork();
    if (kp == 0) {
      int null = ::open("/dev/null", O_RDWR);
      if (null >= 0) ::dup2(null, 1), ::dup2(null, 2);
      sigset_t empty;
      sigemptyset(&empty);
      sigprocmask(SIG_SETMASK, &empty, nullptr);
      std::vector<char*> argv;
      for (const auto& x : k) argv.push_back(const_cast<char*>(x.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    if (kp > 0) kills.started(s, kp);
  };
  for (;;) {
    pollfd fds[4] = {{sigfd, POLLIN, 0}, {a_.parent_pidfd, POLLIN, 0}, {relay_rd[1], POLLIN, 0}, {relay_rd[2], POLLIN, 0}};
    if (::poll(fds, 4, -1) < 0) continue;
    if (fds[1].revents) ::_exit(137);  // the supervisor is gone: our pid namespace takes everything down
    for (int k = 1; k <= 2; ++k)
      if (relay_rd[k] >= 0 && fds[1 + k].revents) drain(k, false);
    signalfd_siginfo si;
    while (::read(sigfd, &si, sizeof si) == sizeof si) {
      int s = static_cast<int>(si.ssi_signo);
      if (s == SIGCHLD) {
        int status;
        pid_t p;
        while ((p = ::waitpid(-1, &status, WNOHANG)) > 0) {
          if (p != rt) {
            if (int again = kills.ended(p)) send_kill(again);
            continue;
          }
          for (int k = 1; k <= 2; ++k)
            if (relay_rd[k] >= 0) drain(k, true);  // the runtime's children are gone with it
          // A `<runtime> kill` still running would die with our pid namespace
          // half-way, and crun leaves its /tmp/crun.XXXXXX copy behind then:
          // give them a moment to finish (they have nothing left to signal).
          std::vector<pid_t> left = kills.running();
          for (int tries = 0; !left.empty() && tries < 200; ++tries) {
            std::erase_if(left, [](pid_t k) { return ::waitpid(k, nullptr, WNOHANG) != 0; });
            if (!left.empty()) ::usleep(10000);
          }
          if (WIFEXITED(status)) ::_exit(WEXITSTATUS(status));
          ::_exit(128 + WTERMSIG(status));
        }
        continue;
      }
      if (s == SIGWINCH) continue;  // the pty carries it
      if (kills.want(s)) send_kill(s);
    }
  }
}

void RuntimeHost::run() {
  auto mark = [this](const char* step) {
    if (a_.timer) a_.timer->child_mark(step);
  };
  mounts();
  // Staged before the seal: an overlay's upper (/var/tmp/exguardian-*, the workspace's
  // discard and overlay modes) lies in a tree the seal makes read-only whenever something
  // is mounted below it (podman's storage under /var): mounted first, the overlay keeps
  // the writable mount it was given ("upper is read-only": EINVAL otherwise).
  stage();
  seal();
  mark("host mounts");
  network();
  if (a_.want_pty && a_.console_socket.empty()) pty();
  mark("network");
  bundle();
  host_binds();
  if (!a_.seccomp_socket.empty()) seccomp_sock_ = listen_at(a_.seccomp_socket, "seccomp listener socket");
  if (!a_.console_socket.empty()) console_sock_ = listen_at(a_.console_socket, "console socket");
  mark("bundle");
  // The runtime starts inside the sandbox's cgroup only (v1: this process
  // moves itself in now; process/spawn.hpp).
  if (int e = process::await_in_cgroup(a_.sync_fd, a_.timer)) {
    if (e < 0) ::_exit(125);
    fail("move into the sandbox's cgroup", e);
  }
  mark("cgroup wait");
  supervise_runtime();
}

[[noreturn]] void host_main(const HostArgs& a) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (!process::await_go(a.sync_fd, nullptr)) ::_exit(125);
  // The invoker's environment (a secret's source variable among it) stays
  // out of the runtime and everything it starts; the container's own
  // environment is the Plan's, in config.json.
  for (char** e = environ; e && *e; ++e) ::explicit_bzero(*e, std::strlen(*e));
  // A fixed array, not clearenv()/setenv(): those take glibc's environment
  // lock, which another thread of a threaded parent may have held at clone.
  static char path_entry[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  static char* runtime_env[] = {path_entry, nullptr};
  environ = runtime_env;
  // Invoked as root, our ids are still the host's 0 (unmapped here) until we
  // take the namespace's 0 = the command's host uid; files we create need it.
  if (a.host_userns && (sys::setresgid_child(0, 0, 0) != 0 || sys::setresuid_child(0, 0, 0) != 0)) process::die(a.sync_fd, "take uid 0 of the runtime host's user namespace", errno);
  // A change of ids clears "dumpable", which would hide /proc/1/ns/net from
  // the runtime, and the parent-death signal: set both again.
  if (a.host_userns) {
    ::prctl(PR_SET_DUMPABLE, 1);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    pollfd gone{a.parent_pidfd, POLLIN, 0};
    if (::poll(&gone, 1, 0) != 0) ::_exit(125);
  }
  pollfd pfd{a.parent_pidfd, POLLIN, 0};
  if (::poll(&pfd, 1, 0) != 0) ::_exit(125);
  if (a.timer) a.timer->child_mark("host namespaces");
  RuntimeHost h(a);
  h.run();
}

// Whether a mount of the spec binds a file (its mount point must be a file):
// the files staged for it under kBase/f/ (not there yet), or a host path that is
// not a directory; other paths under kBase are directories.
bool binds_a_file(const nlohmann::json& m) {
  if (m.value("type", "") != "bind") return false;
  std::string src = m.value("source", "");
  if (within(src, std::string(kBase) + "/f")) return true;
  struct stat st;
  return !within(src, kBase) && ::stat(src.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
}

// One directory of --rootfs DIR (REL, "" for its top) in the skeleton: each
// directory and file bound read-only, symlinks copied; a name in EXPAND becomes
// a skeleton directory whose entries are done the same way (so a mount point
// missing in DIR can be made there without writing to DIR); a name in COVERED
// is only a mount point of the spec. Adds the names done to DONE.
Result<void> rootfs_entries(const std::string& dir, const std::string& rel, const std::string& skel,
                            const std::set<std::string>& covered, const std::set<std::string>& expand,
                            nlohmann::json& base, HostArgs& a, std::set<std::string>& done) {
  DIR* d = ::opendir((dir + rel).c_str());
  if (!d) return fail(Error::sys("--rootfs " + dir + rel));
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    std::string path = rel + "/" + n, src = dir + path;
    struct stat st;
    if (::lstat(src.c_str(), &st) != 0) continue;
    done.insert(path);
    if (S_ISLNK(st.st_mode)) {
      char buf[4096];
      ssize_t len = ::readlink(src.c_str(), buf, sizeof buf - 1);
      if (len > 0) a.skeleton_links.emplace_back(skel + path, std::string(buf, static_cast<size_t>(len)));
      continue;
    }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) continue;
    (S_ISDIR(st.st_mode) ? a.skeleton_dirs : a.skeleton_files).push_back(skel + path);
    if (covered.count(path)) continue;
    if (S_ISDIR(st.st_mode) && expand.count(path)) {
      if (auto r = rootfs_entries(dir, path, skel, covered, expand, base, a, done); !r) return r;
      continue;
    }
    nlohmann::json o = {"rbind", "ro", "nosuid", "nodev"};
    base.push_back({{"destination", path}, {"type", "bind"}, {"source", src}, {"options", o}});
  }
  return {};
}

// --rootfs DIR: its top level in the skeleton (directories and files bound
// read-only, symlinks copied) ahead of the Plan's mounts; a top-level name the
// spec mounts something else on (tmpfs /tmp, /proc, ...) is only a mount point.
// A mount point missing in DIR one level down (/etc/resolv.conf, /etc/hosts of a
// minimal root) turns its directory into a skeleton of DIR's entries with the
// mount point made there; deeper ones must exist in DIR (DIR is never written).
// Returns the top-level names done.
Result<std::set<std::string>> rootfs_base(const std::string& dir, nlohmann::json& spec, const std::string& skel,
                                          HostArgs& a) {
  std::set<std::string> covered, expand, all_done;
  for (const auto& m : spec["mounts"]) {
    std::string dest = m.value("destination", "");
    if (dest.size() > 1 && dest.find('/', 1) == std::string::npos && m.value("type", "") != "bind") covered.insert(dest);
  }
  std::vector<std::pair<std::string, bool>> made;  // mount points made in expanded directories (path, is a file)
  for (const auto& m : spec["mounts"]) {
    std::string dest = m.value("destination", "");
    if (dest.size() < 2 || dest[0] != '/') continue;
    std::string top = dest.substr(0, dest.find('/', 1));
    struct stat st;
    if (top == dest || covered.count(top) || ::lstat((dir + top).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    // Below a directory bound from DIR: it must exist there, unless another
    // mount of the spec (made first) holds it.
    bool under_other = false;
    for (const auto& o : spec["mounts"]) {
      std::string od = o.value("destination", "");
      if (od != dest && within(dest, od)) under_other = true;
    }
    if (under_other || ::lstat((dir + dest).c_str(), &st) == 0) continue;
    if (dest.rfind('/') != top.size())
      return fail(Error::msg("--rootfs " + dir, dest + " does not exist there (a mount point of the sandbox: create it)"));
    expand.insert(top);
    made.emplace_back(dest, binds_a_file(m));
  }
  nlohmann::json base = nlohmann::json::array();
  if (auto r = rootfs_entries(dir, "", skel, covered, expand, base, a, all_done); !r) return fail(r.error());
  for (const auto& [path, file] : made) (file ? a.skeleton_files : a.skeleton_dirs).push_back(skel + path);
  for (auto& m : spec["mounts"]) base.push_back(std::move(m));
  spec["mounts"] = std::move(base);
  std::set<std::string> done;
  for (const auto& p : all_done)
    if (p.find('/', 1) == std::string::npos) done.insert(p);
  return done;
}

// make_spec gives the Plan's content; what is left here are facts of how this
// layer runs it: ids as the runtime host sees them, our pid 1 (bound from
// PID1_SOURCE; with the agent it serves its channel on fd 3), and gVisor's identity.
void adjust_spec(nlohmann::json& spec, const plan::Plan& plan, const RuntimeChoice& rt, const HostIds& ids,
                 const std::string& pid1_source, bool agent, bool pid1_seccomp) {
  auto& linux = spec["linux"];
  if (ids.userns && linux.contains("uidMappings")) {
    // crun rootless: the container's user namespace maps the command's uid
    // onto the runtime host's view of it.
    for (auto& m : linux["uidMappings"]) m["hostID"] = ids.cmd_uid;
    for (auto& m : linux["gidMappings"]) m["hostID"] = ids.cmd_gid;
  }
  if (rt.runtime == Runtime::Runsc) {
    if (!ids.two_ids) {
      // uid 0 of gVisor's own kernel with empty capability sets: the files the
      // gofer serves appear owned by 0 (the runtime host's 0 = the command's
      // host uid), so the command owns exactly what it owns on the host.
      spec["process"]["user"] = {{"uid", 0}, {"gid", 0}};
      for (auto& m : spec["mounts"]) {
        if (m.value("type", "") != "tmpfs" || !m.contains("options")) continue;
        for (auto& o : m["options"]) {
          std::string v = o.get<std::string>();
          if (v.rfind("uid=", 0) == 0) o = "uid=0";
          if (v.rfind("gid=", 0) == 0) o = "gid=0";
        }
      }
    }
    linux.erase("resources");  // the sandbox's cgroup is ours (--ignore-cgroups)
    // gVisor's own threads count in our cgroup's pids limit (given 1024 of
    // headroom in launch()), and hitting it there ends the whole sandbox: the
    // command's limit is RLIMIT_NPROC inside gVisor (a clean EAGAIN). Its uid
    // is its own there unless gVisor's 0 is used (no subuid range), and an
    // RLIMIT_NPROC binds uid 0 without capabilities too.
    if (plan.limits.pids) {
      auto& rl = spec["process"]["rlimits"];
      if (!rl.is_array()) rl = nlohmann::json::array();
      rl.push_back({{"type", "RLIMIT_NPROC"}, {"soft", *plan.limits.pids}, {"hard", *plan.limits.pids}});
    }
  }
  // Our static pid 1: signals, reaping, the command's session and terminal.
  // Static, so it runs on any --rootfs (a busybox root has no libc) and
  // starts fast inside gVisor (every syscall of a dynamic loader traps there).
  // With the agent (LaunchOptions::agent), pid 1 serves its channel on fd 3 instead.
  spec["mounts"].push_back({{"destination", kPid1}, {"type", "bind"}, {"source", pid1_source},
                            {"options", {"bind", "ro", "nosuid", "nodev"}}});
  // runsc has no --preserve-fds: there the channel arrives as stdin (launch()).
  const char* channel_fd = rt.runtime == Runtime::Runsc ? "0" : "3";
  nlohmann::json args = nlohmann::json::array({kPid1});
  if (pid1_seccomp) args.push_back("--seccomp");  // SpecOptions::seccomp_by_pid1
  // gVisor's kernel makes pid 1 with every signal at its default (checked:
  // runsc started with SIGUSR1 ignored, its pid 1 died of SIGUSR1), so pid 1
  // skips resetting them for the command: 64 calls, each a trap there.
  if (rt.runtime == Runtime::Runsc) args.push_back("--fresh-signals");
  if (agent) {
    args.push_back("--agent");
    args.push_back(channel_fd);
  } else {
    args.push_back("--");
    for (const auto& a : plan.argv) args.push_back(a);
  }
  spec["process"]["args"] = args;
}

}  // namespace

std::vector<HostBind> take_host_binds(nlohmann::json& mounts, const std::string& skel, const std::string& rootfs,
                                      const std::function<SourceKind(const std::string&)>& kind_of) {
  std::vector<HostBind> out;
  std::vector<std::string> kept_dests;
  nlohmann::json kept = nlohmann::json::array();
  auto overlaps_kept = [&](const std::string& dest) {
    for (const auto& k : kept_dests)
      if (within(dest, k) || within(k, dest)) return true;
    return false;
  };
  for (auto& m : mounts) {
    std::string dest = m.value("destination", ""), src = m.value("source", "");
    bool ro = false, rbind = false, noexec = false;
    for (const auto& o : m.value("options", nlohmann::json::array())) {
      ro = ro || o == "ro";
      rbind = rbind || o == "rbind";
      noexec = noexec || o == "noexec";
    }
    bool take = false, recursive = rbind;
    if (m.value("type", "") == "bind" && ro && dest.size() > 1 && dest[0] == '/' && !overlaps_kept(dest)) {
      SourceKind kind = kind_of(src);
      bool top = dest.find('/', 1) == std::string::npos;
      bool root_dir = top && src == (rootfs.empty() ? dest : rootfs + dest);  // the root's own: always whole
      if (kind == SourceKind::Dir && root_dir) recursive = true;
      take = kind == SourceKind::File || (kind == SourceKind::Dir && recursive);
    }
    if (take) {
      out.push_back({src, skel + dest, recursive, noexec});
    } else {
      kept_dests.push_back(dest);
      kept.push_back(std::move(m));
    }
  }
  mounts = std::move(kept);
  return out;
}

std::optional<unsigned long> subordinate_start(const std::string& text, uid_t uid, const std::string& name) {
  std::string num = std::to_string(uid);
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    auto c1 = line.find(':');
    if (c1 == std::string::npos) continue;
    auto c2 = line.find(':', c1 + 1);
    if (c2 == std::string::npos) continue;
    std::string who = line.substr(0, c1);
    if (who != num && (name.empty() || who != name)) continue;
    std::string a = line.substr(c1 + 1, c2 - c1 - 1), b = line.substr(c2 + 1);
    auto digits = [](const std::string& x) { return !x.empty() && x.size() < 11 && x.find_first_not_of("0123456789") == std::string::npos; };
    if (!digits(a) || !digits(b)) continue;
    unsigned long start = std::stoul(a), count = std::stoul(b);
    if (count >= 1 && start > 0 && start + count <= 0xffffffffUL) return start;
  }
  return std::nullopt;
}

namespace {

// The least --memory a sandbox on these layers starts under: the runtime host,
// the runtime (crun, runc; runsc's sentry and gofer) and the container's pid 1
// are all charged to the sandbox's cgroup. Measured here (cgroup v1, its peak
// usage): crun with a shell 1.6 MB, gVisor with python3 28 MB; the minimums
// leave room for a v2 host, where the whole setup is charged.
constexpr uint64_t kMinMemoryContainer = 32ull << 20;
constexpr uint64_t kMinMemoryGvisor = 64ull << 20;

std::string slurp(const char* path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// How the runtime host's user namespace maps ids. gVisor: 0 onto an
// unprivileged host uid that is not the command's (root: a second high unused
// uid; a user: the first of their /etc/subuid range, through newuidmap), and
// the command's uid onto itself, so the command runs in gVisor as its own
// non-root uid and runsc's gofer (root of this namespace: CAP_CHOWN and
// CAP_DAC_OVERRIDE over exactly those two ids) creates files as it. Without a
// subuid range: 0 onto the caller, the command as gVisor's uid 0 (layer.hpp).
bool id_mapped_here(const std::string& map, unsigned long id) {
  std::istringstream in(map);
  unsigned long inside = 0, outside = 0, count = 0;
  while (in >> inside >> outside >> count)
    if (id >= inside && id - inside < count) return true;
  return false;
}

HostIds decide_host_ids(const plan::Plan& plan, const RuntimeChoice& rt, bool gvisor_root) {
  HostIds h;
  const auto& id = plan.identity;
  h.cmd_uid = id.host_uid;
  h.cmd_gid = id.host_gid;
  h.userns = !id.invoked_as_root || rt.runtime == Runtime::Runsc;
  if (!h.userns) return h;
  if (rt.runtime == Runtime::Runsc && gvisor_root) {
    // One id: gVisor's 0 is the command's host uid, as in the fallback below.
    h.why = "gVisor: the command runs as gVisor's uid 0 (--gvisor-root; no capabilities), runsc as uid " +
            std::to_string(id.host_uid) + " on the host";
  } else if (rt.runtime == Runtime::Runsc) {
    if (id.invoked_as_root) {
      h.two_ids = true;
      h.root_uid = 1400000000u + (id.host_uid % (1u << 20));  // below the synthetic range, above any allocator's
      h.root_gid = h.root_uid;
      h.why = "gVisor: runsc runs as uid " + std::to_string(h.root_uid) + " on the host, the command as uid " +
              std::to_string(id.host_uid);
    } else {
      passwd* pw = ::getpwuid(::getuid());
      std::string name = pw ? pw->pw_name : "";
      auto su = subordinate_start(slurp("/etc/subuid"), ::getuid(), name);
      auto sg = subordinate_start(slurp("/etc/subgid"), ::getuid(), name);
      bool tools = ::access("/usr/bin/newuidmap", X_OK) == 0 && ::access("/usr/bin/newgidmap", X_OK) == 0;
      // newuidmap is set-uid: it cannot help under no_new_privs, nor inside a
      // user namespace that does not map the subordinate range itself.
      bool usable = tools && ::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 0 && su && sg &&
                    id_mapped_here(slurp("/proc/self/uid_map"), *su) && id_mapped_here(slurp("/proc/self/gid_map"), *sg);
      // The gofer's second uid writes only entries of the caller's own group
      // (writable_ids.hpp): a writable tree with any other keeps gVisor's uid 0.
      std::optional<std::string> other_group;
      if (usable) {
        std::vector<std::string> roots;
        for (const auto& s : plan.steps)
          if (s.kind == plan::StepKind::BindRw) roots.push_back(s.source);  // host paths (--workspace-at moves the target)
        other_group = entry_of_other_group(roots, id.host_gid, 20000);
      }
      if (usable && !other_group) {
        h.two_ids = true;
        h.with_newuidmap = true;
        h.root_uid = static_cast<uid_t>(*su);
        h.root_gid = static_cast<gid_t>(*sg);
        h.why = "gVisor: runsc runs as subordinate uid " + std::to_string(h.root_uid) + ", the command as uid " +
                std::to_string(id.host_uid);
      } else {
        h.why = std::string("gVisor: ") +
                (other_group ? "a writable entry is not of your group (" + *other_group +
                                   "), which runsc's second uid could not write"
                 : tools && su && sg ? "the subordinate uid range cannot be mapped from here (no_new_privs, or a user "
                                       "namespace without it)"
                                     : "no subordinate uid range (/etc/subuid) or newuidmap") +
                ": the command runs as gVisor's uid 0 (no capabilities), runsc as uid " + std::to_string(id.host_uid);
      }
    }
  }
  if (!h.two_ids) {
    h.root_uid = id.host_uid;
    h.root_gid = id.host_gid;
    h.cmd_uid = 0;
    h.cmd_gid = 0;
  }
  return h;
}

Result<void> run_idmap_tool(const std::vector<std::string>& argv) {
  pid_t p = ::fork();
  if (p < 0) return fail(Error::sys("fork " + argv[0]));
  if (p == 0) {
    int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) ::dup2(null, 0), ::dup2(null, 1);
    std::vector<char*> a;
    for (const auto& x : argv) a.push_back(const_cast<char*>(x.c_str()));
    a.push_back(nullptr);
    ::execv(a[0], a.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(p, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return fail(Error::msg(argv[0], "could not map the runtime host's ids"));
  return {};
}

Result<void> write_text_file(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return fail(Error::sys("open " + path));
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  int err = errno;
  ::close(fd);
  if (!ok) return fail(Error::sys("write " + path, err));
  return {};
}

Result<void> map_host_ids(pid_t pid, const HostIds& h) {
  std::string base = "/proc/" + std::to_string(pid);
  if (h.with_newuidmap) {
    if (auto r = run_idmap_tool({"/usr/bin/newuidmap", std::to_string(pid), "0", std::to_string(h.root_uid), "1",
                                 std::to_string(h.cmd_uid), std::to_string(h.cmd_uid), "1"});
        !r)
      return r;
    return run_idmap_tool({"/usr/bin/newgidmap", std::to_string(pid), "0", std::to_string(h.root_gid), "1",
                           std::to_string(h.cmd_gid), std::to_string(h.cmd_gid), "1"});
  }
  if (auto r = write_text_file(base + "/setgroups", "deny"); !r) return r;
  std::string um = "0 " + std::to_string(h.root_uid) + " 1\n", gm = "0 " + std::to_string(h.root_gid) + " 1\n";
  if (h.two_ids) {
    um += std::to_string(h.cmd_uid) + " " + std::to_string(h.cmd_uid) + " 1\n";
    // Root only (a user maps through newgidmap above): every group but runsc's
    // onto itself, so that runsc's gofer may write the command's files of any
    // group (its CAP_DAC_OVERRIDE covers only inodes whose group is mapped).
    gm = process::id_map_lines(0, h.root_gid, true);
  }
  if (auto r = write_text_file(base + "/uid_map", um); !r) return r;
  return write_text_file(base + "/gid_map", gm);
}


// The user namespace of an idmapped mount for gVisor as root: on-disk owner
// <-> the command's uid, and runsc's own uid onto itself, so the gofer (that
// uid) can create a file, which it then hands to the command's uid (chown).
Result<UniqueFd> gvisor_idmap_userns(uid_t from_uid, gid_t from_gid, const HostIds& h) {
  int sync[2];
  if (::pipe2(sync, O_CLOEXEC) != 0) return fail(Error::sys("pipe"));
  UniqueFd rd(sync[0]), wr(sync[1]);
  pid_t pid = static_cast<pid_t>(sys::clone3_fork(CLONE_NEWUSER, nullptr));
  if (pid < 0) return fail(Error::sys("clone a user namespace for an idmapped mount"));
  if (pid == 0) {
    char c;
    wr.reset();
    (void)::read(rd.get(), &c, 1);
    ::_exit(0);
  }
  rd.reset();
  std::string base = "/proc/" + std::to_string(pid);
  auto line = [](unsigned a, unsigned b) { return std::to_string(a) + " " + std::to_string(b) + " 1\n"; };
  Result<void> r = write_text_file(base + "/setgroups", "deny");
  if (r && from_uid != h.root_uid) r = write_text_file(base + "/uid_map", line(from_uid, h.cmd_uid) + line(h.root_uid, h.root_uid));
  else if (r) r = write_text_file(base + "/uid_map", line(from_uid, h.cmd_uid));
  // Groups: the owner's onto the command's, every other one (runsc's own
  // included) onto itself, as the runtime host's namespace maps them.
  if (r) r = write_text_file(base + "/gid_map", process::id_map_lines(from_gid, h.cmd_gid, true));
  UniqueFd ns(::open((base + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
  int saved = errno;
  wr.reset();
  ::waitpid(pid, nullptr, 0);
  if (!r) return fail(r.error());
  if (!ns) return fail(Error::sys("open idmap user namespace", saved));
  return ns;
}
}  // namespace

void after_run(const plan::Plan& plan, const LayerOptions& opt) {
  if (opt.runtime.runtime != Runtime::Runc) return;
  // runc makes "exg-ID" (cgroupsPath) below our cgroup in every hierarchy and
  // removes it when it exits; killed (timeout, kill -9 of exguardian) it
  // cannot. Those directories are empty once the sandbox is gone.
  const std::string name = "exg-" + plan.sandbox_id;
  std::set<std::string> paths;
  for (const auto& c : util::read_proc_cgroup()) paths.insert(c.path == "/" ? "" : c.path);
  for (const auto& m : util::read_mountinfo()) {
    if (m.fstype != "cgroup" && m.fstype != "cgroup2") continue;
    for (const auto& p : paths) {
      std::string base = m.mount_point + p;
      (void)::rmdir((base + "/" + name).c_str());
      if (DIR* d = ::opendir((base + "/exguardian").c_str())) {
        while (dirent* e = ::readdir(d))
          if (std::string(e->d_name).starts_with("exg-")) (void)::rmdir((base + "/exguardian/" + e->d_name + "/" + name).c_str());
        ::closedir(d);
      }
    }
  }
}

void read_host(LayerOptions& opt) {
  opt.cgroups = decide_cgroup_view(util::read_proc_text("/proc/self/mountinfo"));
  opt.pid1_installed = pid1::installed_copy(pid1::exe_dir());
}

layer::Enforcement OciLayer::enforces(const plan::Plan& plan) const {
  const bool runsc = opt_.runtime.runtime == Runtime::Runsc;
  layer::Enforcement e;
  e.landlock = false;
  e.landlock_text = "not used on the " + std::string(layer::name(opt_.kind)) +
                    " layer (the runtime's mounts and user namespace are the walls)";
  e.seccomp = plan.seccomp;
  e.seccomp_by = !plan.seccomp ? std::string() : runsc ? std::string(pid1::name()) : std::string(to_string(opt_.runtime.runtime));
  e.seccomp_notify = plan.seccomp && !runsc;  // runsc has no seccomp notify
  e.seccomp_text = !plan.seccomp ? "OFF (--unsafe-no-seccomp)"
                   : runsc ? "ExGuardian's filter (the process layer's rules in errno form, compiled at build time), "
                             "installed by pid 1 (exguardian-init --seccomp) inside gVisor before anything else runs; "
                             "refusals return their errno there (gVisor has no seccomp notify), not reported here"
                   : opt_.runtime.runtime == Runtime::Crun
                       ? "ExGuardian's filter (the process layer's program, compiled at build time), installed by crun, "
                         "refusals reported to the supervisor"
                       : "ExGuardian's profile in config.json, applied by the runtime, refusals reported to the supervisor";
  return e;
}

std::vector<std::string> describe_layer(const plan::Plan& plan, const LayerOptions& opt) {
  const RuntimeChoice& rt = opt.runtime;
  std::vector<std::string> out;
  out.push_back("layer: " + std::string(layer::name(opt.kind)) + " via " + rt.describe());
  for (const auto& n : rt.notes) out.push_back("  runtime: " + n);
  out.push_back("  root: " + (opt.rootfs.empty() ? std::string("the host's, read-only") : opt.rootfs + ", read-only (never written to)"));
  out.push_back("  cgroups: " + opt.cgroups.why + "; the container stays in the sandbox's cgroup" +
                (rt.runtime == Runtime::Runsc ? " (runsc --ignore-cgroups)" : ""));
  const bool rootless = !plan.identity.invoked_as_root;
  HostIds ids = decide_host_ids(plan, rt, opt.gvisor_root);
  if (rt.runtime == Runtime::Runsc) out.push_back("  identity: " + ids.why);
  else if (rootless) out.push_back("  identity: rootless crun: its user namespace maps only the command's uid");
  else out.push_back(std::string("  identity: ") + to_string(rt.runtime) + " as root sets the mounts up, the command runs as uid " +
                     std::to_string(plan.identity.host_uid));
  out.push_back(std::string("  seccomp: ") + (!plan.seccomp ? "OFF (--unsafe-no-seccomp)"
                                             : rt.runtime == Runtime::Runsc ? "the process layer's rules (errno form, compiled at build time) "
                                                                              "and a shield of pid 1 against signals, installed by pid 1 "
                                                                              "inside gVisor (--seccomp); refusals not reported (no seccomp notify)"
                                             : rt.runtime == Runtime::Crun ? "the process layer's program (compiled at build time), "
                                                                             "installed by crun (run.oci.seccomp_bpf_data); refusals "
                                                                             "reported to the supervisor (listenerPath)"
                                                                           : "the profile in config.json, applied by the runtime; refusals "
                                                                             "reported to the supervisor (listenerPath)"));
  if (rt.runtime == Runtime::Runsc)
    out.push_back("  network: runsc --network=host inside the sandbox's namespace (loopback and the proxy only)");
  const auto& installed = opt.pid1_installed;
  out.push_back("  pid 1: " + std::string(pid1::name()) + " (static) at " + kPid1 + ", " +
                (installed ? "bound from the installed " + *installed
                           : std::string("embedded in exguardian, written to the run's private tmpfs")));
  return out;
}

namespace {

// One launch of the container or gVisor layer, in named steps (launch() lists
// them in order): what the runtime host is given (HostArgs) and the OCI spec
// it writes, all decided here in the supervisor; nothing runs before the last
// step, spawn(). A step that fails ends the launch with its error.
struct Launch {
  Launch(const plan::Plan& plan, const layer::LaunchOptions& lo, const LayerOptions& opt)
      : plan(plan), lo(lo), opt(opt), rt(opt.runtime), rootless(!plan.identity.invoked_as_root),
        ids(decide_host_ids(plan, rt, opt.gvisor_root)), host_userns(ids.userns),
        timer(lo.timer ? *lo.timer : untimed) {}

  Result<void> check_fits();
  Result<void> host_args();
  Result<void> spec_options();
  Result<void> generated_files();
  Result<void> check_no_groups();
  Result<void> staged_mounts();
  Result<void> seal_submounts();
  Result<void> write_spec();
  Result<void> skeleton_root();
  Result<void> root_binds();
  Result<void> runtime_command();
  Result<layer::Sandbox> spawn();

  const plan::Plan& plan;
  const layer::LaunchOptions& lo;
  const LayerOptions& opt;
  const RuntimeChoice& rt;
  const bool rootless;
  // The runtime host has a user namespace when the caller is not root, and
  // always for gVisor: then runsc, its sentry and its gofer hold nothing
  // privileged on the host (decide_host_ids).
  const HostIds ids;
  const bool host_userns;
  StepTimer untimed;
  StepTimer& timer;
  HostArgs a;
  SpecOptions so;
  std::map<size_t, UniqueFd> idmapped;  // (closed when the launch ends: the runtime host has its copies)
  std::map<std::pair<uid_t, gid_t>, UniqueFd> userns;
  nlohmann::json spec;
};

// What this layer cannot run.
Result<void> Launch::check_fits() {
  if (rt.runtime == Runtime::Runc && rootless)
    return fail(Error::msg("layer container with runc",
                           "runc needs root here (rootless runc maps only root into the container, and the command "
                           "must not run as root); use crun"));
  for (const auto& s : plan.steps)
    if (!s.source.empty() && s.kind != plan::StepKind::Symlink && within(s.source, kRunTmpfs))
      return fail(Error::msg("layer " + std::string(to_string(rt.runtime)),
                             "a mount source under /run (" + s.source + ") is not supported on container layers"));
  return {};
}

Result<void> Launch::host_args() {
  a.plan = &plan;
  a.timer = lo.timer;
  a.host_userns = host_userns;
  a.cmd_uid = ids.cmd_uid;
  a.cmd_gid = ids.cmd_gid;
  a.id = "exg-" + plan.sandbox_id;
  a.relay_regular_files = rt.runtime == Runtime::Runsc;
  a.fresh_sysfs = host_userns && rt.runtime == Runtime::Crun;
  for (int k = 0; k < 3; ++k) a.tty_fds[k] = lo.tty_fds[k];
  a.want_pty = lo.tty_fds[0] || lo.tty_fds[1] || lo.tty_fds[2];
  // runsc imports its stdio as plain host files unless process.terminal is
  // on, and then all three are one terminal: only when the caller's 0..2 all
  // are (a pipe among them, `run ... | less`, keeps the pty's plain files).
  if (rt.runtime == Runtime::Runsc && lo.tty_fds[0] && lo.tty_fds[1] && lo.tty_fds[2] && !lo.agent)
    a.console_socket = std::string(kBase) + "/console.sock";
  a.cgroups = opt.cgroups;
  return {};
}

Result<void> Launch::spec_options() {
  so.runtime = rt.runtime;
  so.rootfs = opt.rootfs.empty() ? "/" : opt.rootfs;
  so.netns_path = "/proc/1/ns/net";
  // crun rootless: the container's own user namespace with the command's uid
  // alone mapped. As root, crun and runc set the mounts up as root and run the
  // command as its uid directly (a user namespace there would make the mount
  // setup the command's uid's, which cannot reach root's 0700 directories);
  // runsc: decide_host_ids.
  so.rootless = rootless && rt.runtime == Runtime::Crun;
  if (rt.runtime == Runtime::Runc) so.cgroups_path = "exg-" + plan.sandbox_id;  // relative: nested in ours
  // crun and runc: process.terminal stays off; the runtime host's pty is the
  // command's controlling terminal through oci-init (job control works).
  // Tried: with process.terminal crun's relay breaks Ctrl-C/Ctrl-Z.
  // runsc: on with its console socket (host_args). Given a pty slave as its
  // stdio instead, runsc makes it no controlling terminal of its sandbox
  // process: Ctrl-C and SIGWINCH then reach nothing (runsc 20221219). gVisor
  // puts pid 1's group in the terminal's foreground; oci-init hands it to
  // the command.
  so.terminal = !a.console_socket.empty();
  if (plan.seccomp && rt.runtime != Runtime::Runsc) {
    // crun and runc hand the notify fd over (runsc has no seccomp notify: its
    // refusals are EPERM inside gVisor, not reported).
    a.seccomp_socket = std::string(kBase) + "/seccomp.sock";
    so.seccomp_listener_path = a.seccomp_socket;
    so.seccomp_prebuilt_program = rt.runtime == Runtime::Crun;  // the process layer's program, not ~200 rules to compile
    a.seccomp_program_annotation = so.seccomp_prebuilt_program;
  }
  // runsc would compile the profile's rules at every start: our pid 1
  // installs the same rules, compiled at build time, instead.
  so.seccomp_by_pid1 = plan.seccomp && rt.runtime == Runtime::Runsc;
  return {};
}

// Generated files. The trust anchor (the sandbox CA's certificate; its key
// stays in the supervisor) is made now: the runtime host is forked after
// this and keeps a copy of the supervisor's memory only until it executes
// the runtime, in namespaces the command cannot reach.
Result<void> Launch::generated_files() {
  std::string anchor;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const auto& s = plan.steps[i];
    if (s.kind != plan::StepKind::File && s.kind != plan::StepKind::ResolvConf) continue;
    if (s.in_upper) continue;  // (in its tree's overlay, put there by the supervisor)
    std::string content = s.kind == plan::StepKind::ResolvConf ? std::string(plan::kResolverConf) : s.content;
    if (s.kind == plan::StepKind::File && s.trust_bundle) {
      if (anchor.empty()) {
        if (!lo.trust_anchor) return fail(Error::msg("trust bundle " + s.target, "no certificate authority was made"));
        auto pem = lo.trust_anchor();
        if (!pem) return fail(pem.error());
        anchor = std::move(*pem);
      }
      content += anchor;
    }
    std::string path = std::string(kBase) + "/f/" + std::to_string(i);
    a.files.emplace_back(path, std::move(content));
    so.source_override[s.target] = path;
  }
  // The container's own boot id (util/boot_id.hpp), bound over its /proc's by
  // crun. runc refuses any mount under /proc but a fixed few (its checkProcMount:
  // the container does not start), and gVisor's kernel has no boot_id file to
  // bind over: those show the host's (runc) or none (gVisor).
  if (rt.runtime == Runtime::Crun) {
    auto boot = new_boot_id();
    if (!boot) return fail(Error::sys("getrandom (the container's boot id)"));
    std::string path = std::string(kBase) + "/f/boot_id";
    a.files.emplace_back(path, std::move(*boot));
    so.source_override[kBootIdKnob] = path;
  }
  return {};
}

Result<void> Launch::check_no_groups() {
  if (plan.identity.invoked_as_root && ::getgroups(0, nullptr) != 0)  // dropped by the front end (cli/host_setup.hpp)
    return fail(Error::msg("setup", "the supervisor still holds supplementary groups (they would follow the command in)"));
  return {};
}

// Staged mounts: idmapped binds (root with a workspace owned by someone
// else) and overlays; the spec binds them instead of the host source.
Result<void> Launch::staged_mounts() {
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const auto& s = plan.steps[i];
    bool overlay = s.kind == plan::StepKind::Overlay;
    bool idm = s.idmap && plan.identity.invoked_as_root &&
               (s.kind == plan::StepKind::BindRw || s.kind == plan::StepKind::BindRo || overlay);
    if (!overlay && !idm) continue;
    if (idm) {
      auto key = std::make_pair(s.idmap_from_uid, s.idmap_from_gid);
      if (!userns.count(key)) {
        auto ns = ids.two_ids ? gvisor_idmap_userns(s.idmap_from_uid, s.idmap_from_gid, ids)
                              : process::idmap_userns(s.idmap_from_uid, s.idmap_from_gid, plan.identity.host_uid,
                                                      plan.identity.host_gid);
        if (!ns) return fail(ns.error());
        userns.emplace(key, std::move(*ns));
      }
      auto tree = process::idmapped_tree(s, userns.at(key).get());
      if (!tree) return fail(tree.error());
      idmapped.emplace(i, UniqueFd(*tree));
      a.idmapped[i] = *tree;
    }
    StagedMount sm;
    sm.step = i;
    sm.kind = overlay ? StagedMount::Overlay : StagedMount::Idmapped;
    sm.path = staged(i);
    sm.is_dir = overlay || s.is_dir;
    a.staged.push_back(sm);
    so.source_override[s.source] = sm.path;
  }
  return {};
}

// Read-only binds with submounts are sealed whole by the runtime host
// (RuntimeHost::seal), so the spec needs no bind per submount.
Result<void> Launch::seal_submounts() {
  if (!host_userns) return {};
  auto points = read_mount_points();
  std::vector<std::string> rw;
  for (const auto& s : plan.steps)
    if (s.kind == plan::StepKind::BindRw || s.kind == plan::StepKind::Overlay || s.kind == plan::StepKind::Pin)
      rw.push_back(s.source.empty() ? s.target : s.source);
  for (const auto& s : plan.steps) {
    if (s.kind != plan::StepKind::BindRo || !s.is_dir || s.source.empty() || s.idmap) continue;
    bool has_sub = std::any_of(points.begin(), points.end(), [&](const std::string& m) { return m != s.source && within(m, s.source); });
    bool holds_rw = std::any_of(rw.begin(), rw.end(), [&](const std::string& r) { return within(r, s.source) || within(s.source, r); });
    if (has_sub && holds_rw)
      return fail(Error::msg("layer " + std::string(to_string(rt.runtime)),
                             s.source + " has mounts below it and a writable path inside: not supported on this layer yet"));
    if (has_sub && std::find(a.seal.begin(), a.seal.end(), s.source) == a.seal.end()) a.seal.push_back(s.source);
  }
  so.host_mount_points = std::vector<std::string>{};
  return {};
}

Result<void> Launch::write_spec() {
  auto made = make_spec(plan, so);
  if (!made) return fail(made.error());
  spec = std::move(*made);
  // The pid-1 program where the install put it (the same bytes as the one
  // embedded), else the embedded one in a file of the run's own tmpfs.
  std::string pid1_source;
  if (const auto& installed = opt.pid1_installed) {
    pid1_source = *installed;
  } else {
    pid1_source = kPid1Copy;
    a.pid1_copy = true;
  }
  adjust_spec(spec, plan, rt, ids, pid1_source, lo.agent, so.seccomp_by_pid1);
  return {};
}

// The root is a skeleton in the bundle (on our tmpfs): the top-level mount
// points and symlinks, every directory bound read-only from the host's root
// (the Plan's base view) or from --rootfs DIR. Runtimes create missing mount
// points in the root (runsc's gofer on the host side), so DIR itself is
// never written to and need not be writable by the runtime host.
Result<void> Launch::skeleton_root() {
  std::string skel = std::string(kBase) + "/bundle/rootfs";
  spec["root"] = {{"path", skel}, {"readonly", true}};
  a.skeleton_dirs.push_back(skel);
  std::set<std::string> seen, dir_entries;
  if (!opt.rootfs.empty()) {
    auto base = rootfs_base(opt.rootfs, spec, skel, a);
    if (!base) return fail(base.error());
    seen = dir_entries = std::move(*base);
  } else {
    for (const auto& s : plan.steps)
      if (s.kind == plan::StepKind::Symlink && s.target.find('/', 1) == std::string::npos && seen.insert(s.target).second)
        a.skeleton_links.emplace_back(skel + s.target, s.source);
  }
  for (const auto& m : spec["mounts"]) {
    std::string dest = m.value("destination", "");
    if (dest.size() < 2 || dest[0] != '/') continue;
    std::string top = dest.substr(0, dest.find('/', 1));
    if (!seen.insert(top).second) continue;
    (top == dest && binds_a_file(m) ? a.skeleton_files : a.skeleton_dirs).push_back(skel + top);
  }
  if (!opt.rootfs.empty()) {
    // Mount points below the skeleton's own directories: made here, as the
    // runtime (in the container's user namespace) may not write ours.
    for (const auto& m : spec["mounts"]) {
      std::string dest = m.value("destination", "");
      if (dest.size() < 2 || dest[0] != '/') continue;
      std::string top = dest.substr(0, dest.find('/', 1));
      if (top == dest || dir_entries.count(top)) continue;
      a.skeleton_dirs.push_back(skel + dest.substr(0, dest.rfind('/')));
      (binds_a_file(m) ? a.skeleton_files : a.skeleton_dirs).push_back(skel + dest);
    }
  }
  return {};
}

// The root's read-only binds are made in the skeleton by the runtime host
// itself (take_host_binds): one root for the runtime instead of a bind
// per directory or file, each of which costs the runtime time (runsc: a
// gofer mount). runc as root keeps its per-submount binds (no recursive
// read-only there).
Result<void> Launch::root_binds() {
  if (rt.runtime == Runtime::Runc) return {};
  std::set<std::string> staged_files;
  for (const auto& f : a.files) staged_files.insert(f.first);
  a.host_binds = take_host_binds(spec["mounts"], std::string(kBase) + "/bundle/rootfs", opt.rootfs,
                                 [&](const std::string& src) {
                                   // Generated files exist only once the runtime host made them; other
                                   // staged sources (idmapped trees, overlays) stay the runtime's.
                                   if (staged_files.count(src)) return SourceKind::File;
                                   struct stat st;
                                   if (within(src, kBase) || ::stat(src.c_str(), &st) != 0) return SourceKind::Other;
                                   return S_ISDIR(st.st_mode) ? SourceKind::Dir
                                          : S_ISREG(st.st_mode) ? SourceKind::File
                                                                : SourceKind::Other;
                                 });
  return {};
}

// config.json as the runtime host writes it, and the runtime's command line.
Result<void> Launch::runtime_command() {
  a.config_json = spec.dump(1);
  a.runtime_argv = runtime_argv(rt, host_userns, std::string(kBase) + "/state", std::string(kBase) + "/bundle", a.id);
  a.kill_prefix.assign(a.runtime_argv.begin(), a.runtime_argv.end() - 4);  // up to "run"
  // The agent's channel: fd 3 of the container's pid 1 for crun and runc;
  // runsc run has no --preserve-fds, so there it is the container's stdin,
  // which runsc imports into the sandbox as a host socket (docs/agent-protocol.md).
  if (lo.agent && rt.runtime != Runtime::Runsc) a.runtime_argv.insert(a.runtime_argv.end() - 3, "--preserve-fds=1");  // after "run"
  if (!a.console_socket.empty()) a.runtime_argv.insert(a.runtime_argv.end() - 3, "--console-socket=" + a.console_socket);
  a.agent_on_stdin = lo.agent && rt.runtime == Runtime::Runsc;
  return {};
}

// The runtime host, cloned into its namespaces and cgroup through the spawn
// path the layers share (process/spawn.hpp).
Result<layer::Sandbox> Launch::spawn() {
  // One cgroup per sandbox, limits set before anything runs in it; the
  // runtime host, the runtime and the container all stay inside.
  plan::Limits limits = plan.limits;
  if (rt.runtime == Runtime::Runsc && limits.pids) {
    // gVisor's own threads count too; the command's limit is RLIMIT_NPROC inside.
    limits.pids = *limits.pids + 1024;
  }
  timer.mark("spec");

  process::SpawnSpec sp;
  sp.clone_flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | (host_userns ? CLONE_NEWUSER : 0);
  sp.cgroup_id = plan.sandbox_id;  // spawn() makes it
  sp.limits = limits;
  sp.min_memory = rt.runtime == Runtime::Runsc ? kMinMemoryGvisor : kMinMemoryContainer;
  sp.layer = std::string(layer::name(opt.kind));
  sp.agent = lo.agent;
  sp.child = [this](const process::SpawnFds& f) {
    // The runtime host's own descriptor table (a fork-like clone): its 0..2
    // are what the runtime hands the container (the supervisor's stdio relay).
    for (int k = 0; k < 3; ++k)
      if (lo.stdio_fds[k] >= 0 && lo.stdio_fds[k] != k && ::dup2(lo.stdio_fds[k], k) < 0) ::_exit(125);
    for (int fd : lo.supervisor_fds) ::close(fd);
    a.sync_fd = f.sync_fd;
    a.parent_pidfd = f.parent_pidfd;
    a.agent_fd = f.agent_fd;
    host_main(a);
  };
  if (host_userns) sp.map_ids = [this](pid_t pid) { return map_host_ids(pid, ids); };
  sp.need_seccomp_listener = !a.seccomp_socket.empty();
  if (plan.proxy.enabled && plan.proxy.transparent) sp.capture_port = plan.proxy.transparent_port;  // RuntimeHost::network()
  sp.timer = lo.timer;
  sp.meanwhile = lo.meanwhile;
  sp.clone_what = "create the runtime host's namespaces";
  sp.start_what = "start the runtime host";
  sp.read_what = "read from the runtime host";
  sp.setup_what = "setup (" + std::string(to_string(rt.runtime)) + ")";
  sp.no_listener = "the runtime host did not hand over the seccomp listener";
  sp.exited_early = "the runtime host exited before it was set up";
  return process::spawn(std::move(sp));
}

}  // namespace

Result<layer::Sandbox> launch(const plan::Plan& plan, const layer::LaunchOptions& lo, const LayerOptions& opt) {
  Launch l(plan, lo, opt);
  using Step = Result<void> (Launch::*)();
  static constexpr Step kSteps[] = {
      &Launch::check_fits,       // runc rootless, sources under /run
      &Launch::host_args,        // the runtime host's ids, terminal, cgroups
      &Launch::spec_options,     // how the spec is made for this runtime (seccomp's way among them)
      &Launch::generated_files,  // resolv.conf, File steps, the trust bundle with the anchor
      &Launch::check_no_groups,  // root's supplementary groups gone
      &Launch::staged_mounts,    // idmapped trees, overlays
      &Launch::seal_submounts,   // (with a user namespace) read-only trees sealed whole
      &Launch::write_spec,       // config.json, adjusted (pid 1, seccomp, agent)
      &Launch::skeleton_root,    // the root skeleton's dirs, files and links
      &Launch::root_binds,       // the root's read-only binds, made by the runtime host
      &Launch::runtime_command,  // the runtime's argv
  };
  for (Step step : kSteps)
    if (auto r = (l.*step)(); !r) return fail(r.error());
  return l.spawn();  // (the idmapped trees close after it: the runtime host has its copies)
}

}  // namespace exg::oci
