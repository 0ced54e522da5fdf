// Live workspace mode: protected names (code that runs later) created or
// changed during a run are found at exit and moved into a quarantine outside
// the workspace. Bind mounts protect only what exists at start; this closes the
// rest (a repo made during the run, a new .vscode, an .envrc in a new folder, a
// rename onto a protected name).
//
// Change detection is a snapshot of every DIRECTORY's (dev, ino, mtime, ctime)
// taken at start: creating, renaming or removing an entry always changes its
// parent's mtime and ctime (ctime cannot be set back from userspace). At exit
// only changed directories are listed; new directories are walked whole.
// Protected files present at start are remembered by inode and ctime, so an
// in-place change, a replacement or a rename away-and-back is seen too.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "plan/protected_names.hpp"
#include "sandbox/git_index.hpp"
#include "util/error.hpp"

namespace exg::sandbox {

struct DirStamp {
  dev_t dev = 0;
  ino_t ino = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
};

struct InodeKey {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const InodeKey&) const = default;
};
struct InodeKeyHash {
  size_t operator()(const InodeKey& k) const { return std::hash<uint64_t>()(k.ino * 1000003u ^ k.dev); }
};

// One directory of the tree as the snapshot saw it.
struct DirNode {
  std::string rel;                 // relative path ("" = the root)
  DirStamp stamp;
  bool git_dir = false;            // a git directory by content (protected_names.hpp)
  // Not listed: sealed, we could not open it (then the sandbox, the same uid
  // with fewer groups, could not enter it either: unchanged, it is skipped);
  // truncated, deeper than the walk goes (always reported as not checked).
  bool sealed = false, truncated = false;
  std::vector<std::pair<std::string, uint32_t>> subdirs;         // name -> node index
  std::vector<std::pair<std::string, DirStamp>> protected_here;  // protected entries in it, by name
};

struct Snapshot {
  std::string root;                                    // as given
  std::vector<DirNode> nodes;                          // [0]: the root
  std::unordered_map<InodeKey, uint32_t, InodeKeyHash> node_of;  // a directory's inode -> its node
  // Entries at or under a protected name present at start (files, symlinks and
  // directories), by inode -> ctime.
  std::unordered_map<InodeKey, int64_t, InodeKeyHash> protected_inodes;
  std::vector<std::string> anchored;                   // protect_pointers inside this tree, relative
  // Each git directory's index at start (by the directory's relative path):
  // what it stages under protected names (git_index.hpp).
  std::map<std::string, StagedProtected> indexes;
  size_t entries_seen = 0;                             // for reports and benchmarks
  // CLOCK_REALTIME_COARSE when the snapshot began, minus a margin: on kernels
  // without fine-grained (multigrain) timestamps a change made within the same
  // clock tick as the snapshot keeps the directory's stamp, so directories
  // stamped after this are listed at sweep time whatever their stamp says.
  int64_t taken_ns = 0;
  size_t dirs() const { return nodes.size(); }
};

// Lists only directories (getdents64 d_type, openat from the parent's fd, one
// fstat per directory; a directory of our own that we cannot read gets u+rx
// for the walk). extra_names: the policy's filesystem.protect; pointers: the
// plan's protect_pointers (absolute; those inside root count). A big tree is
// listed by up to max_threads threads (all joined before it returns); the
// nodes' order then varies, what they say does not.
Result<Snapshot> snapshot_tree(const std::string& root, const std::vector<std::string>& extra_names = {},
                               const std::vector<std::string>& pointers = {}, size_t max_threads = 4);

struct Planted {
  std::string relpath;         // relative to the swept tree's root
  std::string why;
  std::string quarantined_to;  // absolute path in the quarantine; empty when not moved (dry run, diff, failure)
  bool unchecked = false;      // a directory the sweep could not read: what it holds is unknown
};

