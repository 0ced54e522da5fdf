#include "process/child.hpp"

#include <grp.h>
#include <linux/capability.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <termios.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "process/handshake.hpp"
#include "process/init.hpp"
#include "process/netns_setup.hpp"
#include "process/transparent_capture.hpp"
#include "walls/rlimits.hpp"
#include "util/boot_id.hpp"
#include "util/syscalls.hpp"
#include "util/fd_passing.hpp"
#include "util/pty_size.hpp"
#include "util/step_timer.hpp"

namespace exg::process {

namespace {

// Where the child builds the new root: a private tmpfs over the host's /tmp in
// its own mount namespace (sources are opened before it is mounted, so a
// workspace under /tmp is still reachable).
constexpr const char* kStage = "/tmp";

struct SetupError {
  std::string text;
};

class Builder {
 public:
  Builder(const ChildArgs& a, std::string trust_anchor)
      : a_(a), plan_(*a.plan), trust_anchor_(std::move(trust_anchor)) {}

  void open_sources();
  void run();

 private:
  const ChildArgs& a_;
  const plan::Plan& plan_;
  std::string trust_anchor_;  // the sandbox CA's certificate, appended to trust_bundle steps
  std::vector<int> src_fds_;  // per step: O_PATH fd of the host source, or -1
  std::map<size_t, int> idmapped_;  // step -> its idmapped tree (take_idmapped_trees), closed once attached
  std::map<size_t, std::pair<int, int>> upper_fds_;  // overlay steps on host dirs: upper, work
  int root_fd_ = -1;          // the new root
  int empty_file_fd_ = -1;    // O_PATH of an empty mode-0 file (file masks)
  int resolv_fd_ = -1;        // O_PATH of the generated resolv.conf (network.resolver)
  int boot_id_fd_ = -1;       // O_PATH of this sandbox's boot id (util/boot_id.hpp), bound over /proc's
  std::map<size_t, int> file_fds_;  // File steps: O_PATH of the file written on the staging tmpfs
  int overlay_count_ = 0;
  std::set<std::string> own_tmpfs_;  // top-level tmpfs mounted here (their names, relative)
  int master_fd_ = -1, slave_fd_ = -1;

  [[noreturn]] void fail(const std::string& what, int err = errno) { die(a_.sync_fd, what, err); }
  void mark(const char* step) {
    if (a_.timer) a_.timer->child_mark(step);
  }

  static std::string rel(const std::string& target) {
    std::string r = target;
    while (!r.empty() && r.front() == '/') r.erase(0, 1);
    return r.empty() ? "." : r;
  }

