#include "plan/protected_names.hpp"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <stdexcept>

namespace exg::plan {

namespace {

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
constexpr ProtectedName kTable[] = {
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
    {".config/nushell", "nushell: config.nu and env.nu, every shell"},
    {".config/xonsh", "xonsh: rc.xsh and rc.d, every shell"},
    {".config/elvish/rc.elv", "elvish, every shell"},
    {".config/powershell", "PowerShell profiles (pwsh), every shell"},
    {".config/starship.toml", "starship: custom modules run commands at every prompt"},
    {".config/direnv", "direnv's own config and lib/*.sh (sourced before every .envrc)"},
    {".config/husky/init.sh", "husky: sourced before every hook"},
    {".config/mise", "mise's global config (hooks, env) and conf.d"},
    {".config/nvim", "Neovim's user config, when the tree is a home directory"},
    {".config/git/hooks", "a conventional global core.hooksPath"},
    {".config/Code/User", "VS Code's user settings and tasks, when the tree is a home directory"},
    {".config/systemd/user", "systemd user units: started at login"},
    {".config/autostart", "XDG autostart: started at desktop login"},
    {".Xresources", "X resources"}, {".xprofile", "X session start"}, {".xsession", "X session start"},
    {".xinitrc", "startx"},
    {".pam_environment", "PAM: the login environment (LD_PRELOAD, BASH_ENV)"},
    {".ssh/rc", "sshd: run at every login"},
    {".ssh/config", "ssh: ProxyCommand, LocalCommand, Match exec run commands"},
    // REPLs and debuggers that read a start-up file from the current directory (or home).
    {".pdbrc", "pdb: runs its lines as debugger commands (`!` is Python) in the current directory"},
    {".pdbrc.py", "pdbpp: imported at start"},
    {".pythonrc", "Python's PYTHONSTARTUP by convention (home)"}, {".pythonrc.py", "Python's PYTHONSTARTUP (home)"},
    {".Rprofile", "R: sourced at start from the current directory"},
    {".Renviron", "R: read at start from the current directory (R_PROFILE_USER names code to run)"},
    {".ghci", "GHCi: read at start from the current directory (:! runs shell)"},
    {".ghcid", "ghcid: its arguments (--command, --test) from the current directory"},
    {".irbrc", "irb: loaded at start from the current directory"}, {"_irbrc", "irb (alternative name)"}, {"irb.rc", "irb (alternative name)"},
    {"$irbrc", "irb (alternative name)"},
    {".pryrc", "pry: loaded at start from the current directory"},
    {".octaverc", "GNU Octave: run at start from the current directory"},
    {".iex.exs", "Elixir IEx: evaluated at start from the current directory"},
    {".erlang", "Erlang: evaluated at erl start"},
    {".perldb", "the Perl debugger: evaluated at start from the current directory"},
    {".gdbinit", "gdb: from the current directory (with auto-load safe-path) and home"},
    {".config/gdb/gdbinit", "gdb (XDG)"}, {".lldbinit", "lldb: from the current directory when enabled, and home"},
    {".sqliterc", "sqlite3: read at start (.shell runs commands)"},
    {".psqlrc", "psql: read at start (\\! runs commands)"},
    {".psqlrc-*", "psql: version-specific start-up file"},
    {".julia/config/startup.jl", "Julia: run at every start (home)"},
    {".claude.json", "Claude Code's global config (per-project mcpServers), home"},
    {".codeium/windsurf/mcp_config.json", "Windsurf: MCP servers (home)"},
    {".ipython", "IPython: profile startup/ scripts and config run at start (home)"},
    {"ipython_config.py", "IPython: config files in the current directory are executed"},
    {"ipython_kernel_config.py", "IPython kernels: config in the current directory is executed"},
    {"jupyter_server_config.py", "Jupyter: config in the current directory is executed at start"},
    {"jupyter_notebook_config.py", "Jupyter Notebook: config in the current directory is executed"},
    {"jupyter_lab_config.py", "JupyterLab: config in the current directory is executed"},
    {".jupyter", "Jupyter's config directory (home)"},
    {".guile", "Guile: loaded at REPL start (home)"}, {".racketrc", "Racket REPL start-up (home)"},
    {".sbclrc", "SBCL: loaded at start (home)"}, {".clisprc.lisp", "CLISP start-up (home)"},
    {".tclshrc", "tclsh: sourced at interactive start (home)"}, {".wishrc", "wish (home)"},
    {".emacs", "Emacs init (home)"}, {".emacs.d/init.el", "Emacs init (home)"},
    {".emacs.d/early-init.el", "Emacs (home)"},
    {".tmux.conf", "tmux: run-shell and hooks (home)"}, {".screenrc", "GNU screen: exec (home)"},
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
    {".lefthook", "lefthook: scripts directory (.lefthook/<hook>/<script>), run by its hooks"},
    {".lefthook-local", "lefthook: local scripts directory"},
    {".huskyrc", "husky v4: hooks from this config"}, {".huskyrc.json", "husky v4"},
    {".huskyrc.js", "husky v4"}, {".huskyrc.cjs", "husky v4"}, {"husky.config.js", "husky v4"},
    {"husky.config.cjs", "husky v4"},
    {".lintstagedrc", "lint-staged: commands run on every commit (by a pre-commit hook)"},
    {".lintstagedrc.*", "lint-staged"}, {"lint-staged.config.*", "lint-staged"},
    {".commitlintrc", "commitlint: loaded (as code when .js/.ts) by a commit-msg hook"},
    {".commitlintrc.*", "commitlint"}, {"commitlint.config.*", "commitlint"},
    {".simple-git-hooks.*", "simple-git-hooks: hook commands"}, {"simple-git-hooks.*", "simple-git-hooks"},
    {".simple-git-hooks", "simple-git-hooks"},
    {"captainhook.json", "CaptainHook (PHP): actions run on every commit"},
    {"grumphp.yml", "GrumPHP: tasks run on every commit"}, {"grumphp.yml.dist", "GrumPHP"},
    {"grumphp.dist.yml", "GrumPHP"},
    {".rusty-hook.toml", "rusty-hook: hook commands"}, {"rusty-hook.toml", "rusty-hook"},
    {".cargo-husky", "cargo-husky: hook scripts (copied into .git/hooks)"},
    {"hk.pkl", "hk: hook steps"}, {"hk.local.pkl", "hk (local overrides)"}, {".config/hk.pkl", "hk (config place)"},
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
    {".sl/config", "Sapling: [hooks] and [extensions] on every sl command"},
    {".sl/hgrc", "Sapling (older name)"},
    {".sl/sharedpath", "Sapling: redirects to another repository's store and config"},
    {".pijul/config", "Pijul repository config: [hooks] record runs on every record"},
    {".jj/repo/config.toml.d", "Jujutsu repository config fragments"},
    {".hg/hgrc.d", "Mercurial: config fragments"},
    {".hgrc.d", "Mercurial (home)"},
    // Entering the directory in a shell.
    {".envrc", "direnv: sourced by bash on cd"},
    {".mise.toml", "mise: [env] and [hooks] run on cd with `mise activate`"},
    {"mise.toml", "mise"}, {".mise.local.toml", "mise"}, {"mise.local.toml", "mise"},
    {".config/mise.toml", "mise"}, {".config/mise/config.toml", "mise"}, {".mise/config.toml", "mise"},
    {"mise.*.toml", "mise: per-environment config (MISE_ENV)"}, {".mise.*.toml", "mise"},
    {".config/mise.*.toml", "mise"}, {".config/mise/config.*.toml", "mise"}, {".config/mise/conf.d", "mise"},
    {".mise/config.*.toml", "mise"}, {".mise/conf.d", "mise"}, {"mise/config.toml", "mise"},
    {"mise/config.*.toml", "mise"}, {".rtx.toml", "rtx (mise's former name)"}, {".rtx.*.toml", "rtx (per environment)"},
    {".tool-versions", "asdf and mise: chooses which tool binaries (and plugins) run"},
    {".envrc.*", "direnv: .envrc.local and friends, sourced by many .envrc files"},
    {".autoenv.zsh", "zsh-autoenv: sourced on cd"}, {".autoenv_leave.zsh", "zsh-autoenv"},
    {".python-version", "pyenv and uv: choose which interpreter runs"},
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
    {"*.code-workspace", "VS Code workspace file: tasks (runOn folderOpen), settings naming executables"},
    {".lazy.lua", "lazy.nvim: loaded from the current directory (local spec)"},
    {"*.sublime-project", "Sublime Text project file"},
    {".kateproject", "Kate: build targets, LSP servers"},
    // Agent CLIs: hooks, MCP servers started at launch, commands and agents they run.
    {".mcp.json", "Claude Code and other MCP clients: servers started at launch"},
    {".claude/settings.json", "Claude Code: hooks, statusLine, apiKeyHelper run commands"},
    {".claude/settings.local.json", "Claude Code"},
    {".claude/commands", "Claude Code slash commands (can run shell lines)"},
    {".claude/agents", "Claude Code subagents"},
    {".claude/hooks", "Claude Code hook scripts"},
    {".claude/skills", "Claude Code skills (scripts the agent runs)"},
    {".claude/statusline.sh", "Claude Code statusLine script (by convention)"},
    {".amp", "Amp: settings.json (mcpServers, amp.commands), commands, toolbox scripts"},
    {".agents", "Amp and others: agent commands and skills"},
    {".copilot", "GitHub Copilot CLI: mcp-config.json"},
    {".augment", "Augment: rules, commands, hooks"},
    {".trae", "Trae: rules, MCP servers"},
    {".qoder", "Qoder: rules, MCP servers"},
    {".factory", "Factory Droid: hooks, MCP servers, droids"},
    {".openhands", "OpenHands: setup.sh runs at session start, microagents"},
    {".gemini/settings.json", "Gemini CLI: mcpServers, tool discovery and call commands, hooks"},
    {".gemini/commands", "Gemini CLI custom commands (!{...} runs shell)"},
    {".gemini/extensions", "Gemini CLI workspace extensions (MCP servers)"},
    {".gemini/.env", "Gemini CLI: loaded into its environment at start"},
    {".gemini/sandbox.Dockerfile", "Gemini CLI sandbox image"},
    {".gemini/sandbox-macos-custom.sb", "Gemini CLI sandbox profile"},
    {".qwen/extensions", "Qwen Code extensions"},
    {".codex/skills", "Codex CLI skills"},
    {".codex/rules", "Codex exec-policy rules"},
    {".qwen/settings.json", "Qwen Code (Gemini CLI's settings format)"},
    {".qwen/commands", "Qwen Code custom commands"},
    {".codex/config.toml", "Codex CLI project config: mcp_servers, notify command"},
    {".cursor/mcp.json", "Cursor: MCP servers"},
    {".cursor/hooks.json", "Cursor agent hooks"},
    {".cursor/hooks", "Cursor agent hook scripts"},
    {".cursor/rules", "Cursor rules"},
    {".cursor/commands", "Cursor custom commands"},
    {".cursor/environment.json", "Cursor background agent: install and start commands"},
    {".cursor/cli.json", "Cursor CLI: permissions"},
    {".cursor/worktrees.json", "Cursor: setup commands for new worktrees"},
    {".cursor/agents", "Cursor agents"},
    {".cursor/skills", "Cursor skills"},
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
    // OpenCode's global config directory (writable in its agent profile for the files it keeps
    // there): what it loads as code or runs at every start, sandboxed or not.
    {".config/opencode/plugin", "OpenCode: global plugins (loaded as code at every start)"},
    {".config/opencode/plugins", "OpenCode: global plugins (loaded as code at every start)"},
    {".config/opencode/tool", "OpenCode: global custom tools (code)"},
    {".config/opencode/tools", "OpenCode: global custom tools (code)"},
    {".config/opencode/package.json", "OpenCode: installed with its scripts at start (its plugins' dependencies)"},
    {".config/opencode/node_modules", "OpenCode: what its global plugins and tools import"},
    {".config/opencode/command", "OpenCode: global commands (!`...` runs shell)"},
    {".config/opencode/commands", "OpenCode: global commands (!`...` runs shell)"},
    {".config/opencode/agent", "OpenCode: global agents (their permissions)"},
    {".config/opencode/agents", "OpenCode: global agents (their permissions)"},
    {".config/opencode/mode", "OpenCode: global modes"},
    {".config/opencode/modes", "OpenCode: global modes"},
    {".config/opencode/skill", "OpenCode: global skills (scripts the agent runs)"},
    {".config/opencode/skills", "OpenCode: global skills (scripts the agent runs)"},
    // Its cache directory (writable in the profile): what it downloads there is code it runs
    // later, sandboxed or not: npm plugins, language servers, skills.
    {".cache/opencode/packages", "OpenCode: plugins installed from npm (loaded as code at start)"},
    {".cache/opencode/node_modules", "OpenCode: installed plugins and their dependencies (code)"},
    {".cache/opencode/package.json", "OpenCode: installed with its scripts (its plugins' dependencies)"},
    {".cache/opencode/bin", "OpenCode: downloaded language servers (run at start)"},
    {".cache/opencode/skill", "OpenCode: downloaded skills (scripts the agent runs)"},
    {".cache/opencode/skills", "OpenCode: downloaded skills (scripts the agent runs)"},
    {".crush.json", "Crush: MCP servers and language server commands"},
    {"crush.json", "Crush"},
    {".aider.conf.yml", "aider: lint-cmd and test-cmd run after edits"},
    // ExGuardian's and srt's own policy files: they choose what the next run may do.
    {".exguardian.json", "ExGuardian's project policy"},
    {".srt-settings.json", "sandbox-runtime (srt) settings"},
    {".ripgreprc", "ripgrep (through RIPGREP_CONFIG_PATH): --pre runs a command per file"},
    // Executable artefacts review never shows (git status stays clean: they are ignored).
    // Judged at the end only: quarantined when created or changed during the run. The
    // sandbox's own Python writes its caches elsewhere (PYTHONPYCACHEPREFIX), so any
    // compiled file that appears in the tree was written on purpose.
    {"*.pth", "Python site: `import` lines run at every start of that interpreter (editors' interpreter discovery included)", true},
    {"*.pyc", "Python: a compiled file stamped with its source's mtime and size runs instead of the reviewed source", true},
    {"*.pyo", "Python 2 / old optimised compiled files", true},
    {"sitecustomize.py", "Python: imported at every start when on the path (a virtualenv's site-packages)", true},
    {"usercustomize.py", "Python: imported at every start (user site)", true},
};

// The table split into components and indexed by first component at compile
// time: every run reads it (the plan's protect walk, the workspace snapshot, the
// end-of-run sweep), and building it at run time (about 300 names: vectors of
// strings and a hash map) was a fifth of the supervisor's instructions.
constexpr size_t kTableSize = std::size(kTable);
constexpr size_t kMaxComponents = 6;

constexpr bool has_pattern_char(std::string_view c) {
  for (char ch : c)
    if (ch == '*' || ch == '?' || ch == '[') return true;
  return false;
}

// How a component is matched, worked out once: exactly, as one '*' between a
// prefix and a suffix (the common form: "*.pyc", "mise.*.toml"), or by fnmatch.
// Big walks test every file name of a quiet directory against the patterns.
struct Form {
  enum Kind : unsigned char { Exact, Star, Fnmatch } kind = Exact;
  unsigned char star = 0;  // Star: where the '*' is (names are shorter than 256: split_name)
};

constexpr Form form_of(std::string_view c) {
  unsigned stars = 0;
  unsigned char star = 0;
  bool other = false;
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i] == '*') ++stars, star = static_cast<unsigned char>(i);
    else if (c[i] == '?' || c[i] == '[') other = true;
  }
  if (!stars && !other) return {};
  if (stars == 1 && !other) return {Form::Star, star};
  return {Form::Fnmatch, 0};
}

