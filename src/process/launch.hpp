// The supervisor's side of the launch: prepares what only the host can
// (idmapped mounts when invoked as root), clones the sandbox into its new
// namespaces, writes its id maps and waits until it is set up or has failed.
#pragma once
#include <sys/types.h>

#include <functional>
#include <string>

#include "plan/plan.hpp"
#include "process/cgroup.hpp"
#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace exg {
class StepTimer;
}

namespace exg::process {

struct LaunchOptions {
  bool tty_fds[3] = {false, false, false};  // which of 0..2 get the sandbox's pty
  bool verbose = false;
  // Plans with trust_bundle steps: called after the clone, before the child
  // goes on; returns the PEM certificate the child appends to those steps'
  // content. What the supervisor makes in it (the CA and its key) is
  // therefore never in the child's copy of the supervisor's memory.
  std::function<Result<std::string>()> trust_anchor;
  // The sandbox's pid 1 is the agent (agent/agent.hpp) instead of the Plan's
  // command: a sandbox that lives across commands, driven over agent_channel.
  bool agent = false;
  // `-v`: the launch's steps are timed here (util/step_timer.hpp); null: not timed.
  StepTimer* timer = nullptr;
};

struct Launched {
  pid_t pid = -1;       // the sandbox's init, as the host sees it
  UniqueFd pidfd;       // for signals and exit without pid reuse races
  UniqueFd pty_master;  // when a pty was asked for
  Cgroup cgroup;        // the sandbox's own cgroup (inactive when none could be made)
  UniqueFd seccomp_listener;  // refused syscalls arrive here
  UniqueFd http_listener, socks_listener;  // the proxy's sockets, in the sandbox's netns
  UniqueFd dns_socket;  // UDP 127.0.0.53:53 in the sandbox's netns (network.resolver / --dns), else empty
  UniqueFd agent_channel;  // LaunchOptions::agent: the stream socket to the agent (agent/protocol.hpp)
};

// Writes setgroups=deny and one-id uid/gid maps (inside -> host) for pid.
Result<void> write_id_maps(pid_t pid, const plan::Identity& id);

// Root only: a user namespace mapping on-disk owner from_* onto to_* (the
// sandbox's host ids), for MOUNT_ATTR_IDMAP; made by a short-lived child.
Result<UniqueFd> idmap_userns(uid_t from_uid, gid_t from_gid, uid_t to_uid, gid_t to_gid);
// A detached clone of s.source (recursive) idmapped through userns_fd.
Result<int> idmapped_tree(const plan::Step& s, int userns_fd);

// Signals the supervisor handles itself must be blocked before launch() (the
// child inherits the mask; its init keeps them blocked and waits for them).
Result<Launched> launch(const plan::Plan& plan, const LaunchOptions& opt);

}  // namespace exg::process
