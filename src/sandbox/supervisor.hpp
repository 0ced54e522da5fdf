// The supervisor: one host process, one event loop. Launches the sandbox,
// relays its pty, forwards signals, enforces the wall-clock timeout and turns
// the outcome into ExGuardian's exit status (DESIGN.md §1).
#pragma once
#include <poll.h>

#include "oci/layer.hpp"
#include "plan/plan.hpp"
#include "util/error.hpp"
#include "util/step_timer.hpp"
#include "util/unique_fd.hpp"

namespace exg::sandbox {

// A front end driving a sandbox whose pid 1 is the agent (exguardian
// session): it gets the agent's channel once the sandbox is up, and its
// descriptors join the supervisor's one poll loop.
class AgentFrontEnd {
 public:
  virtual ~AgentFrontEnd() = default;
  virtual Result<void> start(UniqueFd agent_channel, const std::string& sandbox_id) = 0;
  // Up to `max` descriptors to wait on now.
  virtual size_t poll_fds(pollfd* out, size_t max) = 0;
  // The same descriptors with their revents.
  virtual void on_ready(const pollfd* fds, size_t n) = 0;
};

struct SuperviseOptions {
  bool verbose = false;
  std::string audit_log;  // JSON lines; empty: no log
  const oci::LayerOptions* oci = nullptr;  // container/gvisor layer; null: the process layer
  AgentFrontEnd* agent = nullptr;  // pid 1 is the agent, driven by this; null: the Plan's command (run)
  StepTimer* timer = nullptr;      // `-v`: where the start-up time goes (util/step_timer.hpp); null: not timed
};

// The exit status to return: the command's own, 128+N, 124 on timeout. An
// error means nothing ran (the caller exits 125).
Result<int> supervise(const plan::Plan& plan, const SuperviseOptions& opt);

// "2s", "1m30s", "250ms": for messages.
std::string format_duration(std::chrono::milliseconds d);

}  // namespace exg::sandbox
