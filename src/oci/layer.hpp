// The container and gVisor layers (issue 7): the Plan run by an OCI runtime
// (crun, runc or runsc), with the same supervisor as the process layer.
//
// Design
// ------
// The supervisor (sandbox/supervisor.cpp) stays the one host process it is on
// the process layer: poll loop over a pidfd, signals, pty relay, timer, egress
// proxy thread, workspace guard, audit. Only what it launches differs. Here it
// clones a "runtime host" (RH), before any thread starts, with
//   CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID (+ CLONE_NEWUSER when not root,
//   and always for gVisor, see "Identities" below: the runtime has the
//   capabilities it needs and nothing outside)
// into the sandbox's cgroup (cgroup/cgroup.cpp: limits set before anything
// runs). The RH, pid 1 of its own pid namespace:
//   - makes every mount private and mounts a fresh /proc (the runtime resolves
//     pids there: "/proc/1/ns/net" is the RH's netns);
//   - hides /sys/fs/cgroup/unified on hybrid hosts (crun refuses hybrid mode
//     otherwise); pure v2 and pure v1 hosts need nothing (decide_cgroup_view);
//   - brings lo up and makes the proxy's listeners (127.0.0.1:3128 / :1080,
//     127.0.0.53:53 with network.resolver) in its netns, and hands them to the
//     supervisor over SCM_RIGHTS exactly as the process layer's child does
//     (process/netns_setup.hpp, util/fd_passing.hpp): egress, audit and
//     credential injection behave as on the process layer;
//   - mounts a private tmpfs over /run (the Plan never binds /run from the
//     host; a source under /run is refused) holding the bundle (config.json,
//     rootfs skeleton), the runtime's state dir (--root) and the staging
//     mounts: idmapped binds (root with a root-owned workspace:
//     plan.identity.synthetic) and overlays (HOME's throwaway layer, the
//     workspace's overlay/discard modes) built here and bound by the runtime
//     through SpecOptions::source_override;
//   - opens a pty on the host's devpts when the supervisor's stdio is a
//     terminal, hands the master to the supervisor (same relay as the process
//     layer) and gives the slave to the runtime as stdio (process.terminal
//     stays false; our pid 1 inside, exguardian-init, makes it the
//     command's controlling terminal, so job control works);
//   - seals read-only binds that hold other mounts (a recursive read-only
//     clone over the source: the runtime may not reach a submount below a 0700
//     directory), and binds the root's read-only top-level directories into
//     the skeleton root itself (one root for the runtime instead of a bind per
//     directory: each is a gofer mount for runsc);
//   - listens on listenerPath (crun, runc): the runtime hands over the
//     seccomp notify fd, which goes to the supervisor's SyscallViolations, so
//     refusals are answered and logged as on the process layer (runsc has no
//     seccomp notify: its refusals stay errno inside gVisor, unreported);
//   - writes config.json (oci/spec.hpp make_spec, computed by the parent before
//     the clone) and runs the runtime in the foreground:
//       crun  --root STATE --cgroup-manager=disabled run --bundle B ID
//             (the container stays in ExGuardian's own cgroup: limits nest and
//             cgroup kill reaches it, on hybrid, v1 and v2 alike)
//       runc  --root STATE run --bundle B ID  (cgroupsPath relative: nested
//             under ExGuardian's cgroup in every hierarchy RH is in)
//       runsc --root STATE --network=host --platform=P
//             --ignore-cgroups [--rootless] run --bundle B ID
//   - forwards the signals the supervisor sends it with `<runtime> kill ID SIG`
//     and exits with the runtime's status (= the command's: oci-init turns a
//     death by signal N into 128+N).
// The command's pid 1 in the container is exguardian-init (a small static
// build of `exguardian oci-init`, embedded in exguardian: pid1/image.hpp;
// bound from the installed copy when that is the same program, else from a
// private copy on the runtime host's tmpfs: pid1/provide.hpp): a pid 1
// without handlers ignores SIGTERM/SIGINT, so init forwards them, reaps, and
// gives the command its own session and controlling terminal.
//
// Cleanup on every path, by construction rather than by bookkeeping: the
// container, the runtime and (gVisor) the sentry and gofer all live in the RH's
// pid namespace, so when the RH dies (normal exit, the supervisor's SIGKILL on
// timeout, or PR_SET_PDEATHSIG when exguardian itself is SIGKILLed) the kernel
// kills all of them; the bundle, the state dir and the staging mounts live in
// the RH's mount namespace and vanish with it; the cgroup is the supervisor's
// (removed at exit, swept by the next run after a SIGKILL). Ephemeral: a fresh
// bundle and container id (the sandbox id) per run.
//
// Identities. As root, crun and runc run without a runtime-host user
// namespace: they set the mounts up as root and start the command as its uid
// (plan.identity; a container user namespace would make the mount setup the
// command's uid's, which cannot reach root's 0700 directories). Rootless crun:
// the runtime host maps its 0 onto the caller, the container's user namespace
// the command's uid onto that. gVisor (runsc --rootless, always in a runtime-
// host user namespace, decide_host_ids in layer.cpp): 0 is mapped onto an
// unprivileged host uid that is not the command's (as root a second high
// unused uid; as a user the first id of their /etc/subuid range, through
// newuidmap) and the command's uid onto itself. The command runs in gVisor as
// its own non-root uid with no capabilities; runsc, the sentry and the gofer
// are not root on the host; the gofer (root of that namespace: CAP_CHOWN and
// CAP_DAC_OVERRIDE over exactly those two ids) creates files and hands them to
// the command's uid, so workspace writes land owned by the workspace's owner
// (through an idmapped mount that also maps the gofer's own uid, when the
// workspace is root's). Host root's files appear owned by the overflow uid.
// Without a subuid range or newuidmap, the fallback maps 0 onto the caller and
// runs the command as gVisor's uid 0 with empty capability sets (said by -v):
// the same host rights, but `id -u` says 0. --gvisor-root asks for that map
// (0 onto the command's host uid) on purpose: E2B's root user, `serve`
// templates with allowRoot. What did not work with this runsc:
// spec uid/gid mappings (runsc hangs, or refuses to start the gofer rootless);
// host-root runsc writing through an idmapped mount (EOVERFLOW: host 0 is not
// in the mount's map).
//
// gVisor's network trade-off: runsc runs with --network=host inside the RH's
// netns, so the sandbox's sockets are host sockets in a namespace that holds
// only loopback and our proxy listeners. gVisor's own netstack is bypassed (the
// sentry makes socket syscalls to the host kernel), but the only thing
// reachable is ExGuardian's proxy, which applies the same rules and audit as on
// the process layer. runsc's own netstack would give the sandbox a loopback
// the proxy listeners are not on.
#pragma once
#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "oci/spec.hpp"
#include "plan/plan.hpp"
#include "layer/layer.hpp"
#include "util/error.hpp"

