// Set-id files written during a run: the second wall behind the seccomp rules
// (walls/seccomp_rules.cpp) that refuse every call making one. At exit, each
// tree the sandbox could write on the host (live workspace, allowWrite) is
// walked and a regular file whose ctime is after the run's start and that has
// S_ISUID or S_ISGID loses them: a set-uid binary written through an idmapped
// workspace would be set-uid root on the host. Files already set-id before the
// run and untouched by it are left as they are (the host's own).
//
// The walk is fd-relative (openat with O_NOFOLLOW, no path length limit) and
// never follows a symlink; a directory left unreadable to its owner is opened
// by giving it u+rx for the moment and its mode is put back. What cannot be
// checked is reported as an error, never skipped silently. A big tree is
// walked by up to four threads (every file is stat()ed: a monorepo's files
// are most of the run's end); they are joined before sweep_setid returns.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace exg::sandbox {

struct SetIdFound {
  std::string path;  // absolute host path
  mode_t before = 0, after = 0;
  bool removed = false;  // false: the bits could not be removed (see error)
  std::string error;
};

struct SetIdSweep {
  std::vector<SetIdFound> found;
  std::vector<std::string> errors;  // "PATH: why": entries that could not be checked
  size_t files_checked = 0;
};

// CLOCK_REALTIME_COARSE now. Inode times are stamped from the coarse clock (or
// finer, never below it: multigrain), so a change after this call is never
// stamped before it; one made before it, within the same clock tick, counts as
// the run's.
int64_t setid_sweep_start();

// Checks root (a directory tree or one file) for set-id regular files changed at
// or after since_ns, and removes their set-id bits. max_threads: that walk a big
// tree at once, this one included (1: this one alone).
void sweep_setid(const std::string& root, int64_t since_ns, SetIdSweep& out, size_t max_threads = 4);

}  // namespace exg::sandbox
