#include "process/init.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "agent/agent.hpp"
#include "process/handshake.hpp"
#include "process/landlock_warden.hpp"
#include "walls/init_loop.hpp"
#include "walls/landlock.hpp"
#include "walls/seccomp.hpp"
#include "util/fd_passing.hpp"
#include "util/step_timer.hpp"

extern char** environ;

namespace exg::process {

namespace {

bool drop_capabilities(bool bounding_set_done) {
  for (int cap = 0; !bounding_set_done && cap <= CAP_LAST_CAP; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) return false;
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) return false;
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  return ::syscall(SYS_capset, &hdr, data) == 0;
}

// What the command's clone needs, made before it: the child shares init's
// memory (CLONE_VM) and must allocate nothing.
struct CommandStart {
  const InitArgs* a;
  char** argv = nullptr;
  // >= 0: init offered its seccomp listener on this socket ("S") and goes on
  // without waiting; the command's side waits for "taken" before anything
  // else (see become_init).
  int listener_offered_on = -1;
  int listener = -1;  // init's copy, which this side's table holds too until it closes it
};

// The command's side, between its clone and execve: raw steps only (it runs on
// init's memory with its own stack, init suspended until the exec: CLONE_VFORK).
int exec_command(void* arg) {
  const auto& cs = *static_cast<const CommandStart*>(arg);
  const InitArgs& a = *cs.a;
  auto die = [](const char* what, int err, int status) {
    char msg[512];
    int n = std::snprintf(msg, sizeof msg, "exguardian: %s: %s\n", what, std::strerror(err));
    if (n > 0) (void)::write(2, msg, std::min(static_cast<size_t>(n), sizeof msg - 1));
    ::_exit(status);
  };
  // The supervisor takes init's listener while init's memory (this one, until
  // the execve) is dumpable: only then may it stop being so and the command
  // run. "Taken" ends the handshake (init's "A" was its last word): the
  // supervisor has gone on without waiting for a "ready" from here.
  if (cs.listener_offered_on >= 0) {
    if (!await_listener_taken(cs.listener_offered_on)) ::_exit(125);  // the supervisor is gone or refused it
    ::close(cs.listener);  // (it may sit below 3, where the close_range below does not reach)
    ::prctl(PR_SET_DUMPABLE, 0);  // the command cannot read init's memory
    if (a.timer) {
      a.timer->child_mark("start command");
      a.timer->child_done();  // (init's too: one memory)
    }
  }
  // Handlers are per process here (no CLONE_SIGHAND): resetting them leaves init's alone.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) (void)::sigaction(s, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  // Own session: no controlling terminal but the sandbox's own pty.
  if (::setsid() < 0) die("setsid", errno, 125);
  if (a.pty_slave >= 0) {
    if (::ioctl(a.pty_slave, TIOCSCTTY, 0) != 0) die("pty", errno, 125);
    for (int k = 0; k < 3; ++k)
      if (a.tty_fds[k]) ::dup2(a.pty_slave, k);
  }
  // Passed descriptors become 3, 4, ...: first copied above those numbers, so
  // that one already at 3 + j is not overwritten before it is moved.
  int high[kMaxPassFds];
  for (int k = 0; k < a.n_pass_fds; ++k)
    if ((high[k] = ::fcntl(a.pass_fds[k], F_DUPFD_CLOEXEC, 3 + kMaxPassFds)) < 0) die("pass a descriptor", errno, 125);
  for (int k = 0; k < a.n_pass_fds; ++k)
    if (::dup2(high[k], 3 + k) < 0) die("pass a descriptor", errno, 125);  // (without close-on-exec)
  ::close_range(3 + static_cast<unsigned>(a.n_pass_fds), ~0U, 0);  // (its own descriptor table: no CLONE_FILES)
  ::execvp(cs.argv[0], cs.argv);  // environ is the sandbox's (set by init): its PATH is searched
  int err = errno;
  die(cs.argv[0], err, err == ENOENT || err == ENOTDIR ? 127 : 126);
  return 0;
}

// Starts the command: a clone that shares init's memory until its execve
// (CLONE_VM | CLONE_VFORK, as posix_spawn does), so that neither copies the
// page tables of init (a copy of the supervisor's address space) nor takes
// copy-on-write faults afterwards. `listener_offered_on` >= 0: the sync
// socket on which init offered `listener` (its copy): the command's side ends
// the handshake (exec_command). Its pid, or -1 with errno set.
pid_t start_command(const InitArgs& a, int listener_offered_on, int listener) {
  // The command's argv and environment at the bottom of its stack's mapping,
  // not on the heap: init allocates nothing (a malloc here wrote the arena and
  // heap pages this copy of the supervisor shares with it, copying them), and
  // they need live only until the execve. Room above them for execvp's path
  // buffers and its ENOEXEC fallback's argv (on the stack).
  const size_t argc = a.plan->argv.size(), envc = a.plan->env.size();
  const size_t arrays = (argc + 1 + envc + 1) * sizeof(char*);
  const size_t stack_size = 256 * 1024 + (argc + 1) * sizeof(char*) + arrays;
  void* mem = ::mmap(nullptr, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (mem == MAP_FAILED) return -1;
  char** argv = static_cast<char**>(mem);
  char** envp = argv + argc + 1;
  for (size_t k = 0; k < argc; ++k) argv[k] = const_cast<char*>(a.plan->argv[k].c_str());
  argv[argc] = nullptr;
  for (size_t k = 0; k < envc; ++k) envp[k] = const_cast<char*>(a.plan->env[k].c_str());
  envp[envc] = nullptr;
  char** own_environ = environ;
  environ = envp;  // execvp searches the PATH of the sandbox's environment (one memory: the child's environ)
  CommandStart cs{&a, argv, listener_offered_on, listener};
  pid_t pid = ::clone(exec_command, static_cast<char*>(mem) + stack_size, CLONE_VM | CLONE_VFORK | SIGCHLD, &cs);
  int e = errno;
  environ = own_environ;  // (init reads no environment again; none that is about to be unmapped)
  ::munmap(mem, stack_size);  // the child has exec'd or exited: the stack and arrays are no one's
  errno = e;
  return pid;
}

// (the landlock layer's warden, InitArgs::warden_pid: none when pid < 0)
Warden g_warden;

// Closes every descriptor from `first` on but the warden's.
void close_from(unsigned first) {
  const int w = g_warden.fd;
  if (w >= 0 && static_cast<unsigned>(w) >= first) {
    if (static_cast<unsigned>(w) > first) ::close_range(first, static_cast<unsigned>(w) - 1, 0);
    ::close_range(static_cast<unsigned>(w) + 1, ~0U, 0);
  } else {
    ::close_range(first, ~0U, 0);
  }
}

// Init's list of its children, opened once while the command runs
// (open_children_list), not at the end: the lookup of /proc/thread-self, its
// pid and task directories, was most of a round's time after the command had
// exited. A read at offset 0 lists them afresh. -1: opened when first needed.
int g_children = -1;

void open_children_list() {
  if (g_children < 0) g_children = ::open("/proc/thread-self/children", O_RDONLY | O_CLOEXEC);
}

// What the command left behind, killed (InitArgs::reap_descendants): as the
// subreaper, this process inherits each orphan, so killing its children until
// it has none reaches every descendant, whatever sessions or groups they made
// (a child that forks before its kill leaves an orphan, found next round).
// The warden is left alone (it is out of reach). False when it cannot tell.
// The list read and parsed by hand, not through snprintf/strtol: at the run's
// end, their first calls in this copy of the supervisor faulted in pages of
// libc's text (a fork does not copy the page tables of file mappings).
//
// One round that lists no child but the warden ends it: only this process
// takes a child off its list (by reaping it), and a child is added only by a
// fork of this process (none here) or by the exit of a descendant, which
// would have a listed ancestor among this process's children (an orphan is
// reparented before its dead parent can be reaped). So nothing of the
// sandbox but the warden is left, and nothing can come back.
bool kill_children_but_warden() {
  open_children_list();
  for (;;) {
    char buf[4096];
    ssize_t n = g_children >= 0 ? ::pread(g_children, buf, sizeof buf - 1, 0) : -1;
    bool any = false;
    if (n > 0) {
      buf[n] = '\0';
      for (const char* p = buf; *p;) {  // "pid pid ... "
        long pid = 0;
        const char* digits = p;
        for (; *p >= '0' && *p <= '9'; ++p) pid = pid * 10 + (*p - '0');
        if (p == digits) break;
        if (pid > 0 && pid != g_warden.pid) ::kill(static_cast<pid_t>(pid), SIGKILL), any = true;
        while (*p == ' ' || *p == '\n') ++p;
      }
    }
    // (no children file, CONFIG_PROC_CHILDREN: the warden ends the rest once init has gone without a word)
    if (n < 0) return false;
    int status;
    pid_t r = ::waitpid(-1, &status, any ? 0 : WNOHANG);
    if (r == g_warden.pid) g_warden.pid = -1;  // (gone on its own: killed from the host)
    if (r < 0 && errno == ECHILD) break;
    // r == 0 with none listed: the warden is the only child left (above).
    if (r == 0 && !any && g_warden.pid > 0) break;
  }
  return true;
}

// Init's normal end: the rest killed, then the warden told and reaped.
void kill_descendants() {
  if (kill_children_but_warden()) end_warden(&g_warden);
}

// The agent's end (AgentConfig::end_descendants): with its channel closed, the
// supervisor is gone or going, and will not remove TMPDIR: the warden is not
// told, so that it does once the supervisor has exited (landlock_warden.hpp).
void agent_end_descendants(bool supervisor_gone) {
  if (!supervisor_gone) return kill_descendants();
  (void)kill_children_but_warden();
  leave_warden(&g_warden);
}

}  // namespace

[[noreturn]] void become_init(const InitArgs& a) {
  auto mark = [&](const char* step) {
    if (a.timer) a.timer->child_mark(step);
  };
  g_warden = Warden{a.warden_pid, a.warden_fd};
  if (a.rlimits) {
    if (int r = walls::apply_rlimits(*a.rlimits); r != 0) die(a.sync_fd, "set resource limits", -r);
  }
  // The identity was taken before setup (child_main); now the last privileges go.
  if (!drop_capabilities(a.bounding_set_done)) die(a.sync_fd, "drop capabilities", errno);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die(a.sync_fd, "no_new_privs", errno);
  ::close(a.parent_pidfd);
  if (::chdir(a.plan->cwd.c_str()) != 0) die(a.sync_fd, "chdir " + a.plan->cwd, errno);
  if (::setsid() < 0) die(a.sync_fd, "setsid", errno);  // leave the host's session and terminal

  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  mark("privileges");

  // Landlock: a second wall that does not depend on the mounts being right.
  std::string ll_report;
  if (int r = a.landlock ? walls::enforce_landlock(*a.landlock, &ll_report) : walls::apply_landlock(a.plan->landlock, &ll_report, /*say_applied=*/false); r < 0)
    die(a.sync_fd, "apply Landlock (" + ll_report + ")", -r);
  mark("landlock");
  // seccomp last: init and the command share the filter; refusals reach the
  // supervisor through the listener, which no process of the sandbox keeps.
  // The supervisor takes the listener from init's descriptor table, which an
  // unprivileged supervisor may do only while init is dumpable (init has
  // changed ids: the kernel made it not). Nothing but init runs here yet; the
  // command starts only once it is not dumpable again.
  //
  // With a command to run, init offers the listener as its last word ("A")
  // and goes on: the command's side, suspended before its execve, waits for
  // "taken" and makes the memory it shares with init not dumpable
  // (exec_command); the supervisor counts the sandbox ready once it has sent
  // "taken" (no "ready" to wait for: no wake of it for one). Init closes its
  // copy once the command has exec'd (or given up).
  int offered = -1;
  if (a.seccomp) {
    ::prctl(PR_SET_DUMPABLE, 1);
    int listener = walls::install_seccomp(*a.seccomp);
    if (listener < 0) die(a.sync_fd, "install the seccomp filter", errno);
    mark("seccomp install");  // (before "A": the supervisor may count the handover from it)
    if (a.agent_channel >= 0) {
      if (!hand_over_listener(a.sync_fd, listener)) ::_exit(125);  // the supervisor is gone or refused it
      ::close(listener);
    } else {
      if (!offer_listener(a.sync_fd, listener)) ::_exit(125);  // the supervisor is gone
      offered = listener;
    }
  }
  if (offered < 0) ::prctl(PR_SET_DUMPABLE, 0);  // the command cannot read init's memory

  if (a.agent_channel >= 0) {
    // The agent is pid 1 itself, after every wall above: what it starts and
    // every file it touches are the sandbox's.
    if (a.pty_slave >= 0) ::close(a.pty_slave);
    if (a.timer) a.timer->child_done();  // nothing of the sandbox may write the supervisor's figures
    send_ready(a.sync_fd);
    ::close(a.sync_fd);
    if (g_warden.fd == 3 && (g_warden.fd = ::fcntl(3, F_DUPFD_CLOEXEC, 4)) < 0) ::_exit(125);
    if (::dup2(a.agent_channel, 3) < 0) ::_exit(125);
    ::fcntl(3, F_SETFD, FD_CLOEXEC);
    close_from(4);
    agent::AgentConfig cfg;
    cfg.channel = 3;
    cfg.env = a.plan->env;
    cfg.cwd = a.plan->cwd;
    if (a.reap_descendants) cfg.end_descendants = agent_end_descendants;  // no pid namespace to end them
    agent::serve(cfg);
  }
  pid_t cmd = start_command(a, offered >= 0 ? a.sync_fd : -1, offered);
  if (cmd < 0) die(a.sync_fd, "start the command", errno);
  if (a.pty_slave >= 0) ::close(a.pty_slave);
  if (offered >= 0) {
    // The command's side read "taken" before its execve (or exited without one).
    ::close(offered);
    ::prctl(PR_SET_DUMPABLE, 0);  // (it did so already, but when it gave up)
  } else {
    mark("start command");  // (until its execve: CLONE_VFORK)
    if (a.timer) a.timer->child_done();  // (the command's copy of the page went with its execve)
    send_ready(a.sync_fd);
  }
  ::close(a.sync_fd);
  close_from(3);
  if (a.reap_descendants) open_children_list();  // (while the command runs: kill_children_but_warden)
  // Everything the supervisor forwards goes on to the command.
  auto forward = [](int sig) {
    return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT || sig == SIGUSR1 || sig == SIGUSR2 ||
           sig == SIGWINCH || sig == SIGCONT || sig == SIGALRM;
  };
  if (a.reap_descendants) walls::serve_as_init(cmd, all, forward, kill_descendants);
  walls::serve_as_init(cmd, all, forward);
}

}  // namespace exg::process
