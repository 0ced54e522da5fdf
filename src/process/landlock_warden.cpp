#include "process/landlock_warden.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <ctime>

#include "walls/landlock.hpp"

namespace exg::process {

namespace {

struct Dirent64 {
  ino64_t ino;
  off64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[];
};

// Whether process `pid` is a zombie ('Z') or dead ('X'): it holds nothing and cannot run.
bool finished(const char* pid_text) {
  char path[64] = "/proc/";
  size_t n = 6;
  for (const char* c = pid_text; *c && n < sizeof path - 6; ++c) path[n++] = *c;
  const char tail[] = "/stat";
  for (size_t k = 0; k < sizeof tail; ++k) path[n + k] = tail[k];
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;  // gone meanwhile
  char buf[512];
  ssize_t len = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (len <= 0) return true;
  // "pid (comm) S ...": the state follows the last ')' (comm may hold one).
  ssize_t close_paren = -1;
  for (ssize_t k = 0; k < len; ++k)
    if (buf[k] == ')') close_paren = k;
  if (close_paren < 0 || close_paren + 2 >= len) return false;
  char state = buf[close_paren + 2];
  return state == 'Z' || state == 'X';
}

// Whether a process this warden may signal is still running: only the
// sandbox's, the domain says (kill(pid, 0) is refused for every other).
bool sandbox_alive() {
  int proc = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (proc < 0) return true;  // cannot tell: the caller's rounds are bounded
  const pid_t self = static_cast<pid_t>(::syscall(SYS_getpid));
  bool alive = false;
  alignas(8) char buf[8192];
  for (long n; !alive && (n = ::syscall(SYS_getdents64, proc, buf, sizeof buf)) > 0;) {
    for (long off = 0; off < n;) {
      const auto* d = reinterpret_cast<const Dirent64*>(buf + off);
      off += d->reclen;
      long pid = 0;
      const char* c = d->name;
      for (; *c >= '0' && *c <= '9'; ++c) pid = pid * 10 + (*c - '0');
      if (*c != '\0' || pid <= 0 || pid == self) continue;
      if (::kill(static_cast<pid_t>(pid), 0) != 0) continue;  // not the sandbox's, or gone
      if (!finished(d->name)) {
        alive = true;
        break;
      }
    }
  }
  ::close(proc);
  return alive;
}

// Kills everything the scoped domain reaches, until nothing of it runs (a
// killed process cannot fork; a fork racing the first round meets the next).
// Bounded: a process stuck in the kernel (D state) does not keep this forever.
void end_sandbox() {
  for (int round = 0; round < 2000; ++round) {
    ::kill(-1, SIGKILL);
    if (!sandbox_alive()) return;
    timespec ts{0, 1000000};
    ::nanosleep(&ts, nullptr);
  }
}

// Removes what lies beneath `dir` (never following a link; a bounded depth:
// the sandbox could nest deeper than any stack). Raw syscalls, no allocation.
void remove_beneath(int dir, int depth) {
  alignas(8) char buf[4096];
  for (bool removed = true; removed;) {  // (again until a pass removes nothing: entries move under getdents)
    removed = false;
    ::lseek(dir, 0, SEEK_SET);
    for (long n; (n = ::syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0;) {
      for (long off = 0; off < n;) {
        const auto* d = reinterpret_cast<const Dirent64*>(buf + off);
        off += d->reclen;
        const char* name = d->name;
        if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
        if (d->type == DT_DIR || d->type == DT_UNKNOWN) {
          int sub = depth < 64 ? ::openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
          if (sub >= 0) {
            remove_beneath(sub, depth + 1);
            ::close(sub);
            removed |= ::unlinkat(dir, name, AT_REMOVEDIR) == 0;
            continue;
          }
        }
        removed |= ::unlinkat(dir, name, 0) == 0;
      }
    }
  }
}

// The run's private directory, which the supervisor would have removed
// (LandlockLayer::after_run): its entries belong to the sandbox's uid, the
// warden's; /tmp's sticky bit lets the owner remove the directory itself.
void remove_private_tmp(const char* path) {
  int dir = ::open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return;
  remove_beneath(dir, 0);
  ::close(dir);
  ::rmdir(path);
}

// How long a warden whose sandbox ended without init's word waits for the
// supervisor to remove the private directory or be gone: 500 ticks of 10 ms.
constexpr int kSupervisorWaitTicks = 500;

// Whether the supervisor has exited (its pidfd readable), waiting up to `ms`.
bool supervisor_gone(int pidfd, int ms) {
  pollfd p{pidfd, POLLIN, 0};
  return ::poll(&p, 1, ms) == 1;
}

bool exists(const char* path) {
  struct stat st;
  return ::lstat(path, &st) == 0;
}

[[noreturn]] void watch(int supervisor, int init_end, const char* private_tmp) {
  ::prctl(PR_SET_NAME, "exg-warden");
  // Out of the supervisor's session and process group (a terminal's ^C, a
  // signal to the group, or a job runner's kill of the whole session, e.g.
  // `pkill -s`, is the supervisor's to take; the warden must outlive it to
  // end the sandbox), deaf to every signal but SIGKILL and SIGSTOP.
  ::setsid();
  sigset_t all;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  // Only the two descriptors: no stdio (a caller waiting for the sandbox's
  // output to end must not wait for the warden), nothing of the supervisor's.
  int lo = std::min(supervisor, init_end), hi = std::max(supervisor, init_end);
  if (lo > 0) ::close_range(0, static_cast<unsigned>(lo) - 1, 0);
  if (hi > lo + 1) ::close_range(static_cast<unsigned>(lo) + 1, static_cast<unsigned>(hi) - 1, 0);
  ::close_range(static_cast<unsigned>(hi) + 1, ~0U, 0);
  pollfd fds[2] = {{init_end, POLLIN, 0}, {supervisor, POLLIN, 0}};
  bool told_end = false;
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents) {
      char c;
      ssize_t r = ::read(init_end, &c, 1);
      if (r < 0 && errno == EINTR) continue;
      told_end = r == 1;  // init's normal end: it has ended the rest itself
      break;              // (else init is gone without a word)
    }
    if (fds[1].revents) break;  // the supervisor is gone
  }
  if (!told_end) end_sandbox();
  if (!private_tmp) ::_exit(0);
  // The private directory is removed once the sandbox is over (above) by
  // whichever of the two is left: the supervisor (after_run) while it lives,
  // else the warden. A normal end: init waits for the warden, and the
  // supervisor for init, so only a supervisor already gone is looked at.
  // Otherwise the warden stays until the supervisor has removed the directory
  // or is gone: init ends without a word when the supervisor is killed (its
  // parent-death signal, or the agent seeing its channel close), and the
  // supervisor's pidfd is readable only at the end of its exit, after its
  // descriptors closed; bounded, in case the supervisor is stopped.
  if (!told_end)
    for (int tick = 0; tick < kSupervisorWaitTicks && !supervisor_gone(supervisor, 10); ++tick)
      if (!exists(private_tmp)) ::_exit(0);  // the supervisor's after_run removed it
  if (supervisor_gone(supervisor, 0)) remove_private_tmp(private_tmp);
  ::_exit(0);
}

// What the warden starts with: in memory init never writes again (init goes
// on at once, over the stack frame that started the warden).
struct WatchArgs {
  int supervisor = -1;
  int init_end = -1;
  const char* private_tmp = nullptr;
};
WatchArgs g_watch;

int watch_entry(void*) { watch(g_watch.supervisor, g_watch.init_end, g_watch.private_tmp); }

// The warden's own stack in the shared memory: room for remove_beneath's
// 64 levels of 4 KiB buffers, and a guard page below.
constexpr size_t kStack = 512 * 1024, kGuard = 4096;

}  // namespace

