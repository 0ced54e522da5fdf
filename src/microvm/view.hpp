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
std::vector<guest::ScratchDir> guest_scratch_dirs(const plan::Plan& plan);

}  // namespace exg::microvm
