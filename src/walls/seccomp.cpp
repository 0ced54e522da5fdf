#include "walls/seccomp.hpp"

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

#include "walls/seccomp_rules.hpp"
#include "util/unique_fd.hpp"

namespace exg::walls {

namespace {

namespace rules = seccomp_rules;

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
constexpr uint32_t arg_hi(int i) { return arg_lo(i) + 4; }

// What a refused call returns: a notification for the supervisor, or the
// errno it would answer with (seccomp_rules::refused_errno: the one source of
// both) straight from the filter.
uint32_t refusal(Refusal how, int nr, uint64_t arg0 = 0) {
  if (how == Refusal::Notify) return SECCOMP_RET_USER_NOTIF;
  const uint64_t args[6] = {arg0, 0, 0, 0, 0, 0};
  return SECCOMP_RET_ERRNO | (static_cast<uint32_t>(rules::refused_errno(nr, args)) & SECCOMP_RET_DATA);
}

// personality, socket and socketpair refuse what is NOT in a set of values,
// compared on the low 32 bits the kernel reads (int / unsigned int). libseccomp
// 2.5 cannot say that (one comparison per argument per rule, no masked
// not-equal), so these few instructions run before its program. Jumps are
// forward only and every other syscall falls through to libseccomp's code.
// (socket and socketpair share one errno per case: the refusals below are
// computed for socket.)
//
// With a supervisor (Refusal::Notify), connect() and sendto() with an address
// go to it as well: not refused, judged (sandbox/socket_address_gate.hpp: a
// host's Unix socket bound after the start is reached by no sandbox). The
// errno-only program has no supervisor to ask and leaves them alone: it runs
// where host sockets cannot be reached anyway (the microVM guest, gVisor).
std::vector<sock_filter> value_set_prefix(Refusal how) {
  enum { kEnd, kAllow, kRawRefused, kSocket, kInet, kNetlink, kNotPersonality, kSendto, kJudged };
  Asm a;
  a.load_u32(offsetof(seccomp_data, arch));
  a.jeq(AUDIT_ARCH_X86_64, -1, kEnd);
  a.load_u32(offsetof(seccomp_data, nr));
  if (how == Refusal::Notify) {
    for (int nr : rules::judged_syscalls()) a.jeq(static_cast<uint32_t>(nr), nr == __NR_sendto ? kSendto : kJudged);
  }
  a.jeq(__NR_personality, -1, kNotPersonality);
  a.load_u32(arg_lo(0));
  for (uint32_t v : rules::personality_allowed()) a.jeq(v, kAllow);
  a.ret(refusal(how, __NR_personality));

  a.label(kNotPersonality);
  a.jeq(__NR_socket, kSocket);
  a.jeq(__NR_socketpair, kSocket, kEnd);
  a.label(kSocket);
  a.load_u32(arg_lo(0));
  for (uint32_t f : rules::socket_families_allowed())
    a.jeq(f, f == AF_INET || f == AF_INET6 ? kInet : f == AF_NETLINK ? kNetlink : kAllow);
  a.ret(refusal(how, __NR_socket, AF_UNSPEC));  // a family not in the set
  a.label(kInet);  // no raw IP or link-level packets
  a.load_u32(arg_lo(1));
  a.stmt(BPF_ALU | BPF_AND | BPF_K, 0xf);  // the type without SOCK_NONBLOCK / SOCK_CLOEXEC
  for (uint32_t t : rules::inet_types_refused()) a.jeq(t, kRawRefused);
  a.ret(SECCOMP_RET_ALLOW);
  a.label(kNetlink);
  a.load_u32(arg_lo(2));
  for (uint32_t p : rules::netlink_protocols_allowed()) a.jeq(p, kAllow);
  a.ret(refusal(how, __NR_socket, AF_NETLINK));
  a.label(kAllow);
  a.ret(SECCOMP_RET_ALLOW);
  a.label(kRawRefused);
  a.ret(refusal(how, __NR_socket, AF_INET));
  if (how == Refusal::Notify) {
    // sendto(fd, buf, len, flags, dest_addr, addrlen): judged only with a
    // destination (a NULL one is send() on a connected socket).
    a.label(kSendto);
    a.load_u32(arg_lo(4));
    a.jeq(0, -1, kJudged);
    a.load_u32(arg_hi(4));
    a.jeq(0, kEnd, kJudged);
    a.label(kJudged);
    a.ret(SECCOMP_RET_USER_NOTIF);
  }
  a.label(kEnd);
  return a.finish();
}

Error seccomp_error(const std::string& what, int rc) { return Error::sys("seccomp: " + what, -rc); }

}  // namespace

Result<std::vector<sock_filter>> build_seccomp_program(Refusal how) {
#if !defined(__x86_64__)
  return fail(Error::msg("seccomp", "only x86_64 is supported"));
#else
  if (how == Refusal::Notify && seccomp_api_get() < 5)
    return fail(Error::msg("seccomp", "libseccomp or the kernel lacks user notification"));
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

  // Refused through the supervisor, or with the errno it would answer (`errno_value`).
  auto refuse = [&](int nr, unsigned n, const scmp_arg_cmp* cmp, const char* what, int errno_value = EPERM) -> Result<void> {
    uint32_t action = how == Refusal::Notify ? SCMP_ACT_NOTIFY : SCMP_ACT_ERRNO(static_cast<uint32_t>(errno_value));
    int r = seccomp_rule_add_array(c, action, nr, n, cmp);
    if (r < 0) return fail(seccomp_error(std::string("rule for ") + what, r));
    return {};
  };

  for (const char* name : rules::refused_syscalls()) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return fail(Error::msg("seccomp", std::string("unknown syscall ") + name));
    if (nr < 0) continue;  // not on this architecture (stime on x86_64)
    const uint64_t none[6] = {};
    if (auto r = refuse(nr, 0, nullptr, name, rules::refused_errno(nr, none)); !r) return fail(r.error());
  }
  for (const auto& n : rules::refused_by_number()) {
    const uint64_t none[6] = {};
    if (auto r = refuse(n.nr, 0, nullptr, n.name, rules::refused_errno(n.nr, none)); !r) return fail(r.error());
  }

