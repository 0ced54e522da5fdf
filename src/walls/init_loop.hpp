// The last part of every sandbox init (the process layer's and the container
// layers' exguardian-init): hand stdio to the command, then wait for signals,
// pass them on, and leave with the command's status. Header-only: the static
// exguardian-init links none of the core library.
#pragma once
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

namespace exg::walls {

// `waited`: the blocked signals sigwaitinfo takes (SIGCHLD among them);
// `forward(sig)`: whether a signal goes on to the command.
// `at_end()` runs once the command has ended, before init exits with its status.
template <typename Forward, typename AtEnd>
[[noreturn]] void serve_as_init(pid_t cmd, const sigset_t& waited, Forward forward, AtEnd at_end) {
  // Init keeps no terminal and no pipe open: stdio belongs to the command.
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull >= 0) {
    for (int k = 0; k < 3; ++k) ::dup2(devnull, k);
    ::close(devnull);
  }
  for (;;) {
    siginfo_t si;
    int sig = ::sigwaitinfo(&waited, &si);
    if (sig < 0) continue;
    if (sig == SIGCHLD) {
      int status;
      pid_t p;
      while ((p = ::waitpid(-1, &status, WNOHANG)) > 0) {
        if (p != cmd) continue;
        if (WIFEXITED(status)) at_end(), ::_exit(WEXITSTATUS(status));
        if (WIFSIGNALED(status)) at_end(), ::_exit(128 + WTERMSIG(status));
      }
      continue;
    }
    if (forward(sig)) ::kill(cmd, sig);
  }
}

template <typename Forward>
[[noreturn]] void serve_as_init(pid_t cmd, const sigset_t& waited, Forward forward) {
  serve_as_init(cmd, waited, forward, [] {});
}

}  // namespace exg::walls
