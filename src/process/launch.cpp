#include "process/launch.hpp"
#include "process/id_map.hpp"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>

#include "process/child.hpp"
#include "process/seccomp.hpp"
#include "process/syscalls.hpp"
#include "util/fd_passing.hpp"
#include "util/step_timer.hpp"

namespace exg::process {

namespace {

Result<void> write_file(const std::string& path, const std::string& content) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return fail(Error::sys("open " + path));
  if (::write(fd.get(), content.data(), content.size()) != static_cast<ssize_t>(content.size()))
    return fail(Error::sys("write " + path + " (" + content.substr(0, content.find('\n')) + ")"));
  return {};
}

using Message = FdMessage;

Result<Message> receive(int sock) {
  Message m;
  if (!recv_fds(sock, &m)) return fail(Error::sys("read from the sandbox"));
  return m;
}

}  // namespace

Result<void> write_id_maps(pid_t pid, const plan::Identity& id) {
  std::string base = "/proc/" + std::to_string(pid);
  if (auto r = write_file(base + "/setgroups", "deny"); !r) return r;
  if (auto r = write_file(base + "/uid_map", std::to_string(id.inside_uid) + " " + std::to_string(id.host_uid) + " 1\n"); !r)
    return r;
  return write_file(base + "/gid_map", std::to_string(id.inside_gid) + " " + std::to_string(id.host_gid) + " 1\n");
}

namespace {

// The idmap holder: blocks until the parent closes its end of the pipe. It
// shares the parent's memory (CLONE_VM: no copy of the page tables, which was
// most of its cost), so it makes raw system calls only and touches nothing.
alignas(16) char idmap_holder_stack[16384];
int idmap_holder(void* arg) {
  auto fds = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(arg));
  // Its copy of the pipe's write end (no CLONE_FILES: the table is copied)
  // goes first, so that the parent's close is the end of the read.
  ::syscall(SYS_close, static_cast<int>(fds >> 32));
  char c;
  ::syscall(SYS_read, static_cast<int>(fds & 0xffffffff), &c, 1);  // returns when the parent is done with us
  ::syscall(SYS_exit, 0);
  return 0;
}

}  // namespace

