// Pid 1 of the sandbox: drops the last privileges, starts the command in its
// own session (on the sandbox's pty when there is one), forwards signals,
// reaps orphans, and exits with the command's status, which takes every other
// process of the sandbox down with it (pid namespace).
#pragma once
#include <linux/filter.h>

#include <vector>

#include "plan/plan.hpp"
#include "walls/landlock.hpp"
#include "walls/rlimits.hpp"

namespace exg {
class StepTimer;
}

namespace exg::process {

// The most descriptors a command is passed beyond 0..2 (layer::LaunchOptions::pass_fds).
inline constexpr int kMaxPassFds = 4;

struct InitArgs {
  const plan::Plan* plan = nullptr;
  int sync_fd = -1;
  int parent_pidfd = -1;
  int pty_slave = -1;
  bool tty_fds[3] = {false, false, false};
  const walls::RlimitPlan* rlimits = nullptr;
  const std::vector<sock_filter>* seccomp = nullptr;
  int agent_channel = -1;  // >= 0: serve the agent protocol here instead of running the Plan's command
  StepTimer* timer = nullptr;  // ChildArgs::timer
  // LaunchOptions::pass_fds: the command gets them as 3, 4, ... (a fixed array:
  // the command's side between clone and execve takes raw steps only).
  int pass_fds[kMaxPassFds] = {-1, -1, -1, -1};
  int n_pass_fds = 0;
  // No pid namespace (the landlock layer): init is a child subreaper, so that
  // every process the command leaves behind becomes its child, and kills them
  // all when the command ends (a pid namespace's end does that elsewhere).
  bool reap_descendants = false;
  // The landlock layer's warden (process/landlock_warden.hpp): left out of the
  // descendants init kills (it cannot signal it), told and reaped once they are gone.
  pid_t warden_pid = -1;
  int warden_fd = -1;
  // The capability bounding set was emptied before (root, before it changed
  // uid) or cannot be (an ordinary user lacks CAP_SETPCAP; no_new_privs then
  // keeps it from ever mattering): the landlock layer, which has no user
  // namespace whose capabilities init would hold.
  bool bounding_set_done = false;
  // The Plan's Landlock rules gathered already (walls::prepare_landlock: the
  // landlock layer does it while the supervisor takes its snapshot), put in
  // force here where they would otherwise be built. Null: built here.
  walls::PreparedLandlock* landlock = nullptr;
};

// Exit status encoding: the command's own code, or 128+N when signal N killed it.
[[noreturn]] void become_init(const InitArgs& a);

}  // namespace exg::process
