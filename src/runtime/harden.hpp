// An engine's config.json with ExGuardian's protections merged in, for
// `exguardian runtime create` (issue 17); the engine's own namespaces (and
// their paths: a pod's shared ones), mounts, hooks, user, cgroups and
// seccomp profile are kept and only ever narrowed:
//   - read-only root; every bind the engine asked for read-only unless it is
//     inside a policy allowWrite path; allowWrite paths with no mount of
//     their own get a private tmpfs, placed before the engine's mounts below
//     it (which stay visible and as writable as asked); destinations are
//     compared resolved in the container's root (RootfsPaths); host sockets
//     bound in refused unless the policy allows them;
//   - maskedPaths / readonlyPaths: the usual ones, plus denyRead / denyWrite;
//   - every capability dropped, no_new_privs;
//   - every process (the first, and each `exec`) starts as exguardian-init
//     --walls (init/walls_exec.hpp): Landlock (writes only in allowWrite,
//     /dev and /proc files) and ExGuardian's seccomp filter stacked on the
//     engine's profile (the kernel ANDs filters); with no profile of the
//     engine's, ExGuardian's also goes into linux.seccomp;
//   - the network namespace: the one the egress holder prepared (only its
//     proxy reachable), and the proxy variables in the environment;
//   - pids, memory and CPU limits the smaller of the engine's and the
//     policy's (resource_caps.hpp);
//     only the standard device nodes.
// Pure but for stat() of bind sources and lookups in the root: unit-tested on JSON.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/resource_caps.hpp"
#include "runtime/rootfs_path.hpp"
#include "oci/spec.hpp"
#include "policy/policy.hpp"
#include "util/error.hpp"

namespace exg::runtime {

// Where exguardian-init is bound inside every hardened container (on the
// runtime's own /dev tmpfs: nothing is created in the image).
inline constexpr const char* kInitPath = "/dev/.exguardian-init";

// Set on a config whose network namespace the egress holder made (the path
// in it dies with that holder): read again, it means "a new one".
inline constexpr const char* kOwnNetnsAnnotation = "org.exguardian.runtime.own-netns";

struct HardenInputs {
  const policy::Policy* policy = nullptr;
  oci::Runtime runtime = oci::Runtime::Crun;
  std::string init_source;        // host path of exguardian-init
  std::string walls;              // walls_for(*policy).dump(); "" : computed from the policy
  std::string netns_path;         // the container's network namespace; "" keeps the engine's entry
  uint16_t http_port = 3128;      // the proxy's listeners inside that namespace
  uint16_t socks_port = 1080;
  // The container's root, where destinations are resolved (symlinks inside
  // it) before they are compared; nullptr: compared as written.
  const RootfsPaths* rootfs = nullptr;
};

// The pause ("sandbox") container of a Kubernetes pod, which holds the pod's
// namespaces and runs nothing of the user's: CRI annotations of containerd
// and CRI-O.
bool is_pod_sandbox(const nlohmann::json& config);

// The container's network namespace as the engine asked: the path of one to
// join (a pod's, or one the engine made), "" for a new one.
std::string engine_netns_path(const nlohmann::json& config);

// The host directories the container may write through the engine's binds
// (destination in allowWrite, not in denyWrite): what the egress holder
// sweeps for planted files when the container ends.
std::vector<std::string> writable_bind_sources(const nlohmann::json& config, const policy::Policy& pol,
                                               const RootfsPaths& root = RootfsPaths());

// The walls exguardian-init puts up (microvm/guest/walls.hpp's JSON).
nlohmann::json walls_for(const policy::Policy& pol);

// Rewrites `config` in place; notes say what was changed where it matters.
Result<std::vector<std::string>> harden_config(nlohmann::json& config, const HardenInputs& in);

// One process (config.json's, or `exec --process`'s file): capabilities,
// no_new_privs, the walls prefix, the proxy variables. Idempotent: the prefix
// is not added twice when it is there exactly (a different one, even a
// forged weaker one, gets ours in front: walls only add up).
Result<void> harden_process(nlohmann::json& process, const HardenInputs& in);

}  // namespace exg::runtime
