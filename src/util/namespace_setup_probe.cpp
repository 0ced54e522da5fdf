#include "util/namespace_setup_probe.hpp"

#include <linux/mount.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace exg::util {
namespace {

// A new filesystem of `type` made and mounted detached, as process/child.cpp's
// new_fs does. 0, or the errno of the call that failed (*step names it).
int detached_mount(const char* type, unsigned attrs, const char** step) {
  int fs = static_cast<int>(::syscall(SYS_fsopen, type, FSOPEN_CLOEXEC));
  if (fs < 0) return *step = "fsopen", errno;
  if (::syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) {
    int e = errno;
    ::close(fs);
    return *step = "fsconfig(create)", e;
  }
  int m = static_cast<int>(::syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, attrs));
  int e = errno;
  ::close(fs);
  if (m < 0) return *step = "fsmount", e;
  ::close(m);
  return 0;
}

}  // namespace

SetupProbe try_namespace_setup_calls() {
  // The network namespace too: sysfs may be mounted only by the user namespace
  // that owns the caller's network namespace.
  if (::unshare(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWPID | CLONE_NEWNET) != 0)
    return {"unshare(CLONE_NEWNS|CLONE_NEWUTS|CLONE_NEWPID|CLONE_NEWNET)", errno};
  static constexpr char kName[] = "exguardian-probe";
  if (::sethostname(kName, sizeof kName - 1) != 0) return {"sethostname in a new UTS namespace", errno};
  const char* step = "";
  if (int e = detached_mount("tmpfs", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, &step); e != 0)
    return {std::string("mount tmpfs (") + step + ")", e};
  // Read-only, as the sandbox mounts it: where the sysfs in view is read-only
  // (a container engine mounts it so), the kernel refuses a writable one.
  if (int e = detached_mount("sysfs", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC | MOUNT_ATTR_RDONLY,
                             &step);
      e != 0)
    return {std::string("mount sysfs (") + step + ")", e};
  // proc belongs to the pid namespace of the process that makes it: the new
  // namespace's first process does. Its exit code is the errno (0: mounted).
  pid_t pid = ::fork();
  if (pid < 0) return {"fork into a new pid namespace", errno};
  if (pid == 0) {
    const char* s = "";
    ::_exit(detached_mount("proc", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, &s) & 0xff);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status)) return {"mount proc for a new pid namespace (the probe child died)", EIO};
  if (int e = WEXITSTATUS(status); e != 0) return {"mount proc for a new pid namespace", e};
  return {};
}

}  // namespace exg::util
