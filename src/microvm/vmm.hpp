// The VMM behind the microVM layer, as data in and a command line out, so
// that another VMM (Firecracker, Cloud Hypervisor) is one more implementation
// where it is installed. Today: qemu's `microvm` machine (qemu_command.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace exg::microvm {

enum class Accel { Tcg, Kvm };
const char* to_string(Accel a);  // "TCG (software emulation)" / "KVM"

struct VmSpec {
  std::string vmm;          // the VMM binary (absolute)
  std::string kernel;       // uncompressed vmlinux, PVH boot
  std::string initramfs;    // cpio: the guest init and its modules
  std::string view_dir;     // exported over 9p as the guest's root (in the VMM's own mount namespace)
  // The channels are connected sockets the VMM is given as descriptors (these
  // numbers in its process), their other ends held by the host: no socket
  // path exists anywhere. -1: none.
  int channel_fd = -1;  // the agent's virtio-serial port
  int egress_fd = -1;   // the egress port (egress_mux.hpp); -1: no egress port (launch always sets it)
  // The scratch disk (scratch_disk.hpp), a read-write raw file given as a
  // descriptor (qemu's -add-fd: it never opens a path); -1: none. A template
  // saved with a disk serves only sandboxes with one (the command line differs).
  int disk_fd = -1;
  uint64_t memory_mib = 256;
  unsigned cpus = 1;
  Accel accel = Accel::Tcg;
  std::string name;         // the VM's name (ps shows it): exguardian-SANDBOX_ID
  // TCG: the guest cannot calibrate its TSC against a PIT on a busy host (its
  // clock then never ticks and the boot hangs): tell it the host's rate.
  uint64_t tsc_khz = 0;     // 0: let the guest calibrate
  // QMP, for the template's save and a restore (a descriptor as above); -1: no monitor.
  int monitor_fd = -1;
  bool incoming = false;    // wait for a saved state (over the monitor) instead of booting
  bool console = true;      // the guest's serial console on the VMM's stdout (kernel errors, the init's)
  bool verbose = false;     // the kernel's boot messages too
};

class Vmm {
 public:
  virtual ~Vmm() = default;
  virtual std::string name() const = 0;
  // The argv that boots `spec` and exits when the guest ends.
  virtual std::vector<std::string> command(const VmSpec& spec) const = 0;
};

// qemu-system-x86_64 -M microvm (Debian's qemu-system-x86).
class QemuMicrovm : public Vmm {
 public:
  std::string name() const override { return "qemu microvm"; }
  std::vector<std::string> command(const VmSpec& spec) const override;
};

// The qemu binary this layer uses: the full one (the -microvm build has no TCG and no -sandbox).
inline constexpr char kQemuBinary[] = "/usr/bin/qemu-system-x86_64";

}  // namespace exg::microvm
