#include "process/spawn.hpp"

#include <sched.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "plan/limits.hpp"
#include "walls/capture_rules.hpp"
#include "process/handshake.hpp"
#include "util/syscalls.hpp"
#include "util/fd_passing.hpp"
#include "util/real_ids_of.hpp"
#include "util/step_timer.hpp"

namespace exg::process {

namespace {

// Kills and reaps the child unless committed: every early return unwinds.
class ChildGuard {
 public:
  explicit ChildGuard(layer::Sandbox& sb) : sb_(sb) {}
  ~ChildGuard() {
    if (committed_ || sb_.pid <= 0) return;
    sys::pidfd_send_signal(sb_.pidfd.get(), SIGKILL);
    ::waitpid(sb_.pid, nullptr, 0);
  }
  void commit() { committed_ = true; }
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;

 private:
  layer::Sandbox& sb_;
  bool committed_ = false;
};

}  // namespace

Result<layer::Sandbox> spawn(SpawnSpec spec) {
  // The child runs on a copy of the supervisor's memory: layers write their
  // own copy of the Plan there (the landlock layer's rules). On shared memory
  // those writes would reach the supervisor's Plan.
  if (spec.clone_flags & (CLONE_VM | CLONE_VFORK | CLONE_THREAD))
    return fail(Error::msg("spawn", "the sandbox's first process must not share the supervisor's memory"));
  if (const auto& m = spec.limits.memory_bytes; spec.limits.explicit_memory && m && *m < spec.min_memory)
    return fail(Error::msg("memory limit " + plan::format_bytes(*m),
                           "below the minimum of " + plan::format_bytes(spec.min_memory) + " a sandbox on the " +
                               spec.layer + " layer needs to start (its own setup counts against the limit): "
                               "give --memory " + plan::format_bytes(spec.min_memory) + " or more"));
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
  StepTimer untimed;  // off: marks cost one branch
  StepTimer& timer = spec.timer ? *spec.timer : untimed;
  // v1: the freezer hierarchy only for a sandbox serve may pause (a session's,
  // with the agent); a run's kill stops forks with pids.max 0 instead.
  // v2 (or no usable cgroup, so that explicit limits fail before anything
  // starts): made now, the child born in it. v1: after "go" (header), for
  // every layer (the landlock layer's run costs less CPU than with the
  // cgroup made before the clone: docs/benchmarks.md).
  const auto layout = cgroup::plan_layout();
  const bool cgroup_after_go = layout.usable && !layout.v2;
  cgroup::Cgroup cgroup;
  if (!cgroup_after_go) {
    auto cg = cgroup::Cgroup::create_in(layout, spec.cgroup_id, spec.limits, /*freezer=*/spec.agent || spec.freezer);
    if (!cg) return fail(cg.error());
    cgroup = std::move(*cg);
    timer.mark("cgroup");
  }

  int pidfd = -1;
  long pid = sys::clone3_fork(spec.clone_flags, &pidfd, cgroup.clone_into_fd());
  if (pid < 0) {
    int e = errno;
    return fail(spec.clone_error ? spec.clone_error(e) : Error::sys(spec.clone_what, e));
  }
  if (pid == 0) {
    parent_sock.reset();
    agent_here.reset();
    fds.cgroup_made = cgroup.active();
    spec.child(fds);
    ::_exit(127);  // child() does not return
  }
  timer.mark("clone");
  layer::Sandbox sb;
  sb.pid = static_cast<pid_t>(pid);
  sb.pidfd.reset(pidfd);
  sb.cgroup = std::move(cgroup);
  ChildGuard guard(sb);
  child_sock.reset();
  agent_there.reset();
  sb.agent_channel = std::move(agent_here);

  if (spec.map_ids) {
    if (auto r = spec.map_ids(sb.pid); !r) return fail(r.error());
    timer.mark("id maps");
  }
  // "Go", with the trust anchor when the plan has trust bundles.
  std::string pem;
  if (spec.trust_anchor) {
    auto made = spec.trust_anchor();
    if (!made) return fail(made.error());
    if (made->empty() || made->size() > kMaxTrustAnchor)
      return fail(Error::msg("trust anchor", "empty or larger than 16 KiB"));
    pem = std::move(*made);
  }
  if (!send_go(parent_sock.get(), pem)) return fail(Error::sys(spec.start_what));
  timer.mark("go");
  // A child that failed meanwhile has closed its end: a send to it fails, and
  // what it said before (kMsgError) is still queued and read below, so that is
  // the error shown (not the send's).
  int send_err = 0;  // why the child could not be told (it must then not say ready)
  if (spec.idmapped_trees) {
    auto trees = spec.idmapped_trees();
    if (!trees) return fail(trees.error());
    send_err = send_idmapped_trees(parent_sock.get(), *trees);
    timer.mark("idmapped mounts");
  }
  if (cgroup_after_go) {
    auto cg = cgroup::Cgroup::create_in(layout, spec.cgroup_id, spec.limits, /*freezer=*/spec.agent || spec.freezer);
    if (!cg) return fail(cg.error());
    sb.cgroup = std::move(*cg);
    timer.mark("cgroup");
  }
  if (spec.meanwhile)
    if (auto r = spec.meanwhile(); !r) return fail(r.error());
  // The child waits for kMsgInCgroup before anything of the sandbox starts
  // (init and the command, the agent, the runtime): they inherit its cgroups
  // (born there on v2; on v1 it moves itself in through the tasks files sent
  // with the message). With transparent egress, only once its rules are in (below).
  auto tell_in_cgroup = [&]() -> Result<void> {
    auto tasks = sb.cgroup.open_self_attach();  // empty on v2
    if (!tasks) return fail(tasks.error());
    if (tasks->size() > kMaxPassedFds)  // (v1 gives a sandbox four: memory, pids, cpu, freezer)
      return fail(Error::msg("cgroup", "more hierarchies than the child can be sent"));
    if (!send_err) send_err = send_in_cgroup(parent_sock.get(), *tasks);
    return {};
  };
  bool captured = false;
  // Ready: every check of the child's side done (it must have waited for "in cgroup").
  auto ready = [&]() -> Result<layer::Sandbox> {
    if (send_err) return fail(Error::sys(spec.start_what, send_err));
    if (spec.capture_port && !captured) return fail(Error::msg("setup", "ready without transparent egress capture"));
    if (!sb.seccomp_listener && spec.need_seccomp_listener) return fail(Error::msg("setup", spec.no_listener));
    timer.mark("handover");
    guard.commit();
    return std::move(sb);
  };
  if (!spec.capture_port)
    if (auto r = tell_in_cgroup(); !r) return fail(r.error());
  for (;;) {
    FdMessage m;
    if (!recv_fds(parent_sock.get(), &m)) {
      // A child that exited with kMsgInCgroup unread resets the socket: what
      // it sent before was read above; this is its end, not a read error.
      if (errno == ECONNRESET) return fail(Error::msg("setup", spec.exited_early));
      return fail(Error::sys(spec.read_what));
    }
    if (m.type == kMsgPty) {
      sb.pty_master.reset(m.fd);
      continue;
    }
    if (m.type == kMsgSockDiag) {
      sb.sock_diag.reset(m.fd);
      continue;
    }
    if (m.type == kMsgListeners) {
      sb.http_listener.reset(m.fd);
      sb.socks_listener.reset(m.fd2);
      sb.dns_socket.reset(m.fd3);
      continue;
    }
    if (m.type == kMsgTransparent) {
      UniqueFd listener(m.fd), route(m.fd2), nft(m.fd3);
      if (!spec.capture_port || captured || !listener || !route || !nft)
        return fail(Error::msg(spec.setup_what, "unexpected transparent egress sockets"));
      std::string what;
      if (int e = walls::add_capture_routing(route.get(), nft.get(), *spec.capture_port, &what))
        return fail(Error::msg(spec.setup_what, what + ": " + std::strerror(e) +
                                                    " (fail closed; a policy with \"network\": {\"transparent\": "
                                                    "false} runs without it)"));
      sb.transparent_listener = std::move(listener);
      captured = true;
      timer.mark("capture rules");
      if (auto r = tell_in_cgroup(); !r) return fail(r.error());
      continue;
    }
    if (m.type == kMsgSeccomp || m.type == kMsgSeccompLast) {
      // Init's listener, by number (process/handshake.hpp hand_over_listener:
      // under its own filter it cannot send it): taken, then init is told.
      char* end = nullptr;
      long n = std::strtol(m.text.c_str(), &end, 10);
      if (end != m.text.c_str() && *end == '\0' && n >= 0 && n <= INT_MAX && !sb.seccomp_listener) {
        util::RealIdsOf as_init(sb.pid);  // root without CAP_SYS_PTRACE, init of another uid (util/real_ids_of.hpp)
        sb.seccomp_listener.reset(static_cast<int>(::syscall(SYS_pidfd_getfd, sb.pidfd.get(), static_cast<int>(n), 0)));
      }
      if (!sb.seccomp_listener)
        return fail(Error::sys("take the sandbox's seccomp listener from its init (pidfd_getfd)"));
      if (!send_listener_taken(parent_sock.get()))
        return fail(Error::sys("tell the sandbox's init its listener is taken"));
      // Init's last word: its command reads "taken" before its execve and says
      // nothing more (no wait for a "ready", no wake of this process for it).
      // Its marks reach the timer later (the caller's take_child_marks()).
      if (m.type == kMsgSeccompLast) return ready();
      continue;
    }
    if (m.type == kMsgReady) {
      if (m.fd >= 0) sb.seccomp_listener.reset(m.fd);  // an OCI runtime host's (it is under no filter)
      // Ready without having been told it is in its cgroup: it did not wait (fail closed).
      timer.take_child_marks();
      return ready();
    }
    for (int fd : {m.fd, m.fd2, m.fd3})
      if (fd >= 0) ::close(fd);
    if (m.type == kMsgError) return fail(Error::msg(spec.setup_what, m.text));
    return fail(Error::msg("setup", spec.exited_early));
  }
}

}  // namespace exg::process
