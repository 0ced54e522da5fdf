#include "layer/spawn.hpp"

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <vector>

#include "process/capture_rules.hpp"
#include "process/child.hpp"
#include "process/syscalls.hpp"
#include "util/fd_passing.hpp"
#include "util/step_timer.hpp"

namespace exg::layer {

namespace {

// Kills and reaps the child unless committed: every early return unwinds.
class ChildGuard {
 public:
  explicit ChildGuard(Sandbox& sb) : sb_(sb) {}
  ~ChildGuard() {
    if (committed_ || sb_.pid <= 0) return;
    sys::pidfd_send_signal(sb_.pidfd.get(), SIGKILL);
    ::waitpid(sb_.pid, nullptr, 0);
  }
  void commit() { committed_ = true; }
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;

 private:
  Sandbox& sb_;
  bool committed_ = false;
};

}  // namespace

Result<Sandbox> spawn(SpawnSpec spec) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return fail(Error::sys("socketpair"));
  UniqueFd parent_sock(sv[0]), child_sock(sv[1]);
  UniqueFd self(sys::pidfd_open(::getpid()));
  if (!self) return fail(Error::sys("pidfd_open"));
  // The agent's channel: a stream, as a virtio-serial port will be.
  UniqueFd agent_here, agent_there;
  if (spec.agent) {
    int ch[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ch) != 0) return fail(Error::sys("socketpair for the agent"));
    agent_here.reset(ch[0]);
    agent_there.reset(ch[1]);
  }
  SpawnFds fds{child_sock.get(), self.get(), agent_there.get()};
  // cgroup v1 has no CLONE_INTO_CGROUP: the child moves itself in, first
  // thing (Cgroup::open_self_attach: no RCU grace period, unlike a write of
  // its pid by this process).
  std::vector<UniqueFd> self_attach;
  if (spec.cgroup.active() && spec.cgroup.clone_into_fd() < 0) {
    auto a = spec.cgroup.open_self_attach();
    if (!a) return fail(a.error());
    self_attach = std::move(*a);
  }

  int pidfd = -1;
  long pid = sys::clone3_fork(spec.clone_flags, &pidfd, spec.cgroup.clone_into_fd());
  if (pid < 0) {
    int e = errno;
    return fail(spec.clone_error ? spec.clone_error(e) : Error::sys(spec.clone_what, e));
  }
  if (pid == 0) {
    parent_sock.reset();
    agent_here.reset();
    if (!self_attach.empty()) {
      int attach_fds[8];
      size_t n = 0;
      for (auto& fd : self_attach)
        if (n < 8) attach_fds[n++] = fd.get();
      int err = n == self_attach.size() ? process::Cgroup::attach_self(attach_fds, n) : E2BIG;
      self_attach.clear();  // closed: nothing of the sandbox keeps a way into other cgroups
      if (err != 0) {
        // Said now, read by the parent after "go" (which is waited for, so
        // that the parent's send of it does not fail first).
        std::string msg = std::string(1, process::kMsgError) + "move into the sandbox's cgroup: " + std::strerror(err);
        (void)::send(fds.sync_fd, msg.data(), msg.size(), MSG_NOSIGNAL);
        char c;
        (void)::recv(fds.sync_fd, &c, 1, 0);
        ::_exit(125);
      }
      if (spec.timer) spec.timer->child_mark("cgroup attach");
    }
    spec.child(fds);
    ::_exit(127);  // child() does not return
  }
  self_attach.clear();
  StepTimer untimed;  // off: marks cost one branch
  StepTimer& timer = spec.timer ? *spec.timer : untimed;
  timer.mark("clone");
  Sandbox sb;
  sb.pid = static_cast<pid_t>(pid);
  sb.pidfd.reset(pidfd);
  sb.cgroup = std::move(spec.cgroup);
  ChildGuard guard(sb);
  child_sock.reset();
  agent_there.reset();
  sb.agent_channel = std::move(agent_here);

  if (spec.map_ids) {
    if (auto r = spec.map_ids(sb.pid); !r) return fail(r.error());
    timer.mark("id maps");
  }
  // "Go", with the trust anchor when the plan has trust bundles.
  std::string go(1, process::kMsgGo);
  if (spec.trust_anchor) {
    auto pem = spec.trust_anchor();
    if (!pem) return fail(pem.error());
    if (pem->empty() || pem->size() > process::kMaxTrustAnchor)
      return fail(Error::msg("trust anchor", "empty or larger than 16 KiB"));
    go += *pem;
  }
  if (::send(parent_sock.get(), go.data(), go.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(go.size()))
    return fail(Error::sys(spec.start_what));
  timer.mark("go");
  // The child is in its cgroup (born there on v2, moved itself on v1 before
  // anything else) and waits for kMsgInCgroup before anything of the sandbox
  // starts (init and the command, the agent, the runtime): they inherit its
  // cgroups. A child that failed meanwhile has closed its end: what it said before
  // (kMsgError) is still queued and read below, so that is the error shown.
  // With transparent egress, only once its rules are in (below).
  int in_cgroup_err = 0;  // why the child could not be told (it must then not say ready)
  auto tell_in_cgroup = [&] {
    const char in_cgroup = process::kMsgInCgroup;
    if (::send(parent_sock.get(), &in_cgroup, 1, MSG_NOSIGNAL) != 1) in_cgroup_err = errno;
  };
  bool captured = false;
  if (!spec.capture_port) tell_in_cgroup();
  for (;;) {
    FdMessage m;
    if (!recv_fds(parent_sock.get(), &m)) {
      // A child that exited with kMsgInCgroup unread resets the socket: what
      // it sent before was read above; this is its end, not a read error.
      if (errno == ECONNRESET) return fail(Error::msg("setup", spec.exited_early));
      return fail(Error::sys(spec.read_what));
    }
    if (m.type == process::kMsgPty) {
      sb.pty_master.reset(m.fd);
      continue;
    }
    if (m.type == process::kMsgListeners) {
      sb.http_listener.reset(m.fd);
      sb.socks_listener.reset(m.fd2);
      sb.dns_socket.reset(m.fd3);
      continue;
    }
    if (m.type == process::kMsgTransparent) {
      UniqueFd listener(m.fd), route(m.fd2), nft(m.fd3);
      if (!spec.capture_port || captured || !listener || !route || !nft)
        return fail(Error::msg(spec.setup_what, "unexpected transparent egress sockets"));
      std::string what;
      if (int e = process::add_capture_routing(route.get(), nft.get(), *spec.capture_port, &what))
        return fail(Error::msg(spec.setup_what, what + ": " + std::strerror(e) +
                                                    " (fail closed; a policy with \"network\": {\"transparent\": "
                                                    "false} runs without it)"));
      sb.transparent_listener = std::move(listener);
      captured = true;
      timer.mark("capture rules");
      tell_in_cgroup();
      continue;
    }
    if (m.type == process::kMsgReady) {
      sb.seccomp_listener.reset(m.fd);
      // Ready without having been told it is in its cgroup: it did not wait (fail closed).
      if (in_cgroup_err) return fail(Error::sys(spec.start_what, in_cgroup_err));
      if (spec.capture_port && !captured) return fail(Error::msg("setup", "ready without transparent egress capture"));
      if (!sb.seccomp_listener && spec.need_seccomp_listener) return fail(Error::msg("setup", spec.no_listener));
      timer.take_child_marks();
      timer.mark("handover");
      guard.commit();
      return sb;
    }
    for (int fd : {m.fd, m.fd2, m.fd3})
      if (fd >= 0) ::close(fd);
    if (m.type == process::kMsgError) return fail(Error::msg(spec.setup_what, m.text));
    return fail(Error::msg("setup", spec.exited_early));
  }
}

}  // namespace exg::layer
