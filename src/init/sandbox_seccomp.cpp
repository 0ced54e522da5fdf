#include "init/sandbox_seccomp.hpp"

#include <sys/prctl.h>

#include <cerrno>
#include <cstring>

#include "walls/seccomp.hpp"

namespace exg::init {

std::string install_sandbox_seccomp() {
  auto failed = [](const char* what) { return std::string(what) + ": " + std::strerror(errno); };
  // A filter without CAP_SYS_ADMIN needs it (the runtime sets it too:
  // noNewPrivileges); this holds without that.
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return failed("no_new_privs");
  if (walls::install_seccomp_errno(walls::prebuilt_seccomp_errno_program()) != 0)
    return failed("install the seccomp filter");
  if (walls::install_seccomp_errno(walls::pid1_signal_shield_program()) != 0)
    return failed("install the pid-1 signal shield");
  return "";
}

}  // namespace exg::init