namespace exg::oci {

// Which runtime binary runs a layer, and how (gVisor: which platform).
struct RuntimeChoice {
  Runtime runtime = Runtime::Crun;
  std::string path;       // absolute path of the binary
  std::string platform;   // runsc only: systrap | kvm | ptrace
  std::vector<std::string> notes;  // why this one (shown by -v and doctor)
  std::string describe() const;
};

// `--runtime PATH` (empty: crun, else runc; runsc for gVisor). An error says
// what is missing.
Result<RuntimeChoice> choose_runtime(layer::Kind kind, const std::string& runtime_flag);

// What the runtime host must do about the cgroup filesystems it sees.
struct CgroupView {
  bool hide_unified = false;  // hybrid: cover the empty v2 mount so crun sees v1 only
  std::string unified_path;   // where that v2 mount is
  bool pure_v2 = false;
  std::string why;
};
// From /proc/self/mountinfo text (pure; unit tested).
CgroupView decide_cgroup_view(const std::string& mountinfo);

// gVisor platform from what runsc and the host offer (pure; unit tested):
// `platforms` lists the names runsc knows; kvm_works says /dev/kvm passed a
// bounded probe.
std::string pick_gvisor_platform(const std::vector<std::string>& platforms, bool kvm_works,
                                 std::vector<std::string>* notes);

// The platforms `runsc flags` lists ("which platform to use: ptrace (default),
// kvm." -> {ptrace, kvm}); pure.
std::vector<std::string> parse_platforms(const std::string& flags_text);
// runsc's platforms, from the per-user cache when it matches this binary
// (path, size, mtime, inode), else from `runsc flags` (then cached).
std::vector<std::string> runsc_platforms(const std::string& runsc, bool* from_cache = nullptr);
// The cache line for `key` (runsc_cache_key) in the cache file's text; nothing
// when absent or not a list of known platform names (pure).
std::optional<std::vector<std::string>> parse_platform_cache(const std::string& text, const std::string& key);
std::string runsc_cache_key(const std::string& runsc);

// The first subordinate id of `uid` (or user `name`) in /etc/subuid or
// /etc/subgid text ("name:start:count" lines); nothing when there is none (pure).
std::optional<unsigned long> subordinate_start(const std::string& text, uid_t uid, const std::string& name);

struct LayerOptions {
  layer::Kind kind = layer::Kind::Container;  // Container or Gvisor
  RuntimeChoice runtime;
  std::string rootfs;  // --rootfs DIR; empty: the host's root, read-only
  // gVisor: the command as gVisor's uid 0 (no capabilities; --gvisor-root),
  // the one-id map below even where a second id could be had.
  bool gvisor_root = false;
  // What the host offers, read once when the layer is made (read_host), so
  // that describe_layer() is pure and launch() reads nothing twice.
  CgroupView cgroups;
  std::optional<std::string> pid1_installed;  // the installed pid-1 program, else the embedded one is written out
};
// Fills LayerOptions' host facts (mountinfo, the installed pid-1 program).
void read_host(LayerOptions& opt);

// What --dry-run and -v say about the layer (replacing the plan's layer line):
// runtime, platform and why, root, cgroups, identity, seccomp (pure).
std::vector<std::string> describe_layer(const plan::Plan& plan, const LayerOptions& opt);

// Launches the Plan in a container; the supervisor treats the result like the
// process layer's (pidfd of the runtime host, pty, cgroup, proxy listeners).
Result<layer::Sandbox> launch(const plan::Plan& plan, const layer::LaunchOptions& lo, const LayerOptions& opt);

// After the sandbox is gone (supervisor): what the runtime could not clean up
// when it was killed (runc's cgroups outside ours).
void after_run(const plan::Plan& plan, const LayerOptions& opt);

// The container and gVisor layers as a Layer (layer/layer.hpp).
class OciLayer final : public layer::Layer {
 public:
  explicit OciLayer(LayerOptions opt) : opt_(std::move(opt)) {}
  layer::Kind kind() const override { return opt_.kind; }
  std::vector<std::string> describe(const plan::Plan& plan) const override { return describe_layer(plan, opt_); }
  layer::Enforcement enforces(const plan::Plan& plan) const override;
  Result<layer::Sandbox> launch(const plan::Plan& plan, const layer::LaunchOptions& lo) override {
    return oci::launch(plan, lo, opt_);
  }
  void after_run(const plan::Plan& plan) override { oci::after_run(plan, opt_); }
  bool carries_host_unix_sockets() const override { return opt_.kind != layer::Kind::Gvisor; }  // runsc --host-uds none
  const LayerOptions& options() const { return opt_; }

