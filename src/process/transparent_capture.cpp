#include "process/transparent_capture.hpp"

#include <unistd.h>

#include <cerrno>

#include "process/child.hpp"
#include "util/fd_passing.hpp"

namespace exg::process {

std::string hand_over_transparent_capture(const plan::ProxyPlan& plan, int sync_fd) {
  if (!plan.transparent) return {};
  std::string what;
  int l = set_up_transparent_capture(plan.transparent_port, &what);
  if (l < 0) {
    int e = errno;
    what += " (fail closed; a policy with \"network\": {\"transparent\": false} runs without it)";
    errno = e;
    return what;
  }
  bool sent = send_fds(sync_fd, kMsgTransparent, &l, 1);
  int e = errno;
  ::close(l);
  errno = e;
  return sent ? std::string() : "hand the transparent egress listener to the supervisor";
}

}  // namespace exg::process
