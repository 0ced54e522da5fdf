// Policy sources + flags -> Plan, for run, oci-spec and docker-args alike.
#include "cli/plan_options.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include "cli/make_dirs.hpp"
#include "plan/paths.hpp"
#include "util/layer_kind.hpp"
#include "plan/warnings.hpp"
#include "policy/srt_settings.hpp"

namespace exg::cli {

namespace {

bool file_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

policy::PathEntry flag_path(const std::string& p, const std::string& cwd, const std::string& flag) {
  policy::PathEntry e;
  e.path = p;
  e.base_dir = cwd;
  e.where.file = "--" + flag;
  return e;
}

std::unexpected<Error> flag_error(const std::string& what) { return fail(Error::msg(what, "")); }

}  // namespace

int usage_error(const std::string& what) {
  // One line per fact, each prefixed (an error that explains itself, e.g. a refused user namespace, has several).
  size_t at = 0;
  do {
    size_t end = what.find('\n', at);
    std::string line = what.substr(at, end == std::string::npos ? std::string::npos : end - at);
    std::fprintf(stderr, "exguardian: %s\n", line.c_str());
    at = end == std::string::npos ? what.size() : end + 1;
  } while (at < what.size());  // (a trailing newline adds no empty line)
  return 125;
}

void PlanOptions::add_plan_options(CheckedSubcommand* sub) {
  sub->add_option("--policy", policy_files,
                  "Policy file (JSON); repeatable: later files merge over earlier ones. An srt settings file "
                  "(srt's keys only) has srt's meaning: relative paths are relative to the working directory");
  sub->add_option("-s,--settings", settings,
                  "srt's option: read this srt settings file instead of ~/.srt-settings.json (relative paths: "
                  "relative to the working directory, as in srt)");
  sub->add_option("--workspace", workspace, "Writable, persistent directory (default: the current directory)");
  sub->add_option("--workspace-mode", workspace_mode,
                  "live (writes land as they happen; planted files swept at exit), overlay (applied at exit), "
                  "discard (dropped)")
      ->check(CLI::IsMember({"live", "overlay", "discard"}));
  sub->add_option("--workspace-at", workspace_at,
                  "Mount the workspace at PATH inside instead of its host path (HOME and the cwd there; PATH's parent "
                  "is a fresh empty directory), e.g. /home/user");
  sub->add_option("--user-name", user_name, "The sandbox's user's name inside (its own /etc/passwd and /etc/group entry, USER)");
  sub->add_option("--keep", keep, "overlay/discard: keep the upper layer in DIR (see exguardian diff/apply)");
  sub->add_flag("--allow-planted", allow_planted,
                "Do not fail the run when planted files (hooks, rc files, ...) were quarantined");
  sub->add_option("--allow-write", allow_write, "Also make PATH writable (repeatable)");
  sub->add_option("--deny-write", deny_write, "Make PATH unwritable (repeatable)");
  sub->add_option("--deny-read", deny_read, "Make PATH unreadable; globs allowed (repeatable)");
  sub->add_option("--allow-read", allow_read, "Re-allow reading PATH inside a denied one (repeatable)");
  sub->add_option("--allow-domain", allow_domain, "Allow egress to DOMAIN (repeatable; enforced with the egress proxy)");
  sub->add_option("--env", env, "Pass NAME from the host, or set NAME=VALUE (repeatable)");
  sub->add_option("--timeout", timeout, "Wall-clock limit, e.g. 30s, 5m; the command is killed (exit 124)");
  sub->add_option("--memory", memory, "Memory limit (and no extra swap), e.g. 512M, 2G (default: half of RAM, at most 8G)");
  sub->add_option("--pids", pids, "Most processes and threads at once (default: 4096)");
  sub->add_option("--cpus", cpus, "CPU time, in CPUs, e.g. 0.5, 2 (default: no limit)");
  sub->add_option("--scratch-disk", scratch_disk,
                  "microvm, as guest root: the writable disk's size for /var/lib (podman, docker), /var/cache and "
                  "/var/tmp, e.g. 8G; sparse on the host, gone at the end (default: 4G; 0: none)");
  sub->add_flag("--no-policy-files", no_policy_files,
                "Ignore ~/.srt-settings.json, ~/.config/exguardian/policy.json and the workspace's .exguardian.json");
  sub->add_flag("--dns", dns,
                "Serve DNS inside on 127.0.0.53 (resolv.conf points there): allowed names only, allowed addresses "
                "only (same as network.resolver: true)");
  sub->add_flag("--unsafe-no-seccomp", unsafe_no_seccomp,
                "UNSAFE: run without the seccomp filter (for testing that escape-test notices); reported on every run");
  sub->prefix_command(true);  // the first non-option word starts the command
  sub->footer("COMMAND [ARGS...] follows the options, best after --.");
}

Result<void> PlanOptions::take_command(CLI::App* sub, const std::string& usage) {
  auto rest = sub->remaining();
  if (!rest.empty() && (explicit_command || rest.front().starts_with("-")) && rest.front() != "--")
    return flag_error("usage: unknown option or stray argument \"" + rest.front() + "\" (see exguardian " +
                      sub->get_name() + " --help)");
  if (!explicit_command) {
    for (const auto& r : rest) command.push_back(r);
    if (!command.empty() && command.front() == "--") command.erase(command.begin());
  }
  if (command.empty())
    return flag_error(sub->get_name() + ": no command given (usage: " + usage + ")");
  return {};
}

Result<BuiltPlan> PlanOptions::build_plan(const std::string& layer_flag) const {
  plan::Context ctx = plan::Context::from_process(command);
  if (!workspace.empty()) ctx.workspace = workspace;
  ctx.workspace_mode = workspace_mode == "overlay"   ? plan::WorkspaceMode::Overlay
                       : workspace_mode == "discard" ? plan::WorkspaceMode::Discard
                                                     : plan::WorkspaceMode::Live;
  if (!keep.empty()) ctx.keep_dir = keep;
  ctx.workspace_at = workspace_at;
  ctx.user_name = user_name;
  ctx.allow_planted = allow_planted;

  // Sources, merged in order: srt settings < user file < project file < each
  // --policy < flags. Relative paths: srt's files (srt's place, --settings, and
  // any --policy file holding srt's keys only) are read as srt reads them,
  // relative to the working directory; ExGuardian's own files relative to
  // their directory.
  BuiltPlan out;
  policy::Policy& pol = out.policy;
  auto load = [&](const std::string& path, policy::RelativeTo rule) -> Result<void> {
    auto p = policy::load_policy_file(path, rule, ctx.cwd);
    if (!p) return fail(Error::msg(p.error().message, ""));
    policy::merge(pol, *p);
    return {};
  };
  using policy::RelativeTo;
  // srt reads one settings file: --settings, else ~/.srt-settings.json when it
  // exists. It knows nothing of ExGuardian's files, so here it comes first,
  // under them (as the user-wide base it is in srt).
  if (!settings.empty()) {
    if (auto r = load(settings, RelativeTo::WorkingDirectory); !r) return fail(r.error());
  } else if (!no_policy_files && !ctx.home.empty()) {
    std::string srt = ctx.home + "/.srt-settings.json";
    if (file_exists(srt))
      if (auto r = load(srt, RelativeTo::WorkingDirectory); !r) return fail(r.error());
  }
  if (!no_policy_files) {
    if (!ctx.home.empty()) {
      std::string user = ctx.home + "/.config/exguardian/policy.json";
      if (file_exists(user))
        if (auto r = load(user, RelativeTo::File); !r) return fail(r.error());
    }
    std::string ws = plan::expand_path(workspace.empty() ? ctx.cwd : workspace, ctx.home, ctx.cwd);
    std::string project = ws + "/.exguardian.json";
    if (file_exists(project))
      if (auto r = load(project, RelativeTo::File); !r) return fail(r.error());
  }
  for (const auto& f : policy_files)
    if (auto r = load(f, RelativeTo::ByShape); !r) return fail(r.error());

  policy::Policy flags;
  flags.sources.push_back("<flags>");
  for (const auto& p : allow_write) flags.filesystem.allow_write.push_back(flag_path(p, ctx.cwd, "allow-write"));
  for (const auto& p : deny_write) flags.filesystem.deny_write.push_back(flag_path(p, ctx.cwd, "deny-write"));
  for (const auto& p : deny_read) {
    if (auto bad = policy::check_glob(p)) return flag_error("--deny-read " + p + ": " + *bad);
    flags.filesystem.deny_read.push_back(flag_path(p, ctx.cwd, "deny-read"));
  }
  for (const auto& p : allow_read) flags.filesystem.allow_read.push_back(flag_path(p, ctx.cwd, "allow-read"));
  for (const auto& d : allow_domain) {
    if (auto bad = policy::check_domain_pattern(d, false)) return flag_error("--allow-domain " + d + ": " + *bad);
    flags.network.allowed_domains.push_back({d, {"--allow-domain"}});
  }
  if (dns) flags.network.resolver = true;
  for (const auto& e : env) {
    auto eq = e.find('=');
    std::string name = e.substr(0, eq);
    if (auto bad = policy::check_env_name(name)) return flag_error("--env " + e + ": " + *bad);
    if (eq == std::string::npos) flags.env.allow.push_back(name);
    else flags.env.set.emplace_back(name, e.substr(eq + 1));
  }
  if (!timeout.empty()) {
    auto t = policy::parse_duration(timeout);
    if (!t) return flag_error("--timeout " + timeout + ": " + t.error().message);
    flags.resources.timeout = *t;
  }
  if (!memory.empty()) {
    auto m = policy::parse_size(memory);
    if (!m) return flag_error("--memory " + memory + ": " + m.error().message);
    flags.resources.memory_bytes = *m;
  }
  if (!scratch_disk.empty()) {
    if (scratch_disk == "0") {
      flags.resources.scratch_disk_bytes = 0;
    } else {
      auto d = policy::parse_size(scratch_disk);
      if (!d) return flag_error("--scratch-disk " + scratch_disk + ": " + d.error().message);
      flags.resources.scratch_disk_bytes = *d;
    }
  }
  if (!pids.empty()) {
    char* end = nullptr;
    unsigned long v = std::strtoul(pids.c_str(), &end, 10);
    if (*end || v == 0 || v > 4194304 || pids[0] == '-')
      return flag_error("--pids " + pids + ": expected a whole number from 1 to 4194304");
    flags.resources.pids = static_cast<uint32_t>(v);
  }
  if (!cpus.empty()) {
    char* end = nullptr;
    double v = std::strtod(cpus.c_str(), &end);
    if (*end || !(v >= 0.01) || v > 4096)
      return flag_error("--cpus " + cpus + ": expected a number of CPUs such as 0.5 or 2");
    flags.resources.cpus = v;
  }
  policy::merge(pol, flags);
  // srt's fallback: a parent proxy the policy does not name comes from HTTP_PROXY & co.
  if (auto r = policy::parent_proxy_from_environment(pol, [](const char* n) { return std::getenv(n); }); !r)
    return fail(Error::msg(r.error().message, ""));
  if (exported) {
    if (pol.network.transparent.value_or(false))
      return fail(Error::msg("network.transparent", "needs exguardian run (an exported sandbox has no supervisor "
                                                    "to capture its egress); set it false"));
    pol.network.transparent = false;
  }

  // Named, not auto: --layer auto chooses after the Plan, which may then run on any layer.
  ctx.mask_host_sockets = (!layer_flag.empty() ? layer_flag : pol.layer.value_or("")) !=
                          layer::name(layer::Kind::Landlock);
  // Before the compile, which binds what exists (a protected name read-only).
  auto made = make_policy_dirs(pol, ctx.home, plan::expand_path(workspace.empty() ? ctx.cwd : workspace, ctx.home, ctx.cwd),
                               make_dirs);
  if (!made) return fail(made.error());
  auto plan = plan::compile(pol, ctx);
  if (!plan) return fail(plan.error());
  plan->notes.insert(plan->notes.end(), made->begin(), made->end());
  if (unsafe_no_seccomp) {
    plan->seccomp = false;
    plan->weakened.push_back("--unsafe-no-seccomp: no seccomp filter; the kernel's whole syscall surface is open");
  }
  for (const auto& w : plan->weakened) std::fprintf(stderr, "exguardian: WARNING: sandbox weakened: %s\n", w.c_str());
  for (const auto& w : plan::policy_warnings(pol, *plan, ctx.home))
    std::fprintf(stderr, "exguardian: warning: %s\n", w.c_str());
  out.plan = std::move(*plan);
  return out;
}

}  // namespace exg::cli
