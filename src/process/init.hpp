// Pid 1 of the sandbox: drops the last privileges, starts the command in its
// own session (on the sandbox's pty when there is one), forwards signals,
// reaps orphans, and exits with the command's status, which takes every other
// process of the sandbox down with it (pid namespace).
#pragma once
#include <linux/filter.h>

#include <vector>

#include "plan/plan.hpp"
#include "process/rlimits.hpp"

namespace exg {
class StepTimer;
}

namespace exg::process {

struct InitArgs {
  const plan::Plan* plan = nullptr;
  int sync_fd = -1;
  int parent_pidfd = -1;
  int pty_slave = -1;
  bool tty_fds[3] = {false, false, false};
  const RlimitPlan* rlimits = nullptr;
  const std::vector<sock_filter>* seccomp = nullptr;
  int agent_channel = -1;  // >= 0: serve the agent protocol here instead of running the Plan's command
  StepTimer* timer = nullptr;  // ChildArgs::timer
};

// Exit status encoding: the command's own code, or 128+N when signal N killed it.
[[noreturn]] void become_init(const InitArgs& a);

}  // namespace exg::process
