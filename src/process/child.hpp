// The sandbox's side of the launch: runs in the cloned child (pid 1 of the new
// pid namespace), executes the Plan's steps, pivots into the new root, drops
// every privilege and becomes the sandbox's init.
#pragma once
#include <linux/filter.h>

#include <map>
#include <vector>

#include "plan/plan.hpp"
#include "process/init.hpp"
#include "process/rlimits.hpp"

namespace exg {
class StepTimer;
}

namespace exg::process {

// Messages on the sync socket (SOCK_SEQPACKET), first byte is the type.
inline constexpr char kMsgGo = 'G';      // parent -> child: id maps written, go on
inline constexpr char kMsgIdmapped = 'I';  // parent -> child: idmapped mounts' trees (SCM_RIGHTS), in step order
inline constexpr char kMsgInCgroup = 'C';  // parent -> child: the sandbox's cgroup is ready (v1: + its tasks files); init may start
inline constexpr char kMsgPty = 'P';     // child -> parent: pty master fd attached (SCM_RIGHTS)
inline constexpr char kMsgListeners = 'L';  // child -> parent: proxy listeners (HTTP, SOCKS5[, DNS UDP]) made in the sandbox's netns
inline constexpr char kMsgSockDiag = 'D';  // child -> parent: a NETLINK_SOCK_DIAG socket of the sandbox's netns (sandbox/socket_address_gate.hpp)
inline constexpr char kMsgTransparent = 'T';  // child -> parent: the transparent egress listener and netlink sockets (process/transparent_capture.hpp)
inline constexpr char kMsgSeccomp = 'S';  // init -> parent: its seccomp listener's descriptor number, as text (process/init.cpp)
inline constexpr char kMsgListenerTaken = 'K';  // parent -> init: the listener is taken (pidfd_getfd); init closes its copy
inline constexpr char kMsgReady = 'R';   // child -> parent: set up, command started (an OCI runtime host: the listener attached)
inline constexpr char kMsgError = 'E';   // child -> parent: setup failed, text follows
inline constexpr size_t kMaxTrustAnchor = 16384;  // the PEM that may follow kMsgGo

struct ChildArgs {
  const plan::Plan* plan = nullptr;
  int sync_fd = -1;
  int parent_pidfd = -1;
  bool want_pty = false;
  bool tty_fds[3] = {false, false, false};  // which of 0..2 get the pty slave
  bool verbose = false;
  RlimitPlan rlimits;
  const std::vector<sock_filter>* seccomp = nullptr;  // built by the parent; installed by init
  int agent_channel = -1;  // >= 0: pid 1 is the agent, serving this socket (LaunchOptions::agent)
  StepTimer* timer = nullptr;  // LaunchOptions::timer: the child's marks go to its shared page
  int pass_fds[kMaxPassFds] = {-1, -1, -1, -1};  // LaunchOptions::pass_fds (InitArgs)
  int n_pass_fds = 0;
};

// Steps whose source the supervisor clones with an idmap (root only: the
// sandbox's uid owns what root owns on disk); the child gets them after "go".
inline bool uses_idmapped_mount(const plan::Plan& plan, size_t step) {
  return plan.identity.invoked_as_root && plan.steps[step].idmap;
}

// Never returns.
[[noreturn]] void child_main(const ChildArgs& args);

}  // namespace exg::process
