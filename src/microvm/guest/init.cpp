// exguardian-guest-init: /init of the microVM layer's initramfs, pid 1 of the
// guest kernel. It loads the modules the guest needs (virtio-mmio, the
// virtio-serial port, 9p), mounts the sandbox's filesystem view that the host
// exports over 9p, moves into it, and runs the same agent as every other
// layer (agent/agent.hpp) as the sandbox's uid on the virtio-serial port.
// When the agent ends (shutdown request, closed channel) every guest process
// is killed and the guest reboots, which ends qemu (-no-reboot).
//
// Who the agent runs as, the hostname, the clock and an RNG seed come from the
// host over the port as one boot record (guest/boot_record.hpp), taken after
// the modules are loaded and before anything of the sandbox is mounted: the
// point where a template is saved and each restored sandbox goes on from.
// The boot frame (guest_abi.hpp kBootOp) follows the record in the same
// hand-over: the sandbox's env and cwd, whether to serve egress (listen on
// 127.0.0.1:3128 and :1080 and relay to the egress port, egress_mux.hpp; with
// the resolver on 127.0.0.53:53 and the transparent capture: netfilter in the
// guest kernel redirecting every TCP connection out to 127.0.0.1:15001, the
// process layer's capture_rules.hpp), and
// the walls to put around the agent (guest/walls.hpp: the process layer's
// seccomp rules, Landlock, the pids limit), applied in the agent's process
// before it serves; what was applied goes to the host in its ready event.
// Static, plain syscalls, no exg_core (only the few process-layer files the
// walls reuse): it is the whole user space of the guest.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/random.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "agent/agent.hpp"
#include "agent/protocol.hpp"
#include "microvm/guest/egress_mux.hpp"
#include "microvm/guest/boot_record.hpp"
#include "microvm/guest/guest_abi.hpp"
#include "microvm/guest/scratch.hpp"
#include "microvm/guest/walls.hpp"
#include "microvm/guest/walls_apply.hpp"
#include "walls/capture_rules.hpp"
#include "walls/seccomp.hpp"
#include "util/syscalls.hpp"