bool form_matches(const Form& f, std::string_view c, std::string_view name) {
  switch (f.kind) {
    case Form::Exact:
      return c == name;
    case Form::Star: {
      std::string_view pre = c.substr(0, f.star), suf = c.substr(f.star + 1);
      return name.size() >= pre.size() + suf.size() && name.starts_with(pre) && name.ends_with(suf);
    }
    case Form::Fnmatch:
      break;
  }
  return ::fnmatch(std::string(c).c_str(), std::string(name).c_str(), 0) == 0;
}

// A name's components as where they are in the table's name, not as
// string_views: a table of pointers is data the loader relocates, so copies, at
// every start of exguardian, whichever subcommand (as string_views the split
// table and its index were 63 KiB of .data.rel.ro, 16 of its 39 pages); as
// offsets they are read-only data, read where a run reads them.
struct Span {
  unsigned char at = 0, len = 0;
};

struct SplitName {
  std::array<Span, kMaxComponents> comps{};
  std::array<Form, kMaxComponents> forms{};
  unsigned char n = 0;
};

constexpr SplitName split_name(std::string_view s) {
  if (s.size() > 255) throw std::logic_error("a protected name longer than 255 characters");
  SplitName out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find('/', i);
    if (j == std::string_view::npos) j = s.size();
    if (j > i) {
      if (out.n == kMaxComponents) throw std::logic_error("a protected name with more than kMaxComponents components");
      out.comps[out.n] = {static_cast<unsigned char>(i), static_cast<unsigned char>(j - i)};
      out.forms[out.n] = form_of(s.substr(i, j - i));
      ++out.n;
    }
    i = j + 1;
  }
  return out;
}

