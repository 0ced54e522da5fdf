// The microVM layer's launch: the guest kernel under qemu's microvm machine,
// qemu itself jailed by ExGuardian's process layer (its own user, mount, pid,
// net, ipc, uts and cgroup namespaces, seccomp, Landlock, the sandbox's
// cgroup and limits) with the Plan's view at "/" for itself and a copy under
// kViewRoot exported to the guest over 9p. The guest's pid 1 is our init
// (guest/init.cpp), which runs the agent on a virtio-serial port: the
// returned Launched::agent_channel is that port's host side.
#pragma once
#include <string>
#include <vector>

#include "microvm/guest/walls.hpp"
#include "microvm/vmm.hpp"
#include "plan/plan.hpp"
#include "process/launch.hpp"
#include "util/error.hpp"

namespace exg::microvm {

struct LayerOptions {
  Accel accel = Accel::Tcg;
  std::string accel_why;  // why this accelerator (accel_probe.hpp: chosen_accel)
  // The command as root inside the guest (--microvm-root): the guest kernel
  // is the wall; qemu, and so every file access over 9p, stays the plan's
  // unprivileged uid on the host.
  bool guest_root = false;
};

// The walls the guest's init puts around the command (guest/walls.hpp): the
// process layer's seccomp rules (errno-only) unless --unsafe-no-seccomp, the
// Plan's Landlock rules and its pids limit. Root inside the guest
// (--microvm-root, for privileged tools: mounts, namespaces) gets neither
// filter nor Landlock, unless the policy requires Landlock.
guest::Walls guest_walls(const plan::Plan& plan, const LayerOptions& opt);
// The same in words, for -v and enforces(): "the process layer's seccomp rules (errno-only...), ...".
std::string guest_walls_text(const plan::Plan& plan, const LayerOptions& opt);

// The scratch disk's size for a plan (scratch_disk.hpp): as guest root, the
// policy's "resources.scratchDisk" (--scratch-disk), else 4 GiB; 0: none
// (an unprivileged guest user, or the policy's 0).
uint64_t scratch_disk_bytes(const plan::Plan& plan, const LayerOptions& opt);

// What --dry-run and -v say about this layer, in place of "layer: process".
std::vector<std::string> describe_layer(const plan::Plan& plan, const LayerOptions& opt);

// Guest RAM for a plan: its memory limit less what qemu itself needs (the
// cgroup holds both); an error when the limit leaves too little.
Result<uint64_t> guest_memory_mib(const plan::Plan& plan);

// opt.agent is ignored: the agent always runs, in the guest.
Result<process::Launched> launch(const plan::Plan& plan, const process::LaunchOptions& opt, const LayerOptions& vm);

}  // namespace exg::microvm
