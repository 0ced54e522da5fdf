// Pid 1 of a container or gVisor sandbox (the runtime starts it as
// process.args[0]). A pid 1 without handlers ignores SIGTERM and SIGINT, never
// reaps orphans, and would hand the command no session of its own: this one
// starts the command in its own session with the terminal (when stdin is one)
// as its controlling tty, so an interactive shell has job control, forwards
// every signal the runtime delivers, reaps, and exits with the command's
// status (128+N when signal N killed it), which ends the container.
#include "init/oci_init.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "agent/agent.hpp"
#include "walls/init_loop.hpp"

extern char** environ;

namespace exg::init {

int oci_init_main(int argc, char** argv, bool fresh_signals) {
  if (argc == 2 && std::strcmp(argv[0], "--agent") == 0) {
    // A session (LaunchOptions::agent): the agent is pid 1, its channel the
    // descriptor the runtime passed in; the environment and working directory
    // are the container's (the Plan's, through config.json).
    char* end = nullptr;
    long fd = std::strtol(argv[1], &end, 10);
    if (*end || (fd != 0 && fd < 3) || fd > 1024 || ::fcntl(static_cast<int>(fd), F_GETFD) < 0) {
      std::fprintf(stderr, "exguardian: oci-init: --agent %s: not an open descriptor\n", argv[1]);
      return 125;
    }
    ::prctl(PR_SET_DUMPABLE, 0);  // the sandbox's processes cannot read pid 1
    (void)::setsid();
    if (fd == 0) {
      // gVisor: the channel is stdin (runsc passes no other descriptor). It
      // must be a stream socket (not a terminal or file a runtime put there by
      // mistake); moved off stdio, which the agent points at /dev/null.
      int type = 0;
      socklen_t len = sizeof type;
      if (::getsockopt(0, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) {
        std::fprintf(stderr, "exguardian: oci-init: --agent 0: stdin is not a stream socket\n");
        return 125;
      }
      fd = ::fcntl(0, F_DUPFD_CLOEXEC, 3);
      if (fd < 0) {
        std::fprintf(stderr, "exguardian: oci-init: --agent 0: %s\n", std::strerror(errno));
        return 125;
      }
    }
    ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
    agent::AgentConfig cfg;
    cfg.channel = static_cast<int>(fd);
    for (char** e = environ; e && *e; ++e) cfg.env.emplace_back(*e);
    // The agent keeps its copy; the initial environment area is cleared, so
    // /proc/1/environ shows nothing even where the kernel does not hold it
    // back for a process that is not dumpable (gVisor 20221219 shows it).
    for (char** e = environ; e && *e; ++e) std::memset(*e, 0, std::strlen(*e));
    char cwd[4096];
    cfg.cwd = ::getcwd(cwd, sizeof cwd) ? cwd : "/";
    agent::serve(cfg);
  }
  if (argc < 1) {
    std::fprintf(stderr, "exguardian: oci-init: no command\n");
    return 125;
  }
  sigset_t all, old;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &old);
  // vfork: the child borrows this address space until it executes the
  // command. Under gVisor every address space is a stub process on the host,
  // and fork + exec made two; the child below only makes system calls.
  pid_t cmd = ::vfork();
  if (cmd < 0) {
    std::fprintf(stderr, "exguardian: oci-init: vfork: %s\n", std::strerror(errno));
    return 125;
  }
  if (cmd == 0) {
    // An ignored disposition survives exec: the command starts with none.
    if (!fresh_signals)
      for (int s = 1; s < NSIG; ++s) std::signal(s, SIG_DFL);
    if (::isatty(0) && (::tcgetsid(0) == ::getsid(0) || ::tcgetpgrp(0) == ::getpgrp())) {
      // The runtime made the terminal ours (process.terminal): the command
      // gets its own process group in the foreground of it (signals still
      // blocked, so tcsetpgrp cannot stop us with SIGTTOU). gVisor's host
      // terminal answers no TIOCGSID and refuses TIOCSCTTY (a new session
      // would never reach the foreground: `sh -i` stops for SIGTTIN before
      // its prompt); it puts pid 1's group in the foreground, which says it.
      ::setpgid(0, 0);
      (void)::tcsetpgrp(0, ::getpid());
    } else {
      // A pty the runtime host made: the command's session and controlling
      // terminal. Not a host terminal, so nothing to inject into.
      ::setsid();
      if (::isatty(0)) (void)::ioctl(0, TIOCSCTTY, 0);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvp(argv[0], argv);
    int err = errno;
    std::fprintf(stderr, "exguardian: %s: %s\n", argv[0], std::strerror(err));
    ::_exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
  }
  ::prctl(PR_SET_DUMPABLE, 0);
  walls::serve_as_init(cmd, all, [](int) { return true; });
}

}  // namespace exg::init