constexpr auto kSplit = [] {
  std::array<SplitName, kTableSize> a{};
  for (size_t i = 0; i < kTableSize; ++i) {
    std::string_view name = kTable[i].name;
    // (add() skips these for filesystem.protect: the git directory's own rules cover them)
    if (name.empty() || name.starts_with(".git/")) throw std::logic_error("a table name the classifier would skip");
    a[i] = split_name(name);
  }
  return a;
}();

// Component k of the table's name idx.
constexpr std::string_view table_comp(unsigned idx, unsigned k) {
  const Span& c = kSplit[idx].comps[k];
  return std::string_view(kTable[idx].name + c.at, c.len);
}

constexpr size_t kGlobFirstCount = [] {
  size_t c = 0;
  for (unsigned i = 0; i < kTableSize; ++i) c += has_pattern_char(table_comp(i, 0)) ? 1 : 0;
  return c;
}();

// Patterns whose first component is a pattern, in table order.
constexpr auto kGlobFirst = [] {
  std::array<unsigned, kGlobFirstCount> a{};
  size_t k = 0;
  for (unsigned i = 0; i < kTableSize; ++i)
    if (has_pattern_char(table_comp(i, 0))) a[k++] = i;
  return a;
}();

static_assert(kTableSize <= 65535, "kByFirst holds indexes as unsigned short");

