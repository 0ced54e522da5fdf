// A new pty's size, taken from the caller's terminal before the master goes
// to the supervisor. The supervisor's relay copies the size too, but only
// once the sandbox is up: a command that asks first (`stty size`, a
// full-screen program drawing its first screen) would see 0x0.
#pragma once

#include <sys/ioctl.h>

namespace exg {

// TTY_FDS: which of this process's 0..2 are the caller's terminal (the ones
// the pty replaces); the first that answers gives the size.
inline void size_pty_as_caller(int master, const bool tty_fds[3]) {
  for (int k = 0; k < 3; ++k) {
    winsize ws{};
    if (tty_fds[k] && ::ioctl(k, TIOCGWINSZ, &ws) == 0) {
      ::ioctl(master, TIOCSWINSZ, &ws);
      return;
    }
  }
}

}  // namespace exg
