// The one reader of /proc/<pid>/mountinfo (proc(5)): the cgroup layout, the
// container layers' cgroup view and mount points, and the leak checks of
// escape-test all read mounts through it.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "util/proc_text.hpp"

namespace exg::util {

struct MountInfo {
  int id = 0, parent = 0;
  std::string dev;            // "major:minor"
  std::string root;           // the mounted subtree of the filesystem (unescaped)
  std::string mount_point;    // where, in this mount namespace (unescaped)
  std::string options;        // per-mount options ("rw,nosuid,relatime")
  std::string fstype;         // after the " - " separator
  std::string source;         // (unescaped)
  std::string super_options;  // per-superblock options ("rw,memory" for a v1 cgroup)
};

// Lines that do not have the fields (up to the separator and three after it)
// are skipped (pure).
std::vector<MountInfo> parse_mountinfo(std::string_view text);
// mountinfo's octal escapes (\040 space, \011 tab, \012 newline, \134 backslash).
std::string unescape_mountinfo(std::string_view s);
// This process's mounts (nothing when the file cannot be read).
inline std::vector<MountInfo> read_mountinfo(const char* path = "/proc/self/mountinfo") {
  return parse_mountinfo(read_proc_text(path));
}

}  // namespace exg::util