// The others' indexes, sorted by first component (table order among equals).
constexpr auto kByFirst = [] {
  std::array<unsigned short, kTableSize - kGlobFirstCount> a{};
  size_t k = 0;
  for (unsigned i = 0; i < kTableSize; ++i)
    if (!has_pattern_char(table_comp(i, 0))) a[k++] = static_cast<unsigned short>(i);
  std::sort(a.begin(), a.end(), [](unsigned x, unsigned y) {
    return table_comp(x, 0) < table_comp(y, 0) || (table_comp(x, 0) == table_comp(y, 0) && x < y);
  });
  return a;
}();

// The table entries whose first component is exactly `name`.
std::pair<const unsigned short*, const unsigned short*> table_first(std::string_view name) {
  auto lo = std::lower_bound(kByFirst.begin(), kByFirst.end(), name,
                             [](unsigned idx, std::string_view n) { return table_comp(idx, 0) < n; });
  auto hi = lo;
  while (hi != kByFirst.end() && table_comp(*hi, 0) == name) ++hi;
  return {lo, hi};
}

}  // namespace

const std::span<const ProtectedName> kProtectedNameTable(kTable);

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
  // The table's names are indexed at compile time (kSplit, kByFirst); only the
  // policy's own names are split here.
  for (const auto& n : extra_names) add_extra(n);
}

