// Plan -> hardened `docker run` / `podman run` flags, for users who run their
// own engine. The engine supplies /proc, /sys, /dev and its pseudo-devices,
// masks /proc's usual suspects and keeps /proc/sys read-only itself.
#include <algorithm>

#include "oci/spec.hpp"
#include "walls/rlimits.hpp"

namespace exg::oci {

using plan::Step;
using plan::StepKind;

const char* to_string(Engine e) { return e == Engine::Docker ? "docker" : "podman"; }

namespace {

bool within(const std::string& p, const std::string& dir) {
  return p == dir || (p.size() > dir.size() && p.compare(0, dir.size(), dir) == 0 && p[dir.size()] == '/');
}

std::string octal(unsigned mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", mode);
  return buf;
}

}  // namespace

Result<std::vector<std::string>> docker_args(const plan::Plan& plan, Engine engine, const std::string& image,
                                             const std::string& seccomp_file, std::vector<std::string>* notes) {
  auto note = [&](std::string s) {
    if (notes) notes->push_back(std::move(s));
  };
  if (plan.argv.empty()) return fail(Error::msg("docker-args", "no command"));
  // The host's own root ("/") does not work as an engine's root: the engine's
  // tmpfs on /tmp and /dev would hide bind sources below them (a workspace
  // under /tmp, /dev/null for the masks) before they are bound.
  if (image.empty())
    return fail(Error::msg("docker-args", std::string("--image IMG is needed") +
                                              (engine == Engine::Podman ? " (or a root filesystem DIR: --image /path)" : "")));
  bool rootfs_dir = image[0] == '/';
  if (rootfs_dir && engine == Engine::Docker)
    return fail(Error::msg("docker-args: --image " + image, "docker runs images only (podman takes a root directory)"));
  if (rootfs_dir && image.find_first_not_of("/") == std::string::npos)
    return fail(Error::msg("docker-args: --image /", "the host's root cannot be the engine's root (its /tmp and /dev "
                                                     "would hide the workspace and the masks); use an image"));
  const auto& id = plan.identity;
  std::vector<std::string> a = {"run", "--rm", "-i"};
  auto add = [&](std::initializer_list<std::string> v) { a.insert(a.end(), v); };
  add({"--user", std::to_string(id.inside_uid) + ":" + std::to_string(id.inside_gid)});
  add({"--cap-drop", "ALL", "--security-opt", "no-new-privileges"});
  if (plan.seccomp) {
    if (seccomp_file.empty()) return fail(Error::msg("docker-args", "no file for the seccomp profile"));
    add({"--security-opt", "seccomp=" + seccomp_file});
  } else {
    note("no seccomp profile (--unsafe-no-seccomp): the engine's default profile applies");
  }
  add({"--read-only", "--network", "none"});
  note("--network none: no egress at all; to allow the policy's domains run `exguardian proxy` and attach the "
       "container to a network that reaches only it (the proxy variables in the environment name 127.0.0.1)");
  add({"--hostname", plan.hostname});
  const auto& lim = plan.limits;
  if (lim.pids) add({"--pids-limit", std::to_string(*lim.pids)});
  if (lim.memory_bytes) {
    std::string m = std::to_string(*lim.memory_bytes);
    add({"--memory", m, "--memory-swap", m});  // equal: no swap on top
  }
  if (lim.cpus) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", *lim.cpus);
    add({"--cpus", buf});
  }
  auto rl = walls::default_rlimits(plan.limits.memory_bytes.has_value());
  if (rl.set_core) add({"--ulimit", "core=" + std::to_string(rl.core) + ":" + std::to_string(rl.core)});
  if (rl.set_nofile) add({"--ulimit", "nofile=" + std::to_string(rl.nofile) + ":" + std::to_string(rl.nofile)});
  // podman otherwise copies its own RLIMIT_NPROC, which the runtime then fails
  // to set; the pids limit is the bound that matters.
  if (engine == Engine::Podman && lim.pids)
    add({"--ulimit", "nproc=" + std::to_string(*lim.pids) + ":" + std::to_string(*lim.pids)});
  if (rl.set_fsize) add({"--ulimit", "fsize=" + std::to_string(rl.fsize) + ":" + std::to_string(rl.fsize)});

