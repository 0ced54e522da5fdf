// The sandbox's seccomp filter (DESIGN.md §4, §7). The parent builds the BPF
// program before clone (libseccomp allocates; the child must not); the child
// installs it last before execve and hands the listener fd to the supervisor,
// which answers every refused syscall with an errno and records it
// (sandbox/violations.hpp). Allowed syscalls never leave the kernel.
#pragma once
#include <linux/filter.h>

#include <cstdint>
#include <string>
#include <vector>

#include "util/error.hpp"

namespace exg::walls {

// How the program answers a refused syscall.
enum class Refusal {
  Notify,  // SECCOMP_RET_USER_NOTIF: the supervisor answers with refused_errno() and records it
  Errno,   // the filter answers itself with the same errno: where no supervisor can listen (the
           // microVM guest); nothing is recorded
};

// Native architecture only (x86_64): the i386 (int $0x80) and x32
// (nr | 0x40000000) ABIs kill the whole process. Refused syscalls are
// answered as `how` says; clone3 returns ENOSYS at once in both (libcs fall
// back to clone, whose flags a filter can see).
Result<std::vector<sock_filter>> build_seccomp_program(Refusal how = Refusal::Notify);

// The same programs, compiled at build time (seccomp_prebuilt.cpp): what a
// sandbox installs, without libseccomp's ~0.4 ms at every start-up.
const std::vector<sock_filter>& prebuilt_seccomp_program();
const std::vector<sock_filter>& prebuilt_seccomp_errno_program();  // Refusal::Errno

// A second filter for a pid 1 that the kernel does not shield from its own
// namespace's processes (gVisor 20221219 lets them SIGKILL and SIGSTOP their
// init): kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo and
// pidfd_open aimed at pid 1 return EPERM, which is what Linux's rule looks
// like to a sender without privileges. Everything else is left to the filter
// below it. Written by hand (seccomp_pid1_shield.cpp): no libseccomp.
const std::vector<sock_filter>& pid1_signal_shield_program();

// A filter stacked on the main one where the sandbox shares the host's
// network (the landlock layer, which has no network namespace): socket() of
// AF_INET/AF_INET6 other than SOCK_STREAM (UDP, ICMP, SCTP) and sendto(),
// sendmsg(), sendmmsg() with MSG_FASTOPEN (a TCP connect inside a send) return
// EPERM. Errno-only (no listener). Written by hand (seccomp_host_network.cpp).
// Raw and packet inet sockets: left to the main filter when `raw_to_main_filter`
// (it refuses them through the supervisor, which audits each), refused here
// otherwise (no main filter: --unsafe-no-seccomp).
const std::vector<sock_filter>& host_network_seccomp_program(bool raw_to_main_filter);

// The host-network filter (deferring raw sockets) and `main` as one program:
// what the two stacked filters answer, for one filter's cost (one seccomp()
// at start-up, one program run per syscall that is not cached). The landlock
// layer installs prebuilt_seccomp_program_host_network() (the prebuilt
// program behind it), made once in the supervisor before the clone.
std::vector<sock_filter> with_host_network(const std::vector<sock_filter>& main);
const std::vector<sock_filter>& prebuilt_seccomp_program_host_network();

// The errno the supervisor answers a refused syscall with: EPERM by default,
// EAFNOSUPPORT for socket families, EPROTONOSUPPORT for netlink protocols
// other than NETLINK_ROUTE, ENOSYS for clone3.
int refused_errno(int syscall_nr, const uint64_t args[6]);

// "ptrace"; "syscall_<nr>" when libseccomp does not know the number.
std::string syscall_name(int nr);

// In the child, after PR_SET_NO_NEW_PRIVS (or with CAP_SYS_ADMIN): installs the
// program and returns the listener fd (close-on-exec), or -1 with errno. No
// allocation: safe after fork/clone. (seccomp_install.cpp: no libseccomp.)
int install_seccomp(const std::vector<sock_filter>& prog);

// The same for a Refusal::Errno program, which needs no listener: 0, or -1 with errno.
int install_seccomp_errno(const std::vector<sock_filter>& prog);

}  // namespace exg::walls
