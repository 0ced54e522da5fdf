// Overlay workspace mode: the sandbox sees the workspace through an overlayfs
// (lowerdir = the real workspace, upperdir/workdir outside it, "userxattr" in a
// user namespace); the host sees nothing until exit, when the upper layer's
// changes are applied to the real workspace. Protected names are copied into a
// quarantine instead; fifos, devices, sockets and symlinks leading out are not
// applied. Every write goes through openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS)
// from the workspace root fd, then *at() calls on single names with O_NOFOLLOW.
//
// Upper-layer format handled: whiteouts as char devices 0/0 or as zero-size
// files with xattr {user,trusted}.overlay.whiteout; opaque directories with
// {user,trusted}.overlay.opaque = "y" (propagated to their subdirectories).
// redirect_dir and metacopy are not handled (entries carrying them are skipped
// and reported): "userxattr" turns both off by default, so mount with it, or
// with redirect_dir=off,metacopy=off.
#pragma once
#include <string>
#include <vector>

#include "sandbox/sweep.hpp"
#include "util/error.hpp"

namespace exg::sandbox {

struct ApplyOptions {
  std::vector<std::string> extra_names;  // policy filesystem.protect
  bool allow_git_config = false;
  std::string quarantine_dir;            // absolute, outside the workspace (needed unless discard)
  bool discard = false;                  // apply nothing, quarantine nothing: report what was dropped
  std::vector<std::string> pointers;     // the plan's protect_pointers (absolute)
  std::vector<std::string> worktree_roots;  // as SweepOptions::worktree_roots (the run's writable trees)
};

struct ApplyReport {
  // Relative paths; directories end in '/'.
  std::vector<std::string> created, modified, deleted;
  std::vector<Planted> quarantined;   // quarantined_to empty in diff / discard
  std::vector<std::string> skipped;   // "path (why)": fifos, devices, sockets, links leading out, protected deletions
  bool empty() const {
    return created.empty() && modified.empty() && deleted.empty() && quarantined.empty() && skipped.empty();
  }
};

// Applies upper's changes to workspace (creations, modifications of content
// and mode, deletions, opaque directories, symlinks that stay inside). Applied
// files get the upper file's mode (set-id bits dropped) and mtime; when run as
// root they are owned by the owner of the file they replace, or of their parent
// directory. With opt.discard it only reports, like diff_upper.
Result<ApplyReport> apply_upper(const std::string& upper, const std::string& workspace, const ApplyOptions& opt);
// The same walk, changing nothing (the upper layer is not modified either,
// except that an entry the sandbox left unreadable to its owner gets u+r).
Result<ApplyReport> diff_upper(const std::string& upper, const std::string& workspace, const ApplyOptions& opt);

// One line per change, in report order: "+ path", "~ path", "- path",
// "! path (quarantined: why)", "skip path (why)".
std::vector<std::string> report_lines(const ApplyReport& r);

// ---- for the sandbox and the CLI ----

// A layer directory: DIR/upper and DIR/work (same filesystem, mode 0700) and
// DIR/workspace (a text file: the workspace path). DIR must be outside the
// workspace and on a filesystem with user xattrs (ext4, xfs, btrfs, tmpfs >= 6.6).
struct LayerDirs {
  std::string dir, upper, work, workspace;
};
Result<LayerDirs> make_layer_dirs(const std::string& dir, const std::string& workspace);
Result<LayerDirs> read_layer_dirs(const std::string& dir);  // reads DIR/workspace back
// The mount(2) data for "overlay": lowerdir=..,upperdir=..,workdir=..,userxattr
// (paths with ',' ':' '\\' or '=' are refused rather than escaped).
Result<std::string> overlay_mount_data(const std::string& lower, const std::string& upper, const std::string& work,
                                       bool userxattr = true);
// Removes DIR and everything in it (overlay leaves DIR/work/work with mode 000).
Result<void> remove_layer_dirs(const std::string& dir);

}  // namespace exg::sandbox
