// rlimits for the sandbox, computed by the supervisor and applied in the
// child (async-signal-safe: plain fields, no allocation).
#pragma once
#include <sys/resource.h>

namespace exg::walls {

struct RlimitPlan {
  bool set_core = true;
  rlim_t core = 0;  // no core dumps (they would write the sandbox's memory to disk)
  bool set_nofile = true;
  rlim_t nofile = 65536;  // soft = hard = min(current hard, 65536)
  // Not set by default: /tmp inside is a tmpfs whose pages are charged to the
  // sandbox's memory cgroup, so the memory limit already bounds it. A policy
  // that asks for a file size limit sets these.
  bool set_fsize = false;
  rlim_t fsize = RLIM_INFINITY;
  const char* note = "";  // why fsize is (not) set, for run -v
};

// `memory_limited`: the sandbox has a memory limit (the Plan's limits), which
// bounds /tmp's tmpfs; only the note says so.
RlimitPlan default_rlimits(bool memory_limited);

// In the child: 0 or -errno (the first failure).
int apply_rlimits(const RlimitPlan& plan);

}  // namespace exg::walls
