#include "walls/seccomp_rules.hpp"

#include <sched.h>
#include <sys/ioctl.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>


#include <algorithm>
#include <cerrno>

namespace exg::walls::seccomp_rules {

namespace {

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

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

// Linux 6.15: open_tree() with mount attributes; libseccomp 2.5.4 does not know it.
constexpr NumberedSyscall kByNumber[] = {{"open_tree_attr", 467}};

constexpr uint32_t kPersonalityAllowed[] = {0x0, 0x8 /* PER_LINUX32 */, 0x20000 /* UNAME26 */, 0x20008,
                                            0x40000 /* ADDR_NO_RANDOMIZE */, 0xffffffff /* query */};
constexpr uint32_t kFamiliesAllowed[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};
constexpr uint32_t kInetTypesRefused[] = {SOCK_RAW, SOCK_PACKET};  // no raw IP or link-level packets
constexpr uint32_t kNetlinkAllowed[] = {0 /* NETLINK_ROUTE */};

constexpr uint64_t kLow32 = 0xffffffffULL;
// O_TMPFILE is __O_TMPFILE | O_DIRECTORY; the bit of its own is what makes a file.
constexpr uint64_t kTmpfileBit = 020000000;

std::vector<ArgRule> make_flag_rules() {
  std::vector<ArgRule> r;
  // Nested namespaces: a rule per flag (rules on one syscall are OR-ed).
  // clone's low byte is the exit signal, so CLONE_NEWTIME (0x80) exists only
  // for unshare (and clone3).
  for (uint64_t flag : {CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
                        CLONE_NEWCGROUP}) {
    r.push_back({"clone", {{0, flag, flag}}, EPERM, true, "nested namespaces"});
    r.push_back({"unshare", {{0, flag, flag}}, EPERM, true, "nested namespaces"});
  }
  r.push_back({"unshare", {{0, CLONE_NEWTIME, CLONE_NEWTIME}}, EPERM, true, "nested namespaces"});
  // clone3 passes its flags in memory a filter cannot read.
  r.push_back({"clone3", {}, ENOSYS, false, "flags out of the filter's sight; libcs fall back to clone"});
  // Terminal injection. The kernel reads the request as unsigned int: compare
  // the low 32 bits only, so high bits set do not slip through.
  for (uint64_t req : {uint64_t{TIOCSTI}, uint64_t{TIOCLINUX}})
    r.push_back({"ioctl", {{1, kLow32, req}}, EPERM, true, "terminal injection"});
  // Set-id files: a set-uid binary written through an idmapped workspace is
  // set-uid to its on-disk owner (root) on the host. Every call that sets a
  // mode: chmod and kin, and creation with a mode (open/openat/creat with
  // O_CREAT or O_TMPFILE, mknod/mknodat of a regular file). mkdir/mkdirat are
  // not listed: the kernel keeps only S_IRWXUGO|S_ISVTX of their mode
  // (vfs_mkdir), a set-gid directory comes from its parent, never the mode.
  // openat2 carries its mode in memory: below. File capabilities need
  // CAP_SETFCAP, which the command never holds.
  for (uint64_t bit : {uint64_t{S_ISUID}, uint64_t{S_ISGID}}) {
    const char* why = "set-id mode";
    for (const auto& [name, mode_arg] : {std::pair{"chmod", 1u}, {"fchmod", 1u}, {"fchmodat", 2u}, {"fchmodat2", 2u},
                                         {"creat", 1u}, {"mknod", 1u}, {"mknodat", 2u}})
      r.push_back({name, {{mode_arg, bit, bit}}, EPERM, true, why});
    // open(path, flags, mode), openat(dirfd, path, flags, mode): the mode counts
    // only when a file is made.
    for (uint64_t create : {uint64_t{O_CREAT}, uint64_t{kTmpfileBit}}) {
      r.push_back({"open", {{1, create, create}, {2, bit, bit}}, EPERM, true, why});
      r.push_back({"openat", {{2, create, create}, {3, bit, bit}}, EPERM, true, why});
    }
  }
  // openat2's flags and mode are in a struct open_how a filter cannot read:
  // ENOSYS, as on kernels before 5.6; callers fall back to openat.
  r.push_back({"openat2", {}, ENOSYS, false, "flags and mode out of the filter's sight; callers fall back to openat"});
  return r;
}

constexpr int kJudged[] = {__NR_connect, __NR_sendto, __NR_sendmsg, __NR_sendmmsg};

bool in(std::span<const uint32_t> set, uint32_t v) { return std::find(set.begin(), set.end(), v) != set.end(); }

}  // namespace

std::span<const char* const> refused_syscalls() { return kRefused; }
std::span<const int> judged_syscalls() { return kJudged; }
std::span<const NumberedSyscall> refused_by_number() { return kByNumber; }
const std::vector<ArgRule>& flag_rules() {
  static const std::vector<ArgRule> rules = make_flag_rules();
  return rules;
}
std::span<const uint32_t> personality_allowed() { return kPersonalityAllowed; }
std::span<const uint32_t> socket_families_allowed() { return kFamiliesAllowed; }
std::span<const uint32_t> inet_types_refused() { return kInetTypesRefused; }
std::span<const uint32_t> netlink_protocols_allowed() { return kNetlinkAllowed; }

int refused_errno(int nr, const uint64_t args[6]) {
  if (nr == __NR_clone3 || nr == __NR_openat2) return ENOSYS;
  if (nr == __NR_socket || nr == __NR_socketpair) {
    uint32_t family = static_cast<uint32_t>(args[0]);
    if (!in(kFamiliesAllowed, family)) return EAFNOSUPPORT;
    // What the kernel says for a netlink family it lacks (libaudit and shadow
    // treat it as "no audit", EPERM would make them fail).
    if (family == AF_NETLINK) return EPROTONOSUPPORT;
    return EPERM;  // raw or packet sockets, as without CAP_NET_RAW
  }
  return EPERM;
}

std::vector<MaskedCmp> complement_blocks(unsigned arg, std::span<const uint32_t> allowed) {
  std::vector<uint64_t> keep(allowed.begin(), allowed.end());
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  std::vector<MaskedCmp> out;
  // The ranges between allowed values, each cut into aligned power-of-two
  // blocks: [v, v + 2^k) with v a multiple of 2^k is (low32 & ~(2^k-1)) == v.
  auto emit = [&](uint64_t lo, uint64_t hi) {  // inclusive
    while (lo <= hi) {
      uint64_t size = 1;
      while (size < (1ULL << 32) && lo % (size * 2) == 0 && lo + size * 2 - 1 <= hi) size *= 2;
      out.push_back({arg, kLow32 & ~(size - 1), lo});
      lo += size;
    }
  };
  uint64_t next = 0;
  for (uint64_t v : keep) {
    if (v > next) emit(next, v - 1);
    next = v + 1;
  }
  if (next <= kLow32) emit(next, kLow32);
  return out;
}

std::vector<ArgRule> expanded_rules() {
  std::vector<ArgRule> out;
  for (const char* name : kRefused) out.push_back({name, {}, EPERM, true, "refused"});
  for (const auto& n : kByNumber) out.push_back({n.name, {}, EPERM, true, "refused"});
  for (const auto& r : flag_rules()) out.push_back(r);
  for (const auto& c : complement_blocks(0, kPersonalityAllowed))
    out.push_back({"personality", {c}, EPERM, true, "execution domains"});
  for (const char* sock : {"socket", "socketpair"}) {
    for (const auto& c : complement_blocks(0, kFamiliesAllowed))
      out.push_back({sock, {c}, EAFNOSUPPORT, true, "socket family"});
    for (uint32_t fam : {uint32_t{AF_INET}, uint32_t{AF_INET6}})
      for (uint32_t type : kInetTypesRefused)
        out.push_back({sock, {{0, kLow32, fam}, {1, 0xf, type}}, EPERM, true, "raw or packet socket"});
    for (const auto& c : complement_blocks(2, kNetlinkAllowed))
      out.push_back({sock, {{0, kLow32, AF_NETLINK}, c}, EPROTONOSUPPORT, true, "netlink protocol"});
  }
  return out;
}

}  // namespace exg::walls::seccomp_rules