 private:
  LayerOptions opt_;
};

// A read-only bind the runtime host makes itself, in the skeleton root, before
// the runtime starts: a recursive read-only clone of SOURCE (or a plain one of
// a file) moved onto TARGET. runsc serves the whole root through one gofer
// connection and follows these mounts, where each bind of config.json costs
// it a gofer mount of its own (~1.6 ms under ptrace).
struct HostBind {
  std::string source, target;
  bool recursive = true;
  bool noexec = false;
};

// What a bind's source is, as the runtime host will see it: a directory, a
// regular file, or anything else (0: missing, a socket, ...).
enum class SourceKind { Other, Dir, File };

// Takes out of MOUNTS (config.json's, in order) the read-only binds of a
// directory or a regular file that no mount kept for the runtime before them
// overlaps (an ancestor, the same path or a descendant): made first by the
// runtime host, each ends up under or over the others exactly as in the
// spec's order. Directory binds go only when recursive ("rbind"), or as the
// root's own top-level directories (ROOTFS + dest). SKEL: the skeleton root.
std::vector<HostBind> take_host_binds(nlohmann::json& mounts, const std::string& skel, const std::string& rootfs,
                                      const std::function<SourceKind(const std::string&)>& kind_of);

// The runtime's argv (without the kill/delete verbs' ids), for tests and -v.
std::vector<std::string> runtime_argv(const RuntimeChoice& rt, bool rootless, const std::string& state_dir,
                                      const std::string& bundle_dir, const std::string& id);

}  // namespace exg::oci
