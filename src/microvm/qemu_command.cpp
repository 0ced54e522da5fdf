// qemu's command line for one sandbox's guest. Every device is named here;
// -nodefaults and -no-user-config keep qemu from adding any of its own (no
// NIC, no disks, no VGA), so the guest has exactly: a serial console, one
// virtio-serial port (the agent's channel), a second for egress (used only
// when the plan has a proxy), one 9p export (the view) and, as guest root, the
// scratch disk.
#include "microvm/guest/guest_abi.hpp"
#include "microvm/vmm.hpp"

namespace exg::microvm {

const char* to_string(Accel a) { return a == Accel::Kvm ? "KVM" : "TCG (software emulation)"; }

std::vector<std::string> QemuMicrovm::command(const VmSpec& s) const {
  std::string append = "console=ttyS0 reboot=t panic=-1 nomodeset random.trust_cpu=on";
  append += s.verbose ? " loglevel=7" : " quiet loglevel=0";
  // Nothing of one sandbox here: the same guest serves as every sandbox's
  // template; identity comes over the channel (guest/boot_record.hpp).
  if (s.tsc_khz) append += " tsc_early_khz=" + std::to_string(s.tsc_khz);
  std::vector<std::string> a = {
      s.vmm,
      "-M", "microvm,acpi=on",  // Debian's kernel finds the virtio-mmio devices through ACPI
      "-nodefaults", "-no-user-config", "-display", "none",
      "-no-reboot",  // the guest's reboot (reboot=t) ends qemu
      // qemu's own seccomp filter: no exec, no privilege changes, no scheduler or affinity changes.
      "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
      "-m", std::to_string(s.memory_mib) + "M",
      "-smp", std::to_string(s.cpus),
      "-kernel", s.kernel, "-initrd", s.initramfs, "-append", append,
      // The view: security_model=none, so qemu touches files as itself, under
      // the host's own permission checks and its sandbox's read-only mounts.
      "-fsdev", "local,id=view,path=" + s.view_dir + ",security_model=none,multidevs=remap",
      "-device", std::string("virtio-9p-device,fsdev=view,mount_tag=") + guest::kViewTag,
      "-chardev", "socket,id=agent,fd=" + std::to_string(s.channel_fd),
      "-device", "virtio-serial-device,max_ports=4",
      "-device", std::string("virtserialport,chardev=agent,name=") + guest::kChannelName,
  };
  if (s.egress_fd >= 0)
    // Always there on the microvm layer (launch.cpp), with or without a proxy:
    // the saved template's device set must be the same for every sandbox.
    a.insert(a.end(), {"-chardev", "socket,id=egress,fd=" + std::to_string(s.egress_fd), "-device",
                       std::string("virtserialport,chardev=egress,name=") + guest::kEgressChannelName});
  if (s.disk_fd >= 0)
    // Raw, no host page cache games, no locking (the file has no name: no one
    // else can open it); the guest's driver is loaded only after the hand-over.
    a.insert(a.end(), {"-add-fd", "fd=" + std::to_string(s.disk_fd) + ",set=1", "-blockdev",
                       "driver=raw,node-name=scratch,file.driver=file,file.filename=/dev/fdset/1,file.locking=off",
                       "-device", "virtio-blk-device,drive=scratch"});
  if (s.monitor_fd >= 0)
    // QMP for the host alone (its end of a socket pair): saving the template,
    // restoring from it. The guest has no path to it.
    a.insert(a.end(), {"-chardev", "socket,id=qmp,fd=" + std::to_string(s.monitor_fd), "-mon", "chardev=qmp,mode=control"});
  if (s.incoming) a.insert(a.end(), {"-incoming", "defer"});  // the state comes by fd over QMP
  if (!s.name.empty()) a.insert(a.end(), {"-name", "guest=" + s.name});
  if (s.accel == Accel::Kvm) {
    a.insert(a.end(), {"-accel", "kvm", "-cpu", "host"});
  } else {
    // A bounded translation cache (the default is 1 GiB, charged to the cgroup as it fills).
    // The CPU model with every feature TCG emulates (SSE4.2, AVX2, ...): under qemu's default
    // (qemu64) programs built for today's x86-64 die with SIGILL (Claude Code's binary). The
    // price: some guest work runs slower under emulation (docs/microvm.md, the measures).
    a.insert(a.end(), {"-accel", "tcg,tb-size=64", "-cpu", "max"});
  }
  if (s.console) a.insert(a.end(), {"-chardev", "stdio,id=console,signal=off", "-serial", "chardev:console"});
  else a.insert(a.end(), {"-serial", "none"});
  return a;
}

}  // namespace exg::microvm