bool is_name_pattern(std::string_view c) { return has_pattern_char(c); }

bool component_matches(std::string_view c, std::string_view name) { return form_matches(form_of(c), c, name); }

bool ProtectedPaths::comp_matches(unsigned idx, unsigned k, std::string_view name) const {
  if (idx < kTableSize) return form_matches(kSplit[idx].forms[k], table_comp(idx, k), name);
  return component_matches(extra_[idx - kTableSize][k], name);
}

unsigned ProtectedPaths::size_of(unsigned idx) const {
  return idx < kTableSize ? kSplit[idx].n : static_cast<unsigned>(extra_[idx - kTableSize].size());
}

std::string_view ProtectedPaths::comp(unsigned idx, unsigned k) const {
  return idx < kTableSize ? table_comp(idx, k) : std::string_view(extra_[idx - kTableSize][k]);
}

const char* ProtectedPaths::who(unsigned idx) const {
  return idx < kTableSize ? kTable[idx].who : "filesystem.protect";
}

bool ProtectedPaths::sweep_only(unsigned idx) const { return idx < kTableSize && kTable[idx].sweep_only; }

std::string ProtectedPaths::spelled(unsigned idx) const {
  std::string s;
  for (unsigned k = 0; k < size_of(idx); ++k) {
    if (k) s += '/';
    s += comp(idx, k);
  }
  return s;
}

