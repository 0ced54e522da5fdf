#include "process/seccomp.hpp"

#include <linux/audit.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <memory>

#include "util/unique_fd.hpp"

namespace exg::process {

namespace {

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

// Newer than libseccomp 2.5.4's tables: refused by number (x86_64).
constexpr int kNrOpenTreeAttr = 467;  // Linux 6.15: open_tree() with mount attributes

// Refused whatever their arguments.
constexpr const char* kRefused[] = {
    // other processes' memory and descriptors
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
    // kernel attack surface with a history of escapes
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    // the kernel itself
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    // mounts, old and new API, and leaving the root
    "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick", "open_tree",
    "move_mount", "mount_setattr",
    // other namespaces; handles reach files outside the mount tree
    "setns", "open_by_handle_at", "name_to_handle_at",
    // host-wide state
    "clock_settime", "clock_adjtime", "settimeofday", "adjtimex", "stime", "acct", "swapon", "swapoff",
    "reboot", "syslog", "quotactl", "quotactl_fd", "lookup_dcookie", "vhangup", "nfsservctl", "uselib",
    "ustat", "sysfs", "_sysctl", "iopl", "ioperm",
};

constexpr uint64_t kCloneNamespaces[] = {CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,   CLONE_NEWUSER,
                                         CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP};

constexpr uint32_t kPersonalityAllowed[] = {0x0, 0x8 /* PER_LINUX32 */, 0x20000 /* UNAME26 */, 0x20008,
                                            0x40000 /* ADDR_NO_RANDOMIZE */, 0xffffffff /* query */};

bool family_allowed(uint32_t f) { return f == AF_UNIX || f == AF_INET || f == AF_INET6 || f == AF_NETLINK; }

struct CtxDeleter {
  void operator()(void* c) const { seccomp_release(c); }
};

// A few BPF instructions with forward jumps to labels, resolved at the end.
class Asm {
 public:
  void stmt(uint16_t code, uint32_t k) { code_.push_back(BPF_STMT(code, k)); }
  void load_u32(uint32_t offset) { stmt(BPF_LD | BPF_W | BPF_ABS, offset); }
  // if (A == k) goto jt else goto jf; -1 means the next instruction.
  void jeq(uint32_t k, int jt, int jf = -1) { jump(BPF_JMP | BPF_JEQ | BPF_K, k, jt, jf); }
  void ret(uint32_t k) { stmt(BPF_RET | BPF_K, k); }
  void label(int l) { labels_[l] = code_.size(); }
  std::vector<sock_filter> finish() {
    for (auto& f : fixups_) {
      sock_filter& ins = code_[f.at];
      if (f.jt >= 0) ins.jt = static_cast<uint8_t>(labels_[f.jt] - f.at - 1);
      if (f.jf >= 0) ins.jf = static_cast<uint8_t>(labels_[f.jf] - f.at - 1);
    }
    return code_;
  }

