#include "sandbox/supervisor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
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
#include "process/syscalls.hpp"
#include "util/unique_fd.hpp"

namespace exg::sandbox {

namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT, SIGALRM};

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
struct WorkspaceGuard {
  std::vector<SweptTree> trees;
  std::optional<LayerDirs> layer;
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

// What the sandbox's mounts need (the overlay's layer directories) and the
// quarantine; the snapshot of the swept trees comes later (snapshot_trees).
Result<WorkspaceGuard> prepare_workspace(const plan::Plan& plan) {
  WorkspaceGuard g;
  if (plan.quarantine_fresh)  // a directory no one else made (compile(): under /var/tmp)
    if (::mkdir(plan.quarantine_dir.c_str(), 0700) != 0) return fail(Error::sys("quarantine " + plan.quarantine_dir));
  if (plan.workspace_mode == plan::WorkspaceMode::Live) return g;
  auto l = make_layer_dirs(plan.layer_dir, plan.workspace);
  if (!l) return fail(l.error());
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
    SweepOptions so{plan.protect_extra, plan.allow_git_config, t.quarantine_dir, false};
    auto r = sweep(t.root, t.snapshot, so);
    if (!r) {
      report(t.root, {{".", "sweep failed: " + r.error().str(), {}, true}}, true);
      continue;
    }
    report(t.root, *r, true);
  }
  if (g.layer && plan.keep_layer) {
    // Kept for review: nothing reaches the workspace until `exguardian apply`.
    sayf(io, "workspace changes kept in %s: review with `exguardian diff %s`, apply with "
                 "`exguardian apply %s`", g.layer->dir.c_str(), g.layer->dir.c_str(), g.layer->dir.c_str());
  } else if (g.layer) {
    bool discard = plan.workspace_mode == plan::WorkspaceMode::Discard;
    ApplyOptions ao{plan.protect_extra, plan.allow_git_config, quarantine_for(plan, plan.workspace), discard,
                    plan.protect_pointers};
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
  StepTimer untimed;  // off: marks cost one branch
  StepTimer& steps = opt.timer ? *opt.timer : untimed;
  std::optional<PreparedSecrets> secrets;
  if (plan_in.terminates_tls()) {  // secrets, or request rules to judge inside TLS
    auto p = prepare_secrets(plan_in);
    if (!p) return fail(p.error());
    secrets.emplace(std::move(*p));
  }
  const plan::Plan& plan = secrets ? secrets->plan : plan_in;
  // Its pid 1 would wait for commands nobody sends.
  if (layer.command_through_agent() && !opt.agent)
    return fail(Error::msg("layer " + std::string(layer::name(layer.kind())),
                           "runs the command through its agent: the front end must drive it (SuperviseOptions::agent)"));
  if (plan.host_unix_sockets_allowed && !layer.carries_host_unix_sockets())
    return fail(Error::msg("layer " + std::string(layer::name(layer.kind())) +
                               ": network.allowUnixSockets / allowAllUnixSockets",
                           "this layer cannot carry a host's Unix socket into the sandbox: use the process or "
                           "container layer for this policy"));
  for (const auto& c : layer.cautions(plan)) io.say(c);
  layer::LaunchOptions lo;
  lo.verbose = opt.verbose;
  lo.agent = opt.agent != nullptr;
  // With the agent, terminals are its own (one per process that asks): the host's stays out.
  const Terminal term = lo.agent ? Terminal{} : io.terminal();
  for (int k = 0; k < 3; ++k) lo.tty_fds[k] = term.sandbox_fds[k];
  bool pty = lo.tty_fds[0] || lo.tty_fds[1] || lo.tty_fds[2];
  const int host_tty = term.size_from;
  // The caller's files reach the command as pipes of ours (stdio_relay.hpp:
  // a descriptor handed in must not be opened again with more rights). Not
  // for an agent's sandbox (its processes get pipes from the agent, and the
  // microVM guest's command gets bytes over the channel).
  StdioRelay stdio;
  if (!opt.agent) {
    auto r = StdioRelay::make(lo.tty_fds);
    if (!r) return fail(r.error());
    stdio = std::move(*r);
    for (int k = 0; k < 3; ++k) lo.stdio_fds[k] = stdio.sandbox_fd(k);
    lo.supervisor_fds = stdio.own_fds();
  }
  const int sigfd = opt.signal_fd;  // the front end's; blocked before launch (the sandbox inherits the mask)

  AuditLog audit;
  if (!opt.audit_log.empty()) {
    auto a = AuditLog::open(opt.audit_log, plan.sandbox_id, opt.audit_tags);
    if (!a) return fail(a.error());
    audit = std::move(*a);
  }
  if (opt.audit_hold) {
    if (!audit.enabled() || !opt.agent) return fail(Error::msg("audit hold", "needs an audit log and an agent front end"));
    audit.hold();
    opt.agent->set_audit_tagger([&audit](const nlohmann::json& tags) { return audit.add_tags(tags); });
  }
  if (!opt.layer_choice.is_null()) audit.write(opt.layer_choice);
  for (const auto& w : plan.weakened) audit.write({{"event", "weakened"}, {"what", w}});
  if (secrets && !secrets->config->secrets.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& s : secrets->config->secrets) list.push_back({{"name", s.name}, {"hosts", s.hosts}});
    audit.write({{"event", "secrets"}, {"secrets", list}, {"trust_bundle", plan.trust_bundle_path}});
  }

