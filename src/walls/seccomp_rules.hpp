// ExGuardian's seccomp rules as data: the one source of truth for the process
// layer's filter (walls/seccomp.cpp: libseccomp + a hand-written prefix for
// the value sets) and for its OCI form (oci/spec.cpp seccomp_profile(): crun,
// runc, runsc, docker and podman). Change a rule here and both follow.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace exg::walls::seccomp_rules {

// Refused whatever their arguments (EPERM, through the supervisor).
std::span<const char* const> refused_syscalls();

// Refused by number: newer than the libseccomp tables this is built with.
struct NumberedSyscall {
  const char* name;
  int nr;  // x86_64
};
std::span<const NumberedSyscall> refused_by_number();

// Refused when every comparison holds: (args[arg] & mask) == value.
struct MaskedCmp {
  unsigned arg;
  uint64_t mask;
  uint64_t value;
};
struct ArgRule {
  const char* syscall;
  std::vector<MaskedCmp> cmps;  // AND-ed; at most one per argument (libseccomp's limit)
  int errno_value;              // what the caller sees
  bool notify;                  // through the supervisor (logged); false: a plain errno from the filter
  const char* why;
};

// clone/unshare with a namespace flag, ioctl TIOCSTI/TIOCLINUX (low 32 bits),
// clone3 (ENOSYS at once: its flags are in memory a filter cannot read, libcs
// fall back to clone); set-id modes (chmod, fchmod, fchmodat, fchmodat2, creat,
// mknod, mknodat, open/openat making a file), openat2 (ENOSYS, like clone3).
const std::vector<ArgRule>& flag_rules();

// Value sets, compared on the low 32 bits (the kernel reads int / unsigned
// int): refused when NOT in the set.
std::span<const uint32_t> personality_allowed();       // personality(arg0)
std::span<const uint32_t> socket_families_allowed();   // socket/socketpair(arg0): else EAFNOSUPPORT
std::span<const uint32_t> inet_types_refused();        // AF_INET/AF_INET6: (arg1 & 0xf) in this set -> EPERM
std::span<const uint32_t> netlink_protocols_allowed(); // AF_NETLINK: arg2 else EPROTONOSUPPORT

// Not refused but judged by the supervisor, through seccomp notify, where
// there is one (process layer, crun, runc): connect(), sendto() with a
// destination address, and every sendmsg()/sendmmsg() (their destination lies
// in a msghdr the filter cannot read) (sandbox/socket_address_gate.hpp). Only
// the notify program and the notify OCI profile carry them.
std::span<const int> judged_syscalls();

// The errno a refused call gets (the supervisor answers notifications with it).
int refused_errno(int nr, const uint64_t args[6]);

// Every rule above as plain masked comparisons (value sets expanded into
// aligned blocks: "low 32 bits not in S" is a union of (arg & mask) == value
// blocks), for filters that have no "not in" (OCI profiles). Exactly the same
// refusals as the process layer's filter for every argument value.
std::vector<ArgRule> expanded_rules();

// "low 32 bits of arg NOT in `allowed`" as aligned blocks (mask, value).
std::vector<MaskedCmp> complement_blocks(unsigned arg, std::span<const uint32_t> allowed);

}  // namespace exg::walls::seccomp_rules
