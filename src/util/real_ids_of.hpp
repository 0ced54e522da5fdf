// The supervisor's reach into a sandbox process (pidfd_getfd of the seccomp
// listener or of a caller's socket, process_vm_readv of a caller's address)
// passes the kernel's ptrace check: the caller's *real* uid and gid equal to
// the target's, or CAP_SYS_PTRACE. Root inside a container with the engine's
// default capabilities has no CAP_SYS_PTRACE, and the landlock layer runs
// root's command as the workspace's owner: every such call failed with EPERM.
// For one call, RealIdsOf gives this thread the target's real uid and gid and
// keeps its effective uid 0 (so its capabilities, and the way back). Only this
// thread (raw syscalls: glibc would change every thread's), only where it is
// needed (effective root without CAP_SYS_PTRACE, a target of another uid);
// if the switch fails the call fails as it did before (EPERM: fail closed),
// and if the way back fails the process aborts rather than go on as another.
//
// While it holds, the target's uid may signal this thread's process (kill()
// compares the sender with the real uid): the landlock layer's scoping keeps
// the sandbox's processes from signalling out of their domain.
#pragma once
#include <sys/types.h>

namespace exg::util {

//
// With `fs_too`, the filesystem uid and gid as well, for the checks made with
// them (opening /proc/PID/root and /proc/PID/cwd): meanwhile this thread opens
// files as the target would (its capabilities over files are gone until the
// way back), so only those opens go inside.
class RealIdsOf {
 public:
  explicit RealIdsOf(pid_t pid, bool fs_too = false);
  ~RealIdsOf();
  RealIdsOf(const RealIdsOf&) = delete;
  RealIdsOf& operator=(const RealIdsOf&) = delete;

 private:
  bool switched_ = false, fs_switched_ = false;
  uid_t ruid_ = 0, fsuid_ = 0;
  gid_t rgid_ = 0, fsgid_ = 0;
};

// Effective root without CAP_SYS_PTRACE in its effective set (computed once).
bool root_without_ptrace_capability();

}  // namespace exg::util
