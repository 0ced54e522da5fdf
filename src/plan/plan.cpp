#include "plan/plan.hpp"

#include <pwd.h>
#include <unistd.h>

#include <climits>
#include <sstream>

extern char** environ;

namespace exg::plan {

const char* to_string(WorkspaceMode m) {
  switch (m) {
    case WorkspaceMode::Live: return "live";
    case WorkspaceMode::Overlay: return "overlay";
    case WorkspaceMode::Discard: return "discard";
  }
  return "?";
}

const char* to_string(StepKind k) {
  switch (k) {
    case StepKind::BindRo: return "bind-ro";
    case StepKind::BindRw: return "bind-rw";
    case StepKind::Overlay: return "overlay";
    case StepKind::Tmpfs: return "tmpfs";
    case StepKind::MaskDir: return "mask-dir";
    case StepKind::MaskFile: return "mask-file";
    case StepKind::ResolvConf: return "resolv-conf";
    case StepKind::ProtectRo: return "protect-ro";
    case StepKind::Pin: return "pin";
    case StepKind::Proc: return "proc";
    case StepKind::Sysfs: return "sysfs";
    case StepKind::Devpts: return "devpts";
    case StepKind::DevNode: return "dev-node";
    case StepKind::Symlink: return "symlink";
    case StepKind::ReadOnly: return "read-only";
    case StepKind::File: return "file";
  }
  return "?";
}

std::string Plan::to_text(const std::vector<std::string>& layer_lines) const {
  std::ostringstream o;
  o << "sandbox " << sandbox_id << "\n";
  for (const auto& l : layer_lines) o << l << "\n";
  o << "namespaces:";
  for (const auto& n : namespaces) o << " " << n;
  o << "\nhostname: " << hostname << "\n";
  o << "identity: uid " << identity.inside_uid << " gid " << identity.inside_gid << " inside = host uid "
    << identity.host_uid << " gid " << identity.host_gid << " (" << identity.why << ")\n";
  o << "workspace: " << workspace << " (" << to_string(workspace_mode) << ": "
    << (workspace_mode == WorkspaceMode::Live      ? "writable, persistent; protected names created during the run are quarantined at exit"
        : workspace_mode == WorkspaceMode::Overlay ? "writes go to " + layer_dir + "/upper, applied at exit except protected names"
                                                   : "writes go to " + layer_dir + "/upper and are dropped at exit")
    << ")\n";
  o << "cwd: " << cwd << "\n";
  o << proxy.text() << "\n";
  o << "home: " << home << "\n";
  if (timeout) o << "timeout: " << timeout->count() << " ms\n";
  o << "limits:";
  if (limits.memory_bytes)
    o << " memory " << format_bytes(*limits.memory_bytes) << (limits.explicit_memory ? "" : " (default)");
  if (limits.pids) o << ", pids " << *limits.pids << (limits.explicit_pids ? "" : " (default)");
  if (limits.cpus) o << ", cpus " << *limits.cpus;
  o << "; rlimits: core 0, nofile 65536\n";
  o << "mounts (in order):\n";
  for (const auto& s : steps) {
    o << "  " << to_string(s.kind) << " " << s.target;
    if (!s.source.empty() && s.source != s.target) o << " <- " << s.source;
    if (s.kind == StepKind::Tmpfs) {
      char m[8];
      std::snprintf(m, sizeof m, "%04o", s.mode);
      o << " mode=" << m;
    }
    if (!s.upper_dir.empty()) o << " [upper " << s.upper_dir << "]";
    if (s.kind == StepKind::File) {
      if (s.trust_bundle) o << " [host bundle + this sandbox's CA]";
      else o << " [" << s.content.size() << " bytes, " << (s.in_upper ? "in the overlay's upper layer, writable" : s.writable ? "writable" : "read-only") << "]";
    }
    if (s.idmap) o << " [idmapped: on-disk uid " << s.idmap_from_uid << " <-> uid " << identity.host_uid << "]";
    if (!s.why.empty()) o << "  # " << s.why;
    o << "\n";
  }
  o << "landlock: writes only in";
  for (const auto& p : landlock.read_write) o << " " << p;
  o << "; write existing files in";
  for (const auto& p : landlock.write_files) o << " " << p;
  o << "; signals and abstract unix sockets scoped to the sandbox\n";
  for (const auto& w : weakened) o << "WEAKENED: " << w << "\n";
  if (!seccomp) o << "seccomp: OFF (--unsafe-no-seccomp)\n";
  else o << "seccomp: native x86_64 only; ptrace, bpf, mount API, namespaces, io_uring, keyctl, TIOCSTI/TIOCLINUX, "
       "kernel modules, raw/packet/vsock sockets, set-id modes (chmod, open, mknod) and more refused (each refusal "
       "logged)\n";
  if (!secrets.empty()) {
    // Names, placeholders and hosts only: the values never leave the supervisor.
    o << "secrets (values stay outside; the proxy puts them into requests to their hosts only):\n";
    for (const auto& s : secrets) {
      o << "  " << s.name << " -> ";
      for (size_t i = 0; i < s.hosts.size(); ++i) o << (i ? ", " : "") << s.hosts[i];
      if (!s.headers.empty()) {
        o << " (only in header";
        for (size_t i = 0; i < s.headers.size(); ++i) o << (i ? ", " : " ") << s.headers[i];
        o << ")";
      }
      if (!s.set_header.empty()) o << "; the proxy sets header " << s.set_header << " itself; inside: nothing\n";
      else o << "; inside: " << s.placeholder << "\n";
    }
    o << "tls: the proxy terminates TLS for those hosts only (a CA made in memory for this sandbox, trusted inside via "
      << trust_bundle_path << "); upstreams verified against "
      << (host_trust_bundle.empty() ? std::string("OpenSSL's default store") : host_trust_bundle)
      << "; a placeholder on its way to another host is refused and logged; to its own hosts, where it is not put "
         "in (a body, the URL, another header) it goes as the placeholder, logged\n";
  }
  if (terminate_for_rules)
    o << "tls: the proxy also terminates TLS for the hosts under network.rules"
      << " (network.readOnly: every host), to judge their requests; a CA made in memory, trusted inside via "
      << trust_bundle_path << "\n";
  o << "environment:\n";
  for (const auto& e : env) o << "  " << e << "\n";
  o << "fds: 0 1 2 only\n";
  o << "command:";
  for (const auto& a : argv) o << " " << a;
  o << "\n";
  if (!notes.empty()) {
    o << "notes:\n";
    for (const auto& n : notes) o << "  - " << n << "\n";
  }
  return o.str();
}

std::string ProxyPlan::text() const {
  if (!enabled) return "egress: none";
  std::string t = "egress: proxy 127.0.0.1:" + std::to_string(http_port) + " (HTTP), 127.0.0.1:" +
                  std::to_string(socks_port) + " (SOCKS5), set in the proxy variables";
  if (resolver)
    t += transparent ? "; resolver 127.0.0.53 (allowed names only, answered with addresses of 198.18.0.0/15)"
                     : "; resolver 127.0.0.53 (allowed names only)";
  if (transparent)
    t += "; transparent: TCP to any non-loopback IPv4 address redirected to the proxy (127.0.0.1:" +
         std::to_string(transparent_port) + ", nftables in the sandbox's netns), other UDP and IP dropped";
  else
    t += "; transparent: off (network.transparent: false)";
  return t;
}

Context Context::from_process(const std::vector<std::string>& argv) {
  Context c;
  c.uid = ::geteuid();
  c.gid = ::getegid();
  char buf[PATH_MAX];
  if (::getcwd(buf, sizeof buf)) c.cwd = buf;
  if (const char* h = ::getenv("HOME"); h && *h) {
    c.home = h;
  } else if (passwd* pw = ::getpwuid(c.uid)) {
    c.home = pw->pw_dir;
  }
  for (char** e = ::environ; e && *e; ++e) c.environ.emplace_back(*e);
  c.argv = argv;
  return c;
}

}  // namespace exg::plan
