// One message on the sandbox's sync socket: a type byte, with file
// descriptors attached (SCM_RIGHTS). Used between the sandbox's setup and the
// supervisor; safe after fork (no allocation).
#pragma once
#include <sys/socket.h>

#include <cstddef>
#include <cerrno>
#include <cstring>
#include <string>

namespace exg {

// Sends `type` with up to 8 fds; true when the byte went out.
inline bool send_fds(int sock, char type, const int* fds, size_t count) {
  iovec iov{&type, 1};
  alignas(cmsghdr) char ctrl[CMSG_SPACE(8 * sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (count > 0 && count <= 8) {
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

// One message from the other side: its type (0 when the peer is gone), the
// text after the type byte, and up to 3 fds received close-on-exec (-1 when
// absent). False on a socket error (errno set).
struct FdMessage {
  char type = 0;
  std::string text;
  int fd = -1, fd2 = -1, fd3 = -1;
};

inline bool recv_fds(int sock, FdMessage* m) {
  char buf[4096];
  iovec iov{buf, sizeof buf};
  alignas(cmsghdr) char ctrl[CMSG_SPACE(3 * sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctrl;
  msg.msg_controllen = sizeof ctrl;
  ssize_t n;
  do n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC); while (n < 0 && errno == EINTR);
  if (n < 0) return false;
  *m = FdMessage{};
  if (n == 0) return true;
  m->type = buf[0];
  m->text.assign(buf + 1, static_cast<size_t>(n - 1));
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    int* slots[3] = {&m->fd, &m->fd2, &m->fd3};
    for (size_t k = 0; k < count && k < 3; ++k) std::memcpy(slots[k], CMSG_DATA(c) + k * sizeof(int), sizeof(int));
  }
  return true;
}

}  // namespace exg
