// The pid-1 signal shield (seccomp.hpp): a dozen instructions, so written out
// rather than compiled by libseccomp; the static exguardian-init carries it.
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstddef>

#include "walls/seccomp.hpp"

namespace exg::walls {

namespace {

constexpr sock_filter stmt(unsigned short code, unsigned k) { return {code, 0, 0, k}; }
constexpr sock_filter jeq(unsigned k, unsigned char jt, unsigned char jf) {
  return {BPF_JMP | BPF_JEQ | BPF_K, jt, jf, k};
}

// Jump offsets count from the next instruction: kCheck is instruction 9,
// kAllow instruction 12.
constexpr sock_filter kShield[] = {
    stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),  // 0
    jeq(AUDIT_ARCH_X86_64, 0, 10),                                   // 1: another ABI: the main filter's business
    stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),      // 2
    jeq(__NR_kill, 5, 0),                                            // 3
    jeq(__NR_tkill, 4, 0),                                           // 4
    jeq(__NR_tgkill, 3, 0),                                          // 5
    jeq(__NR_rt_sigqueueinfo, 2, 0),                                 // 6
    jeq(__NR_rt_tgsigqueueinfo, 1, 0),                               // 7
    jeq(__NR_pidfd_open, 0, 3),                                      // 8
    // The pid (tgid, tid) is a C int: the kernel reads the low 32 bits.
    stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args)),    // 9 (kCheck; little-endian)
    jeq(1, 0, 1),                                                    // 10
    stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),                // 11
    stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),                        // 12 (kAllow)
};

}  // namespace

const std::vector<sock_filter>& pid1_signal_shield_program() {
  static const std::vector<sock_filter> prog(std::begin(kShield), std::end(kShield));
  return prog;
}

}  // namespace exg::walls
