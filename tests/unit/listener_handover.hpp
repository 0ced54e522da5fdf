// A test child's seccomp listener handed to the test (its supervisor) once the
// child is under the filter, as the sandbox's init and process/spawn.cpp do
// it (process/handshake.hpp's hand_over_listener):
// the descriptor's number by send() (the filter sends every sendmsg() to the
// supervisor, which has no listener yet: SCM_RIGHTS would wait forever), the
// test takes it with pidfd_getfd and answers; only then does the child go on.
#pragma once
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "util/unique_fd.hpp"

namespace exg::test_support {

// The child's half: false when the test did not answer.
inline bool hand_over_listener(int sock, int listener) {
  std::string n = std::to_string(listener);
  if (::send(sock, n.data(), n.size(), MSG_NOSIGNAL) < 0) return false;
  char taken = 0;
  return ::recv(sock, &taken, 1, 0) == 1;
}

// The test's half: the child's listener, or an empty fd.
inline UniqueFd take_listener(int sock, pid_t child) {
  char buf[32] = {};
  if (::recv(sock, buf, sizeof buf - 1, 0) <= 0) return UniqueFd();
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, child, 0)));
  UniqueFd l(pidfd ? static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd.get(), std::atoi(buf), 0)) : -1);
  (void)::send(sock, "K", 1, MSG_NOSIGNAL);
  return l;
}

}  // namespace exg::test_support
