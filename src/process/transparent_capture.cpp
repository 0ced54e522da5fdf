#include "process/transparent_capture.hpp"

#include <linux/netlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "process/handshake.hpp"
#include "util/fd_passing.hpp"

namespace exg::process {

std::string hand_over_transparent_capture(const plan::ProxyPlan& plan, int sync_fd) {
  if (!plan.transparent) return {};
  std::string what;
  // The listener and two netlink sockets of this netns; the supervisor sends
  // the route and the rules on them (process/spawn.cpp) while this process goes on
  // with its setup, and says "in cgroup" only once they are in.
  int fds[3] = {walls::capture_listener(plan.transparent_port, &what), -1, -1};
  if (fds[0] >= 0) {
    fds[1] = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    fds[2] = fds[1] < 0 ? -1 : ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
    if (fds[2] < 0) what = "transparent egress: netlink sockets";
  }
  bool sent = fds[2] >= 0 && send_fds(sync_fd, kMsgTransparent, fds, 3);
  int e = errno;
  if (fds[2] >= 0 && !sent) what = "hand the transparent egress sockets to the supervisor";
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
  errno = e;
  if (!sent && fds[2] < 0) what += " (fail closed; a policy with \"network\": {\"transparent\": false} runs without it)";
  return sent ? std::string() : what;
}

}  // namespace exg::process