template <class F>
void ProtectedPaths::each_first(std::string_view name, F&& f) const {
  for (auto [it, end] = table_first(name); it != end; ++it) f(*it);
  if (!extra_first_.empty())
    for (const auto& [first, idx] : extra_first_)
      if (first == name) f(idx);
  for (unsigned idx : kGlobFirst)
    if (comp_matches(idx, 0, name)) f(idx);
  for (unsigned idx : extra_glob_first_)
    if (comp_matches(idx, 0, name)) f(idx);
}

bool ProtectedPaths::glob_first(std::string_view name) const {
  for (unsigned idx : kGlobFirst)
    if (comp_matches(idx, 0, name)) return true;
  for (unsigned idx : extra_glob_first_)
    if (comp_matches(idx, 0, name)) return true;
  return false;
}

bool ProtectedPaths::first_name(std::string_view name) const {
  if (name == ".git") return true;
  if (auto [lo, hi] = table_first(name); lo != hi) return true;
  for (const auto& e : extra_first_)
    if (e.first == name) return true;
  return glob_first(name);
}

void ProtectedPaths::add_extra(std::string_view name) {
  if (name.empty() || name.starts_with(".git/")) return;  // the git directory's own rules cover these
  auto parts = split_components(name);
  if (parts.empty()) return;
  auto idx = static_cast<unsigned>(kTableSize + extra_.size());
  extra_.emplace_back(parts.begin(), parts.end());
  if (is_name_pattern(parts[0])) extra_glob_first_.push_back(idx);
  else extra_first_.emplace_back(std::string(parts[0]), idx);
}

