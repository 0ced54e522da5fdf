// `exguardian run` on the microVM layer: the guest's agent is driven like a
// session with one command. Once the agent is ready it starts the Plan's
// command (argv, environment, working directory), relays stdin (when it is
// not a terminal) and the command's stdout/stderr, and asks the agent to shut
// down at the command's exit, which ends the guest and qemu. The run's exit
// status is the command's, as the agent reported it. Under a terminal (stdin
// and stdout both ttys) the command gets a pty of the guest's own devpts, of
// the terminal's size: the host's terminal is put in raw mode for the run and
// its keystrokes go to that pty (^C included: the guest's line discipline
// makes the signal); it is put back as it was at the end. A resize of the
// terminal (SIGWINCH) is passed on as the agent's `resize` of that pty: the
// guest's kernel then signals the command's foreground group itself.
#pragma once
#include <termios.h>

#include <optional>

#include "agent/client.hpp"
#include "agent/front_end.hpp"
#include "agent/inside_report.hpp"
#include "plan/plan.hpp"

namespace exg::microvm {

class RunFrontEnd : public agent::FrontEnd {
 public:
  // `verbose`: the walls the guest applied (the agent's ready event) are said on stderr.
  RunFrontEnd(const plan::Plan& plan, bool verbose);
  ~RunFrontEnd() override;
  Result<void> start(UniqueFd agent_channel, const std::string& sandbox_id) override;
  size_t poll_fds(pollfd* out, size_t max) override;
  void on_ready(const pollfd* fds, size_t n) override;
  int final_status(int sandbox_status) override;
  bool forward_signal(int sig) override;
  void on_terminal_resized() override;
  uint64_t inside_pids_refused() const override { return inside_.pids_refused(); }

 private:
  const plan::Plan& plan_;
  bool verbose_;
  agent::InsideReport inside_;
  agent::Channel ch_;
  bool channel_open_ = false;
  bool relay_stdin_ = false, stdin_done_ = false;
  bool pty_ = false;
  bool resize_pending_ = false;  // a resize before the start's reply: sent once the pid is known
  std::optional<termios> saved_tty_;  // the host terminal's settings while it is raw
  bool started_ = false, shutdown_sent_ = false;
  int pid_ = -1;
  std::optional<int> status_;

  void on_frame(const agent::Frame& f);
  void shutdown();
  void read_stdin();
  void restore_terminal();
  void send_size();
};

}  // namespace exg::microvm
