#include "plan/protected_names.hpp"

#include <fcntl.h>
#include <sys/stat.h>

namespace exg::plan {

// Code that runs later: never writable in a writable tree, at any depth, and
// quarantined when created or changed during a run. The bar: it runs (or is
// loaded as configuration that names commands) without the user asking for the
// project's code, on an ordinary git command, on entering the directory in a
// shell, on opening the folder in an editor or an agent CLI. Build files the
// user runs on purpose (Makefile, package.json scripts, build.rs, eslint and
// cargo configs) are the project's code, reviewed like any other change.
// `.env` is data: only direnv with load_dotenv = true turns it into the
// shell's environment, and compile.cpp adds it when the host's direnv config
// says so.
const std::vector<ProtectedName> kProtectedNameTable = {
    // Shells: read at start-up when the tree is (or holds) a home directory.
    {".bashrc", "bash, interactive shells"},
    {".bash_profile", "bash, login shells"},
    {".bash_login", "bash, login shells"},
    {".bash_logout", "bash, at logout"},
    {".bash_aliases", "sourced by Debian's and Ubuntu's default .bashrc"},
    {".profile", "sh, dash and bash login shells"},
    {".zshrc", "zsh, interactive shells"},
    {".zshenv", "zsh, every shell"},
    {".zprofile", "zsh, login shells"},
    {".zlogin", "zsh, login shells"},
    {".zlogout", "zsh, at logout"},
    {".cshrc", "csh and tcsh"},
    {".tcshrc", "tcsh"},
    {".kshrc", "ksh (through ENV)"},
    {".xonshrc", "xonsh"},
    {".inputrc", "readline: key bindings can run shell commands"},
    {".config/fish/config.fish", "fish, every shell"},
    {".config/fish/conf.d", "fish, every shell"},
    // Git outside the git directory (the git directory's own files: kGitDirEntries).
    {".git", "a .git file or link (gitdir: ...) chooses the git directory, and so its hooks and config"},
    {".gitconfig", "git, when the tree is a home directory"},
    {".config/git/config", "git's XDG global config"},
    {".config/git/attributes", "git's XDG attributes (select filters that run commands)"},
    {".gitmodules", "git submodule update/clone: urls and update commands"},
    {".githooks", "a conventional core.hooksPath directory (the configured one is read from the config)"},
    {".git-hooks", "a conventional core.hooksPath directory"},
    // Git hook managers: their hooks in .git/hooks run the commands these name on every commit.
    {".husky", "husky: core.hooksPath=.husky/_ runs the scripts in .husky/"},
    {".pre-commit-config.yaml", "pre-commit: 'repo: local' hooks are arbitrary commands"},
    {".pre-commit-config.yml", "pre-commit (alternative name)"},
    {"lefthook.yml", "lefthook"}, {".lefthook.yml", "lefthook"}, {"lefthook.yaml", "lefthook"},
    {".lefthook.yaml", "lefthook"}, {"lefthook.toml", "lefthook"}, {".lefthook.toml", "lefthook"},
    {"lefthook.json", "lefthook"}, {".lefthook.json", "lefthook"}, {"lefthook.jsonc", "lefthook"},
    {".lefthook.jsonc", "lefthook"}, {"lefthook-local.yml", "lefthook (local overrides)"},
    {".lefthook-local.yml", "lefthook (local overrides)"}, {"lefthook-local.yaml", "lefthook (local overrides)"},
    {".lefthook-local.yaml", "lefthook (local overrides)"}, {".config/lefthook.yml", "lefthook"},
    {".config/lefthook.yaml", "lefthook"},
    {".overcommit.yml", "overcommit"},
    // Other version control systems: their repository config names hooks and extensions.
    {".hg/hgrc", "Mercurial: [hooks] and [extensions] (Python) on every hg command"},
    {".hg/hgrc-not-shared", "Mercurial (share-safe repositories)"},
    {".hg/sharedpath", "Mercurial: redirects to another repository's store and config"},
    {".hgrc", "Mercurial, when the tree is a home directory"},
    {".bzr/branch/branch.conf", "Breezy/Bazaar branch configuration"},
    {".bzr/branch/location", "Breezy/Bazaar: redirects to another branch"},
    {".jj/repo/config.toml", "Jujutsu repository config: aliases, fix.tools, ui.pager run commands"},
    {".jj/repo/store/git_target", "Jujutsu: redirects to a git directory"},
    {"_darcs/prefs/defaults", "darcs: default options, including --posthook/--prehook commands"},
    {".fslckout", "Fossil checkout database (points at the repository and its settings)"},
    {"_FOSSIL_", "Fossil checkout database (older name)"},
    // Entering the directory in a shell.
    {".envrc", "direnv: sourced by bash on cd"},
    {".mise.toml", "mise: [env] and [hooks] run on cd with `mise activate`"},
    {"mise.toml", "mise"}, {".mise.local.toml", "mise"}, {"mise.local.toml", "mise"},
    {".config/mise.toml", "mise"}, {".config/mise/config.toml", "mise"}, {".mise/config.toml", "mise"},
    {".yarnrc.yml", "yarn berry: yarnPath is executed by every yarn command"},
    {".yarnrc", "yarn classic: yarn-path is executed by every yarn command"},
    // Editors, on opening the folder.
    {".vscode", "VS Code and its forks (Cursor, Windsurf): tasks with runOn folderOpen, settings naming executables, mcp.json"},
    {".idea", "JetBrains IDEs: run configurations, startup tasks, tool paths"},
    {".fleet", "JetBrains Fleet: run configurations"},
    {".zed", "Zed: tasks, language server binaries, context servers (MCP)"},
    {".helix", "Helix: languages.toml names language server commands, started on opening a file"},
    {".nvim.lua", "Neovim with 'exrc'"},
    {".nvimrc", "Neovim with 'exrc'"},
    {".exrc", "vi, Vim and Neovim with 'exrc'"},
    {".vimrc", "Vim with 'exrc' (and in a home directory)"},
    {".gvimrc", "gVim with 'exrc'"},
    {".lvimrc", "Vim localvimrc plugin"},
    {".dir-locals.el", "Emacs: eval: forms (after a prompt that is often answered once)"},
    {".dir-locals-2.el", "Emacs"},
    {".devcontainer", "Dev Containers: initializeCommand runs on the host"},
    {".devcontainer.json", "Dev Containers: initializeCommand runs on the host"},
    // Agent CLIs: hooks, MCP servers started at launch, commands and agents they run.
    {".mcp.json", "Claude Code and other MCP clients: servers started at launch"},
    {".claude/settings.json", "Claude Code: hooks, statusLine, apiKeyHelper run commands"},
    {".claude/settings.local.json", "Claude Code"},
    {".claude/commands", "Claude Code slash commands (can run shell lines)"},
    {".claude/agents", "Claude Code subagents"},
    {".claude/hooks", "Claude Code hook scripts"},
    {".claude/skills", "Claude Code skills (scripts the agent runs)"},
    {".gemini/settings.json", "Gemini CLI: mcpServers, tool discovery and call commands, hooks"},
    {".gemini/commands", "Gemini CLI custom commands (!{...} runs shell)"},
    {".gemini/extensions", "Gemini CLI workspace extensions (MCP servers)"},
    {".qwen/settings.json", "Qwen Code (Gemini CLI's settings format)"},
    {".qwen/commands", "Qwen Code custom commands"},
    {".codex/config.toml", "Codex CLI project config: mcp_servers, notify command"},
    {".cursor/mcp.json", "Cursor: MCP servers"},
    {".cursor/hooks.json", "Cursor agent hooks"},
    {".cursor/hooks", "Cursor agent hook scripts"},
    {".cursor/rules", "Cursor rules"},
    {".cursor/commands", "Cursor custom commands"},
    {".cursor/environment.json", "Cursor background agent: install and start commands"},
    {".windsurf/hooks.json", "Windsurf Cascade hooks"},
    {".windsurf/workflows", "Windsurf workflows (run commands)"},
    {".continue", "Continue: config.yaml, mcpServers/"},
    {".clinerules/hooks", "Cline hooks"},
    {".clinerules/workflows", "Cline workflows"},
    {".roo/mcp.json", "Roo Code: MCP servers"},
    {".kilocode/mcp.json", "Kilo Code: MCP servers"},
    {".amazonq/mcp.json", "Amazon Q Developer: MCP servers"},
    {".amazonq/cli-agents", "Amazon Q Developer CLI agents: hooks and MCP servers"},
    {".kiro/settings/mcp.json", "Kiro: MCP servers"},
    {".kiro/hooks", "Kiro agent hooks"},
    {".junie/mcp", "JetBrains Junie: MCP servers"},
    {"opencode.json", "OpenCode: mcp servers, commands"},
    {"opencode.jsonc", "OpenCode"},
    {".opencode", "OpenCode: plugins (loaded as code at start), commands, agents"},
    {".crush.json", "Crush: MCP servers and language server commands"},
    {"crush.json", "Crush"},
    {".aider.conf.yml", "aider: lint-cmd and test-cmd run after edits"},
    // ExGuardian's and srt's own policy files: they choose what the next run may do.
    {".exguardian.json", "ExGuardian's project policy"},
    {".srt-settings.json", "sandbox-runtime (srt) settings"},
    {".ripgreprc", "ripgrep (through RIPGREP_CONFIG_PATH): --pre runs a command per file"},
};

const std::vector<ProtectedName> kGitDirEntries = {
    {"hooks", "git hooks: run by git commit, checkout, merge, push, ..."},
    {"config", "git config: core.hooksPath, core.fsmonitor, core.sshCommand, aliases, filters run commands"},
    {"config.worktree", "git per-worktree config (extensions.worktreeConfig, e.g. sparse checkout)"},
    {"commondir", "redirects a git directory's objects, refs, config and hooks to another directory"},
    {"gitdir", "a linked worktree's way back to its .git file"},
    {"info/attributes", "git attributes: choose filters and diff drivers that run commands"},
};

std::string join_rel(const std::string& rel, std::string_view name) {
  if (rel.empty()) return std::string(name);
  std::string s;
  s.reserve(rel.size() + 1 + name.size());
  s += rel;
  s += '/';
  s += name;
  return s;
}

namespace {

std::string spelled(const std::vector<std::string>& comps) {
  std::string s;
  for (const auto& c : comps) s += (s.empty() ? "" : "/") + c;
  return s;
}

}  // namespace

std::vector<std::string_view> split_components(std::string_view rel) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < rel.size()) {
    size_t j = rel.find('/', i);
    if (j == std::string_view::npos) j = rel.size();
    if (j > i) out.push_back(rel.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

void GitMarkers::see(std::string_view n) {
  if (n == "HEAD") head = true;
  else if (n == "objects") objects = true;
  else if (n == "refs") refs = true;
  else if (n == "commondir") commondir = true;
}

GitMarkers git_markers_at(int dirfd) {
  GitMarkers m;
  struct stat st;
  for (const char* n : {"HEAD", "objects", "refs", "commondir"})
    if (::fstatat(dirfd, n, &st, AT_SYMLINK_NOFOLLOW) == 0) m.see(n);
  return m;
}

ProtectedPaths::ProtectedPaths(const std::vector<std::string>& extra_names, bool allow_git_config,
                               std::vector<std::string> anchored)
    : anchored_(anchored.begin(), anchored.end()), allow_git_config_(allow_git_config) {
  for (const auto& e : kProtectedNameTable) add(e.name, e.who);
  for (const auto& n : extra_names) add(n, "filesystem.protect");
}

void ProtectedPaths::add(const std::string& name, const std::string& who) {
  if (name.empty() || name.starts_with(".git/")) return;  // the git directory's own rules cover these
  std::vector<std::string> comps;
  for (auto c : split_components(name)) comps.emplace_back(c);
  if (comps.empty()) return;
  first_[comps[0]].push_back(static_cast<unsigned>(patterns_.size()));
  patterns_.push_back(std::move(comps));
  whos_.push_back(who);
}

std::vector<std::string> ProtectedPaths::tails(std::string_view first) const {
  std::vector<std::string> out;
  if (auto it = first_.find(std::string(first)); it != first_.end())
    for (unsigned idx : it->second)
      if (patterns_[idx].size() > 1)
        out.push_back(spelled(std::vector<std::string>(patterns_[idx].begin() + 1, patterns_[idx].end())));
  return out;
}

ProtectedPaths::Scope ProtectedPaths::root(bool root_is_git_dir) const {
  Scope s;
  if (root_is_git_dir) s.git_depth = 0;
  return s;
}

ProtectMatch ProtectedPaths::git_entry(const Scope& p, std::string_view name, bool is_dir, bool is_reg) const {
  if (p.hooks) {
    if (is_reg && name.ends_with(".sample")) return {};  // git never runs these
    return {ProtectMatch::Protected, "git hook: runs later, outside the sandbox", false};
  }
  // Below modules/ and worktrees/ every directory may be a submodule's or a
  // linked worktree's git directory, looking like one or not.
  bool top = p.git_depth == 0 || (p.git_depth >= 1 && (p.git_first == "modules" || p.git_first == "worktrees"));
  if (top) {
    if (name == "hooks") {
      if (is_dir) return {ProtectMatch::HooksDir, "git hooks directory", false};
      return {ProtectMatch::Protected, "git hooks directory replaced by a file or link: hooks run later, outside the sandbox",
              false};
    }
    if (name == "config" || name == "config.worktree") {
      if (allow_git_config_) return {};
      return {ProtectMatch::Protected,
              std::string(name == "config" ? "git config" : "git config.worktree") +
                  ": can name hooks and commands (core.hooksPath, core.fsmonitor, ...)",
              true};
    }
    if (name == "commondir" || name == "gitdir")
      return {ProtectMatch::Protected, "git " + std::string(name) + ": redirects the git directory (and so its hooks)", false};
  }
  if (p.git_depth == 1 && p.git_first == "info" && name == "attributes")
    return {ProtectMatch::Protected, "git attributes: choose filters that run commands", false};
  return {};
}

ProtectMatch ProtectedPaths::classify(const Scope& p, std::string_view name, bool is_dir, bool is_reg) const {
  if (p.inside) return {ProtectMatch::Protected, p.why, false};
  if (p.git_depth >= 0 || p.hooks) {
    auto m = git_entry(p, name, is_dir, is_reg);
    if (m.kind != ProtectMatch::None) return m;
  }
  if (name == ".git") {
    if (is_dir) return {};  // a git directory: its entries are judged by the rules above
    return {ProtectMatch::Protected, "a .git file or link chooses the git directory (and so its hooks)", false};
  }
  for (const auto& [idx, k] : p.partial)
    if (patterns_[idx][k] == name && k + 1 == patterns_[idx].size())
      return {ProtectMatch::Protected, spelled(patterns_[idx]) + ": " + whos_[idx], false};
  if (auto it = first_.find(std::string(name)); it != first_.end())
    for (unsigned idx : it->second)
      if (patterns_[idx].size() == 1) return {ProtectMatch::Protected, std::string(name) + ": " + whos_[idx], false};
  if (!anchored_.empty() && anchored_.count(join_rel(p.rel, name)))
    return {ProtectMatch::Protected, "named by a git config or a symlinked hook: runs later, outside the sandbox", false};
  return {};
}

ProtectedPaths::Scope ProtectedPaths::enter(const Scope& p, std::string_view name, bool is_git_dir) const {
  Scope s;
  s.rel = join_rel(p.rel, name);
  auto m = classify(p, name, true, false);
  if (m.kind == ProtectMatch::Protected) {
    s.inside = true;
    s.why = m.why;
  }
  if (is_git_dir || name == ".git") {
    s.git_depth = 0;
  } else if (p.git_depth >= 0) {
    s.git_depth = p.git_depth + 1;
    s.git_first = p.git_depth == 0 ? std::string(name) : p.git_first;
    s.hooks = m.kind == ProtectMatch::HooksDir;
  }
  for (const auto& [idx, k] : p.partial)
    if (patterns_[idx][k] == name && k + 1 < patterns_[idx].size()) s.partial.emplace_back(idx, k + 1);
  if (auto it = first_.find(std::string(name)); it != first_.end())
    for (unsigned idx : it->second)
      if (patterns_[idx].size() > 1) s.partial.emplace_back(idx, 1u);
  return s;
}

ProtectMatch ProtectedPaths::classify_path(std::string_view rel, bool is_dir, bool is_reg,
                                           const std::unordered_set<std::string>& git_dirs) const {
  auto comps = split_components(rel);
  if (comps.empty()) return {};
  Scope s = root(git_dirs.count("") > 0);
  for (size_t i = 0; i + 1 < comps.size(); ++i) {
    std::string next = join_rel(s.rel, comps[i]);
    s = enter(s, comps[i], git_dirs.count(next) > 0);
  }
  return classify(s, comps.back(), is_dir, is_reg);
}

}  // namespace exg::plan