// A user namespace that maps on-disk owner `from` to the sandbox's host id,
// used only as the idmap of a mount (root only). Made by a short-lived child.
Result<UniqueFd> idmap_userns(uid_t from_uid, gid_t from_gid, uid_t to_uid, gid_t to_gid) {
  int sync[2];
  if (::pipe2(sync, O_CLOEXEC) != 0) return fail(Error::sys("pipe"));
  UniqueFd rd(sync[0]), wr(sync[1]);
  uint64_t fds = (static_cast<uint64_t>(wr.get()) << 32) | static_cast<uint32_t>(rd.get());
  pid_t pid = static_cast<pid_t>(::clone(idmap_holder, idmap_holder_stack + sizeof idmap_holder_stack,
                                         CLONE_VM | CLONE_NEWUSER | SIGCHLD, reinterpret_cast<void*>(uintptr_t{fds})));
  if (pid < 0) return fail(Error::sys("clone a user namespace for an idmapped mount"));
  rd.reset();
  // "Inside" the idmap: the on-disk id. The owner becomes the sandbox's uid;
  // every other group stays itself (id_map.hpp).
  std::string base = "/proc/" + std::to_string(pid);
  Result<void> maps = write_file(base + "/setgroups", "deny");
  if (maps) maps = write_file(base + "/uid_map", id_map_lines(from_uid, to_uid, false));
  if (maps) maps = write_file(base + "/gid_map", id_map_lines(from_gid, to_gid, true));
  UniqueFd ns(::open(("/proc/" + std::to_string(pid) + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
  int saved = errno;
  wr.reset();
  ::waitpid(pid, nullptr, 0);
  if (!maps) return fail(maps.error());
  if (!ns) return fail(Error::sys("open idmap user namespace", saved));
  return ns;
}

Result<int> idmapped_tree(const plan::Step& s, int userns_fd) {
  int tree = sys::open_tree(AT_FDCWD, s.source.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
  if (tree < 0) return fail(Error::sys("clone " + s.source + " for an idmapped mount"));
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_IDMAP;
  attr.userns_fd = static_cast<uint64_t>(userns_fd);
  if (sys::mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr) != 0) {
    Error e = Error::sys("idmap " + s.source + " (the filesystem must support idmapped mounts)");
    ::close(tree);
    return fail(e);
  }
  return tree;
}

Result<Launched> launch(const plan::Plan& plan, const LaunchOptions& opt) {
  ChildArgs args;
  args.plan = &plan;
  args.verbose = opt.verbose;
  for (int k = 0; k < 3; ++k) args.tty_fds[k] = opt.tty_fds[k];
  args.want_pty = opt.tty_fds[0] || opt.tty_fds[1] || opt.tty_fds[2];
  args.rlimits = default_rlimits(plan.limits);
  args.timer = opt.timer;
  StepTimer none;  // off: marks cost one branch
  StepTimer& timer = opt.timer ? *opt.timer : none;
  // Compiled at build time (tools/seccomp_bpf_gen.cpp); installing it is
  // still the kernel's decision (install_seccomp fails closed).
  args.seccomp = plan.seccomp ? &prebuilt_seccomp_program() : nullptr;
  timer.mark("seccomp program");

  std::map<size_t, UniqueFd> idmapped;
  if (plan.identity.invoked_as_root) {
    // Root's supplementary groups must not follow the command in.
    if (::setgroups(0, nullptr) != 0) return fail(Error::sys("setgroups"));
    std::map<std::pair<uid_t, gid_t>, UniqueFd> userns;
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const auto& s = plan.steps[i];
      if (!s.idmap) continue;
      auto key = std::make_pair(s.idmap_from_uid, s.idmap_from_gid);
      if (!userns.count(key)) {
        auto ns = idmap_userns(s.idmap_from_uid, s.idmap_from_gid, plan.identity.host_uid, plan.identity.host_gid);
        if (!ns) return fail(ns.error());
        userns.emplace(key, std::move(*ns));
      }
      auto tree = idmapped_tree(s, userns.at(key).get());
      if (!tree) return fail(tree.error());
      idmapped.emplace(i, UniqueFd(*tree));
      args.idmapped[i] = *tree;
    }
    timer.mark("idmapped mounts");
  }

  // One cgroup per sandbox, limits set before anything runs in it.
  auto cg = Cgroup::create(plan.sandbox_id, plan.limits);
  if (!cg) return fail(cg.error());
  timer.mark("cgroup");
  // Cgroups left by a supervisor killed with SIGKILL; only where we can make them.
  if (cg->active()) Cgroup::sweep_stale();
  timer.mark("cgroup sweep");

  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return fail(Error::sys("socketpair"));
  UniqueFd parent_sock(sv[0]), child_sock(sv[1]);
  UniqueFd self(sys::pidfd_open(::getpid()));
  if (!self) return fail(Error::sys("pidfd_open"));
  args.sync_fd = child_sock.get();
  args.parent_pidfd = self.get();
  // The agent's channel: a stream, as a virtio-serial port will be.
  UniqueFd agent_here, agent_there;
  if (opt.agent) {
    int ch[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ch) != 0) return fail(Error::sys("socketpair for the agent"));
    agent_here.reset(ch[0]);
    agent_there.reset(ch[1]);
    args.agent_channel = agent_there.get();
  }

  int pidfd = -1;
  const uint64_t flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
                         CLONE_NEWCGROUP;
  long pid = sys::clone3_fork(flags, &pidfd, cg->clone_into_fd());
  if (pid < 0) {
    int e = errno;
    return fail(Error{"create namespaces",
                      std::string(std::strerror(e)) +
                          (e == EPERM || e == ENOSPC
                               ? " (are unprivileged user namespaces disabled? see kernel.unprivileged_userns_clone, "
                                 "user.max_user_namespaces)"
                               : ""),
                      e});
  }
  if (pid == 0) {
    parent_sock.reset();
    agent_here.reset();
    child_main(args);
  }
  timer.mark("clone");
  Launched l;
  l.pid = static_cast<pid_t>(pid);
  l.pidfd.reset(pidfd);
  l.cgroup = std::move(*cg);
  child_sock.reset();
  agent_there.reset();
  l.agent_channel = std::move(agent_here);
  idmapped.clear();  // the child has its copies

  auto kill_child = [&] {
    sys::pidfd_send_signal(l.pidfd.get(), SIGKILL);
    ::waitpid(l.pid, nullptr, 0);
  };
  if (auto r = write_id_maps(l.pid, plan.identity); !r) {
    kill_child();
    return fail(r.error());
  }
  timer.mark("id maps");
  // "Go", with the trust anchor when the plan has trust bundles.
  std::string go(1, kMsgGo);
  if (opt.trust_anchor) {
    auto pem = opt.trust_anchor();
    if (!pem) {
      kill_child();
      return fail(pem.error());
    }
    if (pem->empty() || pem->size() > kMaxTrustAnchor) {
      kill_child();
      return fail(Error::msg("trust anchor", "empty or larger than 16 KiB"));
    }
    go += *pem;
  }
  if (::send(parent_sock.get(), go.data(), go.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(go.size())) {
    kill_child();
    return fail(Error::sys("start the sandbox"));
  }
  timer.mark("go");
  // cgroup v1 has no CLONE_INTO_CGROUP: the child is moved in while it sets
  // up its mounts (each v1 write to cgroup.procs waits for an RCU grace
  // period, milliseconds on a busy host), and waits for kMsgInCgroup before
  // it starts anything (become_init: the command or the agent's processes
  // inherit its cgroups) or enters its cgroup namespace.
  if (l.cgroup.active() && l.cgroup.clone_into_fd() < 0) {
    if (auto r = l.cgroup.attach(l.pid); !r) {
      kill_child();
      return fail(r.error());
    }
    timer.mark("cgroup attach");
  }
  if (char c = kMsgInCgroup; ::send(parent_sock.get(), &c, 1, MSG_NOSIGNAL) != 1) {
    kill_child();
    return fail(Error::sys("start the sandbox"));
  }
  for (;;) {
    auto m = receive(parent_sock.get());
    if (!m) {
      kill_child();
      return fail(m.error());
    }
    if (m->type == kMsgPty) {
      l.pty_master.reset(m->fd);
      continue;
    }
    if (m->type == kMsgListeners) {
      l.http_listener.reset(m->fd);
      l.socks_listener.reset(m->fd2);
      l.dns_socket.reset(m->fd3);
      continue;
    }
    if (m->type == kMsgReady) {
      if (m->fd < 0 && plan.seccomp) {
        kill_child();
        return fail(Error::msg("setup", "the sandbox did not hand over its seccomp listener"));
      }
      l.seccomp_listener.reset(m->fd);
      timer.take_child_marks();
      timer.mark("handover");
      return l;
    }
    if (m->fd >= 0) ::close(m->fd);
    if (m->fd2 >= 0) ::close(m->fd2);
    if (m->fd3 >= 0) ::close(m->fd3);
    kill_child();
    if (m->type == kMsgError) return fail(Error::msg("setup", m->text));
    return fail(Error::msg("setup", "the sandbox exited before it was set up"));
  }
}

}  // namespace exg::process
