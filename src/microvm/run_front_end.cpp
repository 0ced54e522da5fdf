#include "microvm/run_front_end.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <optional>

namespace exg::microvm {

namespace {

constexpr uint32_t kStartId = 1, kShutdownId = 2, kInputIds = 16, kSignalIds = 17, kResizeIds = 18;
constexpr size_t kStdinPauseAt = 1u << 20;  // queued bytes to the agent before stdin waits

// The caller's terminal's size, when it has a sane one (the agent refuses 0 and above 1000).
std::optional<winsize> terminal_size() {
  winsize ws{};
  if (::ioctl(1, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0 || ws.ws_col == 0 || ws.ws_row > 1000 || ws.ws_col > 1000)
    return std::nullopt;
  return ws;
}

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t w = ::write(fd, s.data() + off, s.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 1000);
      continue;
    }
    if (w <= 0) return;  // the reader is gone: the command's output is dropped, as a closed pipe would
    off += static_cast<size_t>(w);
  }
}

}  // namespace

RunFrontEnd::RunFrontEnd(const plan::Plan& plan, bool verbose) : plan_(plan), verbose_(verbose) {}

RunFrontEnd::~RunFrontEnd() { restore_terminal(); }

void RunFrontEnd::restore_terminal() {
  if (!saved_tty_) return;
  ::tcsetattr(0, TCSADRAIN, &*saved_tty_);
  saved_tty_.reset();
}

Result<void> RunFrontEnd::start(UniqueFd agent_channel, const std::string&) {
  ch_ = agent::Channel(std::move(agent_channel));
  channel_open_ = true;
  // A terminal: a pty in the guest, fed with its keystrokes; a pipe or file is the command's stdin.
  pty_ = ::isatty(0) == 1 && ::isatty(1) == 1;
  relay_stdin_ = pty_ || (::isatty(0) != 1 && ::fcntl(0, F_GETFD) >= 0);
  return {};
}

size_t RunFrontEnd::poll_fds(pollfd* out, size_t max) {
  size_t n = 0;
  if (channel_open_ && n < max) out[n++] = {ch_.fd(), static_cast<short>(POLLIN | (ch_.queued() ? POLLOUT : 0)), 0};
  if (relay_stdin_ && pid_ > 0 && !stdin_done_ && !status_ && ch_.queued() < kStdinPauseAt && n < max)
    out[n++] = {0, POLLIN, 0};
  return n;
}

void RunFrontEnd::on_ready(const pollfd* fds, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (fds[i].fd == 0 && fds[i].revents) {
      read_stdin();
      continue;
    }
    if (fds[i].fd != ch_.fd() || !fds[i].revents) continue;
    if ((fds[i].revents & POLLOUT) && !ch_.flush()) channel_open_ = false;
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
      bool open = ch_.read_some();
      for (auto item = ch_.next(); item.frame || item.error; item = ch_.next())
        if (item.frame) on_frame(*item.frame);
      if (!open) channel_open_ = false;  // the guest is ending; qemu's exit ends the run
    }
  }
}

void RunFrontEnd::read_stdin() {
  char buf[65536];
  ssize_t r = ::read(0, buf, sizeof buf);
  if (r < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (r > 0) {
    ch_.send({agent::Kind::Request, kInputIds, agent::request::input(pid_), std::string(buf, static_cast<size_t>(r))});
    return;
  }
  stdin_done_ = true;
  ch_.send({agent::Kind::Request, kInputIds, agent::request::close_stdin(pid_), {}});
}

void RunFrontEnd::shutdown() {
  if (shutdown_sent_) return;
  shutdown_sent_ = true;
  ch_.send({agent::Kind::Request, kShutdownId, agent::request::shutdown(), {}});
}

void RunFrontEnd::on_frame(const agent::Frame& f) {
  const auto& h = f.header;
  if (inside_.take(f)) return;
  if (f.kind == agent::Kind::Event) {
    std::string ev = h.value("event", "");
    if (ev == "ready" && !started_) {
      started_ = true;
      if (verbose_)
        for (const auto& w : inside_.walls()) std::fprintf(stderr, "exguardian: microvm: in the guest: %s\n", w.c_str());
      agent::request::Start req{.argv = plan_.argv, .env = plan_.env, .cwd = plan_.cwd, .stdin_open = relay_stdin_};
      if (pty_) {
        req.pty = true;
        if (auto ws = terminal_size()) req.rows = ws->ws_row, req.cols = ws->ws_col;
        termios t;
        if (::tcgetattr(0, &t) == 0) {
          saved_tty_ = t;
          ::cfmakeraw(&t);
          ::tcsetattr(0, TCSADRAIN, &t);
        }
      }
      ch_.send({agent::Kind::Request, kStartId, agent::request::start(req), {}});
    } else if (ev == "stdout" || ev == "stderr") {
      if (h.value("pid", -2) == pid_) write_all(ev == "stdout" ? 1 : 2, f.payload);
    } else if (ev == "exit" && h.value("pid", -2) == pid_) {
      status_ = h.value("status", 125);
      restore_terminal();
      shutdown();
    }
    return;
  }
  if (f.kind != agent::Kind::Reply || f.id != kStartId) return;
  if (h.value("ok", false)) {
    pid_ = h.value("pid", -1);
    if (resize_pending_) send_size();
    return;
  }
  int e = h.value("errno", 0);
  std::string arg0 = plan_.argv.empty() ? "" : plan_.argv[0];
  restore_terminal();
  std::fprintf(stderr, "exguardian: %s: %s\n", arg0.c_str(), h.value("message", std::string("cannot start")).c_str());
  status_ = e == ENOENT ? 127 : 126;
  shutdown();
}

bool RunFrontEnd::forward_signal(int sig) {
  if (pid_ <= 0 || !channel_open_ || status_) return false;  // before the start or after the exit: ends the VM
  ch_.send({agent::Kind::Request, kSignalIds, agent::request::signal(pid_, sig), {}});
  return true;
}

void RunFrontEnd::on_terminal_resized() {
  if (!pty_ || !started_ || status_ || !channel_open_) return;
  if (pid_ <= 0) {
    resize_pending_ = true;  // started, the pid not known yet
    return;
  }
  send_size();
}

void RunFrontEnd::send_size() {
  resize_pending_ = false;
  if (auto ws = terminal_size())
    ch_.send({agent::Kind::Request, kResizeIds, agent::request::resize(pid_, ws->ws_row, ws->ws_col), {}});
}

int RunFrontEnd::final_status(int sandbox_status) {
  restore_terminal();
  if (status_) return *status_;
  std::fprintf(stderr, "exguardian: microvm: the guest ended before the command's exit was reported (qemu: status %d)\n",
               sandbox_status);
  return sandbox_status != 0 ? sandbox_status : 125;
}

}  // namespace exg::microvm
