// Finds protected paths (code that runs later: git hooks and config, shell rc
// files, editor and agent settings, policy files) anywhere in a writable tree,
// nested repositories included. Nothing is created on the host: only paths that
// exist are returned, and the sandbox binds them read-only over themselves.
#pragma once
#include <string>
#include <vector>

namespace exg::plan {

struct ProtectedPath {
  std::string path;   // canonical host path
  bool is_dir = false;
  bool pin = false;   // a .git directory: bound onto itself so it cannot be renamed away
  std::string why;
};

struct ProtectOptions {
  bool allow_git_config = false;
  std::vector<std::string> extra_names;  // policy filesystem.protect
};

std::vector<ProtectedPath> find_protected(const std::string& root, const ProtectOptions& opt);

}  // namespace exg::plan
