// The host-network filter (seccomp.hpp): put before the main filter where the
// sandbox shares the host's network (the landlock layer), as one program, or
// alone under --unsafe-no-seccomp. Two dozen instructions, written out like
// the pid-1 shield.
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sys/socket.h>
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
constexpr sock_filter jset(unsigned k, unsigned char jt, unsigned char jf) {
  return {BPF_JMP | BPF_JSET | BPF_K, jt, jf, k};
}
// The low 32 bits of argument i (little-endian): the kernel reads these as C ints.
constexpr unsigned arg(unsigned i) { return offsetof(seccomp_data, args) + 8 * i; }

// Jump offsets count from the next instruction. kAllow is instruction 22,
// kRefuse 21.
std::vector<sock_filter> make_host_network(bool raw_to_main_filter) {
  // Raw and packet inet sockets: to kAllow where the main filter is below, which
  // refuses them through the supervisor (the audit line); an errno here would
  // win over its notification and the refusal would go unrecorded. To kRefuse
  // without it (--unsafe-no-seccomp).
  const unsigned char raw15 = raw_to_main_filter ? 6 : 5, raw16 = raw_to_main_filter ? 5 : 4;
  return {
      stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),  // 0
      jeq(AUDIT_ARCH_X86_64, 0, 20),                                   // 1: another ABI: the main filter kills it
      stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),      // 2
      jeq(__NR_socket, 5, 0),                                          // 3 -> 9
      jeq(__NR_socketpair, 4, 0),                                      // 4 -> 9
      jeq(__NR_sendto, 11, 0),                                         // 5 -> 17
      jeq(__NR_sendmmsg, 10, 0),                                       // 6 -> 17
      jeq(__NR_sendmsg, 11, 0),                                        // 7 -> 19
      stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),                        // 8
      // socket(family, type, ...): IPv4 and IPv6 only as streams (TCP, which
      // Landlock's port rules and the supervisor's gate judge): no UDP, ICMP, SCTP.
      stmt(BPF_LD | BPF_W | BPF_ABS, arg(0)),                          // 9
      jeq(AF_INET, 1, 0),                                              // 10 -> 12
      jeq(AF_INET6, 0, 10),                                            // 11 -> 22
      stmt(BPF_LD | BPF_W | BPF_ABS, arg(1)),                          // 12
      stmt(BPF_ALU | BPF_AND | BPF_K, 0xf),                            // 13: the type without SOCK_NONBLOCK / CLOEXEC
      jeq(SOCK_STREAM, 7, 0),                                          // 14 -> 22
      jeq(SOCK_RAW, raw15, 0),                                         // 15 -> 22 or 21
      jeq(SOCK_PACKET, raw16, 4),                                      // 16 -> 22 or 21 : 21
      // sendto / sendmmsg flags (argument 3): MSG_FASTOPEN connects inside the
      // send, past the connect() the gate judges.
      stmt(BPF_LD | BPF_W | BPF_ABS, arg(3)),                          // 17
      jset(MSG_FASTOPEN, 2, 3),                                        // 18 -> 21 : 22
      stmt(BPF_LD | BPF_W | BPF_ABS, arg(2)),                          // 19: sendmsg flags
      jset(MSG_FASTOPEN, 0, 1),                                        // 20 -> 21 : 22
      stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),                // 21 (kRefuse)
      stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),                        // 22 (kAllow)
  };
}

constexpr size_t kAllowAt = 22;

}  // namespace

const std::vector<sock_filter>& host_network_seccomp_program(bool raw_to_main_filter) {
  static const std::vector<sock_filter> deferring = make_host_network(true), refusing = make_host_network(false);
  return raw_to_main_filter ? deferring : refusing;
}

// The deferring program, its "allow" (instruction 22) turned into "go on with
// `main`", which begins where that instruction was: a jump to kAllow lands on
// main's first instruction, and instruction 8 (a syscall not named here)
// becomes a jump there. What it refused stays refused with EPERM, which is
// what the two stacked filters answered (an errno outranks main's
// notification; main answers these calls with nothing stronger).
std::vector<sock_filter> with_host_network(const std::vector<sock_filter>& main) {
  std::vector<sock_filter> prog = make_host_network(true);
  prog.resize(kAllowAt);
  prog[8] = stmt(BPF_JMP | BPF_JA, static_cast<unsigned>(kAllowAt - 9));
  prog.insert(prog.end(), main.begin(), main.end());
  return prog;
}

const std::vector<sock_filter>& prebuilt_seccomp_program_host_network() {
  static const std::vector<sock_filter> prog = with_host_network(prebuilt_seccomp_program());
  return prog;
}

}  // namespace exg::walls
