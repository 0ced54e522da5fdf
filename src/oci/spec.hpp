// The Plan as an OCI runtime bundle (issue 7): config.json for crun, runc and
// runsc, and the equivalent hardened `docker run` / `podman run` flags. Pure:
// nothing here touches the kernel; the layer (oci/layer.hpp) writes the bundle
// and runs the runtime.
#pragma once
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plan/plan.hpp"
#include "util/error.hpp"

namespace exg::oci {

enum class Runtime { Crun, Runc, Runsc };

// Where the container's own boot id goes (util/boot_id.hpp): its
// source_override names the staged file, bound read-only over the kernel's.
inline constexpr const char* kBootIdKnob = "/proc/sys/kernel/random/boot_id";
const char* to_string(Runtime r);

struct SpecOptions {
  Runtime runtime = Runtime::Crun;
  std::string rootfs = "/";      // the host's root, read-only; or --rootfs DIR
  std::string netns_path;        // the namespace the supervisor prepared (loopback + proxy listeners); empty: a new one
  std::string cgroups_path;      // under ExGuardian's own cgroup, so limits nest; empty: none
  bool terminal = false;         // process.terminal
  bool rootless = false;         // invoked as a non-root user: a user namespace mapping the inside uid onto the caller
  // Host source path -> the path the runtime should bind instead (idmapped
  // mounts and generated files prepared by the layer in its staging dir).
  std::map<std::string, std::string> source_override;
  // Linux seccomp notify (SCMP_ACT_NOTIFY + listenerPath) so refusals reach the
  // supervisor as on the process layer; empty: refusals are SCMP_ACT_ERRNO.
  std::string seccomp_listener_path;
  // crun only, with a listener: the filter travels as the program the process
  // layer installs, compiled at build time (walls::prebuilt_seccomp_program(),
  // the same rules), in the annotation run.oci.seccomp_bpf_data (crun >= 0.18):
  // crun compiling the ~200 rules with libseccomp took ~6 ms of every start.
  // linux.seccomp then holds the listener and a default of SCMP_ACT_KILL_PROCESS
  // with no rules, so a runtime that ignored the annotation would start nothing
  // (fail closed) rather than run the command unfiltered.
  bool seccomp_prebuilt_program = false;
  // The container's pid 1 installs the filter itself (the gVisor layer:
  // exguardian-init --seccomp, init/sandbox_seccomp.hpp): linux.seccomp is
  // left out, as runsc compiling its rules cost ~12 ms of every start. The
  // layer that sets this puts --seccomp in process.args; pid 1 fails closed.
  bool seccomp_by_pid1 = false;
  // Without a layer to stage a throwaway upper layer (oci-spec, docker-args):
  // HOME's overlay becomes a read-only bind (said in `notes`); the workspace's
  // overlay/discard modes stay an error.
  bool unstaged_overlay_read_only = false;
  // Mount points of the host (for read-only binds on runtimes without
  // recursive read-only: every submount gets its own read-only bind); unset:
  // read from /proc/self/mountinfo.
  std::optional<std::vector<std::string>> host_mount_points;
  // Where make_spec says what it changed or left to the runtime (may be null).
  std::vector<std::string>* notes = nullptr;
};

// What runtimes usually hide or freeze in /proc and /sys (as docker does):
// linux.maskedPaths and readonlyPaths of every spec ExGuardian writes or hardens.
std::vector<std::string> default_masked_paths();
std::vector<std::string> default_readonly_paths();

// Mount points of this mount namespace (mountinfo's fifth field, unescaped).
std::vector<std::string> read_mount_points();

// config.json. An error names the Plan step the layer cannot express.
Result<nlohmann::json> make_spec(const plan::Plan& plan, const SpecOptions& opt);

// ExGuardian's seccomp rules (the same as the process layer's filter) in OCI
// form: linux.seccomp of config.json, also the `--security-opt seccomp=FILE`
// profile for docker/podman.
// runsc (20221219) ignores errnoRet (every refusal is EPERM) and has no clone3
// (ENOSYS from gVisor itself): its profile leaves clone3 to gVisor, as an
// EPERM there would stop glibc from falling back to clone (no threads).
nlohmann::json seccomp_profile(const std::string& listener_path = "", Runtime runtime = Runtime::Crun);

enum class Engine { Docker, Podman };
const char* to_string(Engine e);
// argv after the engine name: {"run", "--rm", "--user", "1000:1000", ...,
// IMAGE, COMMAND...}. `seccomp_file` is where the caller wrote seccomp_profile().
// `image`: an image name, or for podman an absolute root directory (--rootfs).
// The host's top-level directories are the image's; the
// workspace, HOME, allowWrite, masks and protected paths are volumes. An error
// names the Plan step an engine cannot express; `notes` gets what differs from
// `exguardian run` (may be null).
Result<std::vector<std::string>> docker_args(const plan::Plan& plan, Engine engine, const std::string& image,
                                             const std::string& seccomp_file,
                                             std::vector<std::string>* notes = nullptr);

}  // namespace exg::oci
