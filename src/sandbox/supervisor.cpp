#include "sandbox/supervisor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <filesystem>
#include <memory>
#include <set>
#include <thread>

#include "egress/proxy.hpp"
#include "egress/rules.hpp"
#include "egress/secrets.hpp"
#include "sandbox/audit.hpp"
#include "sandbox/overlay_apply.hpp"
#include "sandbox/setid_sweep.hpp"
#include "sandbox/refusal_summary.hpp"
#include "sandbox/stdio_relay.hpp"
#include "sandbox/sweep.hpp"
#include "sandbox/violations.hpp"
#include "util/syscalls.hpp"
#include "util/unique_fd.hpp"

namespace exg::sandbox {

namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT, SIGALRM};

// Refusals before the loop (layer::EarlyRefusals: the microVM layer's qemu at
// its start): answered as the loop answers them, with no Unix socket reached
// by name and nothing audited (nothing of the command runs yet).
class EarlyAnswerer final : public layer::EarlyRefusals {
 public:
  EarlyAnswerer(UniqueFd listener, UniqueFd sock_diag)
      : gate_(std::move(sock_diag), SocketAddressGate::Allowed{}, nullptr),
        violations_(std::move(listener), nullptr, &gate_) {}
  int fd() const override { return violations_.fd(); }
  void on_readable() override { violations_.on_readable(); }

 private:
  SocketAddressGate gate_;  // (before violations_, which points at it)
  SyscallViolations violations_;
};

