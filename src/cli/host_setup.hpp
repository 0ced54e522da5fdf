// What a front end sets up once per process before it supervises sandboxes:
// the process-wide state that sandbox::supervise() must not touch (so that one
// server process can hold many sandboxes), and the terminal and stderr I/O
// of the command-line front ends (run, session).
#pragma once
#include <termios.h>

#include <optional>
#include <string>

#include "plan/plan.hpp"
#include "sandbox/supervisor.hpp"
#include "util/error.hpp"
#include "util/layer_kind.hpp"
#include "util/unique_fd.hpp"

namespace exg::cli {

// `error`'s text, followed (one line each) by why this host refuses a user
// namespace, when the layer `kind` needs one here and none can be made now
// (doctor/userns_diagnosis.hpp); else its text alone.
std::string explain_start_failure(const Error& error, layer::Kind kind);

// The runtime the container layer would use (its own answer, oci::choose_runtime),
// "" when none is installed: for the user namespace diagnosis's facts.
std::string installed_container_runtime();

// Blocks the signals the supervisor handles (before any launch: the sandbox
// inherits the mask, its init keeps them blocked and waits for them) and
// reads them from a signalfd; lifts RLIMIT_NOFILE's soft limit (every proxied
// connection costs up to six fds); as root, drops the supervisor's own
// supplementary groups (they must not follow the command in: the layers check).
// (The cgroups left by supervisors killed with SIGKILL are swept where a
// sandbox's cgroup is made: cgroup::Cgroup::create_in.) The mask is restored
// when the object goes, and a signal still pending then (a second SIGTERM)
// ends the process on the spot: whatever must be cleaned up on the way out
// (a session's control socket) is declared after it, so destroyed before it.
class HostProcess {
 public:
  static Result<HostProcess> prepare(bool invoked_as_root);
  HostProcess(HostProcess&& o) noexcept : sigfd_(std::move(o.sigfd_)), old_(o.old_), active_(o.active_) {
    o.active_ = false;
  }
  HostProcess& operator=(HostProcess&&) = delete;
  ~HostProcess();
  // The signalfd for SuperviseOptions::signal_fd.
  int signal_fd() const { return sigfd_.get(); }

 private:
  HostProcess() = default;
  UniqueFd sigfd_;
  sigset_t old_{};
  bool active_ = false;
};

// Narration and messages on stderr ("exguardian: ..."); the terminal on fds
// 0..2, when there is one and `relay_terminal`, relayed through the sandbox's
// own pty, with fd 0 in raw mode while the relay runs.
class StdioIo final : public sandbox::SupervisorIo {
 public:
  explicit StdioIo(bool relay_terminal);
  ~StdioIo() override { relay_end(); }
  void say(const std::string& line) override;
  sandbox::Terminal terminal() const override { return term_; }
  void relay_begin() override;
  void relay_end() override;

 private:
  sandbox::Terminal term_;
  termios saved_{};
  bool raw_ = false;
};

}  // namespace exg::cli
