#include "process/netns_setup.hpp"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/netlink.h>

#include <cerrno>
#include <cstring>

#include "process/handshake.hpp"
#include "util/fd_passing.hpp"

namespace exg::process {

std::string bring_loopback_up() {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return "socket for loopback";
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(s, SIOCGIFFLAGS, &ifr) != 0) {
    int e = errno;
    ::close(s);
    errno = e;
    return "get lo flags";
  }
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (::ioctl(s, SIOCSIFFLAGS, &ifr) != 0) {
    int e = errno;
    ::close(s);
    errno = e;
    return "bring lo up";
  }
  ::close(s);
  return {};
}

std::string hand_over_sock_diag(int sync_fd) {
  int s = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (s < 0) return "sock_diag socket (which Unix sockets the sandbox binds)";
  bool sent = send_fds(sync_fd, kMsgSockDiag, &s, 1);
  int e = errno;
  ::close(s);
  errno = e;
  return sent ? std::string() : "hand the sock_diag socket to the supervisor";
}

int make_proxy_listeners(const plan::ProxyPlan& proxy, int fds[3], std::string* what) {
  fds[0] = fds[1] = fds[2] = -1;
  auto bail = [&](std::string w) {
    int e = errno;
    for (int k = 0; k < 3; ++k)
      if (fds[k] >= 0) ::close(fds[k]);
    fds[0] = fds[1] = fds[2] = -1;
    if (what) *what = std::move(w);
    errno = e;
    return -1;
  };
  const uint16_t ports[2] = {proxy.http_port, proxy.socks_port};
  for (int k = 0; k < 2; ++k) {
    int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l < 0) return bail("proxy listener socket");
    fds[k] = l;
    int one = 1;
    ::setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(ports[k]);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(l, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
      return bail("bind the proxy listener 127.0.0.1:" + std::to_string(ports[k]));
    if (::listen(l, 256) != 0) return bail("listen on the proxy listener");
  }
  if (!proxy.resolver) return 2;
  // The in-sandbox resolver's socket (network.resolver): 127.0.0.53:53 like
  // systemd-resolved's stub. Port 53 needs CAP_NET_BIND_SERVICE in the netns
  // owner's user namespace, which the caller still has here.
  int u = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (u < 0) return bail("resolver socket");
  fds[2] = u;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(53);
  sa.sin_addr.s_addr = htonl(0x7f000035);  // 127.0.0.53
  if (::bind(u, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return bail("bind the resolver socket 127.0.0.53:53");
  return 3;
}

}  // namespace exg::process