  auto guard = prepare_workspace(plan);
  if (!guard) return fail(guard.error());
  // The rest of the supervisor's setup is done while the sandbox sets itself
  // up (LaunchOptions::meanwhile), before anything of it starts: the egress
  // rules (a bad rule stops the run) and the snapshot of the swept trees.
  std::optional<egress::Rules> rules;
  egress::ProxyConfig proxy_settings;  // request rules, the user's proxies, srt's switches
  bool meanwhile_ran = false;
  lo.meanwhile = [&]() -> Result<void> {
    if (meanwhile_ran) return {};  // once (the microVM layer's retry of a start that failed)
    meanwhile_ran = true;
    if (plan.proxy.enabled) {
      auto c = egress::config_from_policy(plan.network);
      if (!c) return fail(c.error());
      rules.emplace(std::move(c->rules));
      proxy_settings = std::move(c->proxy);
      // The host's own addresses, followed from here to the proxy's end, in
      // this (the host's) network namespace; no netlink socket: no run.
      auto watch = egress::HostAddressWatch::open();
      if (!watch) return fail(watch.error());
      proxy_settings.host_addresses = std::move(*watch);
    }
    steps.mark("supervisor setup");
    if (auto r = snapshot_trees(plan, *guard); !r) return r;
    steps.mark("workspace snapshot");
    return {};
  };
  // The timeout's timer exists before anything runs, so that failing to make
  // it needs no unwinding of a running sandbox.
  UniqueFd timer;
  if (plan.timeout) {
    timer.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
    if (!timer) {
      if (guard->layer && !plan.keep_layer) (void)remove_layer_dirs(guard->layer->dir);
      return fail(Error::sys("timerfd (the --timeout timer)"));
    }
  }
  if (secrets) lo.trust_anchor = [&secrets] { return secrets->make_ca(); };
  lo.timer = opt.timer;
  lo.say = [&io](const std::string& line) { io.say(line); };
  auto launched = layer.launch(plan, lo);
  if (!launched) {
    if (guard->layer && !plan.keep_layer) (void)remove_layer_dirs(guard->layer->dir);
    return fail(launched.error());
  }
  layer::Sandbox& sb = *launched;
  stdio.sandbox_started();  // (its ends are the sandbox's now: EOF reaches the command when ours closes)
  if (!meanwhile_ran) {  // a layer that skipped it: no snapshot, no rules (fail closed)
    sys::pidfd_send_signal(sb.pidfd.get(), SIGKILL);
    ::waitpid(sb.pid, nullptr, 0);
    sb.cgroup.kill_all();
    layer.after_run(plan);
    if (guard->layer && !plan.keep_layer) (void)remove_layer_dirs(guard->layer->dir);
    return fail(Error::msg("layer " + std::string(layer::name(layer.kind())), "started without the supervisor's setup"));
  }
  if (opt.agent) {
    if (auto r = opt.agent->start(std::move(sb.agent_channel), plan.sandbox_id); !r) {
      sys::pidfd_send_signal(sb.pidfd.get(), SIGKILL);
      ::waitpid(sb.pid, nullptr, 0);
      sb.cgroup.kill_all();
      layer.after_run(plan);
      if (guard->layer && !plan.keep_layer) (void)remove_layer_dirs(guard->layer->dir);
      return fail(r.error());
    }
  }
  // connect() and sendto() with an address, judged (a host socket bound after the start stays out of reach).
  SocketAddressGate socket_gate(std::move(sb.sock_diag), {plan.unix_sockets_all_allowed, plan.unix_sockets_allowed}, &audit);
  SyscallViolations refusals(std::move(sb.seccomp_listener), &audit, &socket_gate);
  bool watch_refusals = refusals.fd() >= 0;

