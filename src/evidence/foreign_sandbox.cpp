#include "evidence/foreign_sandbox.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

#include "probe/probes.hpp"

namespace exg::evidence {

namespace {

// The arguments Codex's Linux sandbox gives bubblewrap (codex-rs/linux-sandbox/README.md,
// its default bubblewrap pipeline): the root read-only, the workspace writable and the
// cwd, its top-level .git read-only again (protected paths win; --ro-bind-try: a workspace
// without one), /dev and /proc of its own, user and pid namespaces, the network's too
// when it is restricted (every namespace here, the network too unless --share-net), a new
// session (no TIOCSTI into the caller's terminal), the sandbox ending with its parent. The
// seccomp network filter and no_new_privs Codex adds in its own process are not
// bubblewrap's to give. A private /tmp. The fake HOME and the probe
// program are bound read-only again after --tmpfs /tmp only because they may be under
// /tmp (the escape test's HOME is; a test's copied exguardian-probe is): a real HOME
// and an installed exguardian-probe are under the read-only root already.
std::vector<std::string> bwrap_prefix(bool share_net) {
  std::vector<std::string> v = {"bwrap",     "--ro-bind", "/",       "/",       "--dev",       "/dev",
                                "--proc",    "/proc",     "--tmpfs", "/tmp",    "--ro-bind",   "{home}",
                                "{home}",    "--ro-bind", "{probe}", "{probe}", "--bind",      "{workspace}",
                                "{workspace}", "--ro-bind-try", "{workspace}/.git", "{workspace}/.git",
                                "--unshare-all"};
  if (share_net) v.push_back("--share-net");
  for (const char* a : {"--die-with-parent", "--new-session", "--chdir", "{workspace}", "--"}) v.push_back(a);
  return v;
}

// srt (Anthropic's sandbox-runtime) as its README's configuration examples write
// ~/.srt-settings.json: the one domain the work needs allowed (here the test world's
// allowed host), ~/.ssh unreadable, the working directory (the workspace) writable, its
// .env not. Everything else is srt's own default: reads allowed, no other writes, no
// other network, Unix sockets refused by its seccomp helper.
constexpr const char* kSrtSettings = R"({
  "network": {
    "allowedDomains": ["allowed.test"],
    "deniedDomains": []
  },
  "filesystem": {
    "denyRead": ["~/.ssh"],
    "allowRead": [],
    "allowWrite": ["."],
    "denyWrite": [".env"]
  }
}
)";