  // Namespace flags of clone/unshare, clone3, terminal injection (the value
  // sets are the prefix's).
  for (const auto& rule : rules::flag_rules()) {
    std::vector<scmp_arg_cmp> cmps;
    for (const auto& m : rule.cmps)
      cmps.push_back({m.arg, SCMP_CMP_MASKED_EQ, m.mask, m.value});
    int nr = seccomp_syscall_resolve_name(rule.syscall);
    if (nr == __NR_SCMP_ERROR) return fail(Error::msg("seccomp", std::string("unknown syscall ") + rule.syscall));
    if (rule.notify) {
      if (auto r = refuse(nr, static_cast<unsigned>(cmps.size()), cmps.data(), rule.syscall, rule.errno_value); !r)
        return fail(r.error());
    } else if ((rc = seccomp_rule_add_array(c, SCMP_ACT_ERRNO(static_cast<uint32_t>(rule.errno_value)), nr,
                                            static_cast<unsigned>(cmps.size()), cmps.data())) < 0) {
      return fail(seccomp_error(std::string("rule for ") + rule.syscall, rc));
    }
  }

  // Export to a memfd and read back: libseccomp 2.5 has no export to memory.
  UniqueFd mem(::memfd_create("exg-seccomp", MFD_CLOEXEC));
  if (!mem) return fail(Error::sys("seccomp: memfd_create"));
  if ((rc = seccomp_export_bpf(c, mem.get())) < 0) return fail(seccomp_error("export", rc));
  off_t size = ::lseek(mem.get(), 0, SEEK_END);
  if (size <= 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0)
    return fail(Error::msg("seccomp", "exported program has a bad size"));

  std::vector<sock_filter> prog = value_set_prefix(how);
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

int refused_errno(int nr, const uint64_t args[6]) { return rules::refused_errno(nr, args); }

std::string syscall_name(int nr) {
  for (const auto& n : rules::refused_by_number())
    if (nr == n.nr) return n.name;
  char* s = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
  if (!s) return "syscall_" + std::to_string(nr);
  std::string name(s);
  std::free(s);
  return name;
}

}  // namespace exg::walls
