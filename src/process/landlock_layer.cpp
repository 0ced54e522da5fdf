#include "process/landlock_layer.hpp"

#include <arpa/inet.h>
#include <linux/capability.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <string_view>

#include "plan/private_tmp.hpp"
#include "plan/proxy_env.hpp"
#include "plan/secrets.hpp"
#include "process/handshake.hpp"
#include "process/init.hpp"
#include "process/landlock_view.hpp"
#include "process/landlock_warden.hpp"
#include "walls/rlimits.hpp"
#include "walls/seccomp.hpp"
#include "process/spawn.hpp"
#include "util/dir_fd.hpp"
#include "util/fd_passing.hpp"
#include "util/pty_size.hpp"
#include "util/step_timer.hpp"
#include "util/syscalls.hpp"

namespace exg::process {

namespace {

// As for the process layer (process/launch.cpp): the least --memory its setup starts under.
constexpr uint64_t kMinMemory = 16ull << 20;

// The CA bundle's file in the private directory (LandlockView::trust_bundle).
constexpr const char* kBundleName = "ca-bundle.pem";

struct ChildSetup {
  // The supervisor's Plan. The child puts this layer's environment and rules
  // (below) into its own copy of it: no copy of the whole Plan for these two.
  plan::Plan* plan = nullptr;
  std::vector<std::string> env;  // the Plan's, with the proxy's, TMPDIR's and the bundle's variables
  walls::LandlockRules landlock;  // this layer's rules
  const layer::LaunchOptions* opt = nullptr;
  walls::RlimitPlan rlimits;
  std::string private_tmp;     // the run's TMPDIR (the warden removes it if the supervisor is killed)
  std::string bundle_path;     // where the trust bundle goes; empty: none
  std::string bundle_content;  // the host's bundle (the File step's content), the anchor appended
  bool want_pty = false;
  // Made here before the clone (the child allocates nothing for them): the
  // host-network filter and the main one as one program, or the host-network
  // filter alone (--unsafe-no-seccomp).
  const std::vector<sock_filter>* seccomp = nullptr;
  const std::vector<sock_filter>* host_network_only = nullptr;
};

// The sandbox's side: no namespaces to build, so the walls and then init.
[[noreturn]] void landlock_child(ChildSetup& c, const SpawnFds& f) {
  c.plan->env.swap(c.env);  // (this process's memory: the supervisor's Plan is untouched)
  std::swap(c.plan->landlock, c.landlock);  // a swap frees nothing (no allocator call in this copy of a process that may have threads)
  const plan::Plan& plan = *c.plan;
  const layer::LaunchOptions& opt = *c.opt;
  for (int k = 0; k < 3; ++k)
    if (opt.stdio_fds[k] >= 0 && opt.stdio_fds[k] != k && ::dup2(opt.stdio_fds[k], k) < 0) ::_exit(125);
  for (int fd : opt.supervisor_fds) ::close(fd);
  const int sync = f.sync_fd;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  std::string_view anchor;  // (in await_go's static buffer: nothing allocated here)
  if (!await_go_view(sync, &anchor)) ::_exit(125);
  // The secrets' values and the invoker's environment came along in this copy of the supervisor's memory.
  for (const auto& sec : plan.secrets) ::explicit_bzero(const_cast<char*>(sec.value.data()), sec.value.size());
  for (char** e = environ; e && *e; ++e) ::explicit_bzero(*e, std::strlen(*e));
  // Root's run: the Plan's identity (the workspace's owner, or an unused
  // high uid): uid 0 without capabilities still owns every root file and
  // device node. An ordinary user stays who they are (no user namespace to map another id).
  const plan::Identity& id = plan.identity;
  if (::getuid() == 0) {
    for (int cap = 0; cap <= CAP_LAST_CAP; ++cap)
      if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) die(sync, "drop the bounding set", errno);
    if (sys::setresgid_child(id.host_gid, id.host_gid, id.host_gid) != 0) die(sync, "setresgid", errno);
    if (sys::setresuid_child(id.host_uid, id.host_uid, id.host_uid) != 0) die(sync, "setresuid", errno);
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) die(sync, "parent-death signal", errno);
  }
  pollfd pfd{f.parent_pidfd, POLLIN, 0};
  if (::poll(&pfd, 1, 0) != 0) ::_exit(125);
  // No pid namespace: every orphan of the command comes back to init, which kills them at the end.
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) die(sync, "child subreaper", errno);
  // The rules' paths opened and added now, as the sandbox's uid (the ids above
  // are final), while the supervisor takes its snapshot, and before the warden
  // and the filters: in force only in init, as before (docs/benchmarks.md: a
  // tenth of the run's CPU less than building them in init).
  walls::PreparedLandlock rules;
  std::string ll_report;
  if (int r = walls::prepare_landlock(plan.landlock, &rules, &ll_report, /*say_applied=*/false); r < 0)
    die(sync, "apply Landlock (" + ll_report + ")", -r);
  bool moved = false;  // (v1: the cgroup is made after "go", spawn.cpp)
  if (int e = await_in_cgroup(sync, opt.timer, &moved)) {
    if (e < 0) ::_exit(125);
    die(sync, "move into the sandbox's cgroup", e);
  }
  const bool in_cgroup = f.cgroup_made || moved;
  // TMPDIR: made by the supervisor while the rules above were gathered, and
  // before "in cgroup": its rule now (no run without it).
  if (int r = walls::add_writable_dir(rules, c.private_tmp); r < 0)
    die(sync, "add " + c.private_tmp + " to the Landlock rules", -r);
  if (!c.bundle_path.empty()) {
    if (anchor.empty()) die(sync, "no trust anchor for the bundle at " + c.bundle_path, 0);
    int w = ::open(c.bundle_path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0444);
    if (w < 0) die(sync, "create " + c.bundle_path, errno);
    // The host's bundle, then the anchor: two writes, no joined copy (no allocation here).
    for (std::string_view part : {std::string_view(c.bundle_content), anchor})
      for (size_t off = 0; off < part.size();) {
        ssize_t n = ::write(w, part.data() + off, part.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) die(sync, "write " + c.bundle_path, errno);
        off += static_cast<size_t>(n);
      }
    ::close(w);
  }
  int pty_slave = -1;
  if (c.want_pty) {
    int ptmx = ::open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (ptmx < 0) die(sync, "open /dev/ptmx", errno);
    int unlock = 0;
    if (::ioctl(ptmx, TIOCSPTLCK, &unlock) != 0) die(sync, "unlock pty", errno);
    pty_slave = ::ioctl(ptmx, TIOCGPTPEER, O_RDWR | O_NOCTTY);
    if (pty_slave < 0) die(sync, "open pty peer", errno);
    size_pty_as_caller(ptmx, c.opt->tty_fds);
    if (!send_fds(sync, kMsgPty, &ptmx, 1)) die(sync, "send pty to supervisor", errno);
    ::close(ptmx);
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die(sync, "no_new_privs", errno);
  // No cgroup need exist: the warden ends the sandbox if the supervisor is killed (landlock_warden.hpp).
  Warden warden;
  // On init's memory only for a plain run in a cgroup (landlock_warden.hpp).
  const bool share_memory = in_cgroup && !opt.agent;
  if (int e = start_warden(f.parent_pidfd, c.private_tmp.c_str(), share_memory, &warden); e != 0) die(sync, "start the warden (a signal-scoped Landlock domain)", -e);
  // The host's network: with seccomp, init installs it with the main filter (one program); without, here.
  if (c.host_network_only && walls::install_seccomp_errno(*c.host_network_only) != 0)
    die(sync, "install the host-network filter", errno);
  InitArgs ia;
  ia.plan = &plan;
  ia.sync_fd = sync;
  ia.parent_pidfd = f.parent_pidfd;
  ia.pty_slave = pty_slave;
  ia.rlimits = &c.rlimits;
  ia.seccomp = c.seccomp;
  ia.timer = opt.timer;
  ia.reap_descendants = true;
  ia.warden_pid = warden.pid;
  ia.warden_fd = warden.fd;
  ia.agent_channel = f.agent_fd;
  ia.bounding_set_done = true;
  ia.landlock = &rules;
  for (int k = 0; k < 3; ++k) ia.tty_fds[k] = opt.tty_fds[k];
  for (int fd : opt.pass_fds) ia.pass_fds[ia.n_pass_fds++] = fd;
  become_init(ia);
}

