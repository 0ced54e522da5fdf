// The spawn path the process, container and gVisor layers share: make the
// sandbox's cgroup, clone its first process into its namespaces, write its id
// maps, send "go" (with the trust anchor), then "in cgroup"; then collect what
// it hands back over the setup socket (pty master, proxy listeners, seccomp
// listener) until it says it is ready. A scope guard kills and reaps the child
// on every way out but success, so no caller writes its own unwinding.
//
// The cgroup: on v2 it is made before the clone and the child is born in it
// (CLONE_INTO_CGROUP). v1 has no such clone: the cgroup is made after "go",
// while the child builds its namespaces and mounts (0.3 ms off the start),
// and "in cgroup" carries the tasks files this process opened
// (Cgroup::open_self_attach): the child moves itself in (await_in_cgroup)
// before anything of the sandbox starts.
//
// Protocol on the setup socket (SOCK_SEQPACKET, process/child.hpp's kMsg*):
//   parent -> child  G[PEM]           id maps written, go on
//                    I + fds          the idmapped mounts' trees, in step
//                                     order, up to 8 a message (made after
//                                     "go", taken before the mounts)
//                    C [+ fds]        the sandbox's cgroup is ready (v1: with
//                                     its tasks files, to move in through):
//                                     nothing of the sandbox may start before
//                                     the child has read it (init, the runtime)
//   child -> parent  P + fd           pty master
//                    L + fd fd [fd]   HTTP and SOCKS listeners [DNS socket]
//                    T + fd fd fd     transparent egress: its listener, and
//                                     rtnetlink and nftables sockets of the
//                                     sandbox's netns, on which this side sends
//                                     the capture's route and rules
//                                     (SpawnSpec::capture_port: "C" waits for them)
//                    R [+ fd]         set up; the seccomp notify fd when there is one
//                    E text           a setup step failed
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "layer/layer.hpp"
#include "cgroup/cgroup.hpp"
#include "util/error.hpp"

namespace exg::layer {

// Descriptors the child's side gets (valid in the child only).
struct SpawnFds {
  int sync_fd = -1;        // the setup socket's child end
  int parent_pidfd = -1;   // the supervisor, for the child's death-of-parent check
  int agent_fd = -1;       // the agent channel's far end (SpawnSpec::agent), else -1
};

struct SpawnSpec {
  uint64_t clone_flags = 0;     // namespaces (CLONE_PIDFD added)
  // The sandbox's cgroup (Cgroup::create), made by spawn() with these limits.
  std::string cgroup_id;
  plan::Limits limits;
  // The least explicit memory limit this layer starts under: the sandbox's own
  // setup (and the runtime's, on the OCI layers) is charged to its cgroup, and
  // below this it is killed before it is set up. Less is refused before the
  // clone, naming this minimum (exit 125). `layer`: its name, for that message.
  uint64_t min_memory = 0;
  std::string layer;
  bool agent = false;           // make the agent channel (a stream socketpair)
  // Runs in the child right after the clone (never returns).
  std::function<void(const SpawnFds&)> child;
  // After the clone, before "go": the child's id maps (empty: none to write).
  std::function<Result<void>(pid_t)> map_ids;
  // The PEM that follows "go" (LaunchOptions::trust_anchor); empty: none.
  std::function<Result<std::string>()> trust_anchor;
  // Made right after "go" and sent as "I" (the process layer's idmapped
  // mounts, which the child needs only when it reaches them); empty: none.
  std::function<Result<std::vector<UniqueFd>>()> idmapped_trees;
  // LaunchOptions::meanwhile: run after "go" (and the v1 cgroup), before "in cgroup".
  std::function<Result<void>()> meanwhile;
  bool need_seccomp_listener = false;  // "ready" without one fails
  // Transparent egress on this port (plan.proxy.transparent): the child hands
  // over its netns's netlink sockets ("T"), this side sets the capture up on
  // them while the child goes on, and "in cgroup" is sent only after that
  // succeeded (a failure kills the child: fail closed).
  std::optional<uint16_t> capture_port;
  // LaunchOptions::timer: the spawn's steps, and at "ready" the child's marks
  // from the timer's shared page; null: not timed.
  StepTimer* timer = nullptr;
  // Messages: who the child is, and the words of the failures.
  std::string clone_what = "create namespaces";
  std::function<Error(int err)> clone_error;  // empty: Error::sys(clone_what)
  std::string start_what = "start the sandbox";
  std::string read_what = "read from the sandbox";
  std::string setup_what = "setup";
  std::string no_listener = "the sandbox did not hand over its seccomp listener";
  std::string exited_early = "the sandbox exited before it was set up";
};

// The running sandbox, or an error with the child killed and reaped.
Result<Sandbox> spawn(SpawnSpec spec);

// The child's side of "in cgroup": waits for it and, on v1, moves itself into
// the sandbox's cgroup through the tasks files that came with it (the timer's
// "cgroup attach"). 0 when in; -1 when the message was not "in cgroup" (the
// parent is gone or said something else); else the errno of the move. No
// allocation: it runs in the cloned child.
int await_in_cgroup(int sync_fd, StepTimer* timer);

// The child's side of "I": takes `count` trees, in order, into `trees`. False
// when the parent sent something else or is gone (what came is closed). No
// allocation.
bool await_idmapped_trees(int sync_fd, int* trees, size_t count);

}  // namespace exg::layer