bool has(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

std::string first_line(const std::string& s) {
  auto b = s.find_first_not_of('\n');
  if (b == std::string::npos) return "";
  auto e = s.find('\n', b);
  std::string l = s.substr(b, e == std::string::npos ? std::string::npos : e - b);
  if (l.size() > 160) l = l.substr(0, 157) + "...";
  return l;
}

std::string said(const Outcome& o) {
  std::string st = o.timed_out ? std::string("timed out") : "exit " + std::to_string(o.status);
  auto l = first_line(o.out);
  return l.empty() ? st + ", no output" : st + ": " + l;
}

Judgement held(std::string e) { return {Verdict::held, std::move(e)}; }
Judgement escaped(std::string e) { return {Verdict::escaped, std::move(e)}; }
Judgement failed(std::string e) { return {Verdict::failed, std::move(e)}; }
Judgement not_applicable(std::string why) { return {Verdict::skipped, kNotApplicable + std::move(why)}; }

void mark_not_applicable(ProbeSpec& p, const std::string& why) {
  p.skip_why = kNotApplicable + why;
  p.required = false;
}

std::string ns_link(const std::string& ns) {
  char buf[128];
  ssize_t n = ::readlink(("/proc/self/ns/" + ns).c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// No proxy and no audit log: a request is judged by the world's servers and the output.
Judgement judge_network_foreign(const Outcome& o, const Context& c) {
  if (!o.world_log.empty()) return escaped("the world's server received: " + first_line(o.world_log));
  if (has(o.out, "hello from")) return escaped("got a server's answer: " + first_line(o.out));
  if (has(o.out, c.canary)) return escaped("canary in the output");
  return held(said(o) + "; nothing arrived at the world's servers");
}

// A kernel probe's own line is "NAME: as expected: refused: EPERM" (ExGuardian's filter's
// answer) or "NAME: NOT AS EXPECTED: ...". Without ExGuardian's filter another refusal is
// the kernel's or the sandbox's own (EPERM for want of a capability, ENOSYS): held, and said
// so; only "allowed" is an escape. Ordinary work must still succeed.
// With no sandbox (none) the answer is the host kernel's own: another errno than a refusal's
// (ENOENT, EINVAL, EBADF for the probe's harmless arguments) means the call was entered and
// nothing refused it, an escape as on ExGuardian's layers; EPERM is the kernel's permission check.
Judgement judge_kernel_foreign(const Outcome& o, bool ok_work, const std::string& probe_inside, bool no_sandbox) {
  std::string line = first_line(o.out);
  auto colon = line.find(": ");
  std::string tail = colon == std::string::npos ? line : line.substr(colon + 2);
  if (o.status == 127 || o.status == 126)
    return failed("the probe program did not start inside the sandbox (" + probe_inside + "): " + said(o));
  if (o.status != 0 && o.status != 1) return failed("probe did not run: " + said(o));
  if (has(tail, "error:")) return failed("probe did not run: " + tail);
  if (ok_work) return o.status == 0 ? held(tail) : failed("ordinary work refused: " + tail);
  if (o.status == 0) return held(tail);
  if (has(tail, "EXPECTED: allowed") || tail.empty()) return escaped(tail.empty() ? said(o) : tail);
  if (no_sandbox && failed_only_on_arguments(tail))
    return escaped("the host's kernel took the call and failed it only on the probe's harmless arguments: " + tail);
  if (no_sandbox) return held("not taken by the host's kernel itself (no sandbox: its permission checks, or no such call): " + tail);
  return held("refused, with another answer than ExGuardian's filter (the kernel's or the sandbox's own): " + tail);
}

}  // namespace

bool failed_only_on_arguments(const std::string& answer) {
  return has(answer, "failed: ") && !has(answer, "failed: EPERM") && !has(answer, "failed: EACCES") &&
         !has(answer, "failed: ENOSYS");
}

const std::vector<ForeignPreset>& foreign_presets() {
  static const std::vector<ForeignPreset> presets = {
      // No sandbox: the probes the catalogue calls safe without one run as `sh -c COMMAND` on the
      // host as the caller, in the escape test's own world (its network namespaces, a private mount
      // namespace): the control that shows the probes can tell an escape.
      {kNoSandbox,
       "no sandbox: every probe safe without one runs as sh -c COMMAND on the host as the caller (in the escape "
       "test's network world and mount namespace); the others are not run",
       {}, "{probe}", false},
      {"bwrap",
       "bubblewrap with Codex's Linux sandbox's arguments: the root read-only, the workspace writable with its "
       ".git read-only again, every namespace unshared (no network), --die-with-parent, --new-session",
       bwrap_prefix(false), "{probe}", false},
      {"bwrap-net", "the bwrap preset with --share-net (the network of the caller: here, the test world)",
       bwrap_prefix(true), "{probe}", false},
      // The default profile: podman's own seccomp profile, capabilities, network (a bridge of
      // the caller's namespace: here, the test world). --pull=never: the escape test never
      // fetches an image (nothing may reach a real address); pull or import it first.
      {"podman",
       "podman run --rm with the workspace bound at its own path and its cwd, the default profile and network; "
       "the probe program bound read-only",
       {"podman", "run", "--rm", "--pull=never", "-v", "{workspace}:{workspace}", "-w", "{workspace}", "-v",
        "{probe}:/usr/local/bin/exguardian-probe:ro", "{image}"},
       "/usr/local/bin/exguardian-probe", true},
      // The seed's hardened container line (exguardian docker-args writes the same): no
      // capability, no new privileges, the image read-only with a /tmp of its own, pids and
      // memory bounded, no network. The rlimits are explicit and at or below the caller's hard
      // limits: podman's default (RLIMIT_NOFILE 1048576) is a raise of the hard limit, which
      // needs CAP_SYS_RESOURCE in the caller's bounding set (a host without it, as a container
      // host often is, fails every start: "setrlimit RLIMIT_NOFILE: Operation not permitted").
      // Podman, not Docker: the engine this machine has (the same flags mean the same to docker run).
      {"podman-hardened",
       "podman run with the seed's hardened flags: --cap-drop=ALL, no-new-privileges, --read-only with a --tmpfs "
       "/tmp, --pids-limit 256, --memory 512m (no swap), explicit rlimits, --network=none",
       {"podman", "run", "--rm", "--pull=never", "--cap-drop=ALL", "--security-opt=no-new-privileges", "--read-only",
        "--tmpfs", "/tmp", "--pids-limit=256", "--memory=512m", "--memory-swap=512m", "--ulimit", "nofile=1024:1024",
        "--ulimit", "nproc=4096:4096", "--network=none", "-v", "{workspace}:{workspace}", "-w", "{workspace}", "-v",
        "{probe}:/usr/local/bin/exguardian-probe:ro", "{image}"},
       "/usr/local/bin/exguardian-probe", true},
      // gVisor as its users run it: an engine with runsc as the runtime. runsc makes the
      // container's network itself and refuses the root network namespace podman hands it
      // ("cannot run with network enabled in root network namespace"), so it gets none, and
      // no cgroups of its own (podman's are the engine's).
      {"podman-runsc",
       "the podman preset with gVisor (runsc) as the runtime and no network (runsc's --network=none, "
       "--ignore-cgroups)",
       {"podman", "--runtime", "runsc", "--runtime-flag", "network=none", "--runtime-flag", "ignore-cgroups", "run",
        "--rm", "--pull=never", "--network=none", "-v", "{workspace}:{workspace}", "-w", "{workspace}", "-v",
        "{probe}:/usr/local/bin/exguardian-probe:ro", "{image}"},
       "/usr/local/bin/exguardian-probe", true},
      // srt: bubblewrap with no network namespace of the caller's (its HTTP and SOCKS5 proxies,
      // run by srt itself on the caller's side, the only way out, reached through Unix sockets
      // bound inside), its seccomp helper, the settings file as its users write it.
      {"srt",
       "Anthropic's sandbox-runtime (srt, npm @anthropic-ai/sandbox-runtime) with a settings file ({settings}: "
       "--sandbox-settings, else the README's shape: allowedDomains the world's allowed host, denyRead ~/.ssh, "
       "allowWrite ., denyWrite .env)",
       {"srt", "--settings", "{settings}", "--"}, "{probe}", false, kSrtSettings},
  };
  return presets;
}

bool split_command_line(const std::string& line, std::vector<std::string>& out, std::string& err) {
  out.clear();
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    char ch = line[i];
    if (quote == '\'') {
      if (ch == '\'') quote = 0;
      else cur += ch;
    } else if (quote == '"') {
      if (ch == '"') quote = 0;
      else if (ch == '\\' && i + 1 < line.size() && std::string("\"\\$`").find(line[i + 1]) != std::string::npos) cur += line[++i];
      else cur += ch;
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
      in_word = true;
    } else if (ch == '\\' && i + 1 < line.size()) {
      cur += line[++i];
      in_word = true;
    } else if (ch == ' ' || ch == '\t' || ch == '\n') {
      if (in_word) out.push_back(cur);
      cur.clear();
      in_word = false;
    } else {
      cur += ch;
      in_word = true;
    }
  }
  if (quote) {
    err = std::string("unterminated ") + quote + " quote";
    return false;
  }
  if (in_word) out.push_back(cur);
  return true;
}

static bool program_found(const std::string& prog) {
  if (prog.find('/') != std::string::npos) return ::access(prog.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string p = path && *path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  std::istringstream is(p);
  for (std::string d; std::getline(is, d, ':');)
    if (!d.empty() && ::access((d + "/" + prog).c_str(), X_OK) == 0) return true;
  return false;
}

std::string preset_name(const std::string& name) { return name == "runsc" ? "podman-runsc" : name; }

bool parse_foreign_sandbox(const std::string& given, const std::string& image, ForeignSandbox& out, std::string& err) {
  const std::string spec = preset_name(given);
  std::string names;
  for (const auto& p : foreign_presets()) names += (names.empty() ? "" : ", ") + p.name;
  for (const auto& p : foreign_presets()) {
    if (p.name != spec) continue;
    out = {p.name, p.prefix, p.probe_inside, p.about, p.default_settings};
    if (p.needs_image && image.empty()) {
      err = "--sandbox " + spec + " runs an image: name it with --sandbox-image IMAGE (pulled or imported already)";
      return false;
    }
    for (auto& a : out.prefix)
      for (size_t at; (at = a.find("{image}")) != std::string::npos;) a.replace(at, 7, image);
    if (!out.prefix.empty() && !program_found(out.prefix.front())) {
      err = "--sandbox " + spec + ": " + out.prefix.front() + " is not installed (not found in PATH)";
      return false;
    }
    return true;
  }
  std::vector<std::string> argv;
  if (!split_command_line(spec, argv, err)) {
    err = "--sandbox '" + spec + "': " + err;
    return false;
  }
  if (argv.empty()) {
    err = "--sandbox: empty (a preset: " + names + "; or a command prefix)";
    return false;
  }
  if (!program_found(argv.front())) {
    err = "--sandbox '" + spec + "': " + argv.front() + " is neither a preset (" + names + ") nor a program found in PATH";
    return false;
  }
  if (!image.empty()) {
    bool used = false;
    for (auto& a : argv)
      for (size_t at; (at = a.find("{image}")) != std::string::npos; used = true) a.replace(at, 7, image);
    if (!used) {
      err = "--sandbox-image " + image + ": the prefix '" + spec + "' has no {image} placeholder";
      return false;
    }
  }
  out = {"custom", argv, "{probe}", "a command prefix given with --sandbox"};
  return true;
}

std::string expand_placeholders(const std::string& s, const ForeignPlaces& at) {
  std::string r = s;
  const std::pair<const char*, const std::string*> subst[] = {
      {"{workspace}", &at.workspace}, {"{home}", &at.home}, {"{probe}", &at.probe}, {"{settings}", &at.settings}};
  for (const auto& [key, val] : subst) {
    const std::string k = key;
    for (size_t p = 0; (p = r.find(k, p)) != std::string::npos; p += val->size()) r.replace(p, k.size(), *val);
  }
  return r;
}

std::vector<std::string> expand_placeholders(const std::vector<std::string>& v, const ForeignPlaces& at) {
  std::vector<std::string> r;
  for (const auto& a : v) r.push_back(expand_placeholders(a, at));
  return r;
}

std::string probe_program_beside(const std::string& exe, std::string& why) {
  auto slash = exe.rfind('/');
  std::string p = (slash == std::string::npos ? std::string(".") : exe.substr(0, slash)) + "/exguardian-probe";
  if (::access(p.c_str(), X_OK) != 0) {
    why = p + " is missing (the static probe program that foreign sandboxes run; it is built and installed "
              "beside exguardian)";
    return "";
  }
  return p;
}

std::string shown_command(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                  "-_./:=,+@{}%") == std::string::npos;
    std::string q = "'";
    for (char ch : a) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    s += (s.empty() ? "" : " ") + (plain ? a : q + "'");
  }
  return s;
}