  int open_in_root(const std::string& target) {
    return sys::openat2(root_fd_, rel(target).c_str(), O_PATH | O_CLOEXEC,
                        RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  }

  // Opens a mount point in the new root, creating it (and its parents) in our
  // own tmpfs when missing. Never follows a symlink.
  // A top-level one lies in the new root's own tmpfs, where it is seldom there
  // yet: made first (EEXIST when it is), not looked up, missed, made and looked
  // up again (one openat2 fewer for each of some 20). So does one right below
  // a top-level tmpfs this process mounted (/dev/null, /dev/pts): the lookup
  // first also made sure no component on the way was a symlink, and that one
  // is a mount point's root, a directory.
  int mountpoint(const std::string& target, bool is_dir) {
    std::string r = rel(target);
    size_t first = r.find('/');
    bool in_own = r != "." && (first == std::string::npos || (r.find('/', first + 1) == std::string::npos &&
                                                             own_tmpfs_.count(r.substr(0, first))));
    if (!in_own) {
      int fd = open_in_root(target);
      if (fd >= 0) return fd;
      if (errno != ENOENT) fail("open mount point " + target);
    }
    size_t pos = in_own && first != std::string::npos ? first + 1 : 0;  // (that tmpfs's root is there)
    while (true) {
      size_t slash = r.find('/', pos);
      bool last = slash == std::string::npos;
      std::string part = r.substr(0, last ? r.size() : slash);
      if (!last || is_dir) {
        if (::mkdirat(root_fd_, part.c_str(), 0755) != 0 && errno != EEXIST)
          fail("create mount point " + target);
      } else {
        int f = ::openat(root_fd_, part.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (f < 0 && errno != EEXIST) fail("create mount point " + target);
        if (f >= 0) ::close(f);
      }
      if (last) break;
      pos = slash + 1;
    }
    int fd = open_in_root(target);
    if (fd < 0) fail("open mount point " + target);
    return fd;
  }

  void attach(int tree_fd, const std::string& target, bool is_dir) {
    int t = mountpoint(target, is_dir);
    if (sys::move_mount(tree_fd, "", t, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
      fail("attach mount at " + target);
    ::close(t);
    ::close(tree_fd);
  }

  void set_attr(int tree_fd, uint64_t set, uint64_t clr, const std::string& what) {
    mount_attr attr{};
    attr.attr_set = set;
    attr.attr_clr = clr;
    if (sys::mount_setattr(tree_fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr) != 0) fail("set mount flags on " + what);
  }

  int clone_tree(int fd, const char* path, const std::string& what) {
    int t = sys::open_tree(fd, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | (path[0] ? 0 : AT_EMPTY_PATH));
    if (t < 0) fail("clone mount " + what);
    return t;
  }

  int new_fs(const char* type, const std::vector<std::pair<std::string, std::string>>& opts, unsigned attrs,
             const std::string& what) {
    int fs = sys::fsopen(type, FSOPEN_CLOEXEC);
    if (fs < 0) fail(std::string("create ") + type + " for " + what);
    for (const auto& [k, v] : opts) {
      int r = v.empty() ? sys::fsconfig(fs, FSCONFIG_SET_FLAG, k.c_str(), nullptr, 0)
                        : sys::fsconfig(fs, FSCONFIG_SET_STRING, k.c_str(), v.c_str(), 0);
      if (r != 0) fail(std::string(type) + " option " + k + "=" + v + " for " + what);
    }
    if (sys::fsconfig(fs, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) fail(std::string("create ") + type + " for " + what);
    int m = sys::fsmount(fs, FSMOUNT_CLOEXEC, attrs);
    if (m < 0) fail(std::string("mount ") + type + " for " + what);
    ::close(fs);
    return m;
  }

  static std::string octal(unsigned mode) {
    char b[16];
    std::snprintf(b, sizeof b, "%o", mode);
    return b;
  }

 public:
  // The setup steps (kChildSteps lists them in order). Each returns whether it had
  // anything to do (a timing mark only then); a failure does not return
  // (fail(): its message to the supervisor, exit 125).
  bool network_and_names();
  bool make_stage();
  bool take_idmapped_trees();
  bool mounts();
  bool open_pty();
  bool pivot();
  bool close_setup_fds();
  bool enter_cgroup();
  [[noreturn]] void start_init();

 private:
  void step(size_t i, const plan::Step& s);
  void seal(const std::string& target);
  void proxy_listeners();
};

// The child's setup, in order (bubblewrap's habit: one list, one job a step).
// The network comes first: the supervisor sets the transparent capture's rules
// up on the sockets handed over there while this process builds the mounts.
struct ChildStep {
  const char* name;  // its timing mark (-v), or nullptr: not timed
  bool (Builder::*run)();
};
constexpr ChildStep kChildSteps[] = {
    {"network", &Builder::network_and_names},
    {"stage", &Builder::make_stage},
    {"idmapped trees", &Builder::take_idmapped_trees},
    {"mounts", &Builder::mounts},
    {"pty", &Builder::open_pty},
    {"pivot", &Builder::pivot},
    {nullptr, &Builder::close_setup_fds},
    {"cgroup wait+namespace", &Builder::enter_cgroup},
};

void Builder::open_sources() {
  src_fds_.assign(plan_.steps.size(), -1);
  for (size_t i = 0; i < plan_.steps.size(); ++i) {
    const auto& s = plan_.steps[i];
    bool host_source = s.kind == plan::StepKind::BindRo || s.kind == plan::StepKind::BindRw ||
                       s.kind == plan::StepKind::Overlay || s.kind == plan::StepKind::DevNode;
    if (!s.upper_dir.empty()) {
      int u = sys::openat2(AT_FDCWD, s.upper_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC, RESOLVE_NO_SYMLINKS);
      int w = sys::openat2(AT_FDCWD, s.work_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC, RESOLVE_NO_SYMLINKS);
      if (u < 0 || w < 0) fail("open the overlay layer " + s.upper_dir);
      upper_fds_[i] = {u, w};
    }
    if (!host_source || uses_idmapped_mount(plan_, i)) continue;
    int fd = sys::openat2(AT_FDCWD, s.source.c_str(), O_PATH | O_CLOEXEC, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    if (fd < 0) fail("open " + s.source + " (for " + s.target + ")");
    src_fds_[i] = fd;
  }
}

// The staging tmpfs over /tmp, the new root's tmpfs in it, and the files the
// mounts bind from it (the empty file, resolv.conf, the File steps').
bool Builder::make_stage() {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail("make mounts private");
  if (::mount("exguardian-stage", kStage, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700") != 0) fail("mount staging tmpfs");
  std::string root = std::string(kStage) + "/root";
  if (::mkdir(root.c_str(), 0755) != 0) fail("mkdir " + root);
  if (::mount("exguardian-root", root.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) fail("mount root tmpfs");
  root_fd_ = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root_fd_ < 0) fail("open new root");
  std::string work = std::string(kStage) + "/work";
  if (::mkdir(work.c_str(), 0755) != 0) fail("mkdir " + work);
  std::string empty = work + "/empty";
  int f = ::open(empty.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0000);
  if (f < 0) fail("create " + empty);
  ::close(f);
  empty_file_fd_ = ::open(empty.c_str(), O_PATH | O_CLOEXEC);
  if (empty_file_fd_ < 0) fail("open " + empty);
  // The sandbox's own boot id: it boots when it starts (util/boot_id.hpp).
  {
    std::string path = work + "/boot_id";
    auto id = new_boot_id();
    if (!id) fail("getrandom (the sandbox's boot id)");
    int w = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0444);
    if (w < 0 || ::write(w, id->data(), id->size()) != static_cast<ssize_t>(id->size())) fail("write " + path);
    ::close(w);
    boot_id_fd_ = ::open(path.c_str(), O_PATH | O_CLOEXEC);
    if (boot_id_fd_ < 0) fail("open " + path);
  }
  if (plan_.proxy.resolver) {
    std::string rc = work + "/resolv.conf";
    static constexpr const char* kResolv = plan::kResolverConf;
    int w = ::open(rc.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (w < 0 || ::write(w, kResolv, std::strlen(kResolv)) != static_cast<ssize_t>(std::strlen(kResolv))) fail("write " + rc);
    ::close(w);
    resolv_fd_ = ::open(rc.c_str(), O_PATH | O_CLOEXEC);
    if (resolv_fd_ < 0) fail("open " + rc);
  }
  // File steps (masked credential copies, the trust bundle): written here, on
  // the staging tmpfs that disappears with the host's root; the sandbox only
  // ever sees each file through a read-only bind.
  for (size_t i = 0; i < plan_.steps.size(); ++i) {
    const auto& s = plan_.steps[i];
    if (s.kind != plan::StepKind::File || s.in_upper) continue;  // (in_upper: in its tree's overlay, by the supervisor)
    if (s.trust_bundle && trust_anchor_.empty()) fail("no trust anchor for the bundle at " + s.target, 0);
    std::string content = s.trust_bundle ? s.content + trust_anchor_ : s.content;
    std::string path = work + "/file" + std::to_string(i);
    int w = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (w < 0) fail("create " + path + " (for " + s.target + ")");
    size_t off = 0;
    while (off < content.size()) {
      ssize_t n = ::write(w, content.data() + off, content.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("write " + path + " (for " + s.target + ")");
      off += static_cast<size_t>(n);
    }
    if (::fchmod(w, s.mode & (s.writable ? 0644 : 0444)) != 0) fail("chmod " + path);
    // A writable copy (an agent's credential file it rewrites) belongs to the command's uid.
    if (s.writable && ::fchown(w, plan_.identity.inside_uid, plan_.identity.inside_gid) != 0) fail("chown " + path);
    ::close(w);
    int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) fail("open " + path);
    file_fds_[i] = fd;
  }
  return true;
}

// The Plan's steps, in its order, in the new root.
bool Builder::mounts() {
  for (size_t i = 0; i < plan_.steps.size(); ++i) step(i, plan_.steps[i]);
  return true;
}

void Builder::step(size_t i, const plan::Step& s) {
  using plan::StepKind;
  const uint64_t kSafe = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  switch (s.kind) {
    case StepKind::BindRo:
    case StepKind::BindRw: {
      int t = idmapped_.count(i) ? idmapped_.at(i) : clone_tree(src_fds_[i], "", s.source);
      bool ro = s.kind == StepKind::BindRo;
      set_attr(t, kSafe | (ro ? MOUNT_ATTR_RDONLY : 0), 0, s.target);
      attach(t, s.target, s.is_dir);
      break;
    }
    case StepKind::DevNode: {
      int t = clone_tree(src_fds_[i], "", s.source);
      set_attr(t, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, 0, s.target);
      attach(t, s.target, false);
      break;
    }
    case StepKind::Overlay: {
      // Lower: the host directory (or its idmapped clone, attached in the stage).
      std::string n = std::to_string(overlay_count_++);
      std::string base = std::string(kStage) + "/work/ovl" + n;
      if (::mkdir(base.c_str(), 0755) != 0) fail("mkdir " + base);
      std::string upper = base + "/upper", work = base + "/work", lower = base + "/lower";
      bool host_upper = !s.upper_dir.empty();
      if (host_upper) {
        // The workspace overlay: upper and work are host directories (opened
        // before the uid change), kept until the supervisor applies them.
        if (::mkdir(lower.c_str(), 0755) != 0) fail("mkdir overlay dirs for " + s.target);
        upper = "/proc/self/fd/" + std::to_string(upper_fds_.at(i).first);
        work = "/proc/self/fd/" + std::to_string(upper_fds_.at(i).second);
      } else {
        // A throwaway upper layer on its own tmpfs, owned by the sandbox user.
        std::string opts = "mode=0755,uid=" + std::to_string(plan_.identity.inside_uid) +
                           ",gid=" + std::to_string(plan_.identity.inside_gid);
        if (::mount("exguardian-upper", base.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0)
          fail("mount overlay upper tmpfs for " + s.target);
        if (::mkdir(upper.c_str(), 0755) != 0 || ::mkdir(work.c_str(), 0755) != 0 || ::mkdir(lower.c_str(), 0755) != 0)
          fail("mkdir overlay dirs for " + s.target);
      }
      int lower_tree = idmapped_.count(i) ? idmapped_.at(i) : clone_tree(src_fds_[i], "", s.source);
      set_attr(lower_tree, kSafe | MOUNT_ATTR_RDONLY, 0, s.target + " (lower)");
      int lfd = ::open(lower.c_str(), O_PATH | O_CLOEXEC);
      if (sys::move_mount(lower_tree, "", lfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
        fail("attach overlay lower for " + s.target);
      ::close(lfd);
      ::close(lower_tree);
      // The upper root takes the lower root's mode, so HOME keeps its permissions.
      if (struct stat st; !host_upper && ::stat(lower.c_str(), &st) == 0) (void)::chmod(upper.c_str(), st.st_mode & 07777);
      int m = new_fs("overlay",
                     {{"lowerdir", lower}, {"upperdir", upper}, {"workdir", work}, {"userxattr", ""}},
                     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, s.target);
      attach(m, s.target, true);
      break;
    }
    case StepKind::Tmpfs: {
      std::string mode = octal(s.mode);
      std::vector<std::pair<std::string, std::string>> o{{"mode", mode}};
      if (s.target == "/tmp" || s.target == "/var/tmp" || s.target == "/dev/shm") {
        o.emplace_back("uid", std::to_string(plan_.identity.inside_uid));
        o.emplace_back("gid", std::to_string(plan_.identity.inside_gid));
      }
      int m = new_fs("tmpfs", o, kSafe, s.target);
      attach(m, s.target, true);
      if (rel(s.target).find('/') == std::string::npos) own_tmpfs_.insert(rel(s.target));
      break;
    }
    case StepKind::MaskDir: {
      // Mode 0 (nothing), or 0111 when a masked credential copy sits inside (reachable, not listable;
      // 0555 in the microVM's view, microvm/view.cpp: its 9p server must read what it walks).
      int m = new_fs("tmpfs", {{"mode", octal(s.mode & 0555)}, {"size", "4k"}, {"nr_inodes", "64"}},
                     kSafe | MOUNT_ATTR_NOEXEC, s.target);
      attach(m, s.target, true);
      break;
    }
    case StepKind::MaskFile: {
      if (s.if_present) {  // a host socket unlinked since the plan: nothing left to mask
        int probe = open_in_root(s.target);
        if (probe < 0 && errno == ENOENT) break;
        if (probe >= 0) ::close(probe);
      }
      int t = clone_tree(empty_file_fd_, "", "empty file");
      set_attr(t, kSafe | MOUNT_ATTR_NOEXEC | MOUNT_ATTR_RDONLY, 0, s.target);
      attach(t, s.target, false);
      break;
    }
    case StepKind::ResolvConf: {
      if (resolv_fd_ < 0) fail("no generated resolv.conf for " + s.target);
      int t = clone_tree(resolv_fd_, "", "resolv.conf");
      set_attr(t, kSafe | MOUNT_ATTR_NOEXEC | MOUNT_ATTR_RDONLY, 0, s.target);
      attach(t, s.target, false);
      break;
    }
    case StepKind::File: {
      if (s.in_upper) break;  // a plain file in its tree's overlay (the supervisor put it in the upper layer)
      int t = clone_tree(file_fds_.at(i), "", s.target);
      set_attr(t, kSafe | MOUNT_ATTR_NOEXEC | (s.writable ? 0 : MOUNT_ATTR_RDONLY), 0, s.target);
      attach(t, s.target, false);
      break;
    }
    case StepKind::ProtectRo:
    case StepKind::Pin: {
      int fd = open_in_root(s.target);
      if (fd < 0) {
        if (errno == ENOENT && s.target.starts_with("/proc/")) break;  // not every kernel has every knob
        fail("open " + s.target);
      }
      int t = clone_tree(fd, "", s.target);
      ::close(fd);
      set_attr(t, kSafe | (s.kind == StepKind::ProtectRo ? MOUNT_ATTR_RDONLY : 0), 0, s.target);
      attach(t, s.target, s.is_dir);
      break;
    }
    case StepKind::Proc: {
      int m = new_fs("proc", {}, kSafe | MOUNT_ATTR_NOEXEC, s.target);
      attach(m, s.target, true);
      // The sandbox's boot id over the host kernel's, read-only (the later
      // read-only /proc/sys takes it along: its clone is recursive).
      std::string knob = s.target + "/sys/kernel/random/boot_id";
      if (int probe = open_in_root(knob); probe >= 0) {
        ::close(probe);
        int t = clone_tree(boot_id_fd_, "", "boot id");
        set_attr(t, kSafe | MOUNT_ATTR_NOEXEC | MOUNT_ATTR_RDONLY, 0, knob);
        attach(t, knob, false);
      }
      break;
    }
    case StepKind::Sysfs: {
      int m = new_fs("sysfs", {}, kSafe | MOUNT_ATTR_NOEXEC | MOUNT_ATTR_RDONLY, s.target);
      attach(m, s.target, true);
      break;
    }
    case StepKind::Devpts: {
      int m = new_fs("devpts", {{"newinstance", ""}, {"ptmxmode", "0666"}, {"mode", "0620"}},
                     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, s.target);
      attach(m, s.target, true);
      break;
    }
    case StepKind::Symlink: {
      if (::symlinkat(s.source.c_str(), root_fd_, rel(s.target).c_str()) != 0) fail("symlink " + s.target);
      break;
    }
    case StepKind::ReadOnly:
      seal(s.target);
      break;
  }
}

void Builder::seal(const std::string& target) {
  int fd = open_in_root(target);
  if (fd < 0) fail("open " + target);
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY;
  if (sys::mount_setattr(fd, "", AT_EMPTY_PATH, &attr) != 0) fail("make " + target + " read-only");
  ::close(fd);
}

// The names and the network of the sandbox's namespaces, and the sockets the
// supervisor needs from inside them.
bool Builder::network_and_names() {
  if (::sethostname(plan_.hostname.data(), plan_.hostname.size()) != 0) fail("sethostname");
  if (::setdomainname("", 0) != 0) fail("setdomainname");
  if (auto what = bring_loopback_up(); !what.empty()) fail(what);
  if (auto what = hand_over_sock_diag(a_.sync_fd); !what.empty()) fail(what);
  if (plan_.proxy.enabled) proxy_listeners();
  if (auto what = hand_over_transparent_capture(plan_.proxy, a_.sync_fd); !what.empty()) fail(what);
  return true;
}

// The egress proxy's listening sockets, made here so that they live in the
// sandbox's network namespace; the supervisor accepts on them from the host
// side. No relay process, no port on the host.
void Builder::proxy_listeners() {
  int fds[3];
  std::string what;
  int n = make_proxy_listeners(plan_.proxy, fds, &what);
  if (n < 0) fail(what);
  if (!send_fds(a_.sync_fd, kMsgListeners, fds, static_cast<size_t>(n)))
    fail("hand the proxy listeners to the supervisor");
  for (int k = 0; k < n; ++k) ::close(fds[k]);
}

// The command's terminal, when the caller has one: the master goes to the
// supervisor, the peer stays for init.
bool Builder::open_pty() {
  if (!a_.want_pty) return false;
  int ptmx = sys::openat2(root_fd_, "dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC,
                          RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS);
  if (ptmx < 0) fail("open the sandbox's ptmx");
  int unlock = 0;
  if (::ioctl(ptmx, TIOCSPTLCK, &unlock) != 0) fail("unlock pty");
  int slave = ::ioctl(ptmx, TIOCGPTPEER, O_RDWR | O_NOCTTY);
  if (slave < 0) fail("open pty peer");
  master_fd_ = ptmx;
  slave_fd_ = slave;
  size_pty_as_caller(ptmx, a_.tty_fds);
  // Hand the master to the supervisor, which relays the host terminal.
  if (!send_fds(a_.sync_fd, kMsgPty, &ptmx, 1)) fail("send pty to supervisor");
  ::close(ptmx);
  master_fd_ = -1;
  return true;
}

// The new root sealed read-only and made the root; the host's detached.
bool Builder::pivot() {
  seal("/");
  if (::fchdir(root_fd_) != 0) fail("chdir new root");
  if (sys::pivot_root(".", ".") != 0) fail("pivot_root");
  if (::umount2(".", MNT_DETACH) != 0) fail("detach the host root");
  if (::chdir("/") != 0) fail("chdir /");
  return true;
}

// The supervisor makes the idmapped mounts' trees after "go", while this
// process set up its network and stage; they come in step order.
bool Builder::take_idmapped_trees() {
  std::vector<size_t> steps;
  for (size_t i = 0; i < plan_.steps.size(); ++i)
    if (uses_idmapped_mount(plan_, i)) steps.push_back(i);
  if (steps.empty()) return false;
  std::vector<int> trees(steps.size(), -1);
  if (!await_idmapped_trees(a_.sync_fd, trees.data(), trees.size())) ::_exit(125);
  for (size_t k = 0; k < steps.size(); ++k) idmapped_[steps[k]] = trees[k];
  return true;
}

void Builder::run() {
  for (const ChildStep& st : kChildSteps)
    if ((this->*st.run)() && st.name) mark(st.name);
  start_init();
}

// What pointed into the host's root or the stage (the new root has it all
// now). Idmapped trees were closed when they were attached.
bool Builder::close_setup_fds() {
  ::close(root_fd_);
  ::close(empty_file_fd_);
  if (resolv_fd_ >= 0) ::close(resolv_fd_);
  if (boot_id_fd_ >= 0) ::close(boot_id_fd_);
  for (auto& [i, fd] : file_fds_) ::close(fd);
  for (int fd : src_fds_)
    if (fd >= 0) ::close(fd);
  for (auto& [i, uw] : upper_fds_) {
    ::close(uw.first);
    ::close(uw.second);
  }
  return false;
}

// Nothing starts before this process is in the sandbox's cgroup (v1: it
// moves itself in now; process/spawn.hpp). Then that cgroup becomes the root of
// what /proc/self/cgroup shows.
bool Builder::enter_cgroup() {
  if (int e = await_in_cgroup(a_.sync_fd, a_.timer)) {
    if (e < 0) ::_exit(125);
    fail("move into the sandbox's cgroup", e);
  }
  if (::unshare(CLONE_NEWCGROUP) != 0) fail("cgroup namespace");
  return true;
}

// The last step: this process becomes the sandbox's init (process/init.hpp).
void Builder::start_init() {
  InitArgs ia;
  ia.plan = &plan_;
  ia.sync_fd = a_.sync_fd;
  ia.parent_pidfd = a_.parent_pidfd;
  ia.pty_slave = slave_fd_;
  ia.rlimits = &a_.rlimits;
  ia.seccomp = a_.seccomp;
  ia.agent_channel = a_.agent_channel;
  ia.timer = a_.timer;
  for (int k = 0; k < 3; ++k) ia.tty_fds[k] = a_.tty_fds[k];
  for (int k = 0; k < a_.n_pass_fds; ++k) ia.pass_fds[k] = a_.pass_fds[k];
  ia.n_pass_fds = a_.n_pass_fds;
  become_init(ia);
}

}  // namespace

[[noreturn]] void child_main(const ChildArgs& a) {
  // Die with the supervisor; then wait until it has written our id maps.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // "Go", perhaps followed by the trust anchor (LaunchOptions::trust_anchor).
  std::string trust_anchor;
  if (!await_go(a.sync_fd, &trust_anchor)) ::_exit(125);
  // Become the sandbox user at once: everything the setup creates is owned by
  // a mapped id, and it acts with that user's rights on host files. The
  // capabilities of the new user namespace stay (uid 0 is not mapped in it).
  // Host sources are opened first, still with the invoker's host uid: root
  // can reach a workspace under /root that the sandbox uid could not traverse.
  // The secrets' values came along in this copy of the supervisor's memory;
  // the sandbox needs none of them (init is not dumpable either way).
  for (const auto& sec : a.plan->secrets)
    ::explicit_bzero(const_cast<char*>(sec.value.data()), sec.value.size());
  // So did the invoker's environment (a secret's source variable among it);
  // init and the command get the Plan's environment only.
  for (char** e = environ; e && *e; ++e) ::explicit_bzero(*e, std::strlen(*e));
  Builder b(a, std::move(trust_anchor));
  b.open_sources();
  const plan::Identity& id = a.plan->identity;
  if (sys::setresgid_child(id.inside_gid, id.inside_gid, id.inside_gid) != 0) die(a.sync_fd, "setresgid", errno);
  if (sys::setresuid_child(id.inside_uid, id.inside_uid, id.inside_uid) != 0) die(a.sync_fd, "setresuid", errno);
  // A uid change clears the parent-death signal: set it again, then make sure
  // the supervisor did not die before it took effect.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) die(a.sync_fd, "parent-death signal", errno);
  pollfd pfd{a.parent_pidfd, POLLIN, 0};
  if (::poll(&pfd, 1, 0) != 0) ::_exit(125);
  if (a.timer) a.timer->child_mark("sources+uid");
  b.run();
  ::_exit(125);
}

}  // namespace exg::process
