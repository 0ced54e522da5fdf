// Thin wrappers for syscalls glibc 2.36 does not wrap (or wraps late).
#pragma once
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace exg::sys {

inline int openat2(int dirfd, const char* path, uint64_t flags, uint64_t resolve, uint64_t mode = 0) {
  open_how how{};
  how.flags = flags;
  how.mode = mode;
  how.resolve = resolve;
  return static_cast<int>(::syscall(SYS_openat2, dirfd, path, &how, sizeof how));
}

inline int pidfd_open(pid_t pid, unsigned flags = 0) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, flags));
}

inline int pidfd_send_signal(int pidfd, int sig) {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

inline int pivot_root(const char* new_root, const char* put_old) {
  return static_cast<int>(::syscall(SYS_pivot_root, new_root, put_old));
}

inline int fsopen(const char* fs, unsigned flags) { return static_cast<int>(::syscall(SYS_fsopen, fs, flags)); }
inline int fsconfig(int fd, unsigned cmd, const char* key, const void* value, int aux) {
  return static_cast<int>(::syscall(SYS_fsconfig, fd, cmd, key, value, aux));
}
inline int fsmount(int fd, unsigned flags, unsigned attrs) {
  return static_cast<int>(::syscall(SYS_fsmount, fd, flags, attrs));
}
inline int open_tree(int dirfd, const char* path, unsigned flags) {
  return static_cast<int>(::syscall(SYS_open_tree, dirfd, path, flags));
}
inline int move_mount(int from_dfd, const char* from, int to_dfd, const char* to, unsigned flags) {
  return static_cast<int>(::syscall(SYS_move_mount, from_dfd, from, to_dfd, to, flags));
}
inline int mount_setattr(int dfd, const char* path, unsigned flags, mount_attr* attr) {
  return static_cast<int>(::syscall(SYS_mount_setattr, dfd, path, flags, attr, sizeof *attr));
}

// clone3 used like fork(): returns 0 in the child, the pid in the parent.
struct CloneArgs {  // struct clone_args of <linux/sched.h>, which clashes with <sched.h>
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size, cgroup;
};
inline long clone3_fork(uint64_t flags, int* pidfd_out, int cgroup_fd = -1) {
  CloneArgs args{};
  constexpr uint64_t kCloneIntoCgroup = 0x200000000ULL;
  args.flags = flags | (pidfd_out ? CLONE_PIDFD : 0) | (cgroup_fd >= 0 ? kCloneIntoCgroup : 0);
  if (cgroup_fd >= 0) args.cgroup = static_cast<uint64_t>(cgroup_fd);
  args.pidfd = reinterpret_cast<uint64_t>(pidfd_out);
  args.exit_signal = SIGCHLD;
  return ::syscall(SYS_clone3, &args, sizeof args);
}

// Id changes in a child of clone3_fork. glibc's setresuid/setresgid make every
// thread of the process change ids together (its setxid broadcast), walking
// the thread list the child copied from a threaded parent (a server, two
// supervise() calls at once): it waits on threads the child does not have,
// forever. The raw syscalls change the calling thread, which is the whole child.
inline int setresuid_child(uid_t r, uid_t e, uid_t s) { return static_cast<int>(::syscall(SYS_setresuid, r, e, s)); }
inline int setresgid_child(gid_t r, gid_t e, gid_t s) { return static_cast<int>(::syscall(SYS_setresgid, r, e, s)); }

}  // namespace exg::sys
