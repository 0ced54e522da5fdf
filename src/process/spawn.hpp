// The spawn path the process, container and gVisor layers share (process
// machinery, here in process/ beside the handshake, the child and the id maps): make the
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
// The messages on the setup socket, and the child's side of them, are
// process/handshake.hpp's.
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

namespace exg::process {

// Descriptors the child's side gets (valid in the child only).
struct SpawnFds {
  int sync_fd = -1;        // the setup socket's child end
  int parent_pidfd = -1;   // the supervisor, for the child's death-of-parent check
  int agent_fd = -1;       // the agent channel's far end (SpawnSpec::agent), else -1
  // The sandbox has a cgroup (made before the clone, or on v1 made after
  // "go" and moved into with "in cgroup", before anything of the sandbox
  // starts; if it cannot be made the child is killed): whatever ends init,
  // the supervisor can end every process of the sandbox through it.
  bool cgroup_made = false;
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
  bool freezer = false;         // a freezer cgroup on v1 without the agent (LaunchOptions::freezer)
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
  // from the timer's shared page (after init's "A", the caller takes them once
  // the sandbox has ended: its command marks the page after the handover);
  // null: not timed.
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
Result<layer::Sandbox> spawn(SpawnSpec spec);

}  // namespace exg::process
