// Applying the guest's walls (walls.hpp) in the guest's init: guest-only code,
// linked into the static init with the process layer's Landlock, seccomp and
// rlimit code it reuses (walls/landlock.cpp, seccomp_prebuilt.cpp,
// seccomp_install.cpp, rlimits.cpp), never into exg_core.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "microvm/guest/walls.hpp"

namespace exg::microvm::guest {

// The cgroup around the agent and its processes (cgroup2 of the guest's own
// kernel), made by pid 1 before it enters the view: mounted, set up and
// unmounted again (lazily), so that nothing of it is in the view; only these
// descriptors (close-on-exec) reach it. The init and the egress relay stay
// outside: the limit counts what it counts on the process layer, the agent
// (the sandbox's pid 1 there) and every process it starts.
struct PidsCgroup {
  int procs = -1;   // cgroup.procs, for writing: the agent moves itself in (as root)
  int events = -1;  // pids.events, read by the agent ("max N": forks refused)
  int notify = -1;  // inotify watching pids.events (IN_MODIFY): the agent's wake-up
};

// pids.max = max in a new cgroup. "" or what failed (with the errno's text).
std::string make_pids_cgroup(uint32_t max, PidsCgroup& out);

// What was applied, for the agent's ready event ("walls"): {"seccomp", "..."}, ...
using WallReport = std::vector<std::pair<std::string, std::string>>;

// In the agent's process while it is still root: into the cgroup (when
// there is one), no core dumps and the file limit (walls/rlimits.hpp's
// defaults). "" or what failed.
std::string enter_limits(const PidsCgroup& cg, uint32_t pids, WallReport& report);

// In pid 1, in the view, before the agent is forked: an O_PATH descriptor on
// each directory the Landlock rules let the sandbox write (close-on-exec; pid 1
// keeps them for the guest's life). Why: Landlock ties a rule to the inode it
// was given, and the guest kernel's 9p (cache=mmap) makes a new inode at every
// lookup of a dentry that is no longer cached, so a rule on an unpinned
// directory (HOME, an allowWrite path) stopped matching once its dentry went:
// every write there was refused. A held descriptor keeps the dentry, and with it
// its parents, so later walks reach the same inodes. Paths that do not exist or
// are not directories are skipped (the rule then fails alike).
std::vector<int> pin_writable_dirs(const Walls& w);

// In the agent's process after it dropped to the sandbox's uid and set
// no_new_privs (root inside the guest keeps CAP_SYS_ADMIN, which Landlock
// accepts instead): Landlock (fails only where the rules require it and the
// kernel lacks it, as on the process layer, or when the kernel refuses the
// rules), then seccomp last. "" or what failed: the init then ends the guest.
std::string apply_walls(const Walls& w, WallReport& report);

}  // namespace exg::microvm::guest
