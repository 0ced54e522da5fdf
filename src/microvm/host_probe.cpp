#include "microvm/host_probe.hpp"

#include <fcntl.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "microvm/accel_probe.hpp"
#include "microvm/guest_image.hpp"
#include "microvm/snapshot.hpp"
#include "microvm/vmm.hpp"
#include "util/unique_fd.hpp"

namespace exg::microvm {
namespace {

using util::Capability;
using util::err_name;
using util::find_in_path;
using util::version_line;

// qemu as the microVM layer runs it: at its one path (microvm/vmm.hpp), not
// wherever PATH finds one (the layer would not start with that one).
void probe_qemu(std::vector<Capability>& out) {
  const std::string name = "qemu-system-x86_64";
  if (::access(kQemuBinary, X_OK) != 0) {
    std::string other = find_in_path(name);
    out.push_back({name, false, std::string(kQemuBinary) + " not found" +
                                    (other.empty() || other == kQemuBinary ? "" : " (" + other +
                                        " is in PATH, but the microVM layer runs only " + kQemuBinary + ")") +
                                    "; microVM layer"});
    return;
  }
  bool answered = false;
  std::string version = version_line(kQemuBinary, &answered);
  out.push_back({name, answered, std::string(kQemuBinary) + ": " + version + "; microVM layer"});
}

// The microVM layer's own guest (built by `make` from Debian's kernel package).
void probe_guest_kernel(std::vector<Capability>& out) {
  auto g = find_guest_image();
  if (!g) {
    out.push_back({"guest kernel", false, g.error().str()});
    return;
  }
  out.push_back({"guest kernel", true, g->kernel + " (" + g->kernel_version + ") and " + g->initramfs +
                                           ": the microVM layer's guest"});
}

// Under real KVM the guest reaches its init in well under a second.
constexpr int kKvmProofTimeoutMs = 5000;

void probe_kvm(std::vector<Capability>& out) {
  struct stat st{};
  if (::stat("/dev/kvm", &st) != 0) {
    out.push_back({"/dev/kvm", false, "absent: a microVM would run under TCG emulation (slower)"});
    out.push_back({"kvm guest boot", false, "not tried (no /dev/kvm): the microVM layer uses TCG (software emulation)"});
    return;
  }
  UniqueFd fd(::open("/dev/kvm", O_RDWR | O_CLOEXEC));
  if (!fd) {
    out.push_back({"/dev/kvm", false, "present but not openable by uid " + std::to_string(::geteuid()) + ": " +
                                          err_name(errno) + "; a microVM would run under TCG"});
    out.push_back({"kvm guest boot", false, "not tried (/dev/kvm not openable): the microVM layer uses TCG (software emulation)"});
    return;
  }
  int api = ::ioctl(fd.get(), KVM_GET_API_VERSION, 0);
  out.push_back({"/dev/kvm", true, "openable, KVM API " + std::to_string(api)});
  // The device node proves nothing (a nested PVM host opens it and runs no
  // ordinary guest): a real boot of the guest image does (microvm/accel_probe.hpp).
  auto proof = prove_kvm(kKvmProofTimeoutMs);
  out.push_back({"kvm guest boot", proof.kvm_boots,
                 proof.detail + (proof.from_cache ? " (tried earlier on this host boot)" : "") +
                     (proof.kvm_boots ? ": the microVM layer uses KVM" : ": the microVM layer uses TCG (software emulation)")});
}

}  // namespace

Capability template_cache_capability() {
  const std::string name = "microvm templates";
  if (!snapshots_enabled()) return {name, true, "EXG_MICROVM_SNAPSHOT=off: none saved, every microVM boots cold"};
  std::string dir = template_write_dir();
  if (dir.empty()) return {name, false, "no cache directory (no HOME): every microVM boots cold"};
  auto limit = template_cache_limit();
  if (!limit) return {name, false, limit.error().str() + ": no template is saved, every microVM boots cold"};
  uint64_t bytes = 0;
  size_t count = 0;
  for (const auto& t : list_templates(dir)) bytes += t.bytes, count += t.partial ? 0 : 1;
  auto mib = [](uint64_t b) { return std::to_string((b + (1 << 20) / 2) >> 20) + " MiB"; };
  return {name, true,
          dir + ": " + std::to_string(count) + (count == 1 ? " template, " : " templates, ") + mib(bytes) +
              " of at most " + mib(*limit) +
              " (EXG_MICROVM_SNAPSHOT_MAX; past it a new save removes the least recently used)"};
}

void probe_host(std::vector<Capability>& out, bool all) {
  probe_qemu(out);
  probe_guest_kernel(out);
  probe_kvm(out);
  if (all) out.push_back(template_cache_capability());
}

}  // namespace exg::microvm
