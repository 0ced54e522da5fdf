// The guest's filesystem view, built on the host: the Plan's own steps (read-
// only binds, the workspace read-write, masks) once more under kViewRoot in
// qemu's sandbox, which exports that directory over 9p. qemu itself runs in
// the Plan's view at "/" (it needs /usr and its libraries); only the copy
// under kViewRoot reaches the guest, without qemu's /proc, /sys and /dev
// (the guest mounts its own there), so a guest cannot reach qemu's memory
// through /proc/self/mem of the export.
#pragma once
#include <vector>

#include "microvm/guest/scratch.hpp"
#include "plan/plan.hpp"

namespace exg::microvm {

inline constexpr char kViewRoot[] = "/.exg-view";

// The plan qemu's own sandbox is built from: `plan` plus the prefixed copy
// of its view (and Landlock rules that let qemu write where the guest may).
plan::Plan with_exported_view(const plan::Plan& plan);

// The plan's private tmpfs directories that the guest mounts itself (guest/
// scratch.hpp: Unix sockets work there), in plan order, each with the paths
// the plan mounts below it, fewest that cover them all. Left to the view: "/",
// what the guest owns anyway (/proc, /sys, /dev) and a tmpfs the plan makes
// read-only (a ReadOnly step on it or above it other than the root's seal).
// With a scratch disk (`disk`): /var/tmp is a directory of the disk instead
// of a tmpfs, and /etc, /var/lib and /var/cache are overlays of the view's
// with their writes on the disk (podman's and dockerd's storage, caches, the
// configuration they write: /etc/cni/net.d's lock and networks), each
// carrying what the plan mounts below it as a tmpfs directory does.
std::vector<guest::ScratchDir> guest_scratch_dirs(const plan::Plan& plan, bool disk = false);

// The directories an overlay of the scratch disk covers (in the view: the host's, read-only).
inline constexpr const char* kDiskOverlays[] = {"/etc", "/var/lib", "/var/cache"};
// Empty directories of the disk, mounted over the /var/lib overlay: podman's and
// dockerd's storage, and CNI's state (the host's IP leases and results are not
// the guest's, and its results/ is 0700 root: unreadable to qemu's uid, so the
// bridge plugin failed "permission denied" through the overlay).
inline constexpr const char* kDiskStores[] = {"/var/lib/containers", "/var/lib/docker", "/var/lib/cni"};

}  // namespace exg::microvm
