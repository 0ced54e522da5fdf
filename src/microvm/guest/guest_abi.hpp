// What the host and the guest's init agree on: names of the virtio devices,
// where the initramfs keeps the modules. One place, so that the qemu command
// line (host) and the guest's init (guest/init.cpp) cannot drift apart.
#pragma once

namespace exg::microvm::guest {

// The virtio-serial port that carries the agent's protocol (virtserialport name=).
inline constexpr char kChannelName[] = "exg.agent";
// The virtio-serial port that carries the guest's egress streams
// (microvm/guest/egress_mux.hpp); always among the devices (a template serves
// every sandbox), opened by the init only when the boot frame says "egress".
inline constexpr char kEgressChannelName[] = "exg.egress";
// Where the guest listens for them: the proxy ports of every layer.
inline constexpr unsigned short kHttpProxyPort = 3128, kSocksProxyPort = 1080;
// Transparent egress in the guest (walls/capture_rules.hpp): the listener
// its netfilter redirects TCP to, as on every layer (egress/transparent.hpp
// kTransparentPort), and the resolver's address (plan: ResolvConf).
inline constexpr unsigned short kTransparentPort = 15001;
inline constexpr char kResolverAddress[] = "127.0.0.53";
inline constexpr unsigned short kResolverPort = 53;
// The guest uid of the egress relay (one below when the command has it).
inline constexpr unsigned kEgressUid = 65533;
// The frame right after the boot record (boot_record.hpp) on the agent's
// port, host to init, in the same post-park hand-over (agent/protocol.hpp's
// framing, kind Request, id 0), before the agent runs: header {"op": "boot",
// "env": [NAME=VALUE...], "cwd": DIR, "egress": BOOL, "resolver": BOOL,
// "transparent": BOOL, "walls": {...}, "scratch": [...], "disk": BOOL}, the sandbox's
// environment and working directory, as the agent of every other layer gets
// them from the plan, whether the egress port is to be served, with the
// resolver on 127.0.0.53:53 and the transparent capture (both only with
// egress), the walls (walls.hpp), the guest's own directories (scratch.hpp)
// and whether a scratch disk is attached (kDiskDevice).
inline constexpr char kBootOp[] = "boot";
// The 9p mount tag of the sandbox's filesystem view (virtio-9p-device mount_tag=).
inline constexpr char kViewTag[] = "exgview";
// In the initramfs: the modules and their load order (one file name a line),
// written by cmake/microvm_guest_image.py.
inline constexpr char kModuleDir[] = "/lib/exg-modules";
inline constexpr char kModuleOrder[] = "/lib/exg-modules/order";
// Loaded only by a guest given a scratch disk, after the hand-over (virtio_blk:
// its probe reads the disk, which must not happen before a template is saved).
inline constexpr char kDiskModuleOrder[] = "/lib/exg-modules/order-disk";
// The scratch disk (microvm/scratch_disk.hpp): the only virtio-blk device, an
// ext4 the host made, mounted by the init in the initramfs (below the view,
// out of the command's reach) before its directories are put in place.
inline constexpr char kDiskDevice[] = "/dev/vda";
inline constexpr char kDiskMount[] = "/disk";

// On the kernel command line: the guest's init prints kBootProbeLine on its
// console and powers off at once (doctor's proof that an accelerator boots a guest).
inline constexpr char kBootProbeArg[] = "exg.probe=boot";
inline constexpr char kBootProbeLine[] = "exguardian-guest: boot probe ok";
// The same after loading the modules (bench/microvm.sh: what module loading costs).
inline constexpr char kModulesProbeArg[] = "exg.probe=modules";

}  // namespace exg::microvm::guest
