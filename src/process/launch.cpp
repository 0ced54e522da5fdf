#include "process/launch.hpp"
#include "process/id_map.hpp"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "process/child.hpp"
#include "walls/seccomp.hpp"
#include "util/syscalls.hpp"
#include "process/spawn.hpp"
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

}  // namespace

Result<void> write_id_maps(pid_t pid, const plan::Identity& id) {
  std::string base = "/proc/" + std::to_string(pid);
  if (auto r = write_file(base + "/setgroups", "deny"); !r) return r;
  if (auto r = write_file(base + "/uid_map", std::to_string(id.inside_uid) + " " + std::to_string(id.host_uid) + " 1\n"); !r)
    return r;
  return write_file(base + "/gid_map", std::to_string(id.inside_gid) + " " + std::to_string(id.host_gid) + " 1\n");
}

namespace {

// The idmap holder: blocks until the parent kills it (or, should the parent
// die first, until the parent's end of the pipe closes). It shares the
// parent's memory (CLONE_VM: no copy of the page tables, which was most of its
// cost), so it makes raw system calls only and touches nothing. Its stack is
// the caller's own allocation (not a static one), so that launches in several
// threads of one process do not share it. The parent ends it with SIGKILL,
// not by closing the pipe: a holder cloned meanwhile by another thread's
// launch copies this pipe's write end into its fd table, and two such holders
// would each keep the other's read from ending (seen: two launches in one
// process hung for good).
constexpr size_t kIdmapHolderStack = 16384;

// The least --memory a process sandbox starts under: its init's and setup's
// pages are charged to its cgroup (on v2 all of them: the child is born in
// it; v1: from its move in). Measured here (v1, peak usage with a shell):
// 0.5 MB; 16M is also the least a serve template may give (memoryMB).
constexpr uint64_t kMinMemory = 16ull << 20;
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
IdmapHolder::~IdmapHolder() {
  if (!pidfd_) return;
  siginfo_t si{};
  while (::waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &si, WEXITED) != 0 && errno == EINTR) {
  }
}

bool IdmapHolder::reap_if_exited() {
  if (!pidfd_) return true;
  siginfo_t si{};
  if (::waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &si, WEXITED | WNOHANG) != 0 || si.si_pid == 0) return false;
  pidfd_.reset();
  return true;
}

