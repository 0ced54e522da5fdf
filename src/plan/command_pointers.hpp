// What a protected config or script names that runs along with it: the
// workspace files a config that runs without the user asking for project code
// hands to a shell or an interpreter (git's core.fsmonitor = tools/fsmon.sh,
// a hook that execs scripts/precommit.sh, an .envrc's dotenv/source_env and
// PATH_add, a Claude Code statusLine or hook command, an MCP server's script,
// a VS Code task that runs on folderOpen). The config itself cannot be
// changed in the sandbox; what it names would otherwise be the way around it,
// so the protect walker binds those files read-only and the sweep quarantines
// them when they are created during the run.
//
// The line (docs/security-model.md, "What the default sandbox does"): a file NAMED by such a
// config is protected whatever the trigger; project code reached only through
// the project's own build (make, npm scripts, what those call) runs when the
// user asks for a build, test or commit and is reviewed in `git diff`.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace exg::plan {

// Paths named in command text (a script, a JSON/TOML/YAML config, a shell
// line): every word that spells a path (holds '/' or '.', no wildcard or URL;
// ${workspaceFolder}, $CLAUDE_PROJECT_DIR and ~ expanded) resolved against
// each base directory, kept when it is an existing regular file, or when it
// does not exist yet and looks like a script (has '/' and a script suffix:
// the sweep then quarantines it if the run creates it). Absolute, folded.
std::vector<std::string> command_paths(std::string_view text, const std::vector<std::string>& bases,
                                       const std::string& home);

// The same for one protected file, by kind: .vscode/tasks.json and
// *.code-workspace count only their folderOpen tasks (the rest run when the
// user asks), launch.json nothing; an .envrc adds what direnv reads without
// naming it (dotenv's default .env, `use flake` / `use nix` files) and the
// directories PATH_add puts first on the user's PATH; prose and IDE state
// (*.md, *.txt, *.xml, .idea/) nothing. Files over 256 KiB are not read
// (nothing is returned for them).
std::vector<std::string> protected_file_pointers(const std::string& path, const std::vector<std::string>& bases,
                                                 const std::string& home);

}  // namespace exg::plan