struct SweepOptions {
  std::vector<std::string> extra_names;  // policy filesystem.protect
  bool allow_git_config = false;
  std::string quarantine_dir;            // outside the tree, e.g. ~/.local/state/exguardian/quarantine/<id>
  bool dry_run = false;                  // find and report, move nothing
  // The run's writable trees: a core.worktree in a git directory reached only by
  // name (OpenCode's snapshots) may point into one of these and nowhere else (a
  // host `git checkout` with that git directory writes where it points).
  std::vector<std::string> worktree_roots;
};

// Finds protected names created or changed since the snapshot, at any depth,
// and moves each into opt.quarantine_dir/<relpath> (renameat2 NOREPLACE on the
// same filesystem, else copy then remove; a taken name gets a ".N" suffix).
// Walks from the root by fd, led by the snapshot: a directory whose stamp is
// unchanged is not listed (its subdirectories are visited from the snapshot's
// list), a changed, new or moved one is. Never follows a symlink; a protected
// name that is a symlink is moved as the symlink itself. A directory it cannot
// open or list (not ours and unreadable, deeper than max_walk_depth()) and a
// move that fails are reported (unchecked / quarantined_to empty): the caller
// fails the run.
Result<std::vector<Planted>> sweep(const std::string& root, const Snapshot& before, const SweepOptions& opt);

// ---- shared with the overlay apply (overlay_apply.cpp) ----

// Copies the rest of `in` to `out` (copy_file_range, else read/write).
bool copy_data(int in, int out);

using plan::ProtectMatch;

std::vector<std::string_view> split_path(std::string_view rel);

// A git config exactly as `git init` writes it ([core] with format, filemode,
// bare, logallrefupdates, ignorecase, precomposeunicode, symlinks; [extensions]
// objectformat/refstorage), `git clone` (remotes, branches) or OpenCode's
// snapshots (line endings, index settings, core.fsmonitor false; core.worktree
// only when worktree_ok accepts its value: a git directory no work tree leads
// git to, pointing where the sandbox could write anyway): nothing in it names a
// command or a hook path, and no checkout through it writes elsewhere.
bool benign_git_config(std::string_view content, const std::function<bool(std::string_view)>& worktree_ok = {});

// core.worktree's value (relative to git_dir, as git reads it) names an existing
// directory inside one of roots, reached with no symlink below that root: a
// checkout through it writes only where the sandbox could write.
bool worktree_within(std::string_view value, const std::string& git_dir, const std::vector<std::string>& roots);

// The git config at the git directory `scope` names in `tree` (its content
// given): benign_git_config, with core.worktree allowed only in a git directory
// reached by name alone (no ".git" on its path: OpenCode's snapshots) and only
// when it points into roots (the run's writable trees). The sweep and the
// overlay's apply judge with this one rule.
bool benign_git_config_in(std::string_view content, const std::string& tree,
                          const plan::ProtectedPaths::Scope& scope, const std::vector<std::string>& roots);

// A Python .pth file that only adds directories to sys.path (site.py runs
// the lines that start with "import"; the rest are paths): nothing in it runs.
// Over 64 KiB: not benign.
bool benign_pth(std::string_view content);

// Quarantine helpers. Moves (or copies then removes) parent_fd/name, whose
// path in its tree is rel, to quarantine_dir/<rel>. Returns the absolute destination.
Result<std::string> quarantine_move(int parent_fd, const std::string& name, const std::string& rel,
                                    const std::string& quarantine_dir);
// Copies src_dirfd/name (file, symlink or directory tree; never following a
// link) to quarantine_dir/<rel>. Returns the absolute destination.
Result<std::string> quarantine_copy(int src_dirfd, const std::string& name, const std::string& rel,
                                    const std::string& quarantine_dir);

// openat2(root_fd, rel, flags, RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS); rel "" is the root.
int open_beneath(int root_fd, const std::string& rel, int flags, mode_t mode = 0);

}  // namespace exg::sandbox