namespace {

using namespace exg::microvm::guest;

// Messages go to the guest's console (the host shows it on stderr).
void say(const char* fmt, const std::string& a, int err = 0) {
  std::fprintf(stderr, "exguardian-guest: ");
  std::fprintf(stderr, fmt, a.c_str());
  if (err) std::fprintf(stderr, ": %s", std::strerror(err));
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

[[noreturn]] void power_off() {
  ::sync();
  // reboot=t on the kernel command line and -no-reboot on qemu's: this ends qemu.
  ::reboot(RB_AUTOBOOT);
  for (;;) ::pause();
}

[[noreturn]] void die(const char* what, const std::string& a, int err = errno) {
  say(what, a, err);
  ::kill(-1, SIGKILL);
  power_off();
}

std::string read_file(const char* path) {
  std::string out;
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

void write_all(int fd, const char* p, size_t n) {
  while (n) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) die("write to the channel%s", "");
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Says "parked" to the host and waits for its boot record: one line, read a
// byte at a time so that nothing of the agent's protocol after it is taken.
BootRecord take_boot_record(int channel) {
  write_all(channel, kParkedLine, sizeof kParkedLine - 1);
  std::string line;
  for (;;) {
    char c;
    ssize_t r = ::read(channel, &c, 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) die("read the boot record from the channel%s", "", r == 0 ? EPIPE : errno);
    if (c == '\n') break;
    if (line.size() > 512) die("boot record too long%s", "", EINVAL);
    line += c;
  }
  auto rec = parse_boot_record(line);
  if (!rec) die("malformed boot record from the host: %s", line, EINVAL);
  return *rec;
}

// The host's seed into the input pool, credited, and a forced reseed of the
// CRNG: a guest restored from a template would otherwise draw the same
// random numbers as every other guest restored from it.
void reseed_rng(const std::string& hex) {
  // rand_pool_info ends in a flexible array: the seed follows it in one buffer.
  alignas(rand_pool_info) unsigned char in[sizeof(rand_pool_info) + kSeedBytes] = {};
  auto* info = reinterpret_cast<rand_pool_info*>(in);
  for (size_t i = 0; i < kSeedBytes; ++i)
    in[sizeof(rand_pool_info) + i] = static_cast<unsigned char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  info->entropy_count = static_cast<int>(kSeedBytes * 8);
  info->buf_size = static_cast<int>(kSeedBytes);
  int fd = ::open("/dev/urandom", O_RDWR | O_CLOEXEC);
  if (fd < 0) die("open /dev/urandom%s", "");
  if (::ioctl(fd, RNDADDENTROPY, in) != 0) die("RNDADDENTROPY%s", "");
  if (::ioctl(fd, RNDRESEEDCRNG) != 0) die("RNDRESEEDCRNG%s", "");
  ::close(fd);
}

void load_modules(const char* order_file) {
  std::string order = read_file(order_file);
  size_t pos = 0;
  while (pos < order.size()) {
    size_t nl = order.find('\n', pos);
    if (nl == std::string::npos) nl = order.size();
    std::string name = order.substr(pos, nl - pos);
    pos = nl + 1;
    if (name.empty()) continue;
    std::string path = std::string(kModuleDir) + "/" + name;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) die("open module %s", path);
    if (::syscall(SYS_finit_module, fd, "", 0) != 0 && errno != EEXIST) die("load module %s", path);
    ::close(fd);
  }
}

void mount_or_die(const char* src, const std::string& target, const char* type, unsigned long flags, const char* data) {
  if (::mount(src, target.c_str(), type, flags, data) != 0) die("mount %s", target + " (" + type + ")");
}

// The virtio-serial port named `want`, as /dev/vportNpM. The port appears
// once the host's side announces it, shortly after the module loads.
std::string find_channel(const char* want) {
  for (int tries = 0; tries < 500; ++tries) {
    if (DIR* d = ::opendir("/sys/class/virtio-ports")) {
      while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        std::string name = read_file(("/sys/class/virtio-ports/" + std::string(e->d_name) + "/name").c_str());
        while (!name.empty() && name.back() == '\n') name.pop_back();
        if (name == want) {
          std::string dev = "/dev/" + std::string(e->d_name);
          ::closedir(d);
          return dev;
        }
      }
      ::closedir(d);
    }
    ::usleep(10000);
  }
  die("no virtio-serial port named %s (is the host's -device virtserialport there?)", want, ENODEV);
}

// The host's boot frame (guest_abi.hpp), right after the boot record.
struct Boot {
  std::vector<std::string> env;
  std::string cwd = "/";
  bool egress = false;
  bool resolver = false;     // UDP 127.0.0.53:53, relayed (egress only)
  bool transparent = false;  // the capture (egress only)
  Walls walls;
  std::vector<exg::microvm::guest::ScratchDir> scratch;
  bool disk = false;  // a scratch disk is attached (kDiskDevice)
};

// Exactly `n` bytes from the port (the frame's own, nothing of the agent's
// requests that may follow it at once).
void read_exact(int fd, char* p, size_t n) {
  while (n) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) die("read the host's boot frame%s", "", r == 0 ? EPIPE : errno);
    p += r;
    n -= static_cast<size_t>(r);
  }
}