std::vector<std::string> ProtectedPaths::tails(std::string_view first) const {
  std::vector<std::string> out;
  each_first(first, [&](unsigned idx) {
    // (a pattern further down cannot be looked up by name: the sweep judges what it matches)
    unsigned n = size_of(idx);
    if (n < 2) return;
    for (unsigned k = 1; k < n; ++k)
      if (is_name_pattern(comp(idx, k))) return;
    std::string tail;
    for (unsigned k = 1; k < n; ++k) {
      if (k > 1) tail += '/';
      tail += comp(idx, k);
    }
    out.push_back(std::move(tail));
  });
  return out;
}

ProtectedPaths::Scope ProtectedPaths::root(bool root_is_git_dir, std::string_view tree) const {
  Scope s;
  if (root_is_git_dir) s.git_depth = 0;
  // Only names of several components are followed through the root's own path:
  // a one-component name among its ancestors or as its own name (a workspace
  // at ~/work/.agents/x) says nothing about the root that the user asked for.
  for (std::string_view c : split_components(tree)) {
    std::vector<std::pair<unsigned, unsigned>> next;
    for (const auto& [idx, k] : s.partial) {
      if (!comp_matches(idx, k, c)) continue;
      if (k + 1 < size_of(idx)) {
        next.emplace_back(idx, k + 1);
      } else if (!s.inside) {
        s.inside = true;
        s.why = spelled(idx) + ": " + who(idx);
        s.sweep_only = sweep_only(idx);
      }
    }
    each_first(c, [&](unsigned idx) {
      if (size_of(idx) > 1) next.emplace_back(idx, 1u);
    });
    s.partial = std::move(next);
  }
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
  if (p.inside) return {ProtectMatch::Protected, p.why, false, p.sweep_only};
  if (p.git_depth >= 0 || p.hooks) {
    auto m = git_entry(p, name, is_dir, is_reg);
    if (m.kind != ProtectMatch::None) return m;
  }
  if (name == ".git") {
    if (is_dir) return {};  // a git directory: its entries are judged by the rules above
    return {ProtectMatch::Protected, "a .git file or link chooses the git directory (and so its hooks)", false};
  }
  for (const auto& [idx, k] : p.partial)
    if (k + 1 == size_of(idx) && !(sweep_only(idx) && is_dir) && comp_matches(idx, k, name))
      return {ProtectMatch::Protected, spelled(idx) + ": " + who(idx), false, sweep_only(idx)};
  ProtectMatch m;
  each_first(name, [&](unsigned idx) {
    // A name listed both ways counts as bound at start (the stricter).
    // (sweep-only kinds are files: a directory of that name is an ordinary one)
    if (size_of(idx) == 1 && !(sweep_only(idx) && is_dir) && (m.kind == ProtectMatch::None || m.sweep_only))
      m = {ProtectMatch::Protected, std::string(name) + ": " + who(idx), false, sweep_only(idx)};
  });
  if (m.kind != ProtectMatch::None) return m;
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
    s.sweep_only = m.sweep_only;
  }
  if (is_git_dir || name == ".git") {
    s.git_depth = 0;
  } else if (p.git_depth >= 0) {
    s.git_depth = p.git_depth + 1;
    s.git_first = p.git_depth == 0 ? std::string(name) : p.git_first;
    s.hooks = m.kind == ProtectMatch::HooksDir;
  }
  for (const auto& [idx, k] : p.partial)
    if (k + 1 < size_of(idx) && comp_matches(idx, k, name)) s.partial.emplace_back(idx, k + 1);
  each_first(name, [&](unsigned idx) {
    if (size_of(idx) > 1) s.partial.emplace_back(idx, 1u);
  });
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