  auto check_path = [&](const Step& s, const std::string& p) -> Result<void> {
    if (p.find_first_of(":,") != std::string::npos)
      return fail(Error::msg("docker-args: " + p, "a path with ':' or ',' cannot be given to -v"));
    (void)s;
    return {};
  };
  auto volume = [&](const Step& s, const std::string& src, const std::string& dst, const char* mode) -> Result<void> {
    if (auto r = check_path(s, src); !r) return r;
    if (auto r = check_path(s, dst); !r) return r;
    add({"-v", src + ":" + dst + ":" + mode});
    return {};
  };
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    auto unsupported = [&](const std::string& why) {
      return fail(Error::msg("docker-args: plan step " + std::string(plan::to_string(s.kind)) + " " + s.target, why));
    };
    bool top = s.target.size() > 1 && s.target.find('/', 1) == std::string::npos;
    Result<void> r;
    switch (s.kind) {
      case StepKind::BindRo:
        if (top && s.source == s.target) break;  // the image's (or the host's root) own
        r = volume(s, s.source, s.target, "ro");
        break;
      case StepKind::BindRw:
        r = volume(s, s.source, s.target, "rw");
        if (s.idmap) note(s.target + ": owned by uid " + std::to_string(s.idmap_from_uid) +
                          " on disk; exguardian run writes through an idmapped mount, the engine as uid " +
                          std::to_string(id.inside_uid));
        break;
      case StepKind::Overlay:
        if (!s.upper_dir.empty())
          return unsupported("the workspace overlay/discard modes need exguardian run; use --workspace-mode live");
        r = volume(s, s.source, s.target, "ro");
        note(s.target + ": read-only here (exguardian run gives it a throwaway writable layer)");
        break;
      case StepKind::Tmpfs: {
        if (s.target == "/dev" || s.target == "/dev/shm") break;  // the engine's own
        if (auto c = check_path(s, s.target); !c) return fail(c.error());
        // No uid=/gid= (podman refuses them): mode 1777 lets the command write there.
        // podman copies what the image has there into the tmpfs unless told not to.
        add({"--tmpfs", s.target + ":rw,nosuid,nodev,mode=" + octal(s.mode) +
                            (engine == Engine::Podman ? ",notmpcopyup" : "")});
        break;
      }
      case StepKind::MaskDir:
        if (auto c = check_path(s, s.target); !c) return fail(c.error());
        add({"--tmpfs", s.target + ":ro,nosuid,nodev,noexec,mode=0000,size=4k" +
                            (engine == Engine::Podman ? ",notmpcopyup" : "")});
        break;
      case StepKind::MaskFile:
        r = volume(s, "/dev/null", s.target, "ro");
        break;
      case StepKind::ProtectRo:
        if (within(s.target, "/proc") || within(s.target, "/sys")) break;  // the engine keeps them read-only
        r = volume(s, s.target, s.target, "ro");
        break;
      case StepKind::Pin:
        r = volume(s, s.target, s.target, "rw");
        break;
      case StepKind::ResolvConf:
        return unsupported("the in-sandbox resolver (network.resolver / --dns) needs exguardian run");
      case StepKind::Proc:
      case StepKind::Sysfs:
      case StepKind::Devpts:
        break;  // the engine's own
      case StepKind::DevNode:
        if (s.target == "/dev/null" || s.target == "/dev/zero" || s.target == "/dev/full" || s.target == "/dev/random" ||
            s.target == "/dev/urandom" || s.target == "/dev/tty")
          break;
        return unsupported("only the standard devices exist in a container");
      case StepKind::Symlink:
        if (top || within(s.target, "/dev")) break;  // the image's, the engine's
        return unsupported("symlinks outside the root's top level and /dev cannot be expressed");
      case StepKind::ReadOnly:
        if (s.target == "/dev" || std::any_of(plan.steps.begin(), plan.steps.end(), [&](const Step& m) {
              return m.kind == StepKind::MaskDir && m.target == s.target;
            }))
          break;
        return unsupported("making an arbitrary mount read-only afterwards cannot be expressed");
      default:
        return unsupported("not known to the docker-args generator");
    }
    if (!r) return fail(r.error());
  }
  for (const auto& e : plan.env) add({"-e", e});
  add({"-w", plan.cwd.empty() ? std::string("/") : plan.cwd});
  if (rootfs_dir) add({"--rootfs"});  // podman: IMAGE is a root directory
  a.push_back(image);
  a.insert(a.end(), plan.argv.begin(), plan.argv.end());
  return a;
}

}  // namespace exg::oci
