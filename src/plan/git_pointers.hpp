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
  // Values git hands to a shell or runs as a program: core.fsmonitor (not a
  // boolean), core.sshCommand, core.pager, core.editor, core.askPass,
  // sequence.editor, diff.external, diff/merge/filter drivers, pager.<cmd>,
  // interactive.diffFilter, gpg programs, credential helpers, `!` aliases.
  std::vector<std::string> commands;
};
// Reads git config syntax: [section], [section "sub"], [section.sub], keys
// case-insensitive, quoted values with \" \\ \n \t, # and ; comments,
// backslash-newline continuations.
GitConfigPointers git_config_pointers(std::string_view config_text);

// p resolved against the directory base without touching the filesystem:
// "~/x" is home/x, an absolute p stays, "." and ".." are folded.
std::string resolve_lexically(const std::string& base, std::string_view p, const std::string& home);

// The user's and the system's git configs, which git reads in every
// repository: $GIT_CONFIG_SYSTEM or /etc/gitconfig, $GIT_CONFIG_GLOBAL or
// $XDG_CONFIG_HOME/git/config (~/.config/git/config) and ~/.gitconfig.
std::vector<std::string> user_git_configs(const std::string& home);

// What those configs name relative to a repository (a relative
// core.hooksPath, the relative paths in their commands): a name inside EVERY
// repository, so protected at any depth (policy filesystem.protect syntax).
std::vector<std::string> user_git_relative_names(const std::string& home);

// Every path the git directory gd (absolute) points at, absolute and folded;
// paths that do not exist are included (a hooksPath directory created later).
// Read from its own configs and the user's (user_git_configs), and from its
// hooks (what they name: command_pointers.hpp).
std::vector<std::string> git_dir_pointers(const std::string& gd, const std::string& home);

}  // namespace exg::plan
