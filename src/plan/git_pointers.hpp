// What a git directory points at, outside itself, that changes what git runs:
// the directory core.hooksPath names, the files include.path and
// includeIf.*.path name, and the targets of symlinked hooks
// (.git/hooks/pre-commit -> ../../tools/pre-commit: rewriting tools/pre-commit
// rewrites the hook). The protect walker binds those that lie in a writable
// tree read-only; the sweep and the overlay apply treat them as protected.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace exg::plan {

struct GitConfigPointers {
  std::vector<std::string> hooks_paths;    // core.hooksPath values, as written
  std::vector<std::string> include_paths;  // include.path and includeIf.<cond>.path values, as written
};
// Reads git config syntax: [section], [section "sub"], [section.sub], keys
// case-insensitive, quoted values with \" \\ \n \t, # and ; comments,
// backslash-newline continuations.
GitConfigPointers git_config_pointers(std::string_view config_text);

// p resolved against the directory base without touching the filesystem:
// "~/x" is home/x, an absolute p stays, "." and ".." are folded.
std::string resolve_lexically(const std::string& base, std::string_view p, const std::string& home);

// Every path the git directory gd (absolute) points at, absolute and folded;
// paths that do not exist are included (a hooksPath directory created later).
std::vector<std::string> git_dir_pointers(const std::string& gd, const std::string& home);

}  // namespace exg::plan
