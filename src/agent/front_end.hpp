// What the supervisor drives a sandbox whose pid 1 is the agent through
// (SuperviseOptions::agent): the front end on the host's side of the agent's
// channel (the session's control relay, agent/relay.hpp; the microVM layer's
// run, microvm/run_front_end.hpp). In agent/, beside the protocol, so that a
// front end takes this and not the whole supervisor (sandbox/supervisor.hpp
// includes it; docs/architecture.md, "Which room may include which").
#pragma once
#include <poll.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace exg::agent {

// A request of the front end's clients that the supervisor answers itself
// (not the agent): the egress rules replaced whole (docs/agent-protocol.md,
// set_network). Hosts as --allow-domain / --deny-domain take them.
struct NetworkChange {
  std::vector<std::string> allow, deny;
};
// The rules now in force (a line for the reply), or why nothing changed.
using NetworkChanger = std::function<Result<std::string>(const NetworkChange&)>;
// The audit tags a held log waits for (SuperviseOptions::audit_hold), once.
using AuditTagger = std::function<Result<void>(const nlohmann::json& tags)>;

// A front end driving a sandbox whose pid 1 is the agent (exguardian
// session): it gets the agent's channel once the sandbox is up, and its
// descriptors join the supervisor's one poll loop.
class FrontEnd {
 public:
  virtual ~FrontEnd() = default;
  // Once the proxy runs (never called without one: no egress to change).
  virtual void set_network_changer(NetworkChanger) {}
  // Only with SuperviseOptions::audit_hold, before start().
  virtual void set_audit_tagger(AuditTagger) {}
  virtual Result<void> start(UniqueFd agent_channel, const std::string& sandbox_id) = 0;
  // Up to `max` descriptors to wait on now.
  virtual size_t poll_fds(pollfd* out, size_t max) = 0;
  // The same descriptors with their revents.
  virtual void on_ready(const pollfd* fds, size_t n) = 0;
  // The run's exit status once the sandbox's pid 1 exited with sandbox_status
  // (the microVM layer: the command's status, which the agent reported, not qemu's).
  virtual int final_status(int sandbox_status) { return sandbox_status; }
  // A signal the supervisor would forward to the sandbox's pid 1: true when
  // the front end delivered it itself (the microVM layer: to the command, over
  // the channel; qemu would just end).
  virtual bool forward_signal(int) { return false; }
  // The caller's terminal changed size (SIGWINCH). The supervisor resizes a
  // pty it made itself; a front end whose command has a pty of the sandbox's
  // own (the microVM guest's) passes the new size on over the channel.
  virtual void on_terminal_resized() {}
  // Forks refused by a pids limit the sandbox's own kernel enforces, as the
  // agent reported it (the microVM guest's cgroup, which the host cannot read).
  virtual uint64_t inside_pids_refused() const { return 0; }
};

}  // namespace exg::agent
