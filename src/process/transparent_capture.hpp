// Transparent egress capture inside the sandbox's own network namespace
// (network.transparent, on by default; egress/transparent.hpp is the proxy's
// side). Made by whoever sets the netns up (the process layer's child, the OCI
// layers' runtime host), with the capabilities it holds over the netns through
// the sandbox's user namespace: no host privilege, as root or as an ordinary
// user alike; in the microVM layer by the guest's init, in the guest kernel.
// set_up_transparent_capture() is in capture_rules.hpp (no plan, no exg_core:
// the guest's static init links it):
//
//   - a default route through lo (source 127.0.0.1), so that a connect() to any IPv4 address
//     leaves the routing step instead of failing with ENETUNREACH;
//   - an nftables table "ip exguardian" (netlink, no nft binary): every TCP
//     connection to a non-loopback IPv4 address is redirected (NAT, output
//     hook) to the transparent listener on 127.0.0.1:PORT, whose accepted
//     sockets still know where the client meant to go (SO_ORIGINAL_DST);
//     every other packet to a non-loopback address is dropped, so UDP (the
//     resolver on 127.0.0.53 aside), ICMP and the rest fail with EPERM;
//   - the listener itself.
// IPv6 keeps no route beyond ::1 (ENETUNREACH): the resolver hands out IPv4 only.
// Safe after clone() in the child (no threads); errors as text for the sync socket.
#pragma once
#include <cstdint>
#include <string>

#include "plan/plan.hpp"
#include "walls/capture_rules.hpp"

namespace exg::process {

// For the sandbox's setup (child or runtime host) when the plan asks for it
// (plan.transparent): makes the listener and two netlink sockets in this
// netns and hands them to the supervisor (kMsgTransparent), which sends the
// route and the rules on them (add_capture_routing) and holds "in cgroup"
// back until they are in: nothing of the sandbox starts without them. Empty
// on success, else what failed, with the way out (network.transparent:
// false) in the text; errno set.
std::string hand_over_transparent_capture(const plan::ProxyPlan& plan, int sync_fd);

}  // namespace exg::process