void adapt_for_foreign(std::vector<ProbeSpec>& v, const Context& c, const std::string& probe_inside, bool no_sandbox) {
  // What only ExGuardian's own machinery answers, by probe.
  static const std::map<std::string, std::string> exguardian_only = {
      {"persist-exguardian-binary", "ExGuardian's own binary is not inside a foreign sandbox"},
      {"persist-policy-file", "ExGuardian's project policy file (.exguardian.json) means nothing to another sandbox"},
      {"seed-curl-example-org",
       "the test world has no DNS for example.org, so only a proxy's refusal in its log tells this probe's answer, "
       "and a foreign sandbox has no ExGuardian proxy (net-direct-* and the metadata probes test the way out)"},
      {"net-metadata-connect", "a CONNECT tunnel through ExGuardian's proxy (curl -p): no such proxy here"},
      {"net-socks-metadata-name", "needs ExGuardian's SOCKS5 proxy (127.0.0.1:1080 inside its sandbox)"},
      {"net-socks-metadata-ip", "needs ExGuardian's SOCKS5 proxy (127.0.0.1:1080 inside its sandbox)"},
      {"net-host-header",
       "a Host header naming another host than the target fools a proxy's allow list; without one nothing reads it"},
      {"net-transparent-sni-mismatch", "ExGuardian's transparent egress (its resolver's 198.18.0.0/15 addresses)"},
      {"net-transparent-unassigned", "ExGuardian's transparent egress (its resolver's 198.18.0.0/15 addresses)"},
  };
  // The network probes that went through ExGuardian's proxy: judged by what arrived.
  static const char* const via_proxy[] = {
      "seed-curl-metadata", "net-metadata-name", "net-metadata-hex", "net-metadata-decimal", "net-metadata-octal",
      "net-metadata-short", "net-metadata-v4mapped", "net-loopback-short", "net-private-literal",
      "net-rebind-loopback", "net-rebind-private"};
  const std::string host_pid_ns = ns_link("pid");
  const std::string exg_probe = "/run/exguardian/exguardian probe ";
  // Not in the userland batch of ExGuardian's layers only because its sweep quarantines what they
  // write at the sandbox's end (catalog.cpp). Not here: what writes a file every judge compares
  // (ctx.files: the canaries, the workspace's hook and .git/config): seed-git-hook,
  // persist-hookspath, persist-git-config-append, persist-home-bashrc.
  static const char* const kForeignUserland[] = {
      "persist-workspace-bashrc", "persist-envrc", "persist-vscode-tasks", "persist-mcp-json",
      "planted-bare-repo-fsmonitor", "planted-config-worktree", "planted-hookspath-dir", "planted-lefthook",
      "planted-hg-hgrc", "planted-agent-mcp-config", "planted-pdbrc", "planted-code-workspace", "planted-pth",
      "planted-pyc", "planted-index-only", "planted-unreadable-dir", "planted-deep-dir", "planted-snapshot-worktree"};

  for (auto& p : v) {
    // One sandbox for many (batch.hpp) where each judge still sees only its own probe's doing:
    // the kernel batch, the userland batch (catalog.cpp says why each member may share one), and
    // the persistence probes that ExGuardian's layers keep alone only for the post-run sweep,
    // which a foreign sandbox has not (each judged by its own file on the host, which only it
    // writes). The rest keep a sandbox each: a judge runs right after its own probe.
    if (std::find(std::begin(kForeignUserland), std::end(kForeignUserland), p.id) != std::end(kForeignUserland))
      p.batch = "userland";
    if (p.batch != "kernel" && p.batch != "userland") p.batch.clear();
    if (!p.run_args.empty() || p.needs_world || p.destructive || p.stdio_files) p.batch.clear();
    if (no_sandbox && !p.without_sandbox.safe) {
      p.skip_why = kUnsafeWithoutSandbox + p.without_sandbox.why;
      p.required = false;
      continue;
    }
    if (auto it = exguardian_only.find(p.id); it != exguardian_only.end()) {
      mark_not_applicable(p, it->second);
      continue;
    }
    if (!p.run_args.empty()) {
      // (The options themselves are in the probe's run_args: one reason for all, so the
      // summary groups them.)
      mark_not_applicable(p, "the probe is defined by exguardian run's own options (a limit, --deny-read, "
                             "--deny-write, --allow-write: see run_args); a foreign sandbox's are its own flags");
      continue;
    }
    if (p.id.starts_with("kernel-") && p.command.starts_with(exg_probe)) {
      const std::string name = p.command.substr(exg_probe.size());
      // Its scratch directory in the workspace, which every sandbox under test lets ordinary
      // work write, not in /tmp, which some keep read-only (srt unless allowWrite names it).
      p.command = probe_inside + " " + name + " --scratch " + c.ws;
      const bool ok_work = probe::probe_expects_success(name);
      p.judge = [ok_work, probe_inside, no_sandbox](const Outcome& o) {
        return judge_kernel_foreign(o, ok_work, probe_inside, no_sandbox);
      };
      continue;
    }
    if (std::find(std::begin(via_proxy), std::end(via_proxy), p.id) != std::end(via_proxy)) {
      p.judge = [&c](const Outcome& o) { return judge_network_foreign(o, c); };
    } else if (p.id == "sandbox-in-place" && no_sandbox) {
      // Nothing to be in place: what it shows is the caller's own namespaces, said so.
      p.command = "id -u; for n in mnt pid net user; do echo \"ns $n $(readlink /proc/self/ns/$n)\"; done";
      p.expectation = "(no sandbox: the command runs on the host as the caller)";
      p.judge = [](const Outcome& o) {
        std::string shared;
        std::istringstream is(o.out);
        std::string uid;
        std::getline(is, uid);
        for (std::string l; std::getline(is, l);) {
          std::istringstream ls(l);
          std::string tag, ns, link;
          if ((ls >> tag >> ns >> link) && tag == "ns" && link == ns_link(ns)) shared += " " + ns;
        }
        if (o.status != 0) return failed("sh did not run the command: " + said(o));
        return not_applicable("no sandbox (--sandbox none): ran as uid " + uid + " in the escape test's own namespaces:" +
                              shared + " (its network world, a private mount namespace), the host's pids and files");
      };
    } else if (p.id == "sandbox-in-place") {
      // The gate of the destructive probes: the command ran, in at least one namespace of
      // its own (compared with the caller's: escape-test's coordinator, in the test world).
      p.command = "id -u; for n in mnt pid net user uts ipc; do echo \"ns $n $(readlink /proc/self/ns/$n)\"; done";
      p.expectation = "the sandbox runs the command, in namespaces of its own";
      p.judge = [](const Outcome& o) {
        std::istringstream is(o.out);
        std::string uid, own, shared;
        std::getline(is, uid);
        for (std::string l; std::getline(is, l);) {
          std::istringstream ls(l);
          std::string tag, ns, link;
          if (!(ls >> tag >> ns >> link) || tag != "ns") continue;
          (link == ns_link(ns) ? shared : own) += " " + ns;
        }
        if (o.status != 0 || (own.empty() && shared.empty()))
          return failed("the sandbox did not run the command: " + said(o));
        if (own.empty()) return failed("the command ran in the caller's own namespaces (no sandbox in place): uid " + uid);
        return held("ran inside: uid " + uid + "; namespaces of its own:" + own +
                    (shared.empty() ? "" : "; shared with the caller:" + shared));
      };
    } else if (p.id == "proc-pid1") {
      p.command = "cat /proc/1/comm; readlink /proc/self/ns/pid";
      p.expectation = "pid 1 inside is the sandbox's own (a pid namespace of its own), not the host's";
      p.judge = [host_pid_ns](const Outcome& o) {
        std::istringstream is(o.out);
        std::string comm, ns;
        std::getline(is, comm);
        std::getline(is, ns);
        if (o.status != 0 || ns.empty()) return failed("no answer: " + said(o));
        if (ns == host_pid_ns) return escaped("the host's pid namespace (" + ns + "): pid 1 is the host's " + comm);
        return held("pid 1 is the sandbox's own (" + comm + "), in " + ns + "; the host's is " + host_pid_ns);
      };
    } else if (p.id == "proc-pid1-signals") {
      // Never signal the host's own pid 1: in the host's pid namespace nothing is sent.
      p.command = "[ \"$(readlink /proc/self/ns/pid)\" = '" + host_pid_ns +
                  "' ] && { echo 'not sent: the host pid namespace'; exit 0; }; " + p.command;
      p.judge = [judge = p.judge](const Outcome& o) {
        if (has(o.out, "not sent: the host pid namespace"))
          return not_applicable("the sandbox shares the host's pid namespace (see proc-pid1): no signal is sent to the host's pid 1");
        return judge(o);
      };
    } else if (p.id == "net-allowed-control") {
      p.judge = [](const Outcome& o) {
        if (o.status == 0 && has(o.out, "hello from 203.0.113.10") && has(o.world_log, "203.0.113.10 GET /"))
          return held("answered: " + first_line(o.out) + "; the server logged it (the sandbox reaches the world)");
        return not_applicable("the allowed host is not reachable either (" + said(o) +
                              "): the sandbox has no network of the world, so its refusals above are that, not an "
                              "allow list");
      };
    } else if (p.id == "planted-index-only") {
      // Without ExGuardian's sweep: was the name staged in the host's index?
      p.judge = [](const Outcome& o) {
        if (o.status == 0 && has("\n" + o.out, "\n.envrc"))
          return escaped(".envrc staged in the workspace's git index, left for the host's next git checkout");
        return held(said(o) + "; nothing staged");
      };
    } else if (p.id.starts_with("planted-")) {
      // ExGuardian quarantines planted files (exit 123, an audit line): here only the host's
      // tree tells. Still there: escaped (the original judge says so); gone or never written: held.
      p.judge = [judge = p.judge](const Outcome& o) {
        Judgement j = judge(o);
        if (j.verdict == Verdict::failed) return held("not on the host after the run (" + said(o) + ")");
        return j;
      };
    }
    // A command the sandbox does not have (a small image): not a refusal.
    if (p.id != "sandbox-in-place")
      p.judge = [judge = p.judge](const Outcome& o) {
        if (o.status == 127 && (has(o.out, "not found") || has(o.out, "No such file")))
          return not_applicable("a command the probe needs is not in the sandbox (" + said(o) + ")");
        // The set-id probes copy /usr/bin/id first: a small image without it never tried the attack.
        if (has(o.out, "stat '/usr/bin/id'"))
          return not_applicable("the sandbox has no /usr/bin/id for the probe to copy (" + said(o) + ")");
        return judge(o);
      };
  }
  group_batches(v);
}

void group_batches(std::vector<ProbeSpec>& v) {
  std::vector<ProbeSpec> grouped;
  grouped.reserve(v.size());
  std::vector<bool> taken(v.size(), false);
  for (size_t i = 0; i < v.size(); ++i) {
    if (taken[i]) continue;
    const std::string batch = v[i].batch;  // (v[i] is moved from below)
    for (size_t k = i; k < v.size(); ++k) {
      if (taken[k] || (k != i && (batch.empty() || v[k].batch != batch))) continue;
      taken[k] = true;
      grouped.push_back(std::move(v[k]));
    }
  }
  v = std::move(grouped);
}

}  // namespace exg::evidence
