// One message on the sandbox's sync socket: a type byte, with file
// descriptors attached (SCM_RIGHTS). Used between the sandbox's setup and the
// supervisor; safe after fork (no allocation).
#pragma once
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cerrno>
#include <cstring>
#include <string>

namespace exg {

inline constexpr size_t kMaxPassedFds = 8;  // the most descriptors one message carries

// Sends `type` with up to kMaxPassedFds fds; true when the byte went out.
inline bool send_fds(int sock, char type, const int* fds, size_t count) {
  iovec iov{&type, 1};
  alignas(cmsghdr) char ctrl[CMSG_SPACE(kMaxPassedFds * sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (count > 0 && count <= kMaxPassedFds) {
    const size_t bytes = count * sizeof(int);
    msg.msg_control = ctrl;
    msg.msg_controllen = CMSG_SPACE(bytes);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(bytes);
    std::memcpy(CMSG_DATA(c), fds, bytes);
  }
  return ::sendmsg(sock, &msg, MSG_NOSIGNAL) == 1;
}

// One message: up to `len` bytes into `buf` and up to kMaxPassedFds
// descriptors (received close-on-exec) into `fds`, their count in *n_fds;
// *truncated when the peer sent more of either than fits (the kernel closes
// descriptors that did not fit). The recvmsg result (0: the peer is gone;
// -1: errno set). No allocation: safe in a cloned child.
inline ssize_t recv_with_fds(int sock, void* buf, size_t len, int (&fds)[kMaxPassedFds], size_t* n_fds,
                             bool* truncated) {
  iovec iov{buf, len};
  alignas(cmsghdr) char ctrl[CMSG_SPACE(kMaxPassedFds * sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctrl;
  msg.msg_controllen = sizeof ctrl;
  ssize_t got;
  do got = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC); while (got < 0 && errno == EINTR);
  *n_fds = 0;
  *truncated = got >= 0 && (msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC));
  for (cmsghdr* c = got > 0 ? CMSG_FIRSTHDR(&msg) : nullptr; c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t k = 0; k < count && *n_fds < kMaxPassedFds; ++k)
      std::memcpy(&fds[(*n_fds)++], CMSG_DATA(c) + k * sizeof(int), sizeof(int));
  }
  return got;
}

// One message from the other side: its type (0 when the peer is gone), the
// text after the type byte, and up to 3 fds received close-on-exec (-1 when
// absent; more are closed). False on a socket error (errno set).
struct FdMessage {
  char type = 0;
  std::string text;
  int fd = -1, fd2 = -1, fd3 = -1;
};

inline bool recv_fds(int sock, FdMessage* m) {
  char buf[4096];
  int fds[kMaxPassedFds];
  size_t n_fds = 0;
  bool truncated = false;
  ssize_t n = recv_with_fds(sock, buf, sizeof buf, fds, &n_fds, &truncated);
  if (n < 0) return false;
  *m = FdMessage{};
  int* slots[3] = {&m->fd, &m->fd2, &m->fd3};
  for (size_t k = 0; k < n_fds; ++k) {
    if (k < 3) *slots[k] = fds[k];
    else ::close(fds[k]);
  }
  if (n == 0) return true;
  m->type = buf[0];
  m->text.assign(buf + 1, static_cast<size_t>(n - 1));
  return true;
}

}  // namespace exg