 private:
  void jump(uint16_t code, uint32_t k, int jt, int jf) {
    fixups_.push_back({code_.size(), jt, jf});
    code_.push_back(BPF_JUMP(code, k, 0, 0));
  }
  struct Fixup {
    size_t at;
    int jt, jf;
  };
  std::vector<sock_filter> code_;
  std::vector<Fixup> fixups_;
  size_t labels_[16] = {};
};

constexpr uint32_t arg_lo(int i) { return offsetof(seccomp_data, args) + 8 * i; }  // little-endian

// personality, socket and socketpair refuse what is NOT in a set of values,
// compared on the low 32 bits the kernel reads (int / unsigned int). libseccomp
// 2.5 cannot say that (one comparison per argument per rule, no masked
// not-equal), so these few instructions run before its program. Jumps are
// forward only and every other syscall falls through to libseccomp's code.
std::vector<sock_filter> value_set_prefix() {
  enum { kEnd, kAllow, kNotify, kSocket, kInet, kNetlink, kNotPersonality };
  Asm a;
  a.load_u32(offsetof(seccomp_data, arch));
  a.jeq(AUDIT_ARCH_X86_64, -1, kEnd);
  a.load_u32(offsetof(seccomp_data, nr));
  a.jeq(__NR_personality, -1, kNotPersonality);
  a.load_u32(arg_lo(0));
  for (uint32_t v : kPersonalityAllowed) a.jeq(v, kAllow);
  a.ret(SECCOMP_RET_USER_NOTIF);

  a.label(kNotPersonality);
  a.jeq(__NR_socket, kSocket);
  a.jeq(__NR_socketpair, kSocket, kEnd);
  a.label(kSocket);
  a.load_u32(arg_lo(0));
  a.jeq(AF_UNIX, kAllow);
  a.jeq(AF_INET, kInet);
  a.jeq(AF_INET6, kInet);
  a.jeq(AF_NETLINK, kNetlink, kNotify);
  a.label(kInet);  // no raw IP or link-level packets
  a.load_u32(arg_lo(1));
  a.stmt(BPF_ALU | BPF_AND | BPF_K, 0xf);  // the type without SOCK_NONBLOCK / SOCK_CLOEXEC
  a.jeq(SOCK_RAW, kNotify);
  a.jeq(SOCK_PACKET, kNotify, kAllow);
  a.label(kNetlink);
  a.load_u32(arg_lo(2));
  a.jeq(0 /* NETLINK_ROUTE */, kAllow, kNotify);
  a.label(kAllow);
  a.ret(SECCOMP_RET_ALLOW);
  a.label(kNotify);
  a.ret(SECCOMP_RET_USER_NOTIF);
  a.label(kEnd);
  return a.finish();
}

Error seccomp_error(const std::string& what, int rc) { return Error::sys("seccomp: " + what, -rc); }

}  // namespace

Result<std::vector<sock_filter>> build_seccomp_program() {
#if !defined(__x86_64__)
  return fail(Error::msg("seccomp", "only x86_64 is supported"));
#else
  if (seccomp_api_get() < 5) return fail(Error::msg("seccomp", "libseccomp or the kernel lacks user notification"));
  std::unique_ptr<void, CtxDeleter> ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) return fail(Error::msg("seccomp", "seccomp_init failed"));
  void* c = ctx.get();
  int rc;
  if ((rc = seccomp_attr_set(c, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0)
    return fail(seccomp_error("bad arch action", rc));
  // No NO_NEW_PRIVS from libseccomp: the program is exported, not loaded here.
  if ((rc = seccomp_attr_set(c, SCMP_FLTATR_CTL_NNP, 0)) < 0) return fail(seccomp_error("nnp attribute", rc));
  // A binary tree over syscall numbers: refused syscalls are found in log(n).
  (void)seccomp_attr_set(c, SCMP_FLTATR_CTL_OPTIMIZE, 2);

  auto refuse = [&](int nr, unsigned n, const scmp_arg_cmp* cmp, const char* what) -> Result<void> {
    int r = seccomp_rule_add_array(c, SCMP_ACT_NOTIFY, nr, n, cmp);
    if (r < 0) return fail(seccomp_error(std::string("rule for ") + what, r));
    return {};
  };

  for (const char* name : kRefused) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return fail(Error::msg("seccomp", std::string("unknown syscall ") + name));
    if (nr < 0) continue;  // not on this architecture (stime on x86_64)
    if (auto r = refuse(nr, 0, nullptr, name); !r) return fail(r.error());
  }
  if (auto r = refuse(kNrOpenTreeAttr, 0, nullptr, "open_tree_attr"); !r) return fail(r.error());

  // Nested namespaces: clone and unshare with any namespace flag. A rule per
  // flag (rules on one syscall are OR-ed). clone's low byte is the exit
  // signal, so CLONE_NEWTIME (0x80) exists only for unshare (and clone3).
  for (uint64_t flag : kCloneNamespaces) {
    scmp_arg_cmp cmp = SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag);
    if (auto r = refuse(SCMP_SYS(clone), 1, &cmp, "clone"); !r) return fail(r.error());
    if (auto r = refuse(SCMP_SYS(unshare), 1, &cmp, "unshare"); !r) return fail(r.error());
  }
  {
    scmp_arg_cmp cmp = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWTIME, CLONE_NEWTIME);
    if (auto r = refuse(SCMP_SYS(unshare), 1, &cmp, "unshare"); !r) return fail(r.error());
  }
  // clone3 passes its flags in memory a filter cannot read.
  if ((rc = seccomp_rule_add(c, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0)) < 0)
    return fail(seccomp_error("rule for clone3", rc));

  // Terminal injection. The kernel reads the request as unsigned int: compare
  // the low 32 bits only, so high bits set do not slip through.
  for (uint64_t req : {uint64_t{TIOCSTI}, uint64_t{TIOCLINUX}}) {
    scmp_arg_cmp cmp = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, req);
    if (auto r = refuse(SCMP_SYS(ioctl), 1, &cmp, "ioctl"); !r) return fail(r.error());
  }

  // Export to a memfd and read back: libseccomp 2.5 has no export to memory.
  UniqueFd mem(::memfd_create("exg-seccomp", MFD_CLOEXEC));
  if (!mem) return fail(Error::sys("seccomp: memfd_create"));
  if ((rc = seccomp_export_bpf(c, mem.get())) < 0) return fail(seccomp_error("export", rc));
  off_t size = ::lseek(mem.get(), 0, SEEK_END);
  if (size <= 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0)
    return fail(Error::msg("seccomp", "exported program has a bad size"));

  std::vector<sock_filter> prog = value_set_prefix();
  size_t head = prog.size();
  prog.resize(head + static_cast<size_t>(size) / sizeof(sock_filter));
  char* p = reinterpret_cast<char*>(prog.data() + head);
  for (off_t got = 0; got < size;) {
    ssize_t r = ::pread(mem.get(), p + got, static_cast<size_t>(size - got), got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return fail(Error::sys("seccomp: read exported program"));
    got += r;
  }
  if (prog.size() > BPF_MAXINSNS) return fail(Error::msg("seccomp", "program too long"));
  return prog;
#endif
}

int refused_errno(int nr, const uint64_t args[6]) {
  if (nr == __NR_clone3) return ENOSYS;
  if (nr == __NR_socket || nr == __NR_socketpair) {
    uint32_t family = static_cast<uint32_t>(args[0]);
    if (!family_allowed(family)) return EAFNOSUPPORT;
    // What the kernel says for a netlink family it lacks (libaudit and shadow
    // treat it as "no audit", EPERM would make them fail).
    if (family == AF_NETLINK) return EPROTONOSUPPORT;
    return EPERM;  // raw or packet sockets, as without CAP_NET_RAW
  }
  return EPERM;
}

std::string syscall_name(int nr) {
  if (nr == kNrOpenTreeAttr) return "open_tree_attr";
  char* s = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
  if (!s) return "syscall_" + std::to_string(nr);
  std::string name(s);
  std::free(s);
  return name;
}

int install_seccomp(const std::vector<sock_filter>& prog) {
  sock_fprog fprog{static_cast<unsigned short>(prog.size()), const_cast<sock_filter*>(prog.data())};
  // WAIT_KILLABLE_RECV (5.19): once the supervisor has read a notification, a
  // signal no longer interrupts and restarts the refused syscall (which would
  // notify, and be counted, twice).
  long fd = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                      SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, &fprog);
  if (fd < 0 && errno == EINVAL)
    fd = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &fprog);
  return static_cast<int>(fd);
}

}  // namespace exg::process
