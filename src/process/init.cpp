#include "process/init.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "agent/agent.hpp"
#include "process/child.hpp"
#include "process/init_loop.hpp"
#include "process/landlock.hpp"
#include "process/seccomp.hpp"
#include "util/fd_passing.hpp"
#include "util/step_timer.hpp"

extern char** environ;

namespace exg::process {

namespace {

[[noreturn]] void die(int sync_fd, const std::string& what) {
  std::string msg(1, kMsgError);
  msg += what + ": " + std::strerror(errno);
  (void)::send(sync_fd, msg.data(), msg.size(), MSG_NOSIGNAL);
  ::_exit(125);
}

bool drop_capabilities() {
  for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) return false;
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) return false;
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  return ::syscall(SYS_capset, &hdr, data) == 0;
}

[[noreturn]] void exec_command(const InitArgs& a) {
  sigset_t none;
  sigemptyset(&none);
  for (int s = 1; s < NSIG; ++s) std::signal(s, SIG_DFL);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  // Own session: no controlling terminal but the sandbox's own pty.
  if (::setsid() < 0) {
    std::fprintf(stderr, "exguardian: setsid: %s\n", std::strerror(errno));
    ::_exit(125);
  }
  if (a.pty_slave >= 0) {
    if (::ioctl(a.pty_slave, TIOCSCTTY, 0) != 0) {
      std::fprintf(stderr, "exguardian: pty: %s\n", std::strerror(errno));
      ::_exit(125);
    }
    for (int k = 0; k < 3; ++k)
      if (a.tty_fds[k]) ::dup2(a.pty_slave, k);
  }
  ::close_range(3, ~0U, 0);

  std::vector<char*> envp, argv;
  for (const auto& e : a.plan->env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  for (const auto& s : a.plan->argv) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  environ = envp.data();  // execvp searches the PATH of the sandbox's environment
  ::execvp(argv[0], argv.data());
  int err = errno;
  std::fprintf(stderr, "exguardian: %s: %s\n", argv[0], std::strerror(err));
  ::_exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
}

// "Ready", with the seccomp listener attached when there is one.
void send_ready(int sock, int fd) { (void)send_fds(sock, kMsgReady, &fd, fd >= 0 ? 1 : 0); }

}  // namespace

[[noreturn]] void become_init(const InitArgs& a) {
  auto mark = [&](const char* step) {
    if (a.timer) a.timer->child_mark(step);
  };
  if (a.rlimits) {
    if (int r = apply_rlimits(*a.rlimits); r != 0) {
      errno = -r;
      die(a.sync_fd, "set resource limits");
    }
  }
  // The identity was taken before setup (child_main); now the last privileges go.
  if (!drop_capabilities()) die(a.sync_fd, "drop capabilities");
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die(a.sync_fd, "no_new_privs");
  ::close(a.parent_pidfd);
  if (::chdir(a.plan->cwd.c_str()) != 0) die(a.sync_fd, "chdir " + a.plan->cwd);
  ::prctl(PR_SET_DUMPABLE, 0);  // the command cannot read init's memory
  if (::setsid() < 0) die(a.sync_fd, "setsid");  // leave the host's session and terminal

  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  mark("privileges");

  // Landlock: a second wall that does not depend on the mounts being right.
  std::string ll_report;
  if (int r = apply_landlock(a.plan->landlock, &ll_report); r < 0) {
    errno = -r;
    die(a.sync_fd, "apply Landlock (" + ll_report + ")");
  }
  mark("landlock");
  // seccomp last: init and the command share the filter; refusals reach the
  // supervisor through the listener, which no process of the sandbox keeps.
  int listener = -1;
  if (a.seccomp) {
    listener = install_seccomp(*a.seccomp);
    if (listener < 0) die(a.sync_fd, "install the seccomp filter");
    mark("seccomp install");
  }

  if (a.agent_channel >= 0) {
    // The agent is pid 1 itself, after every wall above: what it starts and
    // every file it touches are the sandbox's.
    if (a.pty_slave >= 0) ::close(a.pty_slave);
    if (a.timer) a.timer->child_done();  // nothing of the sandbox may write the supervisor's figures
    send_ready(a.sync_fd, listener);
    if (listener >= 0) ::close(listener);
    ::close(a.sync_fd);
    if (::dup2(a.agent_channel, 3) < 0) ::_exit(125);
    ::fcntl(3, F_SETFD, FD_CLOEXEC);
    ::close_range(4, ~0U, 0);
    agent::AgentConfig cfg;
    cfg.channel = 3;
    cfg.env = a.plan->env;
    cfg.cwd = a.plan->cwd;
    agent::serve(cfg);
  }
  pid_t cmd = ::fork();
  if (cmd < 0) die(a.sync_fd, "fork the command");
  if (cmd == 0) {
    ::close(a.sync_fd);
    exec_command(a);
  }
  if (a.pty_slave >= 0) ::close(a.pty_slave);
  mark("fork command");
  if (a.timer) a.timer->child_done();  // (the command's copy of the page went with its execve)
  send_ready(a.sync_fd, listener);
  if (listener >= 0) ::close(listener);
  ::close(a.sync_fd);
  ::close_range(3, ~0U, 0);
  // Everything the supervisor forwards goes on to the command.
  serve_as_init(cmd, all, [](int sig) {
    return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT || sig == SIGUSR1 || sig == SIGUSR2 ||
           sig == SIGWINCH || sig == SIGCONT || sig == SIGALRM;
  });
}

}  // namespace exg::process