// One line of narration, printf-style, through the front end's I/O.
__attribute__((format(printf, 2, 3))) void sayf(SupervisorIo& io, const char* fmt, ...) {
  char small[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (static_cast<size_t>(n) < sizeof small) {
    io.say(std::string(small, static_cast<size_t>(n)));
    return;
  }
  std::string big(static_cast<size_t>(n) + 1, '\0');
  va_start(ap, fmt);
  std::vsnprintf(big.data(), big.size(), fmt, ap);
  va_end(ap);
  big.resize(static_cast<size_t>(n));
  io.say(big);
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd pfd{fd, POLLOUT, 0};
        ::poll(&pfd, 1, 1000);
        continue;
      }
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

void copy_winsize(int from, int to) {
  winsize ws{};
  if (::ioctl(from, TIOCGWINSZ, &ws) == 0) ::ioctl(to, TIOCSWINSZ, &ws);
}

// The proxy's own event loop, on a second thread started after the clone (the
// child is never forked from a multi-threaded process). Stopped and joined on
// every way out of supervise().
struct ProxyRunner {
  boost::asio::io_context io{1};
  std::unique_ptr<egress::Proxy> proxy;
  std::thread thread;

  // relayed: the microVM bridge's sockets (layer::Sandbox::relayed_egress).
  void start(const egress::Rules& rules, AuditLog* audit, int http_fd, int socks_fd, int dns_fd, int transparent_fd,
             bool relayed, egress::ProxyConfig cfg = {}) {
    proxy = std::make_unique<egress::Proxy>(io, rules, audit, std::move(cfg));
    proxy->add_http_listener(http_fd);
    proxy->add_socks_listener(socks_fd);
    if (dns_fd >= 0) {  // network.resolver / --dns
      if (relayed) proxy->add_dns_stream_listener(dns_fd);
      else proxy->add_dns_socket(dns_fd);
    }
    if (transparent_fd >= 0) {  // network.transparent
      if (relayed) proxy->add_transparent_relay_listener(transparent_fd);
      else proxy->add_transparent_listener(transparent_fd);
    }
    thread = std::thread([this] {
      auto guard = boost::asio::make_work_guard(io);
      io.run();
    });
  }
  void stop() {
    if (!thread.joinable()) return;
    boost::asio::post(io, [this] { proxy->stop(); });
    // Let the stop run (closing sockets writes the last audit lines), then end the loop.
    boost::asio::post(io, [this] { io.stop(); });
    thread.join();
  }
  ~ProxyRunner() { stop(); }
};

// set_network: the plan's allowed and denied domains replaced (the rest of its
// network policy stays), checked as at the start, and a secret's host must stay
// allowed (its credential would otherwise go nowhere, or worse, be refused on
// the host it belongs to while the placeholder leaks elsewhere).
Result<std::string> change_egress(const plan::Plan& plan, const egress::SecretsConfig* secrets, egress::Proxy& proxy,
                                  const agent::NetworkChange& c) {
  policy::Network net = plan.network;
  net.allowed_domains.clear();
  net.denied_domains.clear();
  for (const auto& d : c.allow) {
    if (auto bad = policy::check_domain_pattern(d, false)) return fail(Error::msg("allow " + d, *bad));
    net.allowed_domains.push_back({d, {"set_network allow"}});
  }
  for (const auto& d : c.deny) {
    if (auto bad = policy::check_domain_pattern(d, true)) return fail(Error::msg("deny " + d, *bad));
    net.denied_domains.push_back({d, {"set_network deny"}});
  }
  auto rules = egress::Rules::from_policy(net);
  if (!rules) return fail(rules.error());
  if (secrets) {
    for (const auto& s : secrets->secrets)
      for (const auto& h : s.hosts) {
        bool listed = std::find(c.allow.begin(), c.allow.end(), h) != c.allow.end();
        bool denied = false;
        if (!h.starts_with("*.")) {
          auto host = egress::normalise_host(h.substr(0, h.rfind(':') == std::string::npos ? h.size() : h.rfind(':')));
          denied = !host || !rules->check_name(*host).allowed;
        }
        if (!listed || denied)
          return fail(Error::msg("allow", "secret " + s.name + " is for " + h +
                                              ": the new rules must keep allowing it (list it, exactly so, and deny it not)"));
      }
  }
  // (The proxy puts its followed host addresses into them: replace_rules.)
  nlohmann::json ev = {{"event", "egress_rules_changed"}, {"allow", c.allow}, {"deny", c.deny}};
  proxy.replace_rules(std::move(*rules), std::move(ev));
  std::string line = std::to_string(c.allow.size()) + " allowed, " + std::to_string(c.deny.size()) + " denied";
  return line;
}

// Credential injection (DESIGN.md §6): the trust bundle steps get the host's
// bundle now; the CA is made in memory during the launch, after the clone
// (LaunchOptions::trust_anchor), so neither it nor its key is in the sandbox's
// copy of this process; the values go to the proxy only.
struct PreparedSecrets {
  plan::Plan plan;  // the plan to launch: trust bundles hold the host's bundle, values cleared
  std::shared_ptr<egress::SecretsConfig> config;  // ca set by make_ca()

  Result<std::string> make_ca() {
    auto ca = egress::CertAuthority::generate(plan.sandbox_id);
    if (!ca) return fail(Error::msg("secrets", "cannot make the sandbox's certificate authority: " + ca.error().str()));
    config->ca = std::move(*ca);
    return config->ca->cert_pem();
  }
};

Result<PreparedSecrets> prepare_secrets(const plan::Plan& in) {
  std::string host_bundle;
  if (!in.host_trust_bundle.empty()) {
    UniqueFd fd(::open(in.host_trust_bundle.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return fail(Error::sys("read the host's CA bundle " + in.host_trust_bundle));
    char buf[65536];
    for (ssize_t n; (n = ::read(fd.get(), buf, sizeof buf)) != 0;) {
      if (n < 0) {
        if (errno == EINTR) continue;
        return fail(Error::sys("read the host's CA bundle " + in.host_trust_bundle));
      }
      host_bundle.append(buf, static_cast<size_t>(n));
    }
    if (!host_bundle.empty() && host_bundle.back() != '\n') host_bundle += '\n';
  }
  host_bundle += in.extra_ca_pem;  // tlsTerminate.extraCaCertPaths
  PreparedSecrets out{in, std::make_shared<egress::SecretsConfig>()};
  for (auto& s : out.plan.steps)
    if (s.kind == plan::StepKind::File && s.trust_bundle) s.content = host_bundle;
  out.config->secrets = in.secrets;
  out.config->upstream_ca_file = in.host_trust_bundle;
  // The plan the sandbox is built from needs placeholders only.
  for (auto& s : out.plan.secrets) {
    ::explicit_bzero(s.value.data(), s.value.size());
    s.value.clear();
  }
  return out;
}

// The workspace's way back to the host (issue 8): a snapshot of every live
// writable tree for the sweep, and the overlay's layer directories.
struct SweptTree {
  std::string root, quarantine_dir;
  Snapshot snapshot;
};
// A writable tree holding a writable credential copy, run as an overlay
// (plan::Step::credential_tree): its layer directories, and the copies in its
// upper layer (relative to the tree), never applied to the host.
struct CredentialTree {
  std::string tree;
  LayerDirs layer;
  std::vector<std::string> copies;
};
struct WorkspaceGuard {
  std::vector<SweptTree> trees;
  std::optional<LayerDirs> layer;
  std::vector<CredentialTree> credential_trees;
  int64_t setid_since = setid_sweep_start();  // set-id files changed after this are the run's
};

// Where a tree's planted files go: the workspace's straight into the
// quarantine, an allowWrite tree's into a sibling named after its path.
// (A fresh quarantine under /var/tmp holds both, so that nothing of it is a
// name another user could have made first.)
std::string quarantine_for(const plan::Plan& plan, const std::string& tree) {
  if (plan.quarantine_fresh) return plan.quarantine_dir + (tree == plan.workspace ? "/workspace" : "/allow-write" + tree);
  return tree == plan.workspace ? plan.quarantine_dir : plan.quarantine_dir + "-allow-write" + tree;
}

void drop_credential_trees(WorkspaceGuard& g) {
  for (const auto& t : g.credential_trees) (void)remove_layer_dirs(t.layer.dir);
  g.credential_trees.clear();
}

// The overlays of the trees that hold writable credential copies: their layer
// directories, each copy a plain file in its tree's upper layer (owned by the
// sandbox's uid, which rewrites it). Made here, on the host, before the start.
Result<void> prepare_credential_trees(const plan::Plan& plan, WorkspaceGuard& g) {
  auto chown_to_sandbox = [&](const std::string& p) -> Result<void> {
    if (plan.identity.invoked_as_root && ::lchown(p.c_str(), plan.identity.host_uid, plan.identity.host_gid) != 0)
      return fail(Error::sys("chown " + p));
    return {};
  };
  for (const auto& s : plan.steps) {
    if (s.kind != plan::StepKind::Overlay || !s.credential_tree) continue;
    auto l = make_layer_dirs(s.upper_dir.substr(0, s.upper_dir.rfind('/')), s.target);
    if (!l) return fail(l.error());
    g.credential_trees.push_back({s.target, std::move(*l), {}});
    CredentialTree& t = g.credential_trees.back();
    for (const auto& d : {t.layer.dir, t.layer.upper, t.layer.work})
      if (auto r = chown_to_sandbox(d); !r) return r;
  }
  for (const auto& f : plan.steps) {
    if (f.kind != plan::StepKind::File || !f.in_upper) continue;
    CredentialTree* t = nullptr;  // the deepest tree holding it (compile's choice)
    for (auto& c : g.credential_trees)
      if (f.target.starts_with(c.tree + "/") && (!t || c.tree.size() > t->tree.size())) t = &c;
    if (!t) return fail(Error::msg("credential copy " + f.target, "no overlay holds it"));
    std::string rel = f.target.substr(t->tree.size() + 1);
    // Directories on the way (a copy below the tree's top): made in the upper layer as in the lower.
    for (size_t at = rel.find('/'); at != std::string::npos; at = rel.find('/', at + 1)) {
      std::string d = t->layer.upper + "/" + rel.substr(0, at);
      struct stat st{};
      mode_t mode = ::stat((t->tree + "/" + rel.substr(0, at)).c_str(), &st) == 0 ? (st.st_mode & 07777) : 0700;
      if (::mkdir(d.c_str(), mode) != 0 && errno != EEXIST) return fail(Error::sys("mkdir " + d));
      if (auto r = chown_to_sandbox(d); !r) return r;
    }
    std::string p = t->layer.upper + "/" + rel;
    int fd = ::open(p.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return fail(Error::sys("create " + p));
    bool ok = ::write(fd, f.content.data(), f.content.size()) == static_cast<ssize_t>(f.content.size()) &&
              ::fchmod(fd, f.mode & 0666) == 0 &&
              (!plan.identity.invoked_as_root || ::fchown(fd, plan.identity.host_uid, plan.identity.host_gid) == 0);
    ::close(fd);
    if (!ok) return fail(Error::sys("write " + p));
    t->copies.push_back(rel);
  }
  return {};
}

// What the sandbox's mounts need (the overlay's layer directories) and the
// quarantine; the snapshot of the swept trees comes later (snapshot_trees).
Result<WorkspaceGuard> prepare_workspace(const plan::Plan& plan) {
  WorkspaceGuard g;
  if (plan.quarantine_fresh)  // a directory no one else made (compile(): under /var/tmp)
    if (::mkdir(plan.quarantine_dir.c_str(), 0700) != 0) return fail(Error::sys("quarantine " + plan.quarantine_dir));
  if (auto r = prepare_credential_trees(plan, g); !r) {
    drop_credential_trees(g);
    return fail(r.error());
  }
  if (plan.workspace_mode == plan::WorkspaceMode::Live) return g;
  auto l = make_layer_dirs(plan.layer_dir, plan.workspace);
  if (!l) {
    drop_credential_trees(g);
    return fail(l.error());
  }
  // The sandbox writes the upper layer as its own uid.
  if (plan.identity.invoked_as_root) {
    for (const auto& d : {l->dir, l->upper, l->work})
      if (::chown(d.c_str(), plan.identity.host_uid, plan.identity.host_gid) != 0)
        return fail(Error::sys("chown " + d));
  }
  g.layer = std::move(*l);
  return g;
}

// The swept trees as they are before the command runs: what is new or
// changed at the end was planted by the run.
Result<void> snapshot_trees(const plan::Plan& plan, WorkspaceGuard& g) {
  for (const auto& tree : plan.swept_trees) {
    auto snap = snapshot_tree(tree, plan.protect_extra, plan.protect_pointers);
    if (!snap) return fail(snap.error());
    g.trees.push_back({tree, quarantine_for(plan, tree), std::move(*snap)});
  }
  return {};
}

// What the end of the run found: quarantined planted files, planted files
// that could not be moved, and paths that could not be checked at all.
struct Finish {
  size_t quarantined = 0, not_moved = 0, unchecked = 0;
  std::vector<std::string> quarantined_paths;  // as shown (for the run's refusal summary)
};

// At exit: each tree's upper layer applied to it (protected names quarantined),
// its credential copies taken out first, whatever the run made of them (a new
// copy, a deletion's whiteout): the host's file is the proxy's to update.
template <class Report>
void apply_credential_trees(const plan::Plan& plan, WorkspaceGuard& g, SupervisorIo& io, Report&& report, Finish& f) {
  for (auto& t : g.credential_trees) {
    for (const auto& rel : t.copies) {
      // The sandbox wrote the upper layer (it has ended: nothing changes it now): a
      // directory on the copy's way that it made a symlink would lead this removal,
      // with the supervisor's rights, onto a host path. Then the copy is not there.
      bool on_way_ok = true;
      for (size_t at = rel.find('/'); on_way_ok && at != std::string::npos; at = rel.find('/', at + 1)) {
        struct stat st{};
        on_way_ok = ::lstat((t.layer.upper + "/" + rel.substr(0, at)).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
      }
      std::error_code ec;
      if (on_way_ok) std::filesystem::remove_all(t.layer.upper + "/" + rel, ec);  // (a link there: the link itself)
    }
    ApplyOptions ao{plan.protect_extra, plan.allow_git_config, quarantine_for(plan, t.tree), false, plan.protect_pointers};
    if (!plan.workspace.empty()) ao.worktree_roots.push_back(plan.workspace);  // as the sweep's (finish_workspace)
    auto r = apply_upper(t.layer.upper, t.tree, ao);
    if (!r) {
      sayf(io, "applying %s to %s failed: %s (the layer is kept there)", t.layer.upper.c_str(), t.tree.c_str(),
           r.error().str().c_str());
      ++f.unchecked;
      continue;
    }
    report(t.tree, r->quarantined, true);
    for (const auto& s : r->skipped) sayf(io, "not applied: %s/%s", t.tree.c_str(), s.c_str());
    (void)remove_layer_dirs(t.layer.dir);
  }
  g.credential_trees.clear();
}

Finish finish_workspace(const plan::Plan& plan, WorkspaceGuard& g, AuditLog& audit, SupervisorIo& io) {
  Finish f;
  auto report = [&](const std::string& root, const std::vector<Planted>& planted, bool moves) {
    for (const auto& p : planted) {
      // The workspace's paths as they were (relative), other trees' in full.
      std::string abs = root + "/" + p.relpath, shown = root == plan.workspace ? p.relpath : abs;
      if (shown.size() > 400) shown = shown.substr(0, 150) + "/.../" + shown.substr(shown.size() - 200);  // the audit line has it whole
      if (p.unchecked) {
        ++f.unchecked;
        sayf(io, "not checked: %s (%s): what it holds may run later", shown.c_str(), p.why.c_str());
        audit.write({{"event", "sweep_unchecked"}, {"path", abs}, {"why", p.why}});
        continue;
      }
      if (p.quarantined_to.empty() && moves) {
        ++f.not_moved;
      } else {
        ++f.quarantined;
        f.quarantined_paths.push_back(shown);
      }
      std::string to = p.quarantined_to.size() > 400 ? p.quarantined_to.substr(0, 150) + "/.../" +
                                                           p.quarantined_to.substr(p.quarantined_to.size() - 200)
                                                     : p.quarantined_to;
      sayf(io, "planted: %s (%s)%s%s", shown.c_str(), p.why.c_str(),
                   to.empty() ? "" : " -> quarantined in ", to.c_str());
      audit.write({{"event", "planted"}, {"path", abs}, {"why", p.why}, {"quarantined_to", p.quarantined_to}});
    }
  };
  for (auto& t : g.trees) {
    SweepOptions so{plan.protect_extra, plan.allow_git_config, t.quarantine_dir, false, plan.swept_trees};
    if (!plan.workspace.empty()) so.worktree_roots.push_back(plan.workspace);
    auto r = sweep(t.root, t.snapshot, so);
    if (!r) {
      report(t.root, {{".", "sweep failed: " + r.error().str(), {}, true}}, true);
      continue;
    }
    report(t.root, *r, true);
  }
  apply_credential_trees(plan, g, io, report, f);
  if (g.layer && plan.keep_layer) {
    // Kept for review: nothing reaches the workspace until `exguardian apply`.
    sayf(io, "workspace changes kept in %s: review with `exguardian diff %s`, apply with "
                 "`exguardian apply %s`", g.layer->dir.c_str(), g.layer->dir.c_str(), g.layer->dir.c_str());
  } else if (g.layer) {
    bool discard = plan.workspace_mode == plan::WorkspaceMode::Discard;
    ApplyOptions ao{plan.protect_extra, plan.allow_git_config, quarantine_for(plan, plan.workspace), discard,
                    plan.protect_pointers};
    ao.worktree_roots.push_back(plan.workspace);
    auto r = apply_upper(g.layer->upper, plan.workspace, ao);
    if (!r) {
      sayf(io, "applying %s failed: %s (the layer is kept there)", g.layer->upper.c_str(),
                   r.error().str().c_str());
      ++f.unchecked;
      return f;
    }
    if (discard) {
      if (!r->empty()) sayf(io, "discarded the run's workspace changes");
    } else {
      report(plan.workspace, r->quarantined, true);
      for (const auto& s : r->skipped) sayf(io, "not applied: %s", s.c_str());
    }
    (void)remove_layer_dirs(g.layer->dir);
  }
  if (plan.quarantine_fresh) ::rmdir(plan.quarantine_dir.c_str());  // made at start; kept only when it holds something
  return f;
}

// Every tree the sandbox wrote on the host directly (live workspace,
// allowWrite): set-id bits of files it changed are removed and reported (the
// overlay apply never carries them). Returns how many were found or could not
// be checked.
size_t finish_setid(const plan::Plan& plan, const WorkspaceGuard& g, AuditLog& audit, SupervisorIo& io) {
  SetIdSweep sw;
  for (const auto& s : plan.steps)
    if (s.kind == plan::StepKind::BindRw) sweep_setid(s.source, g.setid_since, sw);
  for (const auto& f : sw.found) {
    sayf(io, "set-id file written in the run: %s (mode %04o -> %04o)%s%s", f.path.c_str(),
                 f.before, f.after, f.removed ? "" : ": NOT removed: ", f.error.c_str());
    audit.write({{"event", "setid_removed"}, {"path", f.path}, {"mode_before", f.before}, {"mode_after", f.after},
                 {"removed", f.removed}});
  }
  for (const auto& e : sw.errors) {
    sayf(io, "set-id check incomplete: %s", e.c_str());
    audit.write({{"event", "setid_check_failed"}, {"what", e}});
  }
  return sw.found.size() + sw.errors.size();
}

// One supervise() call: the sandbox's state and the steps that set it up,
// run it and end it, each a function with one job (supervise() lists them in
// order). Nothing here is process-wide: several threads may supervise at once.
class Supervision {
 public:
  Supervision(layer::Layer& layer, const plan::Plan& plan_in, SupervisorIo& io, const SuperviseOptions& opt)
      : layer_(layer), plan_in_(plan_in), io_(io), opt_(opt), steps_(opt.timer ? *opt.timer : untimed_) {}

  // Before the launch: nothing of the sandbox runs yet.
  Result<void> prepare_secrets();
  Result<void> check_layer();
  Result<void> say_cautions();
  Result<void> relay_stdio();
  Result<void> open_audit();
  Result<void> prepare_workspace();
  Result<void> plan_meanwhile();
  Result<void> make_timer();
  // The launch: a failure here or after kills and reaps what started.
  Result<void> launch();
  Result<void> start_agent();
  // The sandbox runs: every way out from here goes through the same end.
  void watch_refusals();
  void prepare_proxy();
  void narrate();
  void arm_timer();
  void begin_relay();
  void relay_until_exit();
  void drain_output();
  void stop_proxy();
  void end_sandbox();
  void bring_workspace_home();
  const std::optional<Error>& late_error() const { return late_error_; }
  void judge_planted();
  void sweep_setid();
  void summarize_refusals();
  int exit_status();

 private:
  // The layer directories of an overlay workspace that is not kept (a launch
  // that failed leaves nothing behind).
  void drop_layer_dirs() {
    if (guard_->layer && !plan().keep_layer) (void)remove_layer_dirs(guard_->layer->dir);
    drop_credential_trees(*guard_);
  }
  // A sandbox that started but cannot be supervised: killed, reaped, gone.
  void abandon() {
    sys::pidfd_send_signal(sb().pidfd.get(), SIGKILL);
    ::waitpid(sb().pid, nullptr, 0);
    sb().cgroup.kill_all();
    layer_.after_run(plan());
    drop_layer_dirs();
  }
  void start_proxy();
  const plan::Plan& plan() const { return secrets_ ? secrets_->plan : plan_in_; }
  layer::Sandbox& sb() { return *launched_; }

  layer::Layer& layer_;
  const plan::Plan& plan_in_;
  SupervisorIo& io_;
  const SuperviseOptions& opt_;
  StepTimer untimed_;  // off: marks cost one branch
  StepTimer& steps_;
  std::optional<PreparedSecrets> secrets_;
  layer::LaunchOptions lo_;
  Terminal term_;
  bool pty_ = false;
  int host_tty_ = -1;
  StdioRelay stdio_;
  int sigfd_ = -1;  // the front end's; blocked before launch (the sandbox inherits the mask)
  AuditLog audit_;
  std::optional<WorkspaceGuard> guard_;
  std::optional<egress::Rules> rules_;
  egress::ProxyConfig proxy_settings_;  // request rules, the user's proxies, srt's switches
  bool meanwhile_ran_ = false;
  UniqueFd timer_;
  std::optional<layer::Sandbox> launched_;
  std::optional<SocketAddressGate> socket_gate_;
  std::optional<SyscallViolations> refusals_;
  bool watch_refusals_ = false;
  ProxyRunner proxy_;
  bool proxy_idle_ = false;  // listeners kept here, polled, until the first use
  std::optional<Error> late_error_;
  int master_ = -1;
  int out_fd_ = -1;
  bool relay_in_ = false;
  bool timed_out_ = false;
  int status_ = 0;
  bool oom_ = false;
  Finish fin_;
  size_t setid_ = 0;
  char buf_[65536];
};

Result<void> Supervision::prepare_secrets() {
  if (plan_in_.terminates_tls()) {  // secrets, or request rules to judge inside TLS
    auto p = sandbox::prepare_secrets(plan_in_);
    if (!p) return fail(p.error());
    secrets_.emplace(std::move(*p));
  }
  return {};
}

Result<void> Supervision::check_layer() {
  // Its pid 1 would wait for commands nobody sends.
  if (layer_.command_through_agent() && !opt_.agent)
    return fail(Error::msg("layer " + std::string(layer::name(layer_.kind())),
                           "runs the command through its agent: the front end must drive it (SuperviseOptions::agent)"));
  if (plan().host_unix_sockets_allowed && !layer_.carries_host_unix_sockets())
    return fail(Error::msg("layer " + std::string(layer::name(layer_.kind())) +
                               ": network.allowUnixSockets / allowAllUnixSockets",
                           "this layer cannot carry a host's Unix socket into the sandbox: use the process or "
                           "container layer for this policy"));
  return {};
}

Result<void> Supervision::say_cautions() {
  for (const auto& c : layer_.cautions(plan())) io_.say(c);
  return {};
}

// The terminal (a pty in the sandbox when the caller has one) and the
// caller's other files.
Result<void> Supervision::relay_stdio() {
  lo_.verbose = opt_.verbose;
  lo_.agent = opt_.agent != nullptr;
  // With the agent, terminals are its own (one per process that asks): the host's stays out.
  term_ = lo_.agent ? Terminal{} : io_.terminal();
  for (int k = 0; k < 3; ++k) lo_.tty_fds[k] = term_.sandbox_fds[k];
  pty_ = lo_.tty_fds[0] || lo_.tty_fds[1] || lo_.tty_fds[2];
  host_tty_ = term_.size_from;
  // The caller's files reach the command as pipes of ours (stdio_relay.hpp:
  // a descriptor handed in must not be opened again with more rights). Not
  // for an agent's sandbox (its processes get pipes from the agent, and the
  // microVM guest's command gets bytes over the channel).
  if (!opt_.agent) {
    auto r = StdioRelay::make(lo_.tty_fds);
    if (!r) return fail(r.error());
    stdio_ = std::move(*r);
    for (int k = 0; k < 3; ++k) lo_.stdio_fds[k] = stdio_.sandbox_fd(k);
    lo_.supervisor_fds = stdio_.own_fds();
  }
  sigfd_ = opt_.signal_fd;
  return {};
}

// The audit log, and what it says before the sandbox starts.
Result<void> Supervision::open_audit() {
  if (!opt_.audit_log.empty()) {
    auto a = AuditLog::open(opt_.audit_log, plan().sandbox_id, opt_.audit_tags);
    if (!a) return fail(a.error());
    audit_ = std::move(*a);
  }
  if (opt_.audit_hold) {
    if (!audit_.enabled() || !opt_.agent) return fail(Error::msg("audit hold", "needs an audit log and an agent front end"));
    audit_.hold();
    opt_.agent->set_audit_tagger([this](const nlohmann::json& tags) { return audit_.add_tags(tags); });
  }
  if (!opt_.layer_choice.is_null()) audit_.write(opt_.layer_choice);
  for (const auto& w : plan().weakened) audit_.write({{"event", "weakened"}, {"what", w}});
  if (secrets_ && !secrets_->config->secrets.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& s : secrets_->config->secrets) list.push_back({{"name", s.name}, {"hosts", s.hosts}});
    audit_.write({{"event", "secrets"}, {"secrets", list}, {"trust_bundle", plan().trust_bundle_path}});
  }
  return {};
}

Result<void> Supervision::prepare_workspace() {
  auto guard = sandbox::prepare_workspace(plan());
  if (!guard) return fail(guard.error());
  guard_.emplace(std::move(*guard));
  return {};
}

// The rest of the supervisor's setup is done while the sandbox sets itself
// up (LaunchOptions::meanwhile), before anything of it starts: the egress
// rules (a bad rule stops the run) and the snapshot of the swept trees.
Result<void> Supervision::plan_meanwhile() {
  lo_.meanwhile = [this]() -> Result<void> {
    if (meanwhile_ran_) return {};  // once (the microVM layer's retry of a start that failed)
    meanwhile_ran_ = true;
    if (plan().proxy.enabled) {
      auto c = egress::config_from_policy(plan().network);
      if (!c) return fail(c.error());
      rules_.emplace(std::move(c->rules));
      proxy_settings_ = std::move(c->proxy);
      // The host's own addresses, followed from here to the proxy's end, in
      // this (the host's) network namespace; no netlink socket: no run.
      auto watch = egress::HostAddressWatch::open();
      if (!watch) return fail(watch.error());
      proxy_settings_.host_addresses = std::move(*watch);
    }
    steps_.mark("supervisor setup");
    if (auto r = snapshot_trees(plan(), *guard_); !r) return r;
    steps_.mark("workspace snapshot");
    return {};
  };
  return {};
}

// The timeout's timer exists before anything runs, so that failing to make
// it needs no unwinding of a running sandbox.
Result<void> Supervision::make_timer() {
  if (plan().timeout) {
    timer_.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
    if (!timer_) {
      drop_layer_dirs();
      return fail(Error::sys("timerfd (the --timeout timer)"));
    }
  }
  return {};
}

Result<void> Supervision::launch() {
  if (secrets_) lo_.trust_anchor = [this] { return secrets_->make_ca(); };
  lo_.timer = opt_.timer;
  lo_.say = [this](const std::string& line) { io_.say(line); };
  lo_.early_refusals = [](UniqueFd listener, UniqueFd sock_diag) -> std::unique_ptr<layer::EarlyRefusals> {
    return std::make_unique<EarlyAnswerer>(std::move(listener), std::move(sock_diag));
  };
  auto launched = layer_.launch(plan(), lo_);
  if (!launched) {
    drop_layer_dirs();
    return fail(launched.error());
  }
  launched_.emplace(std::move(*launched));
  stdio_.sandbox_started();  // (its ends are the sandbox's now: EOF reaches the command when ours closes)
  if (!meanwhile_ran_) {  // a layer that skipped it: no snapshot, no rules (fail closed)
    abandon();
    return fail(Error::msg("layer " + std::string(layer::name(layer_.kind())), "started without the supervisor's setup"));
  }
  return {};
}

Result<void> Supervision::start_agent() {
  if (opt_.agent) {
    if (auto r = opt_.agent->start(std::move(sb().agent_channel), plan().sandbox_id); !r) {
      abandon();
      return fail(r.error());
    }
  }
  return {};
}

void Supervision::watch_refusals() {
  // connect() and sendto() with an address, judged (a host socket bound after the start stays out of reach).
  socket_gate_.emplace(std::move(sb().sock_diag),
                       SocketAddressGate::Allowed{plan().unix_sockets_all_allowed, plan().unix_sockets_allowed,
                                                  sb().host_network, sb().loopback_ports},
                       &audit_);
  refusals_.emplace(std::move(sb().seccomp_listener), &audit_, &*socket_gate_);
  watch_refusals_ = refusals_->fd() >= 0;
}

// The egress proxy accepts on the sockets the sandbox made in its own netns.
// Its thread starts when the sandbox first uses one of them (a connection
// waits in the listener's backlog, a datagram in the socket, until then): a
// command that never reaches for the network costs no thread, no event
// loop. A session starts it at once (set_network needs it).
void Supervision::prepare_proxy() {
  if (rules_ && sb().http_listener && sb().socks_listener) {
    if (opt_.agent) {
      start_proxy();
      opt_.agent->set_network_changer([this](const agent::NetworkChange& c) {
        return change_egress(plan(), secrets_ ? secrets_->config.get() : nullptr, *proxy_.proxy, c);
      });
    } else {
      proxy_idle_ = true;
    }
  }
}

void Supervision::start_proxy() {
  egress::ProxyConfig pc = proxy_settings_;
  if (secrets_) pc.secrets = secrets_->config;
  // Listeners on the host's loopback (the landlock layer): only the sandbox holds the token.
  if (!sb().proxy_token.empty()) pc.token = sb().proxy_token;
  pc.transparent = plan().proxy.transparent;
  pc.pinned_names = plan().proxy.pinned_names;
  layer::Sandbox& s = sb();
  proxy_.start(*rules_, &audit_, s.http_listener.release(), s.socks_listener.release(),
               s.dns_socket ? s.dns_socket.release() : -1,
               s.transparent_listener ? s.transparent_listener.release() : -1, s.relayed_egress, std::move(pc));
  proxy_idle_ = false;
  steps_.mark("proxy start");
}

// -v: what the layer enforces on this host, so a weaker one is visible on every verbose run.
void Supervision::narrate() {
  if (!opt_.verbose) return;
  auto walls = layer_.enforces(plan());
  sayf(io_, "landlock: %s", walls.landlock_text.c_str());
  sayf(io_, "seccomp: %s", walls.seccomp_text.c_str());
  if (secrets_ && !secrets_->config->secrets.empty()) {
    std::set<std::string> hosts;
    for (const auto& s : secrets_->config->secrets) {
      std::string hs;
      for (const auto& h : s.hosts) {
        hs += (hs.empty() ? "" : ", ") + h;
        hosts.insert(h);
      }
      sayf(io_, "secrets: %s -> %s (placeholder only inside)", s.name.c_str(), hs.c_str());
    }
    sayf(io_, "secrets: TLS interception for %zu host pattern(s), CA made in memory, trusted inside "
              "via %s",
         hosts.size(), plan().trust_bundle_path.c_str());
  }
  sayf(io_, "%s", stdio_.describe().c_str());
  if (!sb().cgroup.active()) sayf(io_, "limits: no cgroup for this sandbox");
  for (const auto& n : sb().cgroup.notes()) sayf(io_, "limits: %s", n.c_str());
  steps_.mark("narration");
}

// A sandbox that cannot be bounded in time does not run on: it is killed,
// and the run ends through the same cleanup as any other (workspace sweep,
// cgroups, signal mask), then reports the error.
void Supervision::arm_timer() {
  if (!timer_) return;
  itimerspec its{};
  its.it_value.tv_sec = plan().timeout->count() / 1000;
  its.it_value.tv_nsec = (plan().timeout->count() % 1000) * 1000000;
  if (::timerfd_settime(timer_.get(), 0, &its, nullptr) != 0) {
    late_error_ = Error::sys("timerfd_settime (the --timeout timer)");
    sys::pidfd_send_signal(sb().pidfd.get(), SIGKILL);
    timer_.reset();
  }
}

void Supervision::begin_relay() {
  master_ = sb().pty_master.get();
  if (pty_ && master_ >= 0) {
    if (term_.settings) ::tcsetattr(master_, TCSANOW, &*term_.settings);  // start with the host's settings
    if (host_tty_ >= 0) copy_winsize(host_tty_, master_);
    io_.relay_begin();
    ::fcntl(master_, F_SETFL, ::fcntl(master_, F_GETFL) | O_NONBLOCK);
  }
  out_fd_ = term_.output;
  relay_in_ = pty_ && term_.input >= 0;
}

// One poll loop until the sandbox's pid 1 has ended: its output, the
// caller's input, signals, the timeout, refusals, the idle proxy's first
// use, the agent's descriptors.
void Supervision::relay_until_exit() {
  layer::Sandbox& sb = this->sb();
  const int sigfd = sigfd_;
  const Terminal& term = term_;
  const int host_tty = host_tty_;
  int& master = master_;
  char* buf = buf_;
  constexpr size_t kBuf = sizeof buf_;
  bool exited = false;
  while (!exited) {
    pollfd fds[10 + 3 + 32];  // (pidfd, signals, refusals, timer, pty, input, 4 idle proxy sockets; stdio; the agent's)
    int n = 0;
    fds[n++] = {sb.pidfd.get(), POLLIN, 0};
    fds[n++] = {sigfd, POLLIN, 0};  // (negative: no signals to forward; poll skips it)
    int ti = -1, mi = -1, ii = -1, si_ = -1, pi = -1;
    if (watch_refusals_) { si_ = n; fds[n++] = {refusals_->fd(), POLLIN, 0}; }
    if (proxy_idle_) {
      pi = n;
      fds[n++] = {sb.http_listener.get(), POLLIN, 0};
      fds[n++] = {sb.socks_listener.get(), POLLIN, 0};
      fds[n++] = {sb.dns_socket ? sb.dns_socket.get() : -1, POLLIN, 0};
      fds[n++] = {sb.transparent_listener ? sb.transparent_listener.get() : -1, POLLIN, 0};
    }
    if (timer_) { ti = n; fds[n++] = {timer_.get(), POLLIN, 0}; }
    if (master >= 0) { mi = n; fds[n++] = {master, POLLIN, 0}; }
    if (relay_in_) { ii = n; fds[n++] = {term.input, POLLIN, 0}; }
    int ri = n;
    n += static_cast<int>(stdio_.poll_fds(fds + n, 3));
    int ai = n;
    if (opt_.agent) n += static_cast<int>(opt_.agent->poll_fds(fds + n, 32));
    if (::poll(fds, static_cast<nfds_t>(n), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pi >= 0 && (fds[pi].revents | fds[pi + 1].revents | fds[pi + 2].revents | fds[pi + 3].revents)) start_proxy();
    if (si_ >= 0) {
      if (fds[si_].revents & POLLIN) refusals_->on_readable();
      else if (fds[si_].revents & (POLLHUP | POLLERR | POLLNVAL)) watch_refusals_ = false;  // no process uses the filter
    }
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo si;
      while (::read(sigfd, &si, sizeof si) == sizeof si) {
        int s = static_cast<int>(si.ssi_signo);
        if (s == SIGWINCH) {
          if (master >= 0 && host_tty >= 0) copy_winsize(host_tty, master);
          if (opt_.agent) opt_.agent->on_terminal_resized();
        } else if (s != SIGCHLD && s != SIGPIPE) {
          if (!opt_.agent || !opt_.agent->forward_signal(s)) sys::pidfd_send_signal(sb.pidfd.get(), s);
        }
      }
    }
    if (ti >= 0 && (fds[ti].revents & POLLIN)) {
      timed_out_ = true;
      sys::pidfd_send_signal(sb.pidfd.get(), SIGKILL);
      uint64_t x;
      (void)::read(timer_.get(), &x, sizeof x);
      timer_.reset();
    }
    if (mi >= 0 && (fds[mi].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t r = ::read(master, buf, kBuf);
      if (r > 0) write_all(out_fd_, buf, static_cast<size_t>(r));
      else if (r == 0 || (errno != EAGAIN && errno != EINTR)) master = -1;
    }
    if (ii >= 0 && (fds[ii].revents & (POLLIN | POLLHUP))) {
      ssize_t r = ::read(term.input, buf, kBuf);
      if (r > 0) write_all(master, buf, static_cast<size_t>(r));
      else relay_in_ = false;
    }
    if (ai > ri) stdio_.on_ready(fds + ri, static_cast<size_t>(ai - ri));
    if (opt_.agent && n > ai) opt_.agent->on_ready(fds + ai, static_cast<size_t>(n - ai));
    if (fds[0].revents & POLLIN) {
      siginfo_t si{};
      if (::waitid(P_PIDFD, static_cast<id_t>(sb.pidfd.get()), &si, WEXITED) == 0) {
        exited = true;
        status_ = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
      }
    }
  }
}

void Supervision::drain_output() {
  if (opt_.agent && !timed_out_) status_ = opt_.agent->final_status(status_);
  // Whatever the sandbox wrote before it ended still reaches the terminal.
  while (master_ >= 0) {
    ssize_t r = ::read(master_, buf_, sizeof buf_);
    if (r <= 0) break;
    write_all(out_fd_, buf_, static_cast<size_t>(r));
  }
  stdio_.finish();
  for (const auto& e : stdio_.take_errors()) io_.say(e);
  // The sandbox has ended: the marks its init and command made after "ready"
  // (a handover that ended with init's listener: process/handshake.hpp "A").
  steps_.take_child_marks();
  // The process layer: the command itself; the container layers: the runtime's own time too.
  steps_.mark(layer_.kind() == layer::Kind::Process ? "command" : "runtime+command");
  io_.relay_end();
}

void Supervision::stop_proxy() {
  proxy_.stop();
  steps_.mark("proxy stop");
  if (opt_.verbose && proxy_.proxy) sayf(io_, "%s", proxy_.proxy->stats().summary().c_str());
  else if (opt_.verbose && proxy_idle_) sayf(io_, "%s", egress::ProxyStats{}.summary().c_str());  // never used
}

// What the limits did, read before the cgroup goes away; then nothing of the
// sandbox is left.
void Supervision::end_sandbox() {
  // The guest's own limit (microvm): the agent reported it over the channel.
  if (uint64_t inside = opt_.agent ? opt_.agent->inside_pids_refused() : 0; inside > 0)
    sayf(io_, "pids limit %u reached in the guest: %llu forks refused", plan().limits.pids.value_or(0),
         static_cast<unsigned long long>(inside));
  if (sb().cgroup.active()) {
    auto out = sb().cgroup.outcome();
    if (out.pids_max_hits > 0)
      sayf(io_, "pids limit %u reached: %llu forks refused", plan().limits.pids.value_or(0),
           static_cast<unsigned long long>(out.pids_max_hits));
    if (out.oom_kills > 0 && plan().limits.memory_bytes) {
      oom_ = true;
      sayf(io_, "killed: memory limit %s", plan::format_bytes(*plan().limits.memory_bytes).c_str());
    }
    sb().cgroup.end();  // removed here when empty: no read of its cgroup.procs
  }
  layer_.after_run(plan());
  steps_.mark("cgroup kill");
}

// Everything of the sandbox is gone now: bring the workspace changes home.
void Supervision::bring_workspace_home() {
  fin_ = finish_workspace(plan(), *guard_, audit_, io_);
  steps_.mark("sweep");
}

// Fail closed: what could not be moved or checked fails the run even with
// --allow-planted (which accepts quarantined files only).
void Supervision::judge_planted() {
  bool bad = fin_.not_moved || fin_.unchecked;
  if ((bad || (fin_.quarantined && !plan().allow_planted)) && !timed_out_ && status_ == 0) {
    std::string what;
    auto part = [&](size_t n, const char* s) {
      if (!n) return;
      what += (what.empty() ? "" : ", ") + std::to_string(n) + s;
    };
    part(fin_.quarantined, " planted file(s) quarantined");
    part(fin_.not_moved, " planted file(s) NOT quarantined (still in place)");
    part(fin_.unchecked, " path(s) not checked");
    sayf(io_, "%s; exit status 123%s", what.c_str(), bad ? "" : " (--allow-planted accepts them)");
    status_ = 123;
  }
}

void Supervision::sweep_setid() {
  setid_ = finish_setid(plan(), *guard_, audit_, io_);
  steps_.mark("set-id sweep");
  if (setid_ && !timed_out_ && status_ == 0) {
    sayf(io_, "%zu set-id file(s) or unchecked entries; exit status 123", setid_);
    status_ = 123;
  }
}

void Supervision::summarize_refusals() {
  if (!opt_.refusal_summary) return;
  RunRefusals r;
  if (proxy_.proxy) {
    const auto& st = proxy_.proxy->stats();
    r.egress = st.refused;
    r.hosts = st.refused_hosts;
    r.host_rules = st.refused_rules;
  }
  r.syscalls = refusals_->by_syscall();
  r.planted = fin_.quarantined_paths;
  r.setid = setid_;
  r.unix_sockets = socket_gate_->refused_paths();
  for (const auto& line : refusal_summary(r)) io_.say(line);
}

int Supervision::exit_status() {
  if (oom_ && !timed_out_ && status_ == 128 + SIGKILL) return status_;
  if (timed_out_) {
    if (opt_.verbose) sayf(io_, "%s", refusals_->summary().c_str());
    sayf(io_, "killed: timeout %s", format_duration(*plan().timeout).c_str());
    return 124;
  }
  if (opt_.verbose) {
    sayf(io_, "%s", refusals_->summary().c_str());
    sayf(io_, "sandbox %s exited with status %d", plan().sandbox_id.c_str(), status_);
  }
  return status_;
}

}  // namespace

std::string format_duration(std::chrono::milliseconds d) {
  auto ms = d.count();
  char b[64];
  if (ms % 1000 != 0) std::snprintf(b, sizeof b, "%lldms", static_cast<long long>(ms));
  else if (ms % 60000 == 0 && ms >= 60000) std::snprintf(b, sizeof b, "%lldm", static_cast<long long>(ms / 60000));
  else std::snprintf(b, sizeof b, "%llds", static_cast<long long>(ms / 1000));
  return b;
}

sigset_t supervised_signals() {
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : kForwarded) sigaddset(&mask, s);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGWINCH);
  sigaddset(&mask, SIGPIPE);
  return mask;
}

Result<int> supervise(layer::Layer& layer, const plan::Plan& plan_in, SupervisorIo& io, const SuperviseOptions& opt) {
  Supervision s(layer, plan_in, io, opt);
  using Step = Result<void> (Supervision::*)();
  // Up to a running sandbox, in this order; the first that fails ends the
  // run with its error, and leaves nothing running behind.
  static constexpr Step kSetup[] = {
      &Supervision::prepare_secrets,    // the CA's material, the Plan with placeholders
      &Supervision::check_layer,        // what the layer cannot do for this Plan
      &Supervision::say_cautions,
      &Supervision::relay_stdio,        // the pty, the caller's files as pipes
      &Supervision::open_audit,
      &Supervision::prepare_workspace,  // the overlay's layer directories, the quarantine
      &Supervision::plan_meanwhile,     // egress rules and the workspace snapshot, during the launch
      &Supervision::make_timer,         // --timeout
      &Supervision::launch,
      &Supervision::start_agent,        // a session's channel
  };
  for (Step step : kSetup)
    if (auto r = (s.*step)(); !r) return fail(r.error());
  // The sandbox runs; every way out from here goes through the same end.
  s.watch_refusals();
  s.prepare_proxy();
  s.narrate();
  s.arm_timer();
  s.begin_relay();
  s.relay_until_exit();
  s.drain_output();
  s.stop_proxy();
  s.end_sandbox();
  s.bring_workspace_home();
  if (const auto& e = s.late_error()) return fail(*e);
  s.judge_planted();
  s.sweep_setid();
  s.summarize_refusals();
  return s.exit_status();
}

}  // namespace exg::sandbox
