// Installing a seccomp program in the child: plain syscalls, no libseccomp, so
// that the microVM guest's static init can carry it with the prebuilt programs.
#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "walls/seccomp.hpp"

namespace exg::walls {

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

int install_seccomp_errno(const std::vector<sock_filter>& prog) {
  sock_fprog fprog{static_cast<unsigned short>(prog.size()), const_cast<sock_filter*>(prog.data())};
  return ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) == 0 ? 0 : -1;
}

}  // namespace exg::walls
