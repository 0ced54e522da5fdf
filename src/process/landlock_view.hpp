// What the landlock layer (process/landlock_layer.hpp) makes of a Plan: the
// Plan's walls said without namespaces or mounts, as Landlock rules over the
// host's own filesystem, or why this Plan cannot be kept that way.
//
// Landlock is an allow-list whose rights are inherited down a tree: it can
// grant, never take away below a grant. So:
//   writes     only in the Plan's writable binds (the workspace, allowWrite)
//              and a private directory for TMPDIR; HOME's throwaway layer
//              becomes no writes at all;
//   reads      everywhere but the denied paths (the Plan's masks): every
//              directory on the way from "/" to a denied path gets no rule of
//              its own (it can be walked through, not listed), every other
//              entry of it gets read rights (listed when the sandbox starts:
//              what appears there later is unreadable, which errs closed);
//              the host's /tmp, /var/tmp and /dev/shm count as denied (a
//              sibling sandbox's TMPDIR and workspace live there), but for
//              the sandbox's own paths inside them;
//   refused    a denied path inside a writable tree (Landlock cannot take the
//              tree's rights away below it), a workspace as an overlay
//              (overlay, discard: they need mounts), a writable bind placed
//              elsewhere than its source.
#pragma once
#include <string>
#include <vector>

#include "walls/landlock_rules.hpp"
#include "plan/plan.hpp"
#include "util/error.hpp"

namespace exg::process {

struct LandlockView {
  walls::LandlockRules rules;            // handle_reads and handle_net set; ports left to the launch
  std::vector<std::string> denied;      // the paths made unreadable
  std::vector<std::string> cautions;    // what this layer keeps differently from the process layer
  bool trust_bundle = false;            // the Plan's CA bundle goes to a file in the private directory
};

// The most path rules the read side may take before the Plan is refused
// (denied paths in very large directories).
inline constexpr size_t kMaxReadRules = 4096;

// `private_tmp`: the run's own writable directory (TMPDIR). Lists the
// directories on the way to each denied path (the host as it is now).
Result<LandlockView> landlock_view(const plan::Plan& plan, const std::string& private_tmp);

// The host's shared temporary trees: unreadable on this layer but for the
// sandbox's own paths inside them (landlock_view).
inline constexpr const char* kHostTempTrees[] = {"/tmp", "/var/tmp", "/dev/shm"};

// The read rules alone: every path under "/" but `denied` and their
// ancestors, as the fewest trees (exposed for the unit tests).
Result<std::vector<std::string>> readable_roots(const std::vector<std::string>& denied, size_t max_rules);
// The same beneath `root` (nothing when `root` lies in a denied path).
Result<std::vector<std::string>> readable_beneath(const std::string& root, const std::vector<std::string>& denied,
                                                  size_t max_rules);

}  // namespace exg::process
