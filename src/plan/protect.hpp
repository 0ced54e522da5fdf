// Finds protected paths (code that runs later: git directories' hooks and
// config wherever git would find a git directory, shell rc files, editor and
// agent settings, policy files: protected_names.hpp) anywhere in a writable
// tree, nested repositories included, and what git directories point at
// (git_pointers.hpp). Nothing is created on the host: only paths that exist
// are returned for binding, and the sandbox binds them read-only over
// themselves. The walk is fd-relative; a directory of the caller's own that it
// cannot read is read by giving it u+rx for the walk (the mode is put back).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace exg::plan {

struct ProtectedPath {
  std::string path;   // canonical host path
  bool is_dir = false;
  bool pin = false;   // a git directory: bound onto itself so it cannot be renamed away
  std::string why;
};

struct ProtectOptions {
  bool allow_git_config = false;
  std::vector<std::string> extra_names;  // policy filesystem.protect
  std::string home;                      // for "~/" in core.hooksPath and include.path
  std::vector<std::string> writable;     // the other writable trees: link targets there count too
  size_t max_threads = 4;                // that walk a big tree at once (util/parallel_walk.hpp); 1: the caller's alone
};

struct ProtectFindings {
  std::vector<ProtectedPath> paths;   // existing paths to bind read-only (or pin)
  // What git directories point at (hooksPath directories, included configs,
  // symlinked hooks' targets), absolute and folded, whether they exist or not:
  // the sweep and the overlay apply protect them too.
  std::vector<std::string> pointers;
};

// The protected names beyond the built-in list: the policy's own
// (filesystem.protect), what the user's and the system's git configs name
// relative to every repository, and `.env` where the host's direnv loads it.
// The plan and the runtime's sweep take the same list.
std::vector<std::string> protected_extra_names(std::vector<std::string> policy_names, const std::string& home);

ProtectFindings find_protected_all(const std::string& root, const ProtectOptions& opt);
std::vector<ProtectedPath> find_protected(const std::string& root, const ProtectOptions& opt);

}  // namespace exg::plan
