#include "util/real_ids_of.hpp"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "util/proc_text.hpp"

namespace exg::util {

namespace {

// The first (real) id of the "Uid:" or "Gid:" line of /proc/PID/status; false when unreadable.
bool real_id(const std::string& status, const char* field, unsigned* out) {
  auto at = status.find(std::string("\n") + field);
  if (at == std::string::npos) return false;
  char* end = nullptr;
  unsigned long v = std::strtoul(status.c_str() + at + 1 + std::char_traits<char>::length(field), &end, 10);
  if (end == status.c_str() + at + 1 + std::char_traits<char>::length(field)) return false;
  *out = static_cast<unsigned>(v);
  return true;
}

}  // namespace

bool root_without_ptrace_capability() {
  static const bool without = [] {
    if (::geteuid() != 0) return false;
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    if (::syscall(SYS_capget, &hdr, data) != 0) return false;  // (then the calls fail as before)
    return (data[CAP_SYS_PTRACE / 32].effective & (1u << (CAP_SYS_PTRACE % 32))) == 0;
  }();
  return without;
}

RealIdsOf::RealIdsOf(pid_t pid, bool fs_too) {
  if (!root_without_ptrace_capability()) return;
  const std::string status = read_proc_text(("/proc/" + std::to_string(pid) + "/status").c_str());
  unsigned uid = 0, gid = 0;
  if (!real_id(status, "Uid:", &uid) || !real_id(status, "Gid:", &gid) || uid == 0) return;
  uid_t r, e, s;
  gid_t rg, eg, sg;
  if (::getresuid(&r, &e, &s) != 0 || ::getresgid(&rg, &eg, &sg) != 0) return;
  ruid_ = r;
  rgid_ = rg;
  if (::syscall(SYS_setresgid, gid, -1, -1) != 0) return;
  switched_ = true;  // (the gid at least: restored below either way)
  if (::syscall(SYS_setresuid, uid, -1, -1) != 0) return;  // the call then fails with EPERM
  if (!fs_too) return;
  // setfsuid/setfsgid answer the previous id whatever happens: -1 asks for the current one.
  fsuid_ = static_cast<uid_t>(::syscall(SYS_setfsuid, -1));
  fsgid_ = static_cast<gid_t>(::syscall(SYS_setfsgid, -1));
  fs_switched_ = true;
  ::syscall(SYS_setfsgid, gid);
  ::syscall(SYS_setfsuid, uid);
}

RealIdsOf::~RealIdsOf() {
  if (fs_switched_) {
    ::syscall(SYS_setfsuid, fsuid_);
    ::syscall(SYS_setfsgid, fsgid_);
    if (static_cast<uid_t>(::syscall(SYS_setfsuid, -1)) != fsuid_ || static_cast<gid_t>(::syscall(SYS_setfsgid, -1)) != fsgid_)
      std::abort();
  }
  if (!switched_) return;
  if (::syscall(SYS_setresuid, ruid_, -1, -1) != 0 || ::syscall(SYS_setresgid, rgid_, -1, -1) != 0) std::abort();
}

}  // namespace exg::util
