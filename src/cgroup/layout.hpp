// Where sandbox cgroups go on this host, for this user: cgroup v2 (pure or
// delegated to the user) or cgroup v1 (including hybrid hosts: v1
// controllers plus an empty v2 mount). Read by the sandbox's cgroup
// (cgroup.hpp), by doctor, and by serve to find a session's cgroup.
#pragma once
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace exg::cgroup {

// v1: one base ("…/<ctrl>/exguardian") per hierarchy; v2: one base
// ("<delegated or root cgroup>/exguardian").
struct Base {
  std::vector<std::string> controllers;  // v1: the hierarchy's; v2: those children would get
  std::string dir;                       // the "exguardian" parent (may not exist yet)
  bool enable_in_parent = false;         // v2: write +ctrl into the parent's subtree_control
};
struct Layout {
  bool v2 = false;
  bool usable = false;
  std::string why;
  std::vector<Base> bases;
};
Layout plan_layout();

struct CgroupSupport {
  bool v2 = false;
  bool usable = false;
  std::string why;
  std::vector<std::string> controllers;  // controllers a sandbox cgroup would get
};

// What this host and user can do (for doctor and for create()).
CgroupSupport detect_cgroups();

// The name of the cgroup a supervisor makes for a sandbox in each base:
// "exg-<supervisor pid>-<sandbox id>" (the pid lets sweep_stale find the dead ones).
std::string sandbox_dir_name(pid_t supervisor, std::string_view sandbox_id);
// The directories of that cgroup that exist now, in layout's bases (serve:
// the cgroup of a session another process supervises).
std::vector<std::string> sandbox_dirs(const Layout& layout, pid_t supervisor, std::string_view sandbox_id);

// "/proc/self/cgroup": the path of hierarchy 0 (v2) or of the v1 hierarchy
// holding ctrl (pure; unit tested).
std::optional<std::string> own_cgroup_path(std::string_view proc_self_cgroup, std::string_view ctrl);

}  // namespace exg::cgroup
