// A protected name staged only in a git index: `git update-index --add
// --cacheinfo 100644,<blob>,.envrc` writes no file (the sweep sees nothing),
// and the host's next `git checkout -- .` or `git stash` creates it. The
// index is read at start and at the end of a run in every git directory of a
// swept tree; one that gained (or changed) an entry whose path is a protected
// name is moved to the quarantine (git then rebuilds it from HEAD with
// `git reset`) and reported like a planted file.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "plan/protected_names.hpp"

namespace exg::sandbox {

struct IndexEntry {
  std::string path;   // relative to the working tree's top
  uint32_t mode = 0;
  std::string oid;    // raw bytes
};

// The entries of a git index file (versions 2, 3 and 4; SHA-1 or SHA-256
// object ids, by hash_len). nullopt: not an index we can read whole (bad
// signature or checksum length, truncated, a split index's "link" extension
// that leaves entries in another file).
std::optional<std::vector<IndexEntry>> parse_git_index(std::string_view data, size_t hash_len);

// What an index stages under protected names: "mode oid path" of each such
// entry (classified as a file of the working tree, whose top is the git
// directory's parent). nullopt: unreadable (see parse_git_index).
struct StagedProtected {
  dev_t dev = 0;
  ino_t ino = 0;
  int64_t ctime_ns = 0;
  bool present = false;
  std::optional<std::set<std::string>> entries;
};
StagedProtected staged_protected(int git_dir_fd, const plan::ProtectedPaths& pp);

}  // namespace exg::sandbox
