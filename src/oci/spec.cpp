// Plan -> OCI runtime spec (config.json). Every Plan step is mapped in order,
// or refused with an error naming it: a step this file does not know would be
// a protection silently dropped.
#include "oci/spec.hpp"
#include "util/mountinfo.hpp"

#include <unistd.h>
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "walls/rlimits.hpp"
#include "walls/seccomp.hpp"
#include "util/base64.hpp"

namespace exg::oci {

using nlohmann::json;
using plan::Step;
using plan::StepKind;

const char* to_string(Runtime r) {
  switch (r) {
    case Runtime::Crun: return "crun";
    case Runtime::Runc: return "runc";
    case Runtime::Runsc: return "runsc";
  }
  return "?";
}

namespace {

constexpr const char* kSeccompProgramAnnotation = "run.oci.seccomp_bpf_data";

// walls::prebuilt_seccomp_program() as the bytes seccomp(2) takes (struct sock_filter, native order).
std::string seccomp_program_bytes() {
  const auto& prog = walls::prebuilt_seccomp_program();
  return std::string(reinterpret_cast<const char*>(prog.data()), prog.size() * sizeof(sock_filter));
}

bool within(const std::string& p, const std::string& dir) {
  if (dir == "/") return true;
  return p == dir || (p.size() > dir.size() && p.compare(0, dir.size(), dir) == 0 && p[dir.size()] == '/');
}

// The devices and /dev links every OCI runtime supplies itself (runtime-spec
// "Default Devices" and "Dev symbolic links").
const std::set<std::string> kRuntimeDevices = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                               "/dev/urandom", "/dev/tty"};
const std::set<std::string> kRuntimeDevLinks = {"/dev/ptmx", "/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr"};

// What runtimes usually hide or freeze in /proc and /sys (as docker does).
const char* const kMaskedPaths[] = {"/proc/acpi",        "/proc/asound",       "/proc/kcore",       "/proc/keys",
                                    "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
                                    "/proc/scsi",        "/sys/firmware"};
const char* const kReadonlyPaths[] = {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"};

std::string octal(unsigned mode) {
  std::ostringstream o;
  o << std::oct << mode;
  std::string s = o.str();
  while (s.size() < 4) s = "0" + s;
  return s;
}



class Builder {
 public:
  Builder(const plan::Plan& plan, const SpecOptions& opt) : plan_(plan), opt_(opt) {}

  Result<json> build() {
    json spec;
    spec["ociVersion"] = "1.0.2";
    spec["process"] = process();
    spec["root"] = {{"path", opt_.rootfs}, {"readonly", true}};
    spec["hostname"] = plan_.hostname;
    if (auto m = mounts(); !m) return fail(m.error());
    spec["mounts"] = mounts_;
    spec["linux"] = linux_section();
    if (prebuilt_seccomp())
      spec["annotations"] = {{kSeccompProgramAnnotation, util::base64_encode(seccomp_program_bytes())}};
    return spec;
  }

 private:
  void note(std::string s) {
    if (opt_.notes) opt_.notes->push_back(std::move(s));
  }

  json process() const {
    json p;
    p["terminal"] = opt_.terminal;
    p["user"] = {{"uid", plan_.identity.inside_uid}, {"gid", plan_.identity.inside_gid}};
    p["args"] = plan_.argv;
    p["env"] = plan_.env;
    p["cwd"] = plan_.cwd.empty() ? std::string("/") : plan_.cwd;
    json none = json::array();
    p["capabilities"] = {{"bounding", none}, {"effective", none}, {"inheritable", none}, {"permitted", none},
                         {"ambient", none}};
    p["noNewPrivileges"] = true;
    // The process layer's rlimits (walls/rlimits.cpp), same values.
    auto rl = walls::default_rlimits(plan_.limits.memory_bytes.has_value());
    json r = json::array();
    if (rl.set_core) r.push_back({{"type", "RLIMIT_CORE"}, {"soft", rl.core}, {"hard", rl.core}});
    if (rl.set_nofile) r.push_back({{"type", "RLIMIT_NOFILE"}, {"soft", rl.nofile}, {"hard", rl.nofile}});
    if (rl.set_fsize) r.push_back({{"type", "RLIMIT_FSIZE"}, {"soft", rl.fsize}, {"hard", rl.fsize}});
    p["rlimits"] = r;
    return p;
  }

  // The host path a bind of `path` should use: what the sandbox sees there
  // through the deepest tree that holds it (a bind or HOME's overlay). When
  // that tree was staged by the layer (idmapped, or the throwaway overlay), the
  // same place in the staged copy; else the host path itself. The deepest tree
  // decides, never merely the longest staged prefix: a workspace inside HOME is
  // its own bind of the host, not a directory of HOME's throwaway overlay
  // (writes there were silently dropped on the container and gVisor layers).
  // A bind step's own source: its staged copy (idmapped) or the host path.
  std::string own_source(const Step& st) const {
    auto it = opt_.source_override.find(st.source);
    return it != opt_.source_override.end() ? it->second : st.source;
  }

  std::string host_source(const std::string& path) const {
    const Step* tree = nullptr;
    for (const auto& st : plan_.steps) {
      bool is_tree = st.kind == StepKind::BindRw || st.kind == StepKind::BindRo || st.kind == StepKind::Overlay;
      if (is_tree && !st.source.empty() && within(path, st.target) && (!tree || st.target.size() >= tree->target.size()))
        tree = &st;
    }
    if (!tree) return path;
    std::string rest = path.substr(tree->target.size());
    return own_source(*tree) + rest;
  }

  void bind(const std::string& source, const std::string& dest, std::vector<std::string> options) {
    mounts_.push_back({{"destination", dest}, {"type", "bind"}, {"source", source}, {"options", options}});
  }

  void tmpfs(const std::string& dest, std::vector<std::string> options) {
    mounts_.push_back({{"destination", dest}, {"type", "tmpfs"}, {"source", "tmpfs"}, {"options", options}});
  }

  // Read-only and recursive: crun says "rro"; runc 1.1 and runsc do not know
  // it, so every host mount below the source gets its own read-only bind.
  void bind_ro_tree(const std::string& source, const std::string& dest, const std::string& what_host, bool is_dir) {
    std::vector<std::string> o = {"rbind", "ro", "nosuid", "nodev"};
    if (!is_dir) {  // a file has no submounts (and crun 1.8 refuses "rro" on one)
      bind(source, dest, o);
      return;
    }
    // Rootless crun opens the mounted target to set "rro": a 0700 directory
    // of an unmapped owner (/root) fails, so rootless takes the fallback too.
    if (opt_.runtime == Runtime::Crun && !opt_.rootless) {
      o.push_back("rro");
      bind(source, dest, o);
      return;
    }
    bind(source, dest, o);
    if (!host_mount_points_) host_mount_points_ = opt_.host_mount_points ? *opt_.host_mount_points : read_mount_points();
    std::set<std::string> done;
    for (const auto& mp : *host_mount_points_) {
      if (mp == what_host || !within(mp, what_host) || !done.insert(mp).second) continue;
      bind(mp, dest + mp.substr(what_host.size()), {"rbind", "ro", "nosuid", "nodev"});
    }
  }

  bool is_base_view(const Step& s) const {
    // The host's top-level directories and links (plan/compile.cpp base()).
    bool top = s.target.size() > 1 && s.target.find('/', 1) == std::string::npos;
    return top && ((s.kind == StepKind::BindRo && s.source == s.target) || s.kind == StepKind::Symlink);
  }

  Result<void> mounts() {
    const bool host_root = opt_.rootfs == "/";
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      const Step& s = plan_.steps[i];
      auto unsupported = [&](const std::string& why) {
        return fail(Error::msg("oci spec: plan step " + std::string(plan::to_string(s.kind)) + " " + s.target, why));
      };
      if (!host_root && is_base_view(s)) continue;  // --rootfs DIR supplies its own system
      switch (s.kind) {
        case StepKind::BindRo:
          bind_ro_tree(own_source(s), s.target, s.source, s.is_dir);
          break;
        case StepKind::BindRw:
          bind(own_source(s), s.target, {"rbind", "rw", "nosuid", "nodev"});
          break;
        case StepKind::Overlay:
          if (opt_.source_override.count(s.source)) {
            bind(opt_.source_override.at(s.source), s.target, {"rbind", "rw", "nosuid", "nodev"});
          } else if (opt_.unstaged_overlay_read_only && s.upper_dir.empty()) {
            bind_ro_tree(s.source, s.target, s.source, true);
            note(s.target + ": read-only here (on the process and container layers writes go to a throwaway layer)");
          } else {
            return unsupported(s.upper_dir.empty()
                                   ? "a throwaway overlay needs the layer's staging (exguardian run --layer container)"
                                   : "the workspace overlay/discard modes need exguardian run; use --workspace-mode live");
          }
          break;
        case StepKind::Tmpfs: {
          std::vector<std::string> o = {"nosuid", "nodev", "mode=" + octal(s.mode)};
          if (s.target == "/dev") {
            o = {"nosuid", "strictatime", "mode=0755", "size=65536k"};  // the runtime fills it
          } else if (s.target == "/tmp" || s.target == "/var/tmp" || s.target == "/dev/shm") {
            o.push_back("uid=" + std::to_string(plan_.identity.inside_uid));
            o.push_back("gid=" + std::to_string(plan_.identity.inside_gid));
          }
          tmpfs(s.target, o);
          break;
        }
        case StepKind::MaskDir: {
          // Empty, mode 0, read-only unless something is bound back inside
          // (allowRead); then its owner (root) and no capabilities keep it sealed.
          bool inside = false;
          for (size_t j = i + 1; j < plan_.steps.size(); ++j)
            if ((plan_.steps[j].kind == StepKind::BindRo || plan_.steps[j].kind == StepKind::File) &&
                within(plan_.steps[j].target, s.target) && plan_.steps[j].target != s.target)
              inside = true;
          // Mode 0, or 0111 when something inside is bound back (the Plan's
          // choice): passable to reach it, not listable.
          std::vector<std::string> o = {"nosuid", "nodev", "noexec", "mode=" + octal(s.mode & 0111), "size=4k",
                                        "nr_inodes=64"};
          if (!inside) o.push_back("ro");
          tmpfs(s.target, o);
          break;
        }
        case StepKind::MaskFile:
          if (s.if_present) {
            // A host socket. gVisor's gofer connects to none (runsc --host-uds
            // defaults to none, and the layer never sets it), and runsc cannot
            // start with a mount over a socket: nothing to mask there.
            if (opt_.runtime == Runtime::Runsc) break;
            if (::access(s.target.c_str(), F_OK) != 0 && errno == ENOENT) break;  // gone since the plan
          }
          // /dev/null on a nodev mount: opening it fails (EACCES), like the
          // process layer's unreadable empty file.
          bind("/dev/null", s.target, {"bind", "ro", "nosuid", "nodev", "noexec"});
          break;
        case StepKind::File:
          if (s.in_upper) break;  // a plain file in its tree's overlay (the supervisor put it in the upper layer)
          // Generated content (secrets: the trust bundle with the sandbox's CA,
          // masked credential copies): written by the layer in its staging.
          if (!opt_.source_override.count(s.target))
            return unsupported("generated files (secrets: the trust bundle, masked credential copies) need the "
                               "layer's staging: use exguardian run --layer container|gvisor");
          bind(opt_.source_override.at(s.target), s.target, {"bind", s.writable ? "rw" : "ro", "nosuid", "nodev", "noexec"});
          break;
        case StepKind::ResolvConf:
          if (!opt_.source_override.count(s.target))
            return unsupported("the generated resolv.conf (network.resolver / --dns) was not staged: "
                               "not available on the OCI layers or export yet");
          bind(opt_.source_override.at(s.target), s.target, {"bind", "ro", "nosuid", "nodev", "noexec"});
          break;
        case StepKind::ProtectRo:
          if (within(s.target, "/proc") || within(s.target, "/sys")) {
            readonly_.insert(s.target);  // the runtime binds the container's own path
          } else {
            bind(host_source(s.target), s.target, {"rbind", "ro", "nosuid", "nodev"});
          }
          break;
        case StepKind::Pin:
          bind(host_source(s.target), s.target, {"bind", "rw", "nosuid", "nodev"});
          break;
        case StepKind::Proc:
          mounts_.push_back({{"destination", s.target}, {"type", "proc"}, {"source", "proc"},
                             {"options", {"nosuid", "noexec", "nodev"}}});
          // Its own boot id (util/boot_id.hpp), when the layer staged one; /proc/sys's read-only bind takes it along.
          if (s.target == "/proc" && opt_.source_override.count(kBootIdKnob))
            bind(opt_.source_override.at(kBootIdKnob), kBootIdKnob, {"bind", "ro", "nosuid", "nodev", "noexec"});
          break;
        case StepKind::Sysfs:
          mounts_.push_back({{"destination", s.target}, {"type", "sysfs"}, {"source", "sysfs"},
                             {"options", {"nosuid", "noexec", "nodev", "ro"}}});
          break;
        case StepKind::Devpts:
          mounts_.push_back({{"destination", s.target}, {"type", "devpts"}, {"source", "devpts"},
                             {"options", {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}}});
          break;
        case StepKind::DevNode:
          if (!kRuntimeDevices.count(s.target))
            return unsupported("only the standard devices (null, zero, full, random, urandom, tty) exist in a container");
          break;  // the runtime creates it
        case StepKind::Symlink:
          if (kRuntimeDevLinks.count(s.target)) break;  // the runtime creates it
          if (is_base_view(s)) break;                   // already in the host's root
          return unsupported("symlinks outside the root's top level and /dev cannot be expressed");
        case StepKind::ReadOnly:
          // /dev: a root-owned 0755 tmpfs the command (no capabilities) cannot
          // write; a mask: mounted "ro" or mode 0 above.
          if (s.target == "/dev") break;
          if (std::any_of(plan_.steps.begin(), plan_.steps.end(),
                          [&](const Step& m) { return m.kind == StepKind::MaskDir && m.target == s.target; }))
            break;
          return unsupported("making an arbitrary mount read-only afterwards cannot be expressed");
        default:
          return unsupported("not known to the OCI spec generator");
      }
    }
    return {};
  }

  json linux_section() const {
    json l;
    json ns = json::array();
    for (const char* t : {"pid", "ipc", "uts", "mount", "cgroup"}) ns.push_back({{"type", t}});
    if (opt_.netns_path.empty()) ns.push_back({{"type", "network"}});
    else ns.push_back({{"type", "network"}, {"path", opt_.netns_path}});
    if (opt_.rootless) {
      ns.push_back({{"type", "user"}});
      const auto& id = plan_.identity;
      l["uidMappings"] = json::array({{{"containerID", id.inside_uid}, {"hostID", id.host_uid}, {"size", 1}}});
      l["gidMappings"] = json::array({{{"containerID", id.inside_gid}, {"hostID", id.host_gid}, {"size", 1}}});
    }
    l["namespaces"] = ns;
    json masked = json::array();
    for (const char* p : kMaskedPaths) masked.push_back(p);
    l["maskedPaths"] = masked;
    std::set<std::string> ro(std::begin(kReadonlyPaths), std::end(kReadonlyPaths));
    ro.insert(readonly_.begin(), readonly_.end());
    l["readonlyPaths"] = ro;
    json res;
    // Only the standard devices (the runtime adds its defaults to these).
    json dev = json::array({{{"allow", false}, {"access", "rwm"}}});
    auto c = [&](int major, int minor) {
      json d = {{"allow", true}, {"type", "c"}, {"major", major}, {"access", "rwm"}};
      if (minor >= 0) d["minor"] = minor;
      dev.push_back(d);
    };
    c(1, 3), c(1, 5), c(1, 7), c(1, 8), c(1, 9), c(5, 0), c(5, 2), c(136, -1);
    res["devices"] = dev;
    const auto& lim = plan_.limits;
    if (lim.memory_bytes) res["memory"] = {{"limit", *lim.memory_bytes}, {"swap", *lim.memory_bytes}};  // no extra swap
    if (lim.pids) res["pids"] = {{"limit", *lim.pids}};
    if (lim.cpus) {
      constexpr uint64_t kPeriod = 100000;
      res["cpu"] = {{"quota", static_cast<int64_t>(*lim.cpus * kPeriod)}, {"period", kPeriod}};
    }
    l["resources"] = res;
    if (!opt_.cgroups_path.empty()) l["cgroupsPath"] = opt_.cgroups_path;
    if (prebuilt_seccomp())
      l["seccomp"] = {{"defaultAction", "SCMP_ACT_KILL_PROCESS"},
                      {"architectures", {"SCMP_ARCH_X86_64"}},
                      {"syscalls", json::array()},
                      {"listenerPath", opt_.seccomp_listener_path}};
    else if (plan_.seccomp && !opt_.seccomp_by_pid1)
      l["seccomp"] = seccomp_profile(opt_.seccomp_listener_path, opt_.runtime);
    return l;
  }

  bool prebuilt_seccomp() const {
    return plan_.seccomp && opt_.seccomp_prebuilt_program && opt_.runtime == Runtime::Crun &&
           !opt_.seccomp_listener_path.empty();
  }

  const plan::Plan& plan_;
  const SpecOptions& opt_;
  json mounts_ = json::array();
  std::set<std::string> readonly_;
  std::optional<std::vector<std::string>> host_mount_points_;
};

}  // namespace

std::vector<std::string> default_masked_paths() { return {std::begin(kMaskedPaths), std::end(kMaskedPaths)}; }
std::vector<std::string> default_readonly_paths() { return {std::begin(kReadonlyPaths), std::end(kReadonlyPaths)}; }

std::vector<std::string> read_mount_points() {
  std::vector<std::string> out;
  for (auto& m : util::read_mountinfo()) out.push_back(std::move(m.mount_point));
  return out;
}

Result<json> make_spec(const plan::Plan& plan, const SpecOptions& opt) {
  if (plan.argv.empty()) return fail(Error::msg("oci spec", "no command"));
  if (opt.rootfs.empty() || opt.rootfs[0] != '/')
    return fail(Error::msg("oci spec: rootfs " + opt.rootfs, "must be an absolute path"));
  Builder b(plan, opt);
  return b.build();
}

}  // namespace exg::oci
