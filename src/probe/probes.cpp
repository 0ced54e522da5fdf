#include "probe/probes.hpp"

#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <linux/perf_event.h>
#include <linux/reboot.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "util/syscalls.hpp"

namespace exg::probe {

namespace {

// What one attempt did: the raw return value and errno.
struct Attempt {
  long rc;
  int err;
};

Attempt result(long rc) { return {rc, rc < 0 ? errno : 0}; }

// An fd > 0 means success; close it so the probe leaks nothing.
Attempt fd_result(long rc) {
  Attempt a = result(rc);
  if (rc >= 0) ::close(static_cast<int>(rc));
  return a;
}

constexpr long kX32 = 0x40000000;  // __X32_SYSCALL_BIT

// ---- other processes ----------------------------------------------------

// A child of our own to attach to: the same syscall, and harmless should the
// filter fail (pid 1 in the sandbox is its init; on a test host it is the host's).
Attempt ptrace_attach() {
  pid_t t = ::fork();
  if (t == 0) {
    ::pause();
    ::_exit(0);
  }
  Attempt a = result(::syscall(SYS_ptrace, 16 /* PTRACE_ATTACH */, t, 0, 0));
  ::kill(t, SIGKILL);
  ::waitpid(t, nullptr, 0);
  return a;
}
Attempt ptrace_traceme() { return result(::syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0)); }

Attempt process_vm(long nr) {
  char src[8] = "exg", dst[8] = {};
  iovec local{dst, sizeof dst}, remote{src, sizeof src};
  if (nr == SYS_process_vm_writev) std::swap(local, remote);
  return result(::syscall(nr, ::getpid(), &local, 1, &remote, 1, 0));
}

Attempt pidfd_getfd() {
  int pidfd = sys::pidfd_open(::getpid());
  if (pidfd < 0) return result(-1);
  Attempt a = fd_result(::syscall(SYS_pidfd_getfd, pidfd, 0, 0));
  ::close(pidfd);
  return a;
}

// ---- kernel attack surface ----------------------------------------------

Attempt bpf_prog_load() {
  bpf_insn insns[2] = {};
  insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K;  // r0 = 0
  insns[1].code = BPF_JMP | BPF_EXIT;
  static const char license[] = "GPL";
  bpf_attr attr{};
  attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
  attr.insn_cnt = 2;
  attr.insns = reinterpret_cast<uint64_t>(insns);
  attr.license = reinterpret_cast<uint64_t>(license);
  return fd_result(::syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof attr));
}

