// The cgroups a wrapped runtime made for one container of `exguardian
// runtime`, and their removal. crun and runsc make one in every hierarchy
// (named by linux.cgroupsPath, or after the container's id when there is none)
// and remove it at their own delete; exguardian runtime records them at create
// and makes sure at delete that none is left, whether the runtime was not
// asked, could not, or left processes behind (nothing of a sandbox outlives it).
#pragma once
#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "util/error.hpp"

namespace exg::runtime {

// The container's cgroup directories (in this mount namespace's cgroup
// mounts): the cgroup its init is in, per hierarchy, unless that is the
// caller's own cgroup or an ancestor of it. A runtime that made none there
// (rootless without delegation, a hierarchy it does not use) left the
// container in ours, which is not the container's to remove. Pure: the texts
// of /proc/<init>/cgroup, /proc/self/cgroup and /proc/self/mountinfo.
std::vector<std::string> container_cgroup_dirs(std::string_view init_cgroup, std::string_view self_cgroup,
                                               std::string_view mountinfo);
// The same for a live init (empty when it cannot be read).
std::vector<std::string> container_cgroup_dirs(pid_t init);

// Removes what is left of dirs and the cgroups below them, deepest first.
// With kill, processes still inside are killed first, as runc's delete does
// (v2 cgroup.kill; v1 frozen, SIGKILL, thawed; bounded); without it, a cgroup
// that still holds processes is an error. Directories already gone are fine.
// The error names the cgroups that stay and why.
Result<void> remove_container_cgroups(const std::vector<std::string>& dirs, bool kill);

}  // namespace exg::runtime