int start_warden(int supervisor_pidfd, const char* private_tmp, bool share_memory, Warden* out) {
  // Before the clone: the warden's kill(-1) must never reach past this domain.
  if (int r = walls::scope_signals_only(); r != 0) return r;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return -errno;
  long pid;
  if (share_memory) {
    void* stack = ::mmap(nullptr, kStack + kGuard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED || ::mprotect(stack, kGuard, PROT_NONE) != 0) {
      int e = errno;
      if (stack != MAP_FAILED) ::munmap(stack, kStack + kGuard);
      ::close(p[0]);
      ::close(p[1]);
      return -e;
    }
    g_watch = WatchArgs{supervisor_pidfd, p[0], private_tmp};
    // A process of its own (own pid, creds, descriptors, signal handlers, and
    // the outer domain) on init's memory (CLONE_VM): no copy of the page
    // tables of this copy of the supervisor, no copy-on-write faults in init
    // afterwards, no second address space to tear down at the end. Nothing of
    // the sandbox can write that memory: init is not dumpable once anything
    // else of the sandbox runs (become_init), and its memory lives on while
    // the warden does, whatever ends init. The stack is never unmapped: the
    // warden outlives nothing that would.
    pid = ::clone(watch_entry, static_cast<char*>(stack) + kGuard + kStack, CLONE_VM | SIGCHLD, nullptr);
    if (pid < 0) {
      int e = errno;
      ::munmap(stack, kStack + kGuard);
      ::close(p[0]);
      ::close(p[1]);
      return -e;
    }
  } else {
    // A raw fork: no atfork handlers (this is a copy of a supervisor that may have threads).
    pid = ::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (pid < 0) {
      int e = errno;
      ::close(p[0]);
      ::close(p[1]);
      return -e;
    }
    if (pid == 0) watch(supervisor_pidfd, p[0], private_tmp);
  }
  ::close(p[0]);
  out->pid = static_cast<pid_t>(pid);
  out->fd = p[1];
  return 0;
}

void end_warden(Warden* w) {
  if (w->fd >= 0) {
    if (w->pid > 0) (void)!::write(w->fd, "e", 1);
    ::close(w->fd);
    w->fd = -1;
  }
  if (w->pid > 0) {
    while (::waitpid(w->pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    w->pid = -1;
  }
}

void leave_warden(Warden* w) {
  if (w->fd >= 0) ::close(w->fd);
  w->fd = -1;
  w->pid = -1;
}

}  // namespace exg::process