Result<UniqueFd> loopback_listener(uint16_t* port) {
  UniqueFd l(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!l) return fail(Error::sys("proxy listener socket"));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  if (::bind(l.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    return fail(Error::sys("bind the proxy listener on 127.0.0.1"));
  if (::listen(l.get(), 256) != 0) return fail(Error::sys("listen on the proxy listener"));
  if (::getsockname(l.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) return fail(Error::sys("getsockname"));
  *port = ntohs(sa.sin_port);
  return l;
}

Result<std::string> random_token() {
  unsigned char b[24];
  if (::getrandom(b, sizeof b, 0) != static_cast<ssize_t>(sizeof b)) return fail(Error::sys("getrandom (the proxy's token)"));
  static const char* hex = "0123456789abcdef";
  std::string t;
  for (unsigned char x : b) t += hex[x >> 4], t += hex[x & 15];
  return t;
}

void set_env(std::vector<std::string>& env, std::string_view name, std::string_view value) {
  std::string kv;
  kv.reserve(name.size() + 1 + value.size());
  kv.append(name).append("=").append(value);
  // (the prefix "NAME=" compared in place: no string built per entry)
  std::string_view prefix(kv.data(), name.size() + 1);
  for (auto& e : env)
    if (std::string_view(e).starts_with(prefix)) {
      e = std::move(kv);
      return;
    }
  env.push_back(std::move(kv));
}

// Removes what lies in dirfd (never following a link), then nothing else.
void remove_entries(int dirfd) {
  std::vector<std::pair<std::string, unsigned char>> entries;
  list_dir(dirfd, [&](std::string_view n, unsigned char t) { entries.emplace_back(n, t); });
  for (const auto& [name, type] : entries) {
    if (type == DT_DIR) {
      OpenedDir sub = open_subdir(dirfd, name.c_str());
      if (sub) remove_entries(sub.get());
      ::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR);
    } else {
      ::unlinkat(dirfd, name.c_str(), 0);
    }
  }
}

}  // namespace

std::string LandlockLayer::missing(const walls::LandlockFeatures& f) {
  if (f.abi == 0)
    return "this kernel has no Landlock (not built in, or not in lsm= at boot), and without namespaces it is the "
           "only filesystem wall";
  if (!f.scope)
    return "this kernel's Landlock is ABI " + std::to_string(f.abi) +
           "; the landlock layer needs ABI 6 (TCP connect/bind rules from ABI 4, signal and abstract-unix scoping from "
           "ABI 6)";
  return "";
}

std::string LandlockLayer::private_tmp(const plan::Plan& plan) { return plan::host_private_tmp(plan.sandbox_id); }

std::vector<std::string> LandlockLayer::describe(const plan::Plan&) const {
  return {"layer: landlock (no namespaces: Landlock, seccomp and the proxy on the host's loopback; see docs/layers.md)"};
}

layer::Enforcement LandlockLayer::enforces(const plan::Plan& plan) const {
  layer::Enforcement e;
  e.landlock = landlock_.fs;
  e.landlock_text = "ABI " + std::to_string(landlock_.abi) +
                    ": filesystem reads and writes, TCP connect to the proxy's ports only, no TCP bind, signal and "
                    "abstract-unix scoping (the only walls: no namespaces)";
  e.seccomp = plan.seccomp;
  e.seccomp_by = plan.seccomp ? "exguardian" : "";
  e.seccomp_notify = plan.seccomp;
  e.seccomp_text = std::string(plan.seccomp ? "filter installed, refusals reported to the supervisor"
                                            : "OFF (--unsafe-no-seccomp)") +
                   "; host-network filter: no UDP or other inet sockets";
  return e;
}

Result<void> LandlockLayer::supports_agent() const { return {}; }

Result<LandlockView> LandlockLayer::view_of(const plan::Plan& plan) const {
  if (view_ && view_->first == plan.sandbox_id) return view_->second;
  auto v = landlock_view(plan, private_tmp(plan));
  if (!v) return fail(v.error());
  view_.emplace(plan.sandbox_id, *v);
  return v;
}

std::vector<std::string> LandlockLayer::cautions(const plan::Plan& plan) const {
  std::vector<std::string> out;
  auto v = view_of(plan);
  if (v) out = v->cautions;
  out.insert(out.begin(), "layer landlock: no namespaces: the host's processes and network are visible to the "
                          "command (docs/layers.md says what this layer cannot do)");
  return out;
}

Result<layer::Sandbox> LandlockLayer::launch(const plan::Plan& plan, const layer::LaunchOptions& opt) {
  if (auto why = missing(landlock_); !why.empty()) return fail(Error::msg("layer landlock", why));
  if (opt.agent && !opt.pass_fds.empty()) return fail(Error::msg("launch", "descriptors to pass to an agent"));
  if (opt.pass_fds.size() > static_cast<size_t>(kMaxPassFds))
    return fail(Error::msg("launch", "more than " + std::to_string(kMaxPassFds) + " descriptors to pass"));
  if (plan.identity.invoked_as_root && ::getgroups(0, nullptr) != 0)
    return fail(Error::msg("setup", "the supervisor still holds supplementary groups (they would follow the command in)"));
  const std::string tmp = private_tmp(plan);
  auto view = view_of(plan);
  view_.reset();  // a later launch of this Plan lists the host again
  if (!view) return fail(view.error());

  // The proxy's listeners on the host's loopback, on ports the kernel picks.
  uint16_t http_port = 0, socks_port = 0;
  auto http = loopback_listener(&http_port);
  if (!http) return fail(http.error());
  auto socks = loopback_listener(&socks_port);
  if (!socks) return fail(socks.error());
  auto token = random_token();
  if (!token) return fail(token.error());

  ChildSetup c;
  // This layer's rules and environment; the child takes them into its copy of the Plan.
  c.plan = const_cast<plan::Plan*>(&plan);  // written only in the child's copy of this memory (spawn refuses CLONE_VM)
  c.landlock = std::move(view->rules);
  // (TMPDIR's rule is added by the child once the directory is made: below)
  std::erase(c.landlock.read_write, tmp);
  c.landlock.connect_tcp = {http_port, socks_port};
  c.landlock.bind_tcp.clear();
  c.env = plan.env;
  if (plan.proxy.enabled)
    for (const auto& [name, value] : plan::proxy_env(http_port, socks_port, *token)) set_env(c.env, name, value);
  for (const char* n : {"TMPDIR", "TMP", "TEMP"}) set_env(c.env, n, tmp);
  // A session's agent opens a terminal for each pty command after Landlock is
  // on: the host's /dev/ptmx and devpts (docs/layers.md: the command's uid may
  // write to its other terminals there; TIOCSTI stays refused).
  if (opt.agent) c.landlock.write_files.insert(c.landlock.write_files.end(), {"/dev/ptmx", "/dev/pts"});
  c.opt = &opt;
  c.private_tmp = tmp;
  c.rlimits = walls::default_rlimits(plan.limits.memory_bytes.has_value());
  c.want_pty = opt.tty_fds[0] || opt.tty_fds[1] || opt.tty_fds[2];
  // The host's network: no UDP or other inet sockets, no TCP connect inside a send.
  if (plan.seccomp) c.seccomp = &walls::prebuilt_seccomp_program_host_network();
  else c.host_network_only = &walls::host_network_seccomp_program(false);
  if (view->trust_bundle) {
    c.bundle_path = tmp + "/" + kBundleName;
    for (const auto& s : plan.steps)
      if (s.kind == plan::StepKind::File && s.trust_bundle) {
        c.bundle_content = s.content;
        break;
      }
    for (const auto& n : plan::kCaEnvNames) set_env(c.env, n, c.bundle_path);
  }

  if (opt.timer) opt.timer->mark("layer setup");  // (the proxy's listeners, this layer's Plan)
  SpawnSpec sp;
  sp.clone_flags = 0;  // no namespaces: that is the point
  sp.cgroup_id = plan.sandbox_id;
  sp.limits = plan.limits;
  sp.min_memory = kMinMemory;
  sp.layer = "landlock";
  sp.agent = opt.agent;
  sp.child = [&c](const SpawnFds& f) { landlock_child(c, f); };
  sp.trust_anchor = opt.trust_anchor;
  // The run's private directory (TMPDIR), mode 0700, the sandbox's: made while
  // the child gathers its Landlock rules (a mkdir in /tmp is slow: ~0.2 ms,
  // docs/benchmarks.md), before it is told it is in its cgroup.
  bool made_tmp = false;
  sp.meanwhile = [&]() -> Result<void> {
    if (opt.meanwhile)
      if (auto r = opt.meanwhile(); !r) return r;
    if (::mkdir(tmp.c_str(), 0700) != 0) return fail(Error::sys("create " + tmp));
    made_tmp = true;
    if (::getuid() == 0 && ::chown(tmp.c_str(), plan.identity.host_uid, plan.identity.host_gid) != 0)
      return fail(Error::sys("chown " + tmp));
    return {};
  };
  sp.need_seccomp_listener = plan.seccomp;
  sp.timer = opt.timer;
  sp.clone_what = "start the sandbox's first process";
  auto sb = spawn(std::move(sp));
  if (!sb) {
    if (made_tmp) after_run(plan);  // (one already there is not this run's)
    return fail(sb.error());
  }
  sb->http_listener = std::move(*http);
  sb->socks_listener = std::move(*socks);
  sb->host_network = true;
  sb->proxy_token = *token;
  sb->loopback_ports = {http_port, socks_port};
  return sb;
}

void LandlockLayer::after_run(const plan::Plan& plan) {
  const std::string tmp = private_tmp(plan);
  // Left empty, the usual end: one rmdir (it refuses a directory with entries,
  // and a link in its place, ENOTDIR, which the open below refuses too).
  if (::rmdir(tmp.c_str()) == 0 || errno == ENOENT) return;
  OpenedDir d = open_subdir(AT_FDCWD, tmp.c_str());
  if (!d) return;
  remove_entries(d.get());
  ::rmdir(tmp.c_str());
}

}  // namespace exg::process