Boot read_boot(int channel) {
  char prefix[exg::agent::kPrefixBytes];
  read_exact(channel, prefix, sizeof prefix);
  size_t len = 0;
  for (char c : prefix) len = (len << 8) | static_cast<unsigned char>(c);
  if (len < exg::agent::kFixedBytes || len > exg::agent::kFixedBytes + exg::agent::kMaxHeader)
    die("the host's boot frame: length %s out of bounds", std::to_string(len), EINVAL);
  std::string bytes(prefix, sizeof prefix);
  bytes.resize(sizeof prefix + len);
  read_exact(channel, bytes.data() + sizeof prefix, len);
  exg::agent::FrameReader reader;
  reader.feed(bytes.data(), bytes.size());
  auto item = reader.next();
  if (item.error) die("the host's boot frame: %s", item.error->what, EINVAL);
  if (!item.frame) die("the host's boot frame%s: incomplete", "", EINVAL);
  const auto& h = item.frame->header;
  Boot b;
  try {
    if (h.at("op").get<std::string>() != kBootOp) die("the host's frame after the boot record is not %s", kBootOp, EINVAL);
    b.env = h.at("env").get<std::vector<std::string>>();
    b.cwd = h.at("cwd").get<std::string>();
    b.egress = h.at("egress").get<bool>();
    b.resolver = b.egress && h.at("resolver").get<bool>();
    b.transparent = b.egress && h.at("transparent").get<bool>();
    b.disk = h.at("disk").get<bool>();
  } catch (const std::exception& e) {
    die("the host's boot frame: %s", e.what(), EINVAL);
  }
  std::string why = "walls: missing";
  auto walls = h.contains("walls") ? walls_from_json(h["walls"], &why) : std::nullopt;
  if (!walls) die("the host's boot frame: %s", why, EINVAL);
  b.walls = std::move(*walls);
  why = "scratch: missing";
  auto scratch = h.contains("scratch") ? exg::microvm::guest::scratch_from_json(h["scratch"], &why) : std::nullopt;
  if (!scratch) die("the host's boot frame: %s", why, EINVAL);
  b.scratch = std::move(*scratch);
  return b;
}

// A socket of `type` bound to the guest's addr:port, made by pid 1 before
// anything of the sandbox runs (nothing else can take the port first; 53 is
// a privileged port); TCP ones listen.
int bind_loopback(int type, const char* addr, unsigned short port) {
  std::string where = std::string(addr) + ":" + std::to_string(port);
  int fd = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket for %s", where);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, addr, &sa.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || (type == SOCK_STREAM && ::listen(fd, 128) != 0))
    die("bind %s", where);
  return fd;
}

// The guest's network, as the other layers' sandboxes have it.
struct Egress {
  int http = -1, socks = -1, dns = -1, transparent = -1;
};

// The egress relay (microvm/guest/egress_mux.hpp): its own process, as a uid of its
// own (not the command's: the command cannot signal it or read it), carrying
// every connection to the listeners and every query to the resolver to the
// host's proxy; under the sandbox's seccomp rules too when it has them. Never returns.
[[noreturn]] void egress_relay(int port_fd, const Egress& e, uid_t command_uid, bool seccomp) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  uid_t relay = command_uid == kEgressUid ? kEgressUid - 1 : kEgressUid;
  if (::setgroups(0, nullptr) != 0 || ::setresgid(relay, relay, relay) != 0 || ::setresuid(relay, relay, relay) != 0)
    die("drop the egress relay to uid %s", std::to_string(relay));
  ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  ::prctl(PR_SET_DUMPABLE, 0);
  if (seccomp && exg::walls::install_seccomp_errno(exg::walls::prebuilt_seccomp_errno_program()) != 0)
    die("install the seccomp filter in the egress relay%s", "");
  ::signal(SIGPIPE, SIG_IGN);
  exg::microvm::egress_mux::Config cfg;
  cfg.channel = port_fd;
  using exg::microvm::egress_mux::Target;
  cfg.listeners = {{e.http, Target::Http}, {e.socks, Target::Socks}};
  if (e.transparent >= 0) cfg.listeners.push_back({e.transparent, Target::Transparent});
  cfg.dns_socket = e.dns;
  std::string why = exg::microvm::egress_mux::run(cfg);
  if (why != "channel closed") say("egress relay ended: %s", why);
  ::_exit(0);
}

// The view the host exports (9p), mounted at `root`. The tag appears with the
// virtio-9p device's probe; retried briefly for the same reason as the port.
void mount_view(const std::string& root) {
  ::mkdir(root.c_str(), 0755);
  std::string opts = std::string("trans=virtio,version=9p2000.L,msize=262144,cache=mmap,access=client");
  for (int tries = 0;; ++tries) {
    if (::mount(kViewTag, root.c_str(), "9p", MS_NOSUID | MS_NODEV, opts.c_str()) == 0) return;
    if (errno != ENOENT || tries > 200) die("mount the sandbox's view (9p tag %s)", kViewTag);
    ::usleep(10000);
  }
}

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// mkdir -p: every directory from `p`'s first component down.
void make_dirs(const std::string& p, mode_t mode) {
  for (size_t i = p.find('/', 1);; i = p.find('/', i + 1)) {
    std::string d = i == std::string::npos ? p : p.substr(0, i);
    if (::mkdir(d.c_str(), mode) != 0 && errno != EEXIST) die("mkdir %s", d);
    if (i == std::string::npos) return;
  }
}