  // The egress proxy accepts on the sockets the sandbox made in its own netns.
  // Its thread starts when the sandbox first uses one of them (a connection
  // waits in the listener's backlog, a datagram in the socket, until then): a
  // command that never reaches for the network costs no thread, no event
  // loop. A session starts it at once (set_network needs it).
  ProxyRunner proxy;
  bool proxy_idle = false;  // listeners kept here, polled, until the first use
  auto start_proxy = [&] {
    egress::ProxyConfig pc = proxy_settings;
    if (secrets) pc.secrets = secrets->config;
    pc.transparent = plan.proxy.transparent;
    pc.pinned_names = plan.proxy.pinned_names;
    proxy.start(*rules, &audit, sb.http_listener.release(), sb.socks_listener.release(),
                sb.dns_socket ? sb.dns_socket.release() : -1,
                sb.transparent_listener ? sb.transparent_listener.release() : -1, sb.relayed_egress, std::move(pc));
    proxy_idle = false;
    steps.mark("proxy start");
  };
  if (rules && sb.http_listener && sb.socks_listener) {
    if (opt.agent) {
      start_proxy();
      opt.agent->set_network_changer([&](const agent::NetworkChange& c) {
        return change_egress(plan, secrets ? secrets->config.get() : nullptr, *proxy.proxy, c);
      });
    } else {
      proxy_idle = true;
    }
  }
  if (opt.verbose) {
    // What the layer enforces on this host, so a weaker one is visible on every verbose run.
    auto walls = layer.enforces(plan);
    sayf(io, "landlock: %s", walls.landlock_text.c_str());
    sayf(io, "seccomp: %s", walls.seccomp_text.c_str());
    if (secrets && !secrets->config->secrets.empty()) {
      std::set<std::string> hosts;
      for (const auto& s : secrets->config->secrets) {
        std::string hs;
        for (const auto& h : s.hosts) {
          hs += (hs.empty() ? "" : ", ") + h;
          hosts.insert(h);
        }
        sayf(io, "secrets: %s -> %s (placeholder only inside)", s.name.c_str(), hs.c_str());
      }
      sayf(io, "secrets: TLS interception for %zu host pattern(s), CA made in memory, trusted inside "
                   "via %s",
                   hosts.size(), plan.trust_bundle_path.c_str());
    }
    sayf(io, "%s", stdio.describe().c_str());
    if (!sb.cgroup.active()) sayf(io, "limits: no cgroup for this sandbox");
    for (const auto& n : sb.cgroup.notes()) sayf(io, "limits: %s", n.c_str());
    steps.mark("narration");
  }

  // A sandbox that cannot be bounded in time does not run on: it is killed,
  // and the run ends through the same cleanup as any other (workspace sweep,
  // cgroups, signal mask), then reports the error.
  std::optional<Error> late_error;
  if (timer) {
    itimerspec its{};
    its.it_value.tv_sec = plan.timeout->count() / 1000;
    its.it_value.tv_nsec = (plan.timeout->count() % 1000) * 1000000;
    if (::timerfd_settime(timer.get(), 0, &its, nullptr) != 0) {
      late_error = Error::sys("timerfd_settime (the --timeout timer)");
      sys::pidfd_send_signal(sb.pidfd.get(), SIGKILL);
      timer.reset();
    }
  }

