// The Plan as an OCI runtime bundle (issue 7): config.json for crun, runc and
// runsc, and the equivalent hardened `docker run` / `podman run` flags. Pure:
// nothing here touches the kernel; the layer (oci/layer.hpp) writes the bundle
// and runs the runtime.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plan/plan.hpp"
#include "util/error.hpp"

namespace exg::oci {

enum class Runtime { Crun, Runc, Runsc };
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
};

// config.json. An error names the Plan step the layer cannot express.
Result<nlohmann::json> make_spec(const plan::Plan& plan, const SpecOptions& opt);

// ExGuardian's seccomp rules (the same as the process layer's filter) in OCI
// form: linux.seccomp of config.json, also the `--security-opt seccomp=FILE`
// profile for docker/podman.
nlohmann::json seccomp_profile(const std::string& listener_path = "");

enum class Engine { Docker, Podman };
// argv after the engine name: {"run", "--rm", "--user", "1000:1000", ...,
// IMAGE, COMMAND...}. `seccomp_file` is where the caller wrote seccomp_profile().
std::vector<std::string> docker_args(const plan::Plan& plan, Engine engine, const std::string& image,
                                     const std::string& seccomp_file);

}  // namespace exg::oci