// The scratch disk (an ext4 the host made on a sparse file of the sandbox's
// size): its driver loaded now (never before a template is saved), mounted in
// the initramfs, below the view. A full disk is ENOSPC here; the host's file
// never grows past the size.
void mount_disk() {
  load_modules(kDiskModuleOrder);
  for (int tries = 0;; ++tries) {
    struct stat st;
    if (::stat(kDiskDevice, &st) == 0 && S_ISBLK(st.st_mode)) break;
    if (tries > 500) die("no scratch disk at %s (its virtio-blk device did not appear)", kDiskDevice, ENODEV);
    ::usleep(10000);
  }
  ::mkdir(kDiskMount, 0755);
  // noinit_itable: no background zeroing of inode tables (CPU under TCG, and
  // space on the host's file for nothing: the groups are marked uninitialised).
  mount_or_die(kDiskDevice, kDiskMount, "ext4", MS_NOATIME, "noinit_itable");
}

// The directory of the scratch disk that stands for the guest's `path` (its
// slashes made dashes: /var/lib -> /disk/var-lib).
std::string disk_dir_for(const std::string& path) {
  std::string d = path.substr(1);
  for (char& c : d)
    if (c == '/') c = '-';
  return std::string(kDiskMount) + "/" + d;
}

// The guest's own tmpfs directories (guest/scratch.hpp) over the view's. What
// each carries is cloned from the view first (open_tree: a detached copy of
// that part of the 9p tree, taken before any tmpfs hides it); then each tmpfs
// is mounted, in plan order, and the copies are put in place in it.
void mount_scratch(const std::string& root, const std::vector<exg::microvm::guest::ScratchDir>& dirs) {
  struct Carried {
    std::string path;
    int tree = -1;      // the clone (a directory or a file)
    bool dir = false;
    std::string link;   // or a symlink's text, made again
  };
  std::vector<std::vector<Carried>> carried(dirs.size());
  for (size_t i = 0; i < dirs.size(); ++i)
    for (const auto& c : dirs[i].carry) {
      std::string p = root + c;
      struct stat st;
      if (::lstat(p.c_str(), &st) != 0) die("the view's %s (to carry into the guest's own tmpfs)", c);
      Carried k{c};
      if (S_ISLNK(st.st_mode)) {
        char buf[4096];
        ssize_t n = ::readlink(p.c_str(), buf, sizeof buf);
        if (n <= 0 || static_cast<size_t>(n) == sizeof buf) die("readlink %s", c);
        k.link.assign(buf, static_cast<size_t>(n));
      } else {
        k.tree = exg::sys::open_tree(AT_FDCWD, p.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (k.tree < 0) die("clone the view's %s", c);
        k.dir = S_ISDIR(st.st_mode);
      }
      carried[i].push_back(std::move(k));
    }
  for (size_t i = 0; i < dirs.size(); ++i) {
    std::string at = root + dirs[i].path;
    if (dirs[i].disk == exg::microvm::guest::kOnTmpfs) {
      make_dirs(at, 0755);
      char opts[32];
      std::snprintf(opts, sizeof opts, "mode=%04o", dirs[i].mode);
      mount_or_die("tmpfs", at, "tmpfs", MS_NOSUID | MS_NODEV, opts);
    } else if (dirs[i].disk == exg::microvm::guest::kOnDiskDir) {
      std::string d = disk_dir_for(dirs[i].path);
      if (::mkdir(d.c_str(), 0755) != 0) die("mkdir %s", d);
      make_dirs(at, 0755);  // in an overlay of the disk, or the view's own
      ::chmod(d.c_str(), dirs[i].mode);
      if (::mount(d.c_str(), at.c_str(), nullptr, MS_BIND, nullptr) != 0) die("bind the scratch disk's %s", d);
    } else {
      // The view's directory stays readable below; what is written goes to the disk.
      std::string d = disk_dir_for(dirs[i].path);
      std::string upper = d + "/upper", work = d + "/work";
      for (const auto& m : {d, upper, work})
        if (::mkdir(m.c_str(), 0755) != 0) die("mkdir %s", m);
      std::string opts = "lowerdir=" + at + ",upperdir=" + upper + ",workdir=" + work;
      mount_or_die("overlay", at, "overlay", 0, opts.c_str());
    }
    for (auto& k : carried[i]) {
      std::string p = root + k.path;
      make_dirs(p.substr(0, p.rfind('/')), 0755);
      if (k.tree < 0) {
        if (::symlink(k.link.c_str(), p.c_str()) != 0) die("symlink %s", k.path);
        continue;
      }
      if (k.dir) {
        if (::mkdir(p.c_str(), 0755) != 0 && errno != EEXIST) die("mkdir %s", k.path);
      } else {
        int f = ::open(p.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        if (f < 0) die("create %s", k.path);
        ::close(f);
      }
      if (exg::sys::move_mount(k.tree, "", AT_FDCWD, p.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
        die("put the view's %s into the guest's own tmpfs", k.path);
      ::close(k.tree);
    }
  }
}

// The guest's own /proc, /sys and /dev over the view's (which are empty
// directories of the host view: nothing of qemu's own /proc is exported).
// /tmp, /var/tmp and /run are the guest's own (mount_scratch, before this).
// `privileged`: the command runs as root in the guest (--microvm-root), for
// the tools that need /dev/fuse, /dev/net/tun and loop devices (their modules
// are loaded before the template is saved: guest image, PRIVILEGED).
void mount_guest_filesystems(const std::string& root, bool privileged) {
  if (is_dir(root + "/proc")) mount_or_die("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  if (is_dir(root + "/sys"))
    mount_or_die("sysfs", root + "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, nullptr);
  // Guest root's container runtimes (crun, runc, dockerd) make their cgroups
  // here: the guest kernel's own hierarchy, nothing of the host's. Root could
  // leave the pids limit's cgroup anyway (the guest kernel and qemu's cgroup
  // on the host are the bounds); an unprivileged guest user gets none.
  if (privileged && is_dir(root + "/sys/fs/cgroup"))
    mount_or_die("cgroup2", root + "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  if (!is_dir(root + "/dev")) return;
  // A minimal /dev: not devtmpfs, which would hold the channel's port and the
  // guest's disks for root inside to open.
  std::string dev = root + "/dev";
  mount_or_die("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=1m");
  struct Node {
    const char* name;
    unsigned maj, min;
  };
  for (Node n : {Node{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}}) {
    std::string p = dev + "/" + n.name;
    if (::mknod(p.c_str(), S_IFCHR | 0666, makedev(n.maj, n.min)) != 0) die("mknod %s", p);
    ::chmod(p.c_str(), 0666);
  }
  if (privileged) {
    // Root's tools: FUSE, tun (VPN clients), loop devices (losetup, mount -o loop).
    ::mkdir((dev + "/net").c_str(), 0755);
    auto node = [&](const std::string& name, mode_t type, mode_t mode, unsigned maj, unsigned min) {
      std::string p = dev + "/" + name;
      if (::mknod(p.c_str(), type | mode, makedev(maj, min)) != 0) die("mknod %s", p);
      ::chmod(p.c_str(), mode);  // past the umask
    };
    node("fuse", S_IFCHR, 0666, 10, 229);
    node("net/tun", S_IFCHR, 0666, 10, 200);
    node("loop-control", S_IFCHR, 0660, 10, 237);
    for (unsigned i = 0; i < 8; ++i) node("loop" + std::to_string(i), S_IFBLK, 0660, 7, i);
  }
  ::mkdir((dev + "/pts").c_str(), 0755);
  mount_or_die("devpts", dev + "/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620");
  ::symlink("pts/ptmx", (dev + "/ptmx").c_str());
  ::mkdir((dev + "/shm").c_str(), 01777);
  mount_or_die("tmpfs", dev + "/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  ::symlink("/proc/self/fd", (dev + "/fd").c_str());
  ::symlink("/proc/self/fd/0", (dev + "/stdin").c_str());
  ::symlink("/proc/self/fd/1", (dev + "/stdout").c_str());
  ::symlink("/proc/self/fd/2", (dev + "/stderr").c_str());
}

// Loopback up: the command's own local servers work; nothing else exists (no NIC).
void loopback_up() {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) die("socket for lo%s", "");
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
  if (::ioctl(s, SIOCGIFFLAGS, &ifr) != 0) die("SIOCGIFFLAGS %s", "lo");
  ifr.ifr_flags |= IFF_UP;
  if (::ioctl(s, SIOCSIFFLAGS, &ifr) != 0) die("bring %s up", "lo");
  ::close(s);
}

}  // namespace

int main() {
  if (::getpid() != 1) {
    std::fprintf(stderr, "exguardian-guest-init: only pid 1 of the microVM guest\n");
    return 125;
  }
  ::mkdir("/dev", 0755);
  ::mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
  int con = ::open("/dev/console", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (con >= 0) {
    for (int k = 0; k < 3; ++k) ::dup2(con, k);
    ::close(con);
  }
  ::mkdir("/proc", 0555);
  ::mkdir("/sys", 0555);
  mount_or_die("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  mount_or_die("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  const std::string cmdline = read_file("/proc/cmdline");
  auto probe_done = [] {
    std::fprintf(stderr, "%s\n", kBootProbeLine);
    std::fflush(stderr);
    power_off();
  };
  if (cmdline.find(kBootProbeArg) != std::string::npos) probe_done();
  load_modules(kModuleOrder);
  if (cmdline.find(kModulesProbeArg) != std::string::npos) probe_done();
  std::string port = find_channel(kChannelName);
  int channel = ::open(port.c_str(), O_RDWR | O_CLOEXEC);
  if (channel < 0) die("open the channel %s", port);
  // A template is saved here; a restored guest goes on from here.
  BootRecord rec = take_boot_record(channel);
  reseed_rng(rec.seed_hex);
  timespec now{static_cast<time_t>(rec.time_sec), static_cast<long>(rec.time_nsec)};
  if (::clock_settime(CLOCK_REALTIME, &now) != 0) die("set the clock%s", "");
  uid_t uid = rec.uid;
  gid_t gid = rec.gid;
  const std::string& host = rec.hostname;
  Boot boot = read_boot(channel);
  int egress_port = -1;
  if (boot.egress) {
    std::string ep = find_channel(kEgressChannelName);
    egress_port = ::open(ep.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK);
    if (egress_port < 0) die("open the egress channel %s", ep);
  }

  // The pids limit's cgroup, while the initramfs (where it is mounted for a moment) is still "/".
  PidsCgroup cgroup;
  if (boot.walls.pids) {
    std::string err = make_pids_cgroup(boot.walls.pids, cgroup);
    if (!err.empty()) die("the pids limit: %s", err, 0);
  }

  if (boot.disk) mount_disk();
  const std::string root = "/view";
  mount_view(root);
  mount_scratch(root, boot.scratch);
  mount_guest_filesystems(root, uid == 0);
  // Into the view, for good: the initramfs stays below, out of reach of the
  // unprivileged agent (root inside could chroot out of it, to find only this
  // program and the modules).
  ::umount2("/proc", MNT_DETACH);
  ::umount2("/sys", MNT_DETACH);
  if (::chdir(root.c_str()) != 0) die("chdir %s", root);
  if (::mount(".", "/", nullptr, MS_MOVE, nullptr) != 0) die("move the view to %s", std::string("/"));
  if (::chroot(".") != 0 || ::chdir("/") != 0) die("chroot into the view%s", "");
  ::sethostname(host.c_str(), host.size());
  loopback_up();
  Egress eg;
  if (egress_port >= 0) {
    eg.http = bind_loopback(SOCK_STREAM, "127.0.0.1", kHttpProxyPort);
    eg.socks = bind_loopback(SOCK_STREAM, "127.0.0.1", kSocksProxyPort);
    if (boot.resolver) eg.dns = bind_loopback(SOCK_DGRAM, kResolverAddress, kResolverPort);
    if (boot.transparent) {
      // Fail closed: the host asked for the capture; without it the guest's
      // direct connections would find no route instead of the proxy (safe,
      // but not what the policy says), so the sandbox does not start.
      std::string what;
      eg.transparent = exg::walls::set_up_transparent_capture(kTransparentPort, &what);
      if (eg.transparent < 0)
        die("%s", what + ": " + std::strerror(errno) +
                      " (fail closed; a policy with \"network\": {\"transparent\": false} runs without it)",
            0);
      // Guest root's nested containers (podman's or dockerd's bridge): their
      // TCP reaches the same listener, so the same proxy judges it, and their
      // DNS (to whatever server their engine gave them) the same resolver.
      // (Without this they would find no way out at all: the guest has no NIC.)
      if (uid == 0) {
        exg::walls::ForwardedResolver dns;
        if (eg.dns >= 0) {
          ::inet_pton(AF_INET, kResolverAddress, &dns.address);
          dns.port = kResolverPort;
        }
        if (int e = exg::walls::add_forwarded_capture(kTransparentPort, dns, &what))
          die("%s", what + ": " + std::strerror(e) + " (fail closed)", 0);
      }
    }
  }

  // Held by pid 1 for the guest's life (walls_apply.hpp: Landlock rules on 9p
  // directories match only while their dentries stay); the children close them.
  const std::vector<int> pinned = pin_writable_dirs(boot.walls);
  auto close_pinned = [&pinned] {
    for (int fd : pinned) ::close(fd);
  };

  // Pid 1 stays root to reap orphans and end the guest; the agent is its child.
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  if (egress_port >= 0) {
    pid_t relay = ::fork();
    if (relay < 0) die("fork the egress relay%s", "");
    if (relay == 0) {
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      ::close(channel);
      close_pinned();
      egress_relay(egress_port, eg, uid, boot.walls.seccomp);
    }
    ::close(egress_port);
    for (int fd : {eg.http, eg.socks, eg.dns, eg.transparent})
      if (fd >= 0) ::close(fd);
  }
  pid_t agent = ::fork();
  if (agent < 0) die("fork the agent%s", "");
  if (agent == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    close_pinned();
    WallReport walls;
    if (std::string err = enter_limits(cgroup, boot.walls.pids, walls); !err.empty()) die("%s", err, 0);
    if (cgroup.procs >= 0) ::close(cgroup.procs);
    if (uid != 0) {
      if (::setgroups(0, nullptr) != 0 || ::setresgid(gid, gid, gid) != 0 || ::setresuid(uid, uid, uid) != 0)
        die("drop to uid %s", std::to_string(uid));
      ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    }
    ::prctl(PR_SET_DUMPABLE, 0);
    (void)::setsid();
    // File requests' relative paths begin here, as on every layer (the agent's own cwd).
    if (::chdir(boot.cwd.c_str()) != 0) say("chdir %s", boot.cwd, errno);
    if (std::string err = apply_walls(boot.walls, walls); !err.empty()) die("%s", err, 0);
    exg::agent::AgentConfig cfg;
    cfg.channel = channel;
    cfg.env = boot.env;
    cfg.cwd = boot.cwd;
    cfg.walls = std::move(walls);
    cfg.pids_events = cgroup.events;
    cfg.pids_notify = cgroup.notify;
    cfg.pids_max = boot.walls.pids;
    exg::agent::serve(cfg);
  }
  ::close(channel);
  for (int fd : {cgroup.procs, cgroup.events, cgroup.notify})
    if (fd >= 0) ::close(fd);
  for (;;) {
    int status = 0;
    pid_t p = ::waitpid(-1, &status, 0);
    if (p == agent || (p < 0 && errno == ECHILD)) break;
  }
  ::kill(-1, SIGKILL);
  while (::waitpid(-1, nullptr, 0) > 0) {
  }
  power_off();
}