Attempt perf_event_open() {
  perf_event_attr attr{};
  attr.type = PERF_TYPE_SOFTWARE;
  attr.size = sizeof attr;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.disabled = 1;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  return fd_result(::syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
}

Attempt userfaultfd() { return fd_result(::syscall(SYS_userfaultfd, O_CLOEXEC)); }
Attempt keyctl() {
  return result(::syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
}
Attempt add_key() {
  return result(::syscall(SYS_add_key, "user", "exg-probe", "x", 1, KEY_SPEC_PROCESS_KEYRING));
}
Attempt request_key() { return result(::syscall(SYS_request_key, "user", "exg-probe-none", nullptr, 0)); }

Attempt io_uring_setup() {
  unsigned char params[120] = {};  // struct io_uring_params
  return fd_result(::syscall(SYS_io_uring_setup, 1, params));
}
Attempt io_uring_enter() { return result(::syscall(SYS_io_uring_enter, -1, 0, 0, 0, nullptr, 0)); }
Attempt io_uring_register() { return result(::syscall(SYS_io_uring_register, -1, 0, nullptr, 0)); }

// Arguments the kernel rejects should the filter fail: the host stays as it was.
Attempt kexec_load() { return result(::syscall(SYS_kexec_load, 0, 0, nullptr, 0xffff0000UL)); }
Attempt kexec_file_load() { return result(::syscall(SYS_kexec_file_load, -1, -1, 0, "", 0xffff0000UL)); }
Attempt init_module() { return result(::syscall(SYS_init_module, nullptr, 0, "")); }
Attempt finit_module() { return result(::syscall(SYS_finit_module, -1, "", 0)); }
Attempt delete_module() { return result(::syscall(SYS_delete_module, "exg_probe_none", O_NONBLOCK)); }

// ---- scratch directories -----------------------------------------------------

// The scratch directories' parent: set_scratch_parent's (exguardian-probe --scratch: a
// foreign sandbox's workspace, where srt keeps /tmp read-only), else $TMPDIR (the landlock
// layer's private TMPDIR; the host's /tmp is read-only there), else /tmp.
std::string& scratch_parent() {
  static std::string dir = [] {
    const char* t = std::getenv("TMPDIR");
    return std::string(t && *t == '/' ? t : "/tmp");
  }();
  return dir;
}
// A fresh scratch directory under scratch_parent(); empty when none can be made (an attempt
// that failed on mkdtemp would say nothing about the call it is about).
std::string scratch_dir() {
  std::string tmpl = scratch_parent() + "/exg-probe-XXXXXX";
  return ::mkdtemp(tmpl.data()) ? tmpl : std::string();
}

// ---- mounts and roots -----------------------------------------------------

Attempt mount_tmpfs() {
  std::string dir = scratch_dir();
  if (dir.empty()) return result(-1);
  Attempt a = result(::syscall(SYS_mount, "exg", dir.c_str(), "tmpfs", 0, nullptr));
  if (a.rc == 0) ::umount2(dir.c_str(), MNT_DETACH);
  ::rmdir(dir.c_str());
  return a;
}
Attempt umount2() { return result(::syscall(SYS_umount2, "/exg-probe-none", 0)); }
Attempt pivot_root() { return result(::syscall(SYS_pivot_root, "/exg-probe-none", "/exg-probe-none")); }
Attempt chroot() { return result(::syscall(SYS_chroot, "/")); }
Attempt fsopen() { return fd_result(::syscall(SYS_fsopen, "tmpfs", 0)); }
Attempt fsconfig() { return result(::syscall(SYS_fsconfig, -1, 0, nullptr, nullptr, 0)); }
Attempt fsmount() { return result(::syscall(SYS_fsmount, -1, 0, 0)); }
Attempt fspick() { return fd_result(::syscall(SYS_fspick, AT_FDCWD, "/", 0)); }
Attempt open_tree() { return fd_result(::syscall(SYS_open_tree, AT_FDCWD, "/", 1 /* OPEN_TREE_CLONE */ | O_CLOEXEC)); }
Attempt move_mount() { return result(::syscall(SYS_move_mount, -1, "", -1, "", 0)); }
Attempt mount_setattr() { return result(::syscall(SYS_mount_setattr, -1, "", 0, nullptr, 0)); }

// ---- namespaces -----------------------------------------------------------

Attempt setns_net() {
  int fd = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return result(-1);
  Attempt a = result(::syscall(SYS_setns, fd, CLONE_NEWNET));
  ::close(fd);
  return a;
}
Attempt unshare_flags(unsigned long flags) { return result(::syscall(SYS_unshare, flags)); }
// clone(2) like fork: the child exits at once.
Attempt clone_flags(unsigned long flags) {
  long r = ::syscall(SYS_clone, flags | SIGCHLD, 0, nullptr, nullptr, 0);
  if (r == 0) ::_exit(0);
  Attempt a = result(r);
  if (r > 0) ::waitpid(static_cast<pid_t>(r), nullptr, 0);
  return a;
}
Attempt clone3_plain() {
  int pidfd = -1;
  long r = sys::clone3_fork(0, &pidfd);
  if (r == 0) ::_exit(0);
  Attempt a = result(r);
  if (r > 0) ::waitpid(static_cast<pid_t>(r), nullptr, 0);
  if (pidfd >= 0) ::close(pidfd);
  return a;
}
Attempt clone3_newuser() {
  long r = sys::clone3_fork(CLONE_NEWUSER, nullptr);
  if (r == 0) ::_exit(0);
  Attempt a = result(r);
  if (r > 0) ::waitpid(static_cast<pid_t>(r), nullptr, 0);
  return a;
}

Attempt open_by_handle_at() {
  struct {
    unsigned int handle_bytes;
    int handle_type;
    unsigned char f_handle[64];
  } h{};
  h.handle_bytes = 8;
  h.handle_type = 1;  // FILEID_INO32_GEN
  return fd_result(::syscall(SYS_open_by_handle_at, AT_FDCWD, &h, O_RDONLY));
}
Attempt name_to_handle_at() {
  struct {
    unsigned int handle_bytes;
    int handle_type;
    unsigned char f_handle[128];
  } h{};
  h.handle_bytes = sizeof h.f_handle;
  int mount_id = 0;
  return result(::syscall(SYS_name_to_handle_at, AT_FDCWD, "/", &h, &mount_id, 0));
}

// ---- host-wide state (arguments the kernel rejects: harmless if let through) --

Attempt clock_settime() {
  timespec ts{0, 2000000000L};  // invalid nanoseconds: EINVAL past the filter
  return result(::syscall(SYS_clock_settime, CLOCK_REALTIME, &ts));
}
Attempt settimeofday() {
  timeval tv{0, 2000000};
  return result(::syscall(SYS_settimeofday, &tv, nullptr));
}
Attempt clock_adjtime() {
  unsigned char tx[256] = {};  // struct timex, modes 0: a read
  return result(::syscall(SYS_clock_adjtime, CLOCK_REALTIME, tx));
}
Attempt adjtimex() {
  unsigned char tx[256] = {};
  return result(::syscall(SYS_adjtimex, tx));
}
Attempt acct() { return result(::syscall(SYS_acct, "/exg-probe-none/acct")); }
Attempt swapon() { return result(::syscall(SYS_swapon, "/exg-probe-none", 0)); }
Attempt swapoff() { return result(::syscall(SYS_swapoff, "/exg-probe-none")); }
// LINUX_REBOOT_CMD_CAD_OFF with a wrong magic: EINVAL for root past the filter.
Attempt reboot() { return result(::syscall(SYS_reboot, 0, 0, LINUX_REBOOT_CMD_CAD_OFF, nullptr)); }
Attempt syslog() {
  char buf[64];
  return result(::syscall(SYS_syslog, 3 /* SYSLOG_ACTION_READ_ALL */, buf, sizeof buf));
}
Attempt quotactl() { return result(::syscall(SYS_quotactl, 0, "/exg-probe-none", 0, nullptr)); }
Attempt lookup_dcookie() {
  char buf[64];
  return result(::syscall(SYS_lookup_dcookie, 0, buf, sizeof buf));
}
Attempt vhangup() { return result(::syscall(SYS_vhangup)); }  // the probe runs setsid: no tty to hang up
Attempt uselib() { return result(::syscall(SYS_uselib, "/exg-probe-none")); }
Attempt ustat() {
  char buf[64];
  return result(::syscall(SYS_ustat, 0, buf));
}
Attempt sysfs() { return result(::syscall(SYS_sysfs, 3)); }
Attempt sysctl() { return result(::syscall(SYS__sysctl, nullptr)); }
Attempt nfsservctl() { return result(::syscall(SYS_nfsservctl, 0, nullptr, nullptr)); }
Attempt iopl() { return result(::syscall(SYS_iopl, 0)); }
Attempt ioperm() { return result(::syscall(SYS_ioperm, 0x80, 1, 0)); }

// ---- set-id modes ------------------------------------------------------------

// A scratch directory (scratch_dir) with one plain file "f" in it; removed afterwards,
// whatever the attempt did.
template <typename Fn>
Attempt in_scratch_dir(Fn&& attempt) {
  std::string dir = scratch_dir();
  if (dir.empty()) return result(-1);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int f = dfd < 0 ? -1 : ::openat(dfd, "f", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  Attempt a = f < 0 ? result(-1) : attempt(dfd, f);
  if (f >= 0) ::close(f);
  if (dfd >= 0) {
    for (const char* n : {"f", "g", "t"}) ::unlinkat(dfd, n, 0);
    ::unlinkat(dfd, "d", AT_REMOVEDIR);
    ::close(dfd);
  }
  ::rmdir(dir.c_str());
  return a;
}
// The path of name in the scratch directory, through /proc (no cwd change).
std::string at(int dfd, const char* name) { return "/proc/self/fd/" + std::to_string(dfd) + "/" + name; }

Attempt setid_chmod(mode_t m) {
  return in_scratch_dir([m](int dfd, int) { return result(::syscall(SYS_chmod, at(dfd, "f").c_str(), m)); });
}
Attempt setid_fchmod(mode_t m) {
  return in_scratch_dir([m](int, int f) { return result(::syscall(SYS_fchmod, f, m)); });
}
Attempt setid_fchmodat(long nr, mode_t m) {
  return in_scratch_dir([nr, m](int dfd, int) { return result(::syscall(nr, dfd, "f", m, 0)); });
}
Attempt setid_open(long flags, mode_t m) {
  return in_scratch_dir([flags, m](int dfd, int) {
    return fd_result(::syscall(SYS_open, at(dfd, "g").c_str(), flags | O_CLOEXEC, m));
  });
}
Attempt setid_openat(long flags, mode_t m) {
  return in_scratch_dir([flags, m](int dfd, int) {
    return fd_result(::syscall(SYS_openat, dfd, (flags & O_TMPFILE) == O_TMPFILE ? "." : "g", flags | O_CLOEXEC, m));
  });
}
Attempt setid_creat(mode_t m) {
  return in_scratch_dir([m](int dfd, int) { return fd_result(::syscall(SYS_creat, at(dfd, "g").c_str(), m)); });
}
Attempt setid_mknodat(long nr, mode_t m) {
  return in_scratch_dir([nr, m](int dfd, int) {
    return nr == SYS_mknod ? result(::syscall(SYS_mknod, at(dfd, "g").c_str(), S_IFREG | m, 0))
                           : result(::syscall(SYS_mknodat, dfd, "g", S_IFREG | m, 0));
  });
}
// openat2 with O_CREAT: its mode is in memory, out of a filter's sight.
Attempt openat2_creat() {
  return in_scratch_dir([](int dfd, int) {
    return fd_result(sys::openat2(dfd, "g", O_WRONLY | O_CREAT | O_CLOEXEC, 0, S_ISUID | 0755));
  });
}
// mkdir keeps only the permission and sticky bits of its mode (the kernel
// drops set-id bits): allowed, and the directory made has none.
Attempt mkdir_setid_mode() {
  return in_scratch_dir([](int dfd, int) -> Attempt {
    if (::mkdirat(dfd, "d", S_ISUID | S_ISGID | 0755) != 0) return result(-1);
    struct stat st;
    if (::fstatat(dfd, "d", &st, 0) != 0) return result(-1);
    return (st.st_mode & (S_ISUID | S_ISGID)) ? Attempt{-1, EEXIST} : Attempt{0, 0};
  });
}

// ---- personality ----------------------------------------------------------

Attempt set_personality(unsigned long p) { return result(::syscall(SYS_personality, p)); }

// ---- terminals ------------------------------------------------------------

// fd 0 when it is a terminal (the real target), else /dev/tty, else a new
// pty; *master is the pty's master, kept open while the slave is used.
int terminal_fd(int* master) {
  *master = -1;
  if (::isatty(0)) return 0;
  int fd = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (fd >= 0) return fd;
  *master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (*master < 0) return -1;
  ::grantpt(*master);
  ::unlockpt(*master);
  const char* name = ::ptsname(*master);
  return name ? ::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC) : -1;
}
void close_terminal(int fd, int master) {
  if (fd > 0) ::close(fd);
  if (master >= 0) ::close(master);
}
Attempt tty_ioctl(unsigned long request, void* arg) {
  int master;
  int fd = terminal_fd(&master);
  if (fd < 0) {
    close_terminal(fd, master);
    return result(-1);
  }
  Attempt a = result(::syscall(SYS_ioctl, fd, request, arg));
  close_terminal(fd, master);
  return a;
}
Attempt tty_inject(unsigned long request) {
  char c = ' ';
  return tty_ioctl(request, &c);
}

// ---- sockets --------------------------------------------------------------

Attempt socket_of(unsigned long family, unsigned long type, unsigned long proto, long nr = SYS_socket) {
  return fd_result(::syscall(nr, family, type, proto));
}
Attempt socketpair_of(int family, int type) {
  int sv[2];
  Attempt a = result(::syscall(SYS_socketpair, family, type, 0, sv));
  if (a.rc == 0) {
    ::close(sv[0]);
    ::close(sv[1]);
  }
  return a;
}

// ---- other architectures --------------------------------------------------

Attempt i386_getpid() {
  long r;
  asm volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory");  // __NR_getpid on i386
  return {r, r < 0 ? static_cast<int>(-r) : 0};
}

// ---- ordinary work --------------------------------------------------------

Attempt fork_wait() {
  pid_t p = ::fork();
  if (p == 0) ::_exit(7);
  if (p < 0) return result(-1);
  int st = 0;
  if (::waitpid(p, &st, 0) != p) return result(-1);
  return {WIFEXITED(st) && WEXITSTATUS(st) == 7 ? 0 : -1, 0};
}
void* thread_fn(void*) { return reinterpret_cast<void*>(42); }
Attempt thread_create() {  // glibc tries clone3 first, then clone
  pthread_t t;
  int e = ::pthread_create(&t, nullptr, thread_fn, nullptr);
  if (e != 0) return {-1, e};
  void* r = nullptr;
  ::pthread_join(t, &r);
  return {r == reinterpret_cast<void*>(42) ? 0 : -1, 0};
}
Attempt netlink_route() {
  return fd_result(::syscall(SYS_socket, AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
}
Attempt tty_winsize() {
  winsize ws{};
  return tty_ioctl(TIOCGWINSZ, &ws);
}

struct Probe {
  const char* name;
  int want;  // the errno expected; 0: must succeed
  Attempt (*fn)();
  // A foreign entry (int 0x80) that some kernels do not have at all: with IA32
  // emulation off, or under a hypervisor that does not deliver it (PVM, seen
  // here), the instruction faults (SIGSEGV) before any syscall is entered.
  bool entry_may_be_absent = false;
  // Non-null: not run with no sandbox (escape-test --sandbox none), and why. The
  // others touch only the probe's own process, its own children, descriptors and
  // scratch files (set-id files in a mkdtemp directory it removes), or read.
  const char* unsafe_without_sandbox = nullptr;
};

#define P(name, want, body) {name, want, []() -> Attempt { return body; }}
#define P_FOREIGN_ENTRY(name, want, body) {name, want, []() -> Attempt { return body; }, true}
#define P_HOST_UNSAFE(name, want, body, why) {name, want, []() -> Attempt { return body; }, false, why}

// Why the host-wide probes are not run with no sandbox: their arguments are ones the
// kernel rejects, but with no filter and no namespace between them and the host's
// kernel a kernel that took them would act on the machine itself.
constexpr const char* kKexec = "kexec: a kernel that took the arguments would stage a new kernel for the host";
constexpr const char* kModule = "module loading: a kernel that took the arguments would load or remove a host module";
constexpr const char* kReboot = "reboot(2) on the host's own kernel";
constexpr const char* kSwap = "swapon/swapoff change the host's swap";
constexpr const char* kAcct = "acct(2) turns process accounting on for the whole host";
constexpr const char* kClock = "sets the host's clock had the kernel taken the value";

const Probe kProbes[] = {
    P("ptrace-attach", EPERM, ptrace_attach()),
    P("ptrace-traceme", EPERM, ptrace_traceme()),
    P("process-vm-readv", EPERM, process_vm(SYS_process_vm_readv)),
    P("process-vm-writev", EPERM, process_vm(SYS_process_vm_writev)),
    P("pidfd-getfd", EPERM, pidfd_getfd()),
    P("bpf", EPERM, bpf_prog_load()),
    P("perf-event-open", EPERM, perf_event_open()),
    P("userfaultfd", EPERM, userfaultfd()),
    P("keyctl", EPERM, keyctl()),
    P("add-key", EPERM, add_key()),
    P("request-key", EPERM, request_key()),
    P("io-uring-setup", EPERM, io_uring_setup()),
    P("io-uring-enter", EPERM, io_uring_enter()),
    P("io-uring-register", EPERM, io_uring_register()),
    P_HOST_UNSAFE("kexec-load", EPERM, kexec_load(), kKexec),
    P_HOST_UNSAFE("kexec-file-load", EPERM, kexec_file_load(), kKexec),
    P_HOST_UNSAFE("init-module", EPERM, init_module(), kModule),
    P_HOST_UNSAFE("finit-module", EPERM, finit_module(), kModule),
    P_HOST_UNSAFE("delete-module", EPERM, delete_module(), kModule),
    P("mount-tmpfs", EPERM, mount_tmpfs()),
    P("umount2", EPERM, umount2()),
    P("pivot-root", EPERM, pivot_root()),
    P("chroot", EPERM, chroot()),
    P("fsopen", EPERM, fsopen()),
    P("fsconfig", EPERM, fsconfig()),
    P("fsmount", EPERM, fsmount()),
    P("fspick", EPERM, fspick()),
    P("open-tree", EPERM, open_tree()),
    P("move-mount", EPERM, move_mount()),
    P("mount-setattr", EPERM, mount_setattr()),
    P("setns-net", EPERM, setns_net()),
    P("unshare-newuser", EPERM, unshare_flags(CLONE_NEWUSER)),
    P("unshare-newns", EPERM, unshare_flags(CLONE_NEWNS)),
    P("unshare-newnet", EPERM, unshare_flags(CLONE_NEWNET)),
    P("unshare-newpid", EPERM, unshare_flags(CLONE_NEWPID)),
    P("unshare-newuts", EPERM, unshare_flags(CLONE_NEWUTS)),
    P("unshare-newipc", EPERM, unshare_flags(CLONE_NEWIPC)),
    P("unshare-newcgroup", EPERM, unshare_flags(CLONE_NEWCGROUP)),
    P("unshare-newtime", EPERM, unshare_flags(0x80 /* CLONE_NEWTIME */)),
    P("unshare-files-newuser", EPERM, unshare_flags(CLONE_FILES | CLONE_NEWUSER)),
    P("clone-newuser", EPERM, clone_flags(CLONE_NEWUSER)),
    P("clone-newpid", EPERM, clone_flags(CLONE_NEWPID)),
    P("clone-newnet", EPERM, clone_flags(CLONE_NEWNET)),
    P("clone-newns", EPERM, clone_flags(CLONE_NEWNS)),
    P("clone3", ENOSYS, clone3_plain()),
    P("clone3-newuser", ENOSYS, clone3_newuser()),
    P("open-by-handle-at", EPERM, open_by_handle_at()),
    P("name-to-handle-at", EPERM, name_to_handle_at()),
    P("personality-bsd", EPERM, set_personality(PER_BSD)),
    P("personality-read-implies-exec", EPERM, set_personality(READ_IMPLIES_EXEC)),
    P("personality-mmap-page-zero", EPERM, set_personality(MMAP_PAGE_ZERO)),
    P("personality-high-bits", EPERM, set_personality(0x100000000UL | PER_BSD)),
    P_HOST_UNSAFE("clock-settime", EPERM, clock_settime(), kClock),
    P("clock-adjtime", EPERM, clock_adjtime()),
    P_HOST_UNSAFE("settimeofday", EPERM, settimeofday(), kClock),
    P("adjtimex", EPERM, adjtimex()),
    P_HOST_UNSAFE("acct", EPERM, acct(), kAcct),
    P_HOST_UNSAFE("swapon", EPERM, swapon(), kSwap),
    P_HOST_UNSAFE("swapoff", EPERM, swapoff(), kSwap),
    P_HOST_UNSAFE("reboot", EPERM, reboot(), kReboot),
    P("syslog", EPERM, syslog()),
    P("quotactl", EPERM, quotactl()),
    P("lookup-dcookie", EPERM, lookup_dcookie()),
    P("vhangup", EPERM, vhangup()),
    P("uselib", EPERM, uselib()),
    P("ustat", EPERM, ustat()),
    P("sysfs", EPERM, sysfs()),
    P("sysctl", EPERM, sysctl()),
    P("nfsservctl", EPERM, nfsservctl()),
    P("iopl", EPERM, iopl()),
    P("ioperm", EPERM, ioperm()),
    P("tiocsti", EPERM, tty_inject(TIOCSTI)),
    P("tiocsti-high-bits", EPERM, tty_inject(0xffffffff00000000UL | TIOCSTI)),
    P("tioclinux", EPERM, tty_inject(TIOCLINUX)),
    P("tioclinux-high-bits", EPERM, tty_inject(0x100000000UL | TIOCLINUX)),
    P("socket-vsock", EAFNOSUPPORT, socket_of(AF_VSOCK, SOCK_STREAM, 0)),
    P("socket-vsock-high-bits", EAFNOSUPPORT, socket_of(0x100000000UL | AF_VSOCK, SOCK_STREAM, 0)),
    P("socket-packet", EAFNOSUPPORT, socket_of(AF_PACKET, SOCK_RAW, 0x0300 /* htons(ETH_P_ALL) */)),
    P("socket-bluetooth", EAFNOSUPPORT, socket_of(AF_BLUETOOTH, SOCK_STREAM, 0)),
    P("socket-alg", EAFNOSUPPORT, socket_of(AF_ALG, SOCK_SEQPACKET, 0)),
    P("socket-inet-raw", EPERM, socket_of(AF_INET, SOCK_RAW, IPPROTO_ICMP)),
    P("socket-inet-raw-cloexec", EPERM, socket_of(AF_INET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_RAW)),
    P("socket-inet6-raw", EPERM, socket_of(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6)),
    P("socket-inet-packet", EPERM, socket_of(AF_INET, SOCK_PACKET, 0x0300)),
    P("socket-netlink-audit", EPROTONOSUPPORT, socket_of(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT)),
    P("socket-netlink-sock-diag", EPROTONOSUPPORT, socket_of(AF_NETLINK, SOCK_RAW, NETLINK_SOCK_DIAG)),
    P("socketpair-vsock", EAFNOSUPPORT, socketpair_of(AF_VSOCK, SOCK_STREAM)),
    P("x32-socket", -SIGSYS, socket_of(AF_INET, SOCK_STREAM, 0, kX32 | SYS_socket)),
    P("x32-getpid", -SIGSYS, result(::syscall(kX32 | SYS_getpid))),
    P_FOREIGN_ENTRY("i386-getpid", -SIGSYS, i386_getpid()),
    P("chmod-setuid", EPERM, setid_chmod(S_ISUID | 0755)),
    P("chmod-setgid", EPERM, setid_chmod(S_ISGID | 0755)),
    P("chmod-setuid-high-bits", EPERM, setid_chmod(0x10000 | S_ISUID | 0755)),
    P("fchmod-setuid", EPERM, setid_fchmod(S_ISUID | 0755)),
    P("fchmodat-setuid", EPERM, setid_fchmodat(SYS_fchmodat, S_ISUID | 0755)),
    P("fchmodat2-setgid", EPERM, setid_fchmodat(452 /* fchmodat2 */, S_ISGID | 0755)),
    P("open-creat-setuid", EPERM, setid_open(O_WRONLY | O_CREAT, S_ISUID | 0755)),
    P("openat-creat-setgid", EPERM, setid_openat(O_WRONLY | O_CREAT | O_EXCL, S_ISGID | 0755)),
    P("openat-tmpfile-setuid", EPERM, setid_openat(O_WRONLY | O_TMPFILE, S_ISUID | 0755)),
    P("creat-setuid", EPERM, setid_creat(S_ISUID | 0755)),
    P("mknod-setuid", EPERM, setid_mknodat(SYS_mknod, S_ISUID | 0755)),
    P("mknodat-setgid", EPERM, setid_mknodat(SYS_mknodat, S_ISGID | 0755)),
    P("openat2-creat", ENOSYS, openat2_creat()),
    // Ordinary work that must keep working.
    P("chmod-plain-allowed", 0, setid_chmod(01755)),
    P("fchmodat-plain-allowed", 0, setid_fchmodat(SYS_fchmodat, 0700)),
    P("openat-creat-plain-allowed", 0, setid_openat(O_WRONLY | O_CREAT, 0755)),
    P("open-rdonly-mode-bits-allowed", 0, fd_result(::syscall(SYS_open, "/dev/null", O_RDONLY | O_CLOEXEC, S_ISUID | 0755))),
    P("mkdir-setid-mode-allowed", 0, mkdir_setid_mode()),
    P("fork-allowed", 0, fork_wait()),
    P("thread-allowed", 0, thread_create()),
    P("unshare-files-allowed", 0, unshare_flags(CLONE_FILES | CLONE_FS | CLONE_SYSVSEM)),
    P("socket-unix-allowed", 0, socket_of(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)),
    P("socketpair-unix-allowed", 0, socketpair_of(AF_UNIX, SOCK_SEQPACKET)),
    P("socket-inet-tcp-allowed", 0, socket_of(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)),
    P("socket-inet-udp-allowed", 0, socket_of(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0)),
    P("socket-inet6-tcp-allowed", 0, socket_of(AF_INET6, SOCK_STREAM, 0)),
    P("socket-inet6-udp-allowed", 0, socket_of(AF_INET6, SOCK_DGRAM, 0)),
    P("netlink-route-allowed", 0, netlink_route()),
    P("personality-query-allowed", 0, set_personality(0xffffffff)),
    P("personality-linux-allowed", 0, set_personality(PER_LINUX)),
    P("personality-addr-no-randomize-allowed", 0, set_personality(ADDR_NO_RANDOMIZE)),
    P("ioctl-winsize-allowed", 0, tty_winsize()),
};

#undef P
#undef P_FOREIGN_ENTRY
#undef P_HOST_UNSAFE

std::string errno_name(int e) {
  const char* n = ::strerrorname_np(e);
  return n ? n : "errno " + std::to_string(e);
}

}  // namespace

void set_scratch_parent(const std::string& dir) { scratch_parent() = dir.empty() ? "/tmp" : dir; }

std::vector<std::string> probe_names() {
  std::vector<std::string> v;
  for (const auto& p : kProbes) v.emplace_back(p.name);
  return v;
}

bool probe_expects_success(const std::string& name) {
  for (const auto& p : kProbes)
    if (name == p.name) return p.want == 0;
  return false;
}

bool probe_safe_without_sandbox(const std::string& name, std::string& why) {
  for (const auto& p : kProbes)
    if (name == p.name) {
      why = p.unsafe_without_sandbox ? p.unsafe_without_sandbox : "";
      return !p.unsafe_without_sandbox;
    }
  why = "no probe of that name";
  return false;
}

int run_probe(const std::string& name, std::string& out) {
  const Probe* probe = nullptr;
  for (const auto& p : kProbes)
    if (name == p.name) probe = &p;
  if (!probe) {
    out = "unknown probe " + name;
    return 2;
  }
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    out = "error: pipe: " + errno_name(errno);
    return 1;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    out = "error: fork: " + errno_name(errno);
    return 1;
  }
  if (pid == 0) {
    ::close(pipefd[0]);
    ::setsid();  // no controlling terminal: vhangup and TIOCSTI cannot reach the caller's
    // The kernel's answer is what is judged: a fault or SIGSYS must end the probe as the
    // signal, not go to a handler the caller installed (ASan's turns SIGSEGV into exit 1).
    for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGSYS, SIGFPE}) ::signal(sig, SIG_DFL);
    Attempt a = probe->fn();
    (void)!::write(pipefd[1], &a, sizeof a);
    ::_exit(0);
  }
  ::close(pipefd[1]);
  Attempt a{-1, 0};
  ssize_t got;
  do got = ::read(pipefd[0], &a, sizeof a);
  while (got < 0 && errno == EINTR);
  ::close(pipefd[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }

  bool must_succeed = probe->want == 0;
  if (WIFSIGNALED(st)) {
    int sig = WTERMSIG(st);
    out = std::string("killed by ") + (::sigabbrev_np(sig) ? std::string("SIG") + ::sigabbrev_np(sig) : std::to_string(sig));
    if (probe->entry_may_be_absent && sig == SIGSEGV) {
      // Not an escape: no syscall ran. Not the filter's answer either, which is said.
      out += " (this kernel has no such syscall entry: the call never ran; the filter's SIGSYS is not exercised here)";
      return 0;
    }
    return !must_succeed && sig == SIGSYS ? 0 : 1;
  }
  if (got != static_cast<ssize_t>(sizeof a)) {
    out = "error: the probe reported nothing";
    return 1;
  }
  if (a.rc >= 0) {
    out = "allowed";
    return must_succeed ? 0 : 1;
  }
  if (must_succeed || probe->want < 0) {
    out = "refused: " + errno_name(a.err);
    return 1;
  }
  if (a.err == probe->want) {
    out = "refused: " + errno_name(a.err);
    return 0;
  }
  out = "failed: " + errno_name(a.err) + " (not the filter's answer, " + errno_name(probe->want) + ")";
  return 1;
}

}  // namespace exg::probe
