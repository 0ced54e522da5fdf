// What a fresh network namespace needs before the sandbox runs in it: loopback
// up, and the egress proxy's listening sockets (127.0.0.1:3128 HTTP, :1080
// SOCKS5, and 127.0.0.53:53 UDP for network.resolver) made inside it, so the
// supervisor can accept on them from the host side after SCM_RIGHTS. Shared by
// the process layer's child and the OCI layers' runtime host. Safe after
// clone(): no threads, errors are returned as text for the sync socket.
#pragma once
#include <string>

#include "plan/plan.hpp"

namespace exg::process {

// Brings lo up. Empty on success, else what failed (errno is set).
std::string bring_loopback_up();

// Creates the listeners in the current netns: fds[0] HTTP, fds[1] SOCKS5,
// fds[2] DNS (or -1). Returns how many fds were made (2 or 3), or -1 with
// `what` naming the step that failed (errno set).
int make_proxy_listeners(const plan::ProxyPlan& proxy, int fds[3], std::string* what);

// A NETLINK_SOCK_DIAG socket of the current netns, sent to the supervisor as
// kMsgSockDiag: it tells which Unix sockets were bound inside the sandbox
// (sandbox/socket_address_gate.hpp). Empty on success, else what failed.
std::string hand_over_sock_diag(int sync_fd);

}  // namespace exg::process
