#include "runtime/egress_holder.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "egress/proxy.hpp"
#include "egress/rules.hpp"
#include "plan/paths.hpp"
#include "plan/protect.hpp"
#include "process/netns_setup.hpp"
#include "sandbox/audit.hpp"
#include "sandbox/sweep.hpp"

namespace exg::runtime {

namespace {

// Every packet out of the namespace but by lo, and but replies to
// connections made from outside, dropped. "table ...; delete table ...":
// idempotent for the second container of a pod.
constexpr const char* kLockdown =
    "table inet exguardian_egress\n"
    "delete table inet exguardian_egress\n"
    "table inet exguardian_egress {\n"
    "  chain output {\n"
    "    type filter hook output priority 0; policy drop;\n"
    "    oif \"lo\" accept\n"
    "    ct state established,related accept\n"
    "  }\n"
    "}\n";

std::string find_nft() {
  for (const char* p : {"/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft", "/usr/local/sbin/nft"})
    if (::access(p, X_OK) == 0) return p;
  return {};
}

// nft -f - in the current network namespace. "" or what failed.
std::string lock_down_netns() {
  std::string nft = find_nft();
  if (nft.empty()) return "nft not found (Debian: apt install nftables): cannot close the engine's network";
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(p[0], 0);
    ::execl(nft.c_str(), "nft", "-f", "-", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(p[0]);
  if (pid < 0) {
    ::close(p[1]);
    return std::string("fork: ") + std::strerror(errno);
  }
  (void)!::write(p[1], kLockdown, std::strlen(kLockdown));
  ::close(p[1]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "nft refused the egress table (status " + std::to_string(status) + ")";
  return "";
}

uint16_t local_port(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return 0;
  return ntohs(sa.sin_port);
}

void say(int fd, const std::string& line) { (void)!::write(fd, line.data(), line.size()); }

// The trees the container may write, as they were before it ran, and the
// protected names they are judged by.
struct SweptTrees {
  std::vector<std::string> extra_names;  // the policy's, plus what the host user's git configs name
  std::vector<sandbox::Snapshot> snapshots;
};

// As the plan does for the other layers (plan/compile.cpp): the extra names
// and what protected configs in these trees name (core.fsmonitor's script, a
// hook's exec'd script, an .envrc's dotenv file: command_pointers.hpp) are
// protected too, so a container that rewrites tools/fsmon.sh has it
// quarantined before the host's next `git status` runs it.
Result<SweptTrees> snapshot_swept_trees(const policy::Policy& pol, const std::vector<std::string>& trees) {
  const struct passwd* pw = ::getpwuid(::getuid());
  std::string home = pw && pw->pw_dir ? pw->pw_dir : "";
  SweptTrees out;
  plan::ProtectOptions popt{pol.filesystem.allow_git_config.value_or(false),
                            plan::protected_extra_names(pol.filesystem.protect, home), home, trees};
  out.extra_names = popt.extra_names;
  auto in_swept = [&](const std::string& p) {
    return std::any_of(trees.begin(), trees.end(), [&](const std::string& t) { return plan::is_within(p, t); });
  };
  for (const auto& tree : trees) {
    std::vector<std::string> pointers;
    for (auto& p : plan::find_protected_all(tree, popt).pointers)
      if (in_swept(p)) pointers.push_back(std::move(p));
    auto snap = sandbox::snapshot_tree(tree, out.extra_names, pointers);
    if (!snap) return fail(Error::msg("snapshot " + tree + " for the planted-file sweep", snap.error().str()));
    out.snapshots.push_back(std::move(*snap));
  }
  return out;
}

// The holder's life after fork(). Never returns.
// Protected names planted in the container's writable binds while it ran,
// moved to the quarantine and audited.
void sweep_planted(const policy::Policy& pol, const EgressHolderOptions& opt, const SweptTrees& swept,
                   sandbox::AuditLog& audit) {
  const auto& snapshots = swept.snapshots;
  for (size_t i = 0; i < snapshots.size(); ++i) {
    sandbox::SweepOptions so;
    so.extra_names = swept.extra_names;
    so.allow_git_config = pol.filesystem.allow_git_config.value_or(false);
    so.quarantine_dir = quarantine_dir(opt.audit_log, opt.container_id) + "/" + std::to_string(i);
    for (const auto& s : snapshots) so.worktree_roots.push_back(s.root);
    auto planted = sandbox::sweep(snapshots[i].root, snapshots[i], so);
    if (!planted) {
      audit.write({{"event", "planted"}, {"tree", snapshots[i].root}, {"error", planted.error().str()}});
      continue;
    }
    for (const auto& p : *planted)
      audit.write({{"event", "planted"}, {"tree", snapshots[i].root}, {"path", p.relpath}, {"why", p.why},
                   {"quarantined_to", p.quarantined_to}, {"unchecked", p.unchecked}});
  }
}

[[noreturn]] void run_holder(int ctl, const policy::Policy& pol, const egress::Rules& rules, egress::ProxyConfig cfg,
                             const EgressHolderOptions& opt) {
  ::setsid();
  if (ctl < 3) ctl = ::fcntl(ctl, F_DUPFD_CLOEXEC, 3);  // (a runtime started with stdio closed)
  // Nothing of the engine's stays open here for the container's lifetime
  // (its pipes, a console socket, --preserve-fds descriptors): an engine
  // waiting for the end of one of them would wait for the container's end.
  if (ctl > 3) ::close_range(3, static_cast<unsigned>(ctl - 1), 0);
  ::close_range(static_cast<unsigned>(ctl + 1), ~0u, 0);
  int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, 0), ::dup2(null, 1), ::dup2(null, 2);
    if (null > 2) ::close(null);
  }
  auto die = [&](const std::string& what) {
    say(ctl, "error " + what + (errno ? std::string(": ") + std::strerror(errno) : "") + "\n");
    ::_exit(1);
  };
  nlohmann::json tags = opt.audit_tags.is_object() ? opt.audit_tags : nlohmann::json::object();
  tags["handler"] = opt.handler;
  auto opened = sandbox::AuditLog::open(opt.audit_log, opt.container_id, std::move(tags));
  if (!opened) {
    errno = 0;
    die(opened.error().str());
  }
  sandbox::AuditLog audit = std::move(*opened);
  UniqueFd host_ns(::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!host_ns) die("open own network namespace");
  // The host's own addresses, followed for the holder's whole life, from its
  // own (the host's) network namespace: opened before entering the container's.
  {
    auto watch = egress::HostAddressWatch::open();
    if (!watch) {
      errno = 0;
      die(watch.error().str());
    }
    cfg.host_addresses = std::move(*watch);
  }
  UniqueFd new_ns;
  std::string netns_path = opt.engine_netns;
  if (!opt.engine_netns.empty()) {
    UniqueFd ns(::open(opt.engine_netns.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns) die("open the container's network namespace " + opt.engine_netns);
    if (::setns(ns.get(), CLONE_NEWNET) != 0) die("enter the container's network namespace " + opt.engine_netns);
  } else {
    if (::unshare(CLONE_NEWNET) != 0) die("a new network namespace");
    new_ns = UniqueFd(::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!new_ns) die("open the new network namespace");
    netns_path = "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(new_ns.get());
  }
  errno = 0;
  if (auto w = process::bring_loopback_up(); !w.empty()) die(w);
  plan::ProxyPlan pp;
  int fds[3];
  std::string what;
  if (process::make_proxy_listeners(pp, fds, &what) < 0) {
    if (errno != EADDRINUSE) die(what);
    pp.http_port = pp.socks_port = 0;  // a neighbour in the pod has them: any free ports
    if (process::make_proxy_listeners(pp, fds, &what) < 0) die(what);
  }
  if (!opt.engine_netns.empty()) {
    errno = 0;
    if (auto w = lock_down_netns(); !w.empty()) die(w);
  }
  if (::setns(host_ns.get(), CLONE_NEWNET) != 0) die("back to the holder's own network namespace");
  auto swept = snapshot_swept_trees(pol, opt.swept_trees);
  errno = 0;
  if (!swept) die(swept.error().str());
  say(ctl, "ok " + std::to_string(local_port(fds[0])) + " " + std::to_string(local_port(fds[1])) + " " + netns_path + "\n");

  // The container's pid, once the runtime made it.
  std::string line;
  char c;
  while (line.size() < 64 && ::read(ctl, &c, 1) == 1 && c != '\n') line += c;
  ::close(ctl);
  pid_t cpid = line.starts_with("pid ") ? static_cast<pid_t>(std::atol(line.c_str() + 4)) : 0;
  if (cpid <= 0) ::_exit(0);  // create failed: nothing ran
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, cpid, 0));
  if (pidfd < 0) {  // already gone
    sweep_planted(pol, opt, *swept, audit);
    ::_exit(0);
  }

