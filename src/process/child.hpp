// The sandbox's side of the launch: runs in the cloned child (pid 1 of the new
// pid namespace), executes the Plan's steps, pivots into the new root, drops
// every privilege and becomes the sandbox's init.
#pragma once
#include <linux/filter.h>

#include <map>
#include <vector>

#include "plan/plan.hpp"
#include "process/init.hpp"
#include "walls/rlimits.hpp"

namespace exg {
class StepTimer;
}

namespace exg::process {

struct ChildArgs {
  const plan::Plan* plan = nullptr;
  int sync_fd = -1;
  int parent_pidfd = -1;
  bool want_pty = false;
  bool tty_fds[3] = {false, false, false};  // which of 0..2 get the pty slave
  bool verbose = false;
  walls::RlimitPlan rlimits;
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