Result<UniqueFd> idmap_userns(uid_t from_uid, gid_t from_gid, uid_t to_uid, gid_t to_gid,
                              std::vector<IdmapHolder>* reap_later) {
  int sync[2];
  if (::pipe2(sync, O_CLOEXEC) != 0) return fail(Error::sys("pipe"));
  UniqueFd rd(sync[0]), wr(sync[1]);
  uint64_t fds = (static_cast<uint64_t>(wr.get()) << 32) | static_cast<uint32_t>(rd.get());
  auto stack = std::make_unique<char[]>(kIdmapHolderStack);  // freed once it is reaped (IdmapHolder)
  int pidfd = -1;
  pid_t pid = static_cast<pid_t>(::clone(idmap_holder, stack.get() + kIdmapHolderStack,
                                         CLONE_VM | CLONE_NEWUSER | CLONE_PIDFD | SIGCHLD,
                                         reinterpret_cast<void*>(uintptr_t{fds}), &pidfd));
  if (pid < 0) return fail(Error::sys("clone a user namespace for an idmapped mount"));
  IdmapHolder holder(UniqueFd(pidfd), std::move(stack));
  rd.reset();
  // "Inside" the idmap: the on-disk id. The owner becomes the sandbox's uid;
  // every other group stays itself (id_map.hpp).
  std::string base = "/proc/" + std::to_string(pid);
  Result<void> maps = write_file(base + "/setgroups", "deny");
  if (maps) maps = write_file(base + "/uid_map", id_map_lines(from_uid, to_uid, false));
  if (maps) maps = write_file(base + "/gid_map", id_map_lines(from_gid, to_gid, true));
  UniqueFd ns(::open(("/proc/" + std::to_string(pid) + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
  int saved = errno;
  sys::pidfd_send_signal(pidfd, SIGKILL);
  wr.reset();
  if (reap_later) reap_later->push_back(std::move(holder));  // else reaped here, on return
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
  args.rlimits = walls::default_rlimits(plan.limits.memory_bytes.has_value());
  args.timer = opt.timer;
  if (opt.pass_fds.size() > static_cast<size_t>(kMaxPassFds))
    return fail(Error::msg("launch", "more than " + std::to_string(kMaxPassFds) + " descriptors to pass"));
  if (opt.agent && !opt.pass_fds.empty()) return fail(Error::msg("launch", "descriptors to pass to an agent"));
  for (int fd : opt.pass_fds) {
    if (fd < 0) return fail(Error::msg("launch", "a descriptor to pass is not open"));
    args.pass_fds[args.n_pass_fds++] = fd;
  }
  StepTimer none;  // off: marks cost one branch
  StepTimer& timer = opt.timer ? *opt.timer : none;
  // Compiled at build time (tools/seccomp_bpf_gen.cpp); installing it is
  // still the kernel's decision (install_seccomp fails closed).
  args.seccomp = plan.seccomp ? &walls::prebuilt_seccomp_program() : nullptr;
  timer.mark("seccomp program");

  // Root's supplementary groups must not follow the command in (the front end drops them: cli/host_setup.hpp).
  if (plan.identity.invoked_as_root && ::getgroups(0, nullptr) != 0)
    return fail(Error::msg("setup", "the supervisor still holds supplementary groups (they would follow the command in)"));
  // The idmaps' holders, killed as soon as their namespace is open, are not
  // waited for one by one: on a failed launch they are reaped when this
  // function returns; on a launched sandbox those that have exited are reaped
  // then, and one not yet gone goes with the sandbox (its companion), reaped
  // when that is released at the run's end. A killed holder still has to be
  // scheduled to exit: on a busy machine one waited on a run queue past the
  // sandbox's own end, and the supervisor, reaping it at the handover, slept
  // through that end (docs/benchmarks.md).
  std::vector<IdmapHolder> holders;

  SpawnSpec sp;
  sp.clone_flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
                   CLONE_NEWCGROUP;
  // One cgroup per sandbox, limits set before anything runs in it (spawn() makes it).
  sp.cgroup_id = plan.sandbox_id;
  sp.limits = plan.limits;
  sp.min_memory = kMinMemory;
  sp.layer = "process";
  sp.agent = opt.agent;
  sp.freezer = opt.freezer;
  sp.child = [&args, &opt](const SpawnFds& f) {
    // The child's own descriptor table (a fork-like clone): the caller's stdio is untouched.
    for (int k = 0; k < 3; ++k)
      if (opt.stdio_fds[k] >= 0 && opt.stdio_fds[k] != k && ::dup2(opt.stdio_fds[k], k) < 0) ::_exit(125);
    for (int fd : opt.supervisor_fds) ::close(fd);
    args.sync_fd = f.sync_fd;
    args.parent_pidfd = f.parent_pidfd;
    args.agent_channel = f.agent_fd;
    child_main(args);
  };
  sp.map_ids = [&plan](pid_t pid) { return write_id_maps(pid, plan.identity); };
  // Made after "go", while the child sets up; it takes them before its mounts.
  sp.idmapped_trees = [&plan, &holders]() -> Result<std::vector<UniqueFd>> {
    std::vector<UniqueFd> trees;
    std::map<std::pair<uid_t, gid_t>, UniqueFd> userns;
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      if (!uses_idmapped_mount(plan, i)) continue;
      const auto& s = plan.steps[i];
      auto key = std::make_pair(s.idmap_from_uid, s.idmap_from_gid);
      if (!userns.count(key)) {
        auto ns = idmap_userns(s.idmap_from_uid, s.idmap_from_gid, plan.identity.host_uid, plan.identity.host_gid,
                               &holders);
        if (!ns) return fail(ns.error());
        userns.emplace(key, std::move(*ns));
      }
      auto tree = idmapped_tree(s, userns.at(key).get());
      if (!tree) return fail(tree.error());
      trees.emplace_back(*tree);
    }
    return trees;
  };
  sp.trust_anchor = opt.trust_anchor;
  sp.meanwhile = opt.meanwhile;
  sp.need_seccomp_listener = plan.seccomp;
  if (plan.proxy.transparent) sp.capture_port = plan.proxy.transparent_port;
  sp.timer = opt.timer;
  sp.clone_error = [](int e) {
    return Error{"create namespaces",
                 std::string(std::strerror(e)) +
                     (e == EPERM || e == ENOSPC
                          ? " (are unprivileged user namespaces disabled? see kernel.unprivileged_userns_clone, "
                            "user.max_user_namespaces)"
                          : ""),
                 e};
  };
  auto launched = spawn(std::move(sp));
  if (launched && !launched->companion) {  // (a companion already there: the holders are reaped as on failure)
    auto alive = std::make_shared<std::vector<IdmapHolder>>();
    for (auto& h : holders)
      if (!h.reap_if_exited()) alive->push_back(std::move(h));
    if (!alive->empty()) launched->companion = std::move(alive);
  }
  return launched;
}

}  // namespace exg::process
