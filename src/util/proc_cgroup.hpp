// The one reader of /proc/<pid>/cgroup (cgroups(7)): "0::/path" for the v2
// hierarchy, "N:ctrl,ctrl:/path" (or "N:name=systemd:/path") for v1 ones.
// Used by the cgroup layout, doctor and the runc cleanup.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/proc_text.hpp"

namespace exg::util {

struct ProcCgroup {
  std::string hierarchy;                 // "0" for v2 (and v1 hierarchies' ids)
  std::vector<std::string> controllers;  // empty for v2; v1: "memory", "cpu", "name=systemd", ...
  std::string path;                      // the process's cgroup in that hierarchy
  bool v2() const { return hierarchy == "0" && controllers.empty(); }
};

// Lines without two colons are skipped; a path may hold colons (pure).
std::vector<ProcCgroup> parse_proc_cgroup(std::string_view text);
// The path in the v2 hierarchy (ctrl empty) or in the v1 hierarchy of ctrl.
std::optional<std::string> cgroup_path_of(const std::vector<ProcCgroup>& lines, std::string_view ctrl);
inline std::vector<ProcCgroup> read_proc_cgroup(const char* path = "/proc/self/cgroup") {
  return parse_proc_cgroup(read_proc_text(path));
}

}  // namespace exg::util