  ::signal(SIGPIPE, SIG_IGN);
  boost::asio::io_context io(1);
  egress::Proxy proxy(io, rules, &audit, std::move(cfg));
  proxy.add_http_listener(fds[0]);
  proxy.add_socks_listener(fds[1]);
  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  boost::asio::posix::stream_descriptor container(io, pidfd);
  auto stop = [&] {
    proxy.stop();
    io.stop();
  };
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (!ec) stop();
  });
  container.async_wait(boost::asio::posix::stream_descriptor::wait_read, [&](const boost::system::error_code& ec) {
    if (!ec) stop();
  });
  io.run();
  // The container has ended (or delete asked): what it left in the trees it could write.
  sweep_planted(pol, opt, *swept, audit);
  ::_exit(0);
}

}  // namespace

Result<EgressHolder> start_egress_holder(const policy::Policy& pol, const EgressHolderOptions& opt) {
  if (pol.network.resolver.value_or(false))
    return fail(Error::msg("network.resolver", "not available in exguardian runtime yet (clients use the proxy)"));
  // The rules, and the handler's request rules, parent proxies and srt's
  // switches, as the process layer's supervisor applies them (none silently
  // dropped). (The host's own addresses are followed by the holder itself: run_holder.)
  auto egress_config = egress::config_from_policy(pol.network);
  if (!egress_config) return fail(egress_config.error());
  if (auto slash = opt.audit_log.rfind('/'); slash != std::string::npos && slash > 0)
    ::mkdir(opt.audit_log.substr(0, slash).c_str(), 0700);
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) return fail(Error::sys("socketpair"));
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(sp[0]), ::close(sp[1]);
    return fail(Error::sys("fork the egress holder"));
  }
  if (pid == 0) {
    ::close(sp[0]);
    run_holder(sp[1], pol, egress_config->rules, std::move(egress_config->proxy), opt);
  }
  ::close(sp[1]);
  EgressHolder h;
  h.pid = pid;
  h.control = UniqueFd(sp[0]);
  std::string line;
  char c;
  pollfd pfd{sp[0], POLLIN, 0};
  while (line.size() < 4096) {
    if (::poll(&pfd, 1, 30000) <= 0) break;
    if (::read(sp[0], &c, 1) != 1 || c == '\n') break;
    line += c;
  }
  if (!line.starts_with("ok ")) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return fail(Error::msg("egress holder", line.starts_with("error ") ? line.substr(6) : "did not start"));
  }
  std::istringstream in(line.substr(3));
  in >> h.http_port >> h.socks_port >> h.netns_path;
  return h;
}

std::string quarantine_dir(const std::string& audit_log, const std::string& container_id) {
  auto slash = audit_log.rfind('/');
  std::string dir = slash == std::string::npos || slash == 0 ? "" : audit_log.substr(0, slash);
  return dir + "/quarantine/" + container_id;
}

void send_container_pid(EgressHolder& h, pid_t container_pid) {
  if (!h.control) return;
  say(h.control.get(), "pid " + std::to_string(container_pid) + "\n");
  h.control.reset();
}

std::string process_identity(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), {});
  auto close = s.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream in(s.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && in >> field; ++i)
    if (i == 22) return std::to_string(pid) + " " + field;  // starttime
  return "";
}

void stop_egress_holder(const std::string& identity) {
  std::istringstream in(identity);
  pid_t pid = 0;
  in >> pid;
  if (pid <= 0 || process_identity(pid) != identity) return;
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) return;
  if (process_identity(pid) == identity) ::syscall(SYS_pidfd_send_signal, pidfd, SIGTERM, nullptr, 0);
  pollfd p{pidfd, POLLIN, 0};
  ::poll(&p, 1, 2000);
  ::close(pidfd);
}

}  // namespace exg::runtime
