// What counts as "code that runs later" in a writable tree: the one list of
// protected names (protected_names.cpp, each entry saying who runs or loads
// it) and the one classifier that the pre-run protect walker (protect.cpp),
// the live sweep (sandbox/sweep.cpp) and the overlay apply
// (sandbox/overlay_apply.cpp) all use, so that they cannot disagree.
//
// Git directories are recognised by what git would open, not by the name
// `.git`: a directory holding HEAD and either objects/ + refs/ or a commondir
// file (git's is_git_directory; a bare repository, a linked worktree's
// .git/worktrees/<id>, a submodule's .git/modules/<name>) is a git directory
// wherever it is, and so is anything named `.git`.
//
// Walks classify entry by entry: a Scope says what the directory being listed
// means (inside a protected name, inside a git directory and where, which
// multi-component names are part-way matched), enter() derives a
// subdirectory's Scope, classify() judges one entry.
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace exg::plan {

// One protected name: components separated by '/', matched at any depth
// ("<dir>/<entry>" matches that entry of any directory of that name). A
// component holding *, ? or [ is a shell pattern (fnmatch, no flags: `*`
// matches a leading dot): "*.code-workspace", "mise.*.toml".
struct ProtectedName {
  const char* name;
  const char* who;  // who runs or loads it, and when
  // Judged at the end of the run only (quarantined when created or changed),
  // never bound read-only at start: kinds that tools in the sandbox rewrite
  // as a matter of course and that can be many (a virtualenv's *.pth).
  bool sweep_only = false;
};
extern const std::span<const ProtectedName> kProtectedNameTable;

// Files in a git directory that change what runs (relative to the git directory).
extern const std::vector<ProtectedName> kGitDirEntries;

struct ProtectMatch {
  enum Kind {
    None,       // ordinary
    Protected,  // at or under a protected name: not writable, quarantined when new or changed
    HooksDir,   // a git hooks directory itself: a container, its entries judged one by one
  } kind = None;
  std::string why;
  bool git_config = false;  // a git config (accepted when its content is what `git init` writes)
  bool sweep_only = false;  // quarantined at the end when new or changed, not bound read-only at start
};

// Whether a name component is a pattern, and one component against a name.
bool is_name_pattern(std::string_view component);
bool component_matches(std::string_view component, std::string_view name);

// git's own test for a git directory, from what a directory holds.
struct GitMarkers {
  bool head = false, objects = false, refs = false, commondir = false;
  void see(std::string_view name);  // one entry name of the directory
  bool git_dir() const { return head && ((objects && refs) || commondir); }
};
// The same, read from an open directory (fstatat, no listing).
GitMarkers git_markers_at(int dirfd);

class ProtectedPaths {
 public:
  // extra_names: the policy's filesystem.protect (same syntax as the table).
  // anchored: paths relative to the tree root that are protected there only
  // (what a git config points at: core.hooksPath, include.path; the targets of
  // symlinked hooks), from git_pointers.hpp.
  explicit ProtectedPaths(const std::vector<std::string>& extra_names = {}, bool allow_git_config = false,
                          std::vector<std::string> anchored = {});

  struct Scope {
    std::string rel;            // the directory's path from the tree root ("" = the root)
    bool inside = false;        // at or under a protected name
    std::string why;            // ... which one
    int git_depth = -1;         // components below the innermost git directory (-1: none; 0: it is one)
    std::string git_first;      // the first component below that git directory
    bool hooks = false;         // a git hooks directory
    bool sweep_only = false;    // inside a name judged at the end only
    std::vector<std::pair<unsigned, unsigned>> partial;  // (table index, components matched)
  };

  // The tree root's scope (root_is_git_dir: e.g. --allow-write MAIN/.git).
  // tree: the root's own path: a root that is the first components of a longer
  // name starts part-way into it (allowWrite ~/.claude: its settings.json and
  // hooks are ".claude/settings.json" and ".claude/hooks"), and a root at or
  // under such a name is inside it (allowWrite ~/.claude/hooks).
  Scope root(bool root_is_git_dir, std::string_view tree = {}) const;
  // One entry of the directory `parent` describes. is_dir/is_reg: its type
  // (a .git that is not a directory is protected; a regular *.sample in a
  // hooks directory is not: git never runs those).
  ProtectMatch classify(const Scope& parent, std::string_view name, bool is_dir, bool is_reg) const;
  // Whether a subdirectory of `parent` holding `m` is a git directory: git's
  // test, or below a git directory's modules/ or worktrees/, a HEAD.
  bool git_dir_here(const Scope& parent, const GitMarkers& m) const {
    return m.git_dir() || (m.head && parent.git_depth >= 1 && (parent.git_first == "modules" || parent.git_first == "worktrees"));
  }
  // The scope of subdirectory `name` (is_git_dir: git_dir_here()).
  Scope enter(const Scope& parent, std::string_view name, bool is_git_dir) const;
  // False when nothing in the directory `parent` describes can match by name
  // alone, whatever its entries are called, except names in first_names():
  // lets big walks skip most entries without a stat.
  bool quiet(const Scope& parent) const {
    return !parent.inside && parent.git_depth < 0 && parent.partial.empty() && anchored_.empty();
  }
  // The rest of every multi-component name that starts with `first`
  // (".claude" -> "commands", "settings.json", ...).
  std::vector<std::string> tails(std::string_view first) const;
  bool first_name(std::string_view name) const;

  // A whole relative path at once (tests, one-off checks). git_dirs: paths
  // (relative, "" = root) of the directories that are git directories by content.
  ProtectMatch classify_path(std::string_view rel, bool is_dir, bool is_reg,
                             const std::unordered_set<std::string>& git_dirs = {}) const;

 private:
  // A pattern's index: the table's first (split and indexed at compile time,
  // protected_names.cpp), then the policy's filesystem.protect names, split here.
  std::vector<std::vector<std::string>> extra_;                 // index - the table's size
  std::vector<std::pair<std::string, unsigned>> extra_first_;  // first component -> pattern (few: a scan)
  std::vector<unsigned> extra_glob_first_;                      // patterns whose first component is a pattern
  std::unordered_set<std::string> anchored_;
  bool allow_git_config_ = false;

  void add_extra(std::string_view name);
  unsigned size_of(unsigned idx) const;                   // components
  std::string_view comp(unsigned idx, unsigned k) const;  // component k
  bool comp_matches(unsigned idx, unsigned k, std::string_view name) const;  // component k against name
  const char* who(unsigned idx) const;
  bool sweep_only(unsigned idx) const;
  std::string spelled(unsigned idx) const;  // the name, components joined by '/'
  bool glob_first(std::string_view name) const;
  // The patterns whose first component matches name.
  template <class F> void each_first(std::string_view name, F&& f) const;
  ProtectMatch git_entry(const Scope& parent, std::string_view name, bool is_dir, bool is_reg) const;
};

std::vector<std::string_view> split_components(std::string_view rel);
// rel + "/" + name ("" + name is name).
std::string join_rel(const std::string& rel, std::string_view name);

}  // namespace exg::plan
