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
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

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

struct Snapshot {
  std::string root;                                    // as given
  std::unordered_map<std::string, DirStamp> dirs;      // relative path ("" = root) -> stamp
  // Entries at or under a protected name present at start (files, symlinks and
  // directories), by relative path and by inode -> ctime.
  std::unordered_map<std::string, DirStamp> protected_entries;
  std::unordered_map<InodeKey, int64_t, InodeKeyHash> protected_inodes;
  size_t entries_seen = 0;                             // for reports and benchmarks
  // CLOCK_REALTIME_COARSE when the snapshot began, minus a margin: on kernels
  // without fine-grained (multigrain) timestamps a change made within the same
  // clock tick as the snapshot keeps the directory's stamp, so directories
  // stamped after this are listed at sweep time whatever their stamp says.
  int64_t taken_ns = 0;
};

// Lists only directories (getdents64 d_type, openat relative fds, one fstat per
// directory). extra_names: the policy's filesystem.protect names (same syntax as
// kProtectedNames); they widen which entries are remembered by inode.
Result<Snapshot> snapshot_tree(const std::string& root, const std::vector<std::string>& extra_names = {});

struct Planted {
  std::string relpath;         // relative to the workspace root
  std::string why;
  std::string quarantined_to;  // absolute path in the quarantine; empty when not moved (dry run, diff)
};

struct SweepOptions {
  std::vector<std::string> extra_names;  // policy filesystem.protect
  bool allow_git_config = false;
  std::string quarantine_dir;            // outside the workspace, e.g. ~/.local/state/exguardian/quarantine/<id>
  bool dry_run = false;                  // find and report, move nothing
};

// Finds protected names created or changed since the snapshot, at any depth,
// and moves each into opt.quarantine_dir/<relpath> (renameat2 NOREPLACE on the
// same filesystem, else copy then remove; a taken name gets a ".N" suffix).
// Never follows a symlink: every directory is opened with openat2
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS from the workspace root fd, and a
// protected name that is a symlink is moved as the symlink itself.
Result<std::vector<Planted>> sweep(const std::string& root, const Snapshot& before, const SweepOptions& opt);

// ---- shared with the overlay apply (overlay_apply.cpp) ----

// Copies the rest of `in` to `out` (copy_file_range, else read/write).
bool copy_data(int in, int out);

// What a relative path is with respect to the protected names.
struct ProtectMatch {
  enum Kind {
    None,       // ordinary
    Protected,  // at or under a protected name: not applied, quarantined when new or changed
    HooksDir,   // a .git/hooks directory itself: created as a container, its entries judged one by one
  } kind = None;
  std::string why;
  bool git_config = false;  // a .git/config (accepted when its content is what `git init` writes)
};

class ProtectedNames {
 public:
  explicit ProtectedNames(const std::vector<std::string>& extra_names = {}, bool allow_git_config = false);
  // comps: the path's components from the workspace root; is_dir / is_reg: the
  // type of the last one (a .git that is not a directory is protected; a
  // regular *.sample file in .git/hooks is not: git never runs those).
  ProtectMatch classify(const std::vector<std::string_view>& comps, bool is_dir, bool is_reg) const;
  // True when no name can match below a directory whose path has no component
  // starting with '.' (lets walks skip the check for most entries).
  bool all_dotted() const { return all_dotted_; }

 private:
  std::vector<std::string> names_;                              // single components
  std::vector<std::pair<std::string, std::string>> nested_;     // ".claude" -> "commands"
  bool allow_git_config_ = false;
  bool all_dotted_ = true;
};

std::vector<std::string_view> split_path(std::string_view rel);

// A git config exactly as `git init` writes it ([core] with format, filemode,
// bare, logallrefupdates, ignorecase, precomposeunicode, symlinks; [extensions]
// objectformat/refstorage): nothing in it names a command or a hook path.
bool benign_git_config(std::string_view content);

// Quarantine helpers. root_fd: the workspace root (O_PATH or O_RDONLY dir).
// Returns the absolute destination. Moves (or copies then removes) rel.
Result<std::string> quarantine_move(int root_fd, const std::string& rel, const std::string& quarantine_dir);
// Copies src_dirfd/name (file, symlink or directory tree; never following a
// link) to quarantine_dir/<rel>. Returns the absolute destination.
Result<std::string> quarantine_copy(int src_dirfd, const std::string& name, const std::string& rel,
                                    const std::string& quarantine_dir);

// openat2(root_fd, rel, flags, RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS); rel "" is the root.
int open_beneath(int root_fd, const std::string& rel, int flags, mode_t mode = 0);

}  // namespace exg::sandbox