  int master = sb.pty_master.get();
  if (pty && master >= 0) {
    if (term.settings) ::tcsetattr(master, TCSANOW, &*term.settings);  // start with the host's settings
    if (host_tty >= 0) copy_winsize(host_tty, master);
    io.relay_begin();
    ::fcntl(master, F_SETFL, ::fcntl(master, F_GETFL) | O_NONBLOCK);
  }
  const int out_fd = term.output;
  bool relay_in = pty && term.input >= 0;

  bool timed_out = false, exited = false;
  int status = 0;
  char buf[65536];
  while (!exited) {
    pollfd fds[10 + 3 + 32];  // (pidfd, signals, refusals, timer, pty, input, 4 idle proxy sockets; stdio; the agent's)
    int n = 0;
    fds[n++] = {sb.pidfd.get(), POLLIN, 0};
    fds[n++] = {sigfd, POLLIN, 0};  // (negative: no signals to forward; poll skips it)
    int ti = -1, mi = -1, ii = -1, si_ = -1, pi = -1;
    if (watch_refusals) { si_ = n; fds[n++] = {refusals.fd(), POLLIN, 0}; }
    if (proxy_idle) {
      pi = n;
      fds[n++] = {sb.http_listener.get(), POLLIN, 0};
      fds[n++] = {sb.socks_listener.get(), POLLIN, 0};
      fds[n++] = {sb.dns_socket ? sb.dns_socket.get() : -1, POLLIN, 0};
      fds[n++] = {sb.transparent_listener ? sb.transparent_listener.get() : -1, POLLIN, 0};
    }
    if (timer) { ti = n; fds[n++] = {timer.get(), POLLIN, 0}; }
    if (master >= 0) { mi = n; fds[n++] = {master, POLLIN, 0}; }
    if (relay_in) { ii = n; fds[n++] = {term.input, POLLIN, 0}; }
    int ri = n;
    n += static_cast<int>(stdio.poll_fds(fds + n, 3));
    int ai = n;
    if (opt.agent) n += static_cast<int>(opt.agent->poll_fds(fds + n, 32));
    if (::poll(fds, static_cast<nfds_t>(n), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pi >= 0 && (fds[pi].revents | fds[pi + 1].revents | fds[pi + 2].revents | fds[pi + 3].revents)) start_proxy();
    if (si_ >= 0) {
      if (fds[si_].revents & POLLIN) refusals.on_readable();
      else if (fds[si_].revents & (POLLHUP | POLLERR | POLLNVAL)) watch_refusals = false;  // no process uses the filter
    }
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo si;
      while (::read(sigfd, &si, sizeof si) == sizeof si) {
        int s = static_cast<int>(si.ssi_signo);
        if (s == SIGWINCH) {
          if (master >= 0 && host_tty >= 0) copy_winsize(host_tty, master);
        } else if (s != SIGCHLD && s != SIGPIPE) {
          if (!opt.agent || !opt.agent->forward_signal(s)) sys::pidfd_send_signal(sb.pidfd.get(), s);
        }
      }
    }
    if (ti >= 0 && (fds[ti].revents & POLLIN)) {
      timed_out = true;
      sys::pidfd_send_signal(sb.pidfd.get(), SIGKILL);
      uint64_t x;
      (void)::read(timer.get(), &x, sizeof x);
      timer.reset();
    }
    if (mi >= 0 && (fds[mi].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t r = ::read(master, buf, sizeof buf);
      if (r > 0) write_all(out_fd, buf, static_cast<size_t>(r));
      else if (r == 0 || (errno != EAGAIN && errno != EINTR)) master = -1;
    }
    if (ii >= 0 && (fds[ii].revents & (POLLIN | POLLHUP))) {
      ssize_t r = ::read(term.input, buf, sizeof buf);
      if (r > 0) write_all(master, buf, static_cast<size_t>(r));
      else relay_in = false;
    }
    if (ai > ri) stdio.on_ready(fds + ri, static_cast<size_t>(ai - ri));
    if (opt.agent && n > ai) opt.agent->on_ready(fds + ai, static_cast<size_t>(n - ai));
    if (fds[0].revents & POLLIN) {
      siginfo_t si{};
      if (::waitid(P_PIDFD, static_cast<id_t>(sb.pidfd.get()), &si, WEXITED) == 0) {
        exited = true;
        status = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
      }
    }
  }
  if (opt.agent && !timed_out) status = opt.agent->final_status(status);
  // Whatever the sandbox wrote before it ended still reaches the terminal.
  while (master >= 0) {
    ssize_t r = ::read(master, buf, sizeof buf);
    if (r <= 0) break;
    write_all(out_fd, buf, static_cast<size_t>(r));
  }
  stdio.finish();
  for (const auto& e : stdio.take_errors()) io.say(e);
  // The process layer: the command itself; the container layers: the runtime's own time too.
  steps.mark(layer.kind() == layer::Kind::Process ? "command" : "runtime+command");
  io.relay_end();
  proxy.stop();
  steps.mark("proxy stop");
  if (opt.verbose && proxy.proxy) sayf(io, "%s", proxy.proxy->stats().summary().c_str());
  else if (opt.verbose && proxy_idle) sayf(io, "%s", egress::ProxyStats{}.summary().c_str());  // never used
  // What the limits did, read before the cgroup goes away.
  bool oom = false;
  // The guest's own limit (microvm): the agent reported it over the channel.
  if (uint64_t inside = opt.agent ? opt.agent->inside_pids_refused() : 0; inside > 0)
    sayf(io, "pids limit %u reached in the guest: %llu forks refused", plan.limits.pids.value_or(0),
         static_cast<unsigned long long>(inside));
  if (sb.cgroup.active()) {
    auto out = sb.cgroup.outcome();
    if (out.pids_max_hits > 0)
      sayf(io, "pids limit %u reached: %llu forks refused", plan.limits.pids.value_or(0),
                   static_cast<unsigned long long>(out.pids_max_hits));
    if (out.oom_kills > 0 && plan.limits.memory_bytes) {
      oom = true;
      sayf(io, "killed: memory limit %s",
                   plan::format_bytes(*plan.limits.memory_bytes).c_str());
    }
    sb.cgroup.kill_all();
  }
  layer.after_run(plan);
  steps.mark("cgroup kill");
  // Everything of the sandbox is gone now: bring the workspace changes home.
  Finish fin = finish_workspace(plan, *guard, audit, io);
  steps.mark("sweep");
  if (late_error) return fail(*late_error);
  // Fail closed: what could not be moved or checked fails the run even with
  // --allow-planted (which accepts quarantined files only).
  bool bad = fin.not_moved || fin.unchecked;
  if ((bad || (fin.quarantined && !plan.allow_planted)) && !timed_out && status == 0) {
    std::string what;
    auto part = [&](size_t n, const char* s) {
      if (!n) return;
      what += (what.empty() ? "" : ", ") + std::to_string(n) + s;
    };
    part(fin.quarantined, " planted file(s) quarantined");
    part(fin.not_moved, " planted file(s) NOT quarantined (still in place)");
    part(fin.unchecked, " path(s) not checked");
    sayf(io, "%s; exit status 123%s", what.c_str(),
                 bad ? "" : " (--allow-planted accepts them)");
    status = 123;
  }
  size_t setid = finish_setid(plan, *guard, audit, io);
  steps.mark("set-id sweep");
  if (setid && !timed_out && status == 0) {
    sayf(io, "%zu set-id file(s) or unchecked entries; exit status 123", setid);
    status = 123;
  }
  if (opt.refusal_summary) {
    RunRefusals r;
    if (proxy.proxy) {
      const auto& st = proxy.proxy->stats();
      r.egress = st.refused;
      r.hosts = st.refused_hosts;
      r.host_rules = st.refused_rules;
    }
    r.syscalls = refusals.by_syscall();
    r.planted = fin.quarantined_paths;
    r.setid = setid;
    r.unix_sockets = socket_gate.refused_paths();
    for (const auto& line : refusal_summary(r)) io.say(line);
  }
  if (oom && !timed_out && status == 128 + SIGKILL) return status;
  if (timed_out) {
    if (opt.verbose) sayf(io, "%s", refusals.summary().c_str());
    sayf(io, "killed: timeout %s", format_duration(*plan.timeout).c_str());
    return 124;
  }
  if (opt.verbose) {
    sayf(io, "%s", refusals.summary().c_str());
    sayf(io, "sandbox %s exited with status %d", plan.sandbox_id.c_str(), status);
  }
  return status;
}

}  // namespace exg::sandbox
