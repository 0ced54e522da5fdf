#include "oci/host_probe.hpp"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "oci/layer.hpp"

namespace exg::oci {
namespace {

using util::Capability;
using util::read_text;

// The container and gVisor layers as a run would set them up here: which
// runtime, what about the host's cgroup mounts, gVisor's platform and why, and
// what a caller of this uid gets (rootless).
void probe_oci_layers(std::vector<Capability>& out) {
  const bool root = ::geteuid() == 0;
  auto cg = decide_cgroup_view(read_text("/proc/self/mountinfo"));
  out.push_back({"runtime cgroups", true, cg.why + "; the container stays in the sandbox's cgroup"});
  if (auto c = choose_runtime(layer::Kind::Container, ""); c) {
    std::string d = c->describe();
    for (const auto& n : c->notes) d += "; " + n;
    bool ok = root || c->runtime == Runtime::Crun;
    d += root ? "; as root: the runtime sets the mounts up, the command runs as its uid"
              : (ok ? "; rootless: crun in a user namespace that maps only the command's uid"
                    : "; rootless needs crun (runc maps only root into a rootless container)");
    out.push_back({"container runtime", ok, d});
  } else {
    out.push_back({"container runtime", false, c.error().str()});
  }
  if (auto g = choose_runtime(layer::Kind::Gvisor, ""); g) {
    std::string d = g->describe();
    for (const auto& n : g->notes) d += "; " + n;
    auto platforms = runsc_platforms(g->path);
    if (std::find(platforms.begin(), platforms.end(), "kvm") != platforms.end())
      d += "; kvm is not chosen without EXGUARDIAN_GVISOR_PLATFORM=kvm (a nested host can hang in it)";
    if (root) {
      d += "; runsc runs as an unused high uid, the command as its own";
    } else {
      passwd* pw = ::getpwuid(::getuid());
      std::string name = pw ? pw->pw_name : "";
      bool sub = subordinate_start(read_text("/etc/subuid"), ::getuid(), name) &&
                 subordinate_start(read_text("/etc/subgid"), ::getuid(), name) &&
                 ::access("/usr/bin/newuidmap", X_OK) == 0 && ::access("/usr/bin/newgidmap", X_OK) == 0;
      d += sub ? "; rootless: runsc as your first subordinate uid, the command as your uid"
               : "; rootless without /etc/subuid range or newuidmap: the command runs as gVisor's uid 0 (no capabilities)";
    }
    out.push_back({"gvisor runtime", true, d});
  } else {
    out.push_back({"gvisor runtime", false, g.error().str()});
  }
}

}  // namespace

void probe_host(std::vector<Capability>& out) {
  util::probe_tool(out, "crun", "container layer (OCI runtime, fast)");
  util::probe_tool(out, "runc", "container layer (OCI runtime)");
  util::probe_tool(out, "runsc", "gVisor layer (user-space kernel)");
  probe_oci_layers(out);
}

}  // namespace exg::oci
