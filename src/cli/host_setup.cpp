#include "cli/host_setup.hpp"

#include <grp.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>

#include "oci/layer.hpp"
#include "doctor/userns_diagnosis.hpp"

namespace exg::cli {

std::string explain_start_failure(const Error& error, layer::Kind kind) {
  std::string text = error.str();
  for (const auto& line : doctor::userns_refusal_for(kind, error.what, installed_container_runtime()))
    text += "\n" + line;
  return text;
}

std::string installed_container_runtime() {
  auto rt = oci::choose_runtime(layer::Kind::Container, "");
  return rt ? rt->path : std::string();
}

Result<HostProcess> HostProcess::prepare(bool invoked_as_root) {
  HostProcess h;
  sigset_t mask = sandbox::supervised_signals();
  if (::sigprocmask(SIG_BLOCK, &mask, &h.old_) != 0) return fail(Error::sys("sigprocmask"));
  h.active_ = true;
  h.sigfd_.reset(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!h.sigfd_) return fail(Error::sys("signalfd"));
  if (rlimit rl; ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (invoked_as_root && ::setgroups(0, nullptr) != 0) return fail(Error::sys("setgroups"));
  return h;
}

HostProcess::~HostProcess() {
  if (!active_) return;
  // A SIGPIPE raised while it was blocked (a write of the stdio relay or the
  // proxy to a reader that had gone: the write got EPIPE and was handled) is
  // still pending; unblocking it now would kill this process at its exit and
  // turn the run's status into 141. It is spent: take it first.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  const timespec now{0, 0};
  while (::sigtimedwait(&pipe, nullptr, &now) == SIGPIPE) {
  }
  ::sigprocmask(SIG_SETMASK, &old_, nullptr);
}

StdioIo::StdioIo(bool relay_terminal) {
  if (!relay_terminal) return;
  for (int k = 0; k < 3; ++k) term_.sandbox_fds[k] = ::isatty(k) == 1;
  if (!term_.sandbox_fds[0] && !term_.sandbox_fds[1] && !term_.sandbox_fds[2]) return;
  int host_tty = term_.sandbox_fds[0] ? 0 : term_.sandbox_fds[1] ? 1 : 2;
  term_.size_from = host_tty;
  term_.input = term_.sandbox_fds[0] ? 0 : -1;
  term_.output = term_.sandbox_fds[1] ? 1 : 2;
  if (termios t; ::tcgetattr(host_tty, &t) == 0) term_.settings = t;
}

void StdioIo::say(const std::string& line) { std::fprintf(stderr, "exguardian: %s\n", line.c_str()); }

// Keys (^C, ^Z) reach the sandbox's own pty and its line discipline.
void StdioIo::relay_begin() {
  if (raw_ || term_.input != 0 || ::tcgetattr(0, &saved_) != 0) return;
  termios raw = saved_;
  ::cfmakeraw(&raw);
  raw_ = ::tcsetattr(0, TCSAFLUSH, &raw) == 0;
}

void StdioIo::relay_end() {
  if (raw_) ::tcsetattr(0, TCSAFLUSH, &saved_);
  raw_ = false;
}

}  // namespace exg::cli
