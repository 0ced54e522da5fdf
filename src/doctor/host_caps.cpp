#include "doctor/host_caps.hpp"

#include <grp.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "microvm/host_probe.hpp"
#include "oci/host_probe.hpp"
#include "process/host_probe.hpp"

namespace exg::doctor {
namespace {

using util::err_name;
using util::in_child;
using util::read_text;
using util::say;
using util::trim;

// As root, a run first drops its supplementary groups (cli/host_setup.hpp),
// for every layer: where that is refused (root of a user namespace whose
// setgroups is denied, as `unshare --map-root-user` makes), nothing runs.
Capability probe_supplementary_groups() {
  const std::string name = "supplementary groups";
  if (::geteuid() != 0) return {name, true, "not root: a run has none of root's groups to drop"};
  auto r = in_child([](int fd) {
    if (::setgroups(0, nullptr) == 0) return 0;
    say(fd, "setgroups(0): " + err_name(errno));
    return 1;
  });
  if (r.code == 0) return {name, true, "as root, a run drops its supplementary groups first: setgroups(0) works"};
  std::string sg = trim(read_text("/proc/self/setgroups"));
  return {name, false,
          "as root, a run drops its supplementary groups first, and " + (r.text.empty() ? "probe failed" : r.text) +
              (sg == "deny" ? " (/proc/self/setgroups is deny in this user namespace)" : "")};
}

// The probes, in doctor's order: each layer's own (process, container and
// gVisor, microVM: their host_probe.hpp, the only place each answers for its
// host), then
// what every layer needs. `all` false: only those layer_status() reads
// (without idmap, overlay, cgroups, the template cache and nft).
std::vector<Capability> run_probes(bool all) {
  std::vector<Capability> out;
  process::probe_host(out, all);
  oci::probe_host(out);
  microvm::probe_host(out, all);
  if (all) {
    std::string nft = util::find_in_path("nft");
    if (nft.empty()) {
      out.push_back({"nftables", false, "nft not in PATH; only needed for layers that route through a veth"});
    } else {
      bool answered = false;
      std::string version = util::version_line(nft, &answered);
      out.push_back({"nftables", answered, nft + ": " + version + "; for container/microVM egress rules"});
    }
  }
  out.push_back(probe_supplementary_groups());
  return out;
}

}  // namespace

const Capability* find_capability(const std::vector<Capability>& caps, const std::string& name) {
  for (const auto& c : caps)
    if (c.name == name) return &c;
  return nullptr;
}

std::vector<Capability> probe_host() { return run_probes(true); }

// The probes layer_status() reads, as probe_host() makes them (same names).
std::vector<Capability> probe_for_layers() { return run_probes(false); }

}  // namespace exg::doctor
