// The supervisor: one event loop per sandbox. Launches the sandbox through a
// Layer, relays its pty, forwards signals, enforces the wall-clock timeout,
// runs the egress proxy, brings the workspace home, and turns the outcome into
// ExGuardian's exit status (DESIGN.md §1).
//
// supervise() changes no process-wide state: the front end (cli/host_setup.hpp
// for run and session) blocks the signals (supervised_signals(), before any
// launch) and owns the signalfd, lifts RLIMIT_NOFILE, drops root's
// supplementary groups, sweeps stale cgroups, and puts its terminal in raw
// mode when asked (SupervisorIo::relay_begin). Everything the supervisor says
// goes through the SupervisorIo, never straight to stderr. A front end that
// drives many sandboxes (serve) gives each its own SupervisorIo and no
// terminal, and passes signal_fd -1 (it decides itself which sandbox a
// signal is for).
#pragma once
#include <functional>
#include <poll.h>
#include <signal.h>
#include <termios.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/front_end.hpp"
#include "layer/layer.hpp"
#include "plan/plan.hpp"
#include "util/error.hpp"
#include "util/step_timer.hpp"
#include "util/unique_fd.hpp"

namespace exg::sandbox {

// The front end's terminal, relayed through the sandbox's own pty.
struct Terminal {
  bool sandbox_fds[3] = {false, false, false};  // which of the sandbox's 0..2 are its pty
  int input = -1;      // relayed into the pty (raw mode: the front end's relay_begin); -1: none
  int output = -1;     // the pty's output goes here
  int size_from = -1;  // the pty's window size follows this terminal (on SIGWINCH)
  std::optional<termios> settings;  // the pty starts with these
};

// Where the supervisor's narration and messages go, and which terminal it relays.
class SupervisorIo {
 public:
  virtual ~SupervisorIo() = default;
  // One line (no newline, no "exguardian: " prefix): the CLI prints it on stderr.
  virtual void say(const std::string& line) = 0;
  // The terminal to relay; none by default (no pty for the sandbox).
  virtual Terminal terminal() const { return {}; }
  // The sandbox is up and its pty relayed / the relay is over.
  virtual void relay_begin() {}
  virtual void relay_end() {}
};

// The signals the supervisor handles; the front end blocks them before any
// launch and hands their signalfd over (SuperviseOptions::signal_fd).
sigset_t supervised_signals();

struct SuperviseOptions {
  // A signalfd over supervised_signals(): SIGWINCH resizes the pty, SIGCHLD
  // and SIGPIPE are ignored, every other one is forwarded to the sandbox.
  // -1: none (the front end forwards signals itself).
  int signal_fd = -1;
  bool verbose = false;
  // `exguardian run` without --quiet: a few lines at the end of a run that
  // refused something (sandbox/refusal_summary.hpp).
  bool refusal_summary = false;
  std::string audit_log;  // JSON lines; empty: no log
  std::map<std::string, std::string> audit_tags;  // fields added to every audit line (tenant, e2b_sandbox)
  // A warm pool's sandbox: audit lines held until the front end's tagger adds the tags still unknown.
  bool audit_hold = false;
  // `--layer auto`: the audit log's line saying which layer was chosen and why
  // (doctor/layer_choice.hpp AutoChoice::audit_event); null: none.
  nlohmann::json layer_choice;
  agent::FrontEnd* agent = nullptr;  // pid 1 is the agent, driven by this; null: the Plan's command (run)
  StepTimer* timer = nullptr;      // `-v`: where the start-up time goes (util/step_timer.hpp); null: not timed
};

// The exit status to return: the command's own, 128+N, 124 on timeout. An
// error means nothing ran (the caller exits 125).
Result<int> supervise(layer::Layer& layer, const plan::Plan& plan, SupervisorIo& io, const SuperviseOptions& opt);

// "2s", "1m30s", "250ms": for messages.
std::string format_duration(std::chrono::milliseconds d);

}  // namespace exg::sandbox
