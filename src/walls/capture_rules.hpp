// The netlink half of transparent egress capture (transparent_capture.hpp
// says what it sets up and why): the default route through lo, the nftables
// table, the listener. Plain syscalls, nothing of the plan or exg_core, so
// that the microVM guest's static init links it as the process and OCI
// layers' setup does.
#pragma once
#include <cstdint>
#include <string>

namespace exg::walls {

// Sets the capture up in the current netns; returns the listener (close-on-
// exec), or -1 with `what` naming the step that failed (errno set).
int set_up_transparent_capture(uint16_t port, std::string* what);

// The same in two halves, for a set-up split between two processes (the
// process and OCI layers: the sandbox's side makes the listener and two
// netlink sockets in its netns, cheap; the supervisor sends the route and the
// rules on those sockets while the sandbox's side builds its mounts).
// The listener on 127.0.0.1:PORT (close-on-exec), or -1 with `what` (errno set).
int capture_listener(uint16_t port, std::string* what);
// The default route and the nftables table, sent on sockets made in the
// target netns (NETLINK_ROUTE, NETLINK_NETFILTER) by a caller with
// CAP_NET_ADMIN over it (the kernel checks the socket's opener and the
// sender). 0, or the errno of the first failure with `what` naming the step.
int add_capture_routing(int route_sock, int nft_sock, uint16_t port, std::string* what);

// The capture of traffic that arrives from other interfaces of this netns (a
// nested container's, bridged inside the microVM guest by podman or dockerd):
//   table ip exguardian-nested {
//     chain capture { type nat hook prerouting priority -100;
//       ip daddr != 127.0.0.0/8 meta l4proto tcp dnat to 127.0.0.1:PORT
//       ip daddr != 127.0.0.0/8 meta l4proto udp udp dport 53 dnat to RESOLVER   (with a resolver)
//     }
//   }
// and, with a resolver, first in table ip exguardian's refuse chain (its
// answers to them are UDP leaving through the output hook):
//     ip saddr RESOLVER udp sport 53 accept
// and route_localnet (a packet from a bridge may be delivered to 127.0.0.1).
// The second rule: a nested container's DNS goes to the sandbox's own
// resolver whatever server its engine gave it (podman and dockerd give a
// public one when the host's resolv.conf names only loopback), so names it
// resolves are the resolver's (allowed names only, answered with addresses
// the capture takes back to the name). Without it those queries find no route.
// Call after set_up_transparent_capture in the same netns, with /proc mounted.
// 0, or an errno with `what` naming the step.
struct ForwardedResolver {
  uint32_t address = 0;  // IPv4, network order; 0: no resolver (no DNS rule)
  uint16_t port = 53;
};
int add_forwarded_capture(uint16_t port, const ForwardedResolver& resolver, std::string* what);

}  // namespace exg::walls
