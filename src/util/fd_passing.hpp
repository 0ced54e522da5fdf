// One message on the sandbox's sync socket: a type byte, with file
// descriptors attached (SCM_RIGHTS). Used between the sandbox's setup and the
// supervisor; safe after fork (no allocation).
#pragma once
#include <sys/socket.h>

#include <cstddef>
#include <cstring>

namespace exg {

// Sends `type` with up to 4 fds; true when the byte went out.
inline bool send_fds(int sock, char type, const int* fds, size_t count) {
  iovec iov{&type, 1};
  alignas(cmsghdr) char ctrl[CMSG_SPACE(4 * sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (count > 0 && count <= 4) {
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

}  // namespace exg
