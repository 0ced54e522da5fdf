// The agent: pid 1 of a sandbox that lives across commands. It runs after
// the sandbox's whole setup, as the sandbox's user, inside its seccomp filter
// and Landlock domain, and serves the channel protocol (agent/protocol.hpp)
// on one stream socket to the supervisor: it starts processes (in the same
// namespaces, cgroup, filter and domain: they are its children), streams their
// output and exit, and does file requests itself, so the sandbox's own mounts,
// Landlock and seccomp decide what a request reaches. As pid 1 it reaps every
// orphan; it ends the sandbox (its exit kills every process of the pid
// namespace) on `shutdown`, on SIGTERM/SIGINT/SIGHUP from the supervisor, and
// when the channel closes (the supervisor is gone; PR_SET_PDEATHSIG too).
// No dependency on exg_core: the static init can carry it.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace exg::agent {

struct AgentConfig {
  int channel = -1;               // stream socket to the supervisor (non-blocking is set here)
  std::vector<std::string> env;   // the sandbox's environment, NAME=VALUE
  std::string cwd;                // where processes start and relative paths begin
  // Walls the caller put around the agent that the supervisor cannot see for
  // itself (the microVM guest's init: {"seccomp", "..."}, {"landlock", ...}):
  // said in the ready event's "walls". Empty on the other layers.
  std::vector<std::pair<std::string, std::string>> walls;
  // A pids limit the supervisor cannot read (the guest's own cgroup): its
  // pids.events (read-only) and an inotify descriptor watching it. The agent
  // reports refused forks as "limit" events. -1: none.
  int pids_events = -1, pids_notify = -1;
  uint32_t pids_max = 0;
  // Not pid 1 (the landlock layer: no pid namespace): the agent is a child
  // subreaper, every orphan of its processes comes back to it, and this ends
  // them all (kill(-1) would reach every process of the uid on the host). Set,
  // it also makes the parent (the supervisor) the one whose SIGTERM ends the
  // sandbox, there being no "outside the pid namespace" to tell it by.
  // `supervisor_gone`: the agent ends because its channel closed.
  void (*end_descendants)(bool supervisor_gone) = nullptr;
};

// Never returns: exits 0 on shutdown or a closed channel, 128+N on signal N.
[[noreturn]] void serve(const AgentConfig& cfg);

}  // namespace exg::agent
