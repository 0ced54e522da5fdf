#include "sandbox/sweep.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>

#include "plan/paths.hpp"
#include "util/dir_fd.hpp"
#include "util/parallel_walk.hpp"
#include "util/unique_fd.hpp"

namespace exg::sandbox {

namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

int64_t ns(const struct timespec& t) { return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec; }

DirStamp stamp_of(const struct stat& st) { return {st.st_dev, st.st_ino, ns(st.st_mtim), ns(st.st_ctim)}; }

using plan::join_rel;

std::pair<std::string, std::string> split_last(const std::string& rel) {
  auto slash = rel.rfind('/');
  if (slash == std::string::npos) return {"", rel};
  return {rel.substr(0, slash), rel.substr(slash + 1)};
}

Result<UniqueFd> mkdirs_at(const std::string& base, const std::string& rel, mode_t mode) {
  // base is ours (host side, outside the workspace): created with parents.
  std::string cur;
  for (auto part : split_path(base)) {
    cur += "/";
    cur += part;
    if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) return fail(Error::sys("mkdir " + cur));
  }
  UniqueFd fd(::open(base.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return fail(Error::sys("open " + base));
  for (auto part : split_path(rel)) {
    std::string p(part);
    if (::mkdirat(fd.get(), p.c_str(), mode) != 0 && errno != EEXIST) return fail(Error::sys("mkdir " + p));
    UniqueFd next(::openat(fd.get(), p.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) return fail(Error::sys("open " + base + "/" + rel));
    fd = std::move(next);
  }
  return fd;
}


// Copies src_dirfd/name to dst_dirfd/dst_name without following links.
// Fifos, devices and sockets are not copied (nothing to keep).
Result<void> copy_entry(int src_dirfd, const std::string& name, int dst_dirfd, const std::string& dst_name) {
  struct stat st;
  if (::fstatat(src_dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return fail(Error::sys("stat " + name));
  if (S_ISLNK(st.st_mode)) {
    char buf[PATH_MAX];
    ssize_t n = ::readlinkat(src_dirfd, name.c_str(), buf, sizeof buf);
    if (n < 0) return fail(Error::sys("readlink " + name));
    if (::symlinkat(std::string(buf, n).c_str(), dst_dirfd, dst_name.c_str()) != 0)
      return fail(Error::sys("symlink " + dst_name));
    return {};
  }
  if (S_ISREG(st.st_mode)) {
    UniqueFd in(::openat(src_dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!in) return fail(Error::sys("open " + name));
    // Inert in the quarantine: no set-id bits; exec bits kept so a reviewer sees them.
    UniqueFd out(::openat(dst_dirfd, dst_name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out) return fail(Error::sys("create " + dst_name));
    if (!copy_data(in.get(), out.get())) return fail(Error::sys("copy " + name));
    ::fchmod(out.get(), st.st_mode & 0777);
    return {};
  }
  if (S_ISDIR(st.st_mode)) {
    UniqueFd in(::openat(src_dirfd, name.c_str(), kDirFlags));
    if (!in) return fail(Error::sys("open " + name));
    if (::mkdirat(dst_dirfd, dst_name.c_str(), 0700) != 0) return fail(Error::sys("mkdir " + dst_name));
    UniqueFd out(::openat(dst_dirfd, dst_name.c_str(), kDirFlags));
    if (!out) return fail(Error::sys("open " + dst_name));
    std::vector<std::string> names;
    if (!list_dir(in.get(), [&](std::string_view n, unsigned char) { names.emplace_back(n); }))
      return fail(Error::sys("list " + name));
    for (const auto& n : names)
      if (auto r = copy_entry(in.get(), n, out.get(), n); !r) return r;
    return {};
  }
  return {};
}

// Removes dirfd/name (a tree), never following a link.
Result<void> remove_entry(int dirfd, const std::string& name) {
  if (::unlinkat(dirfd, name.c_str(), 0) == 0) return {};
  if (errno != EISDIR && errno != EPERM) return fail(Error::sys("unlink " + name));
  UniqueFd fd(::openat(dirfd, name.c_str(), kDirFlags));
  if (!fd) return fail(Error::sys("open " + name));
  std::vector<std::string> names;
  if (!list_dir(fd.get(), [&](std::string_view n, unsigned char) { names.emplace_back(n); }))
    return fail(Error::sys("list " + name));
  for (const auto& n : names)
    if (auto r = remove_entry(fd.get(), n); !r) return r;
  if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0) return fail(Error::sys("rmdir " + name));
  return {};
}

// Picks name, name.1, name.2, ... until place(candidate) does not say EEXIST.
Result<std::string> place_unique(const std::string& name, const std::function<int(const std::string&)>& place) {
  for (int i = 0; i < 1000; ++i) {
    std::string cand = i == 0 ? name : name + "." + std::to_string(i);
    int e = place(cand);
    if (e == 0) return cand;
    if (e != EEXIST && e != ENOTEMPTY) return fail(Error::sys("quarantine " + name, e));
  }
  return fail(Error::msg("quarantine " + name, "too many entries of that name"));
}

std::string qpath(const std::string& qdir, const std::string& parent, const std::string& name) {
  return qdir + "/" + (parent.empty() ? name : parent + "/" + name);
}

}  // namespace

std::vector<std::string_view> split_path(std::string_view rel) { return plan::split_components(rel); }

int open_beneath(int root_fd, const std::string& rel, int flags, mode_t mode) {
  struct open_how how {};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  const char* p = rel.empty() ? "." : rel.c_str();
  for (;;) {
    long fd = ::syscall(SYS_openat2, root_fd, p, &how, sizeof how);
    if (fd >= 0 || errno != EAGAIN) return static_cast<int>(fd);
  }
}

bool benign_pth(std::string_view content) {
  if (content.size() > 65536) return false;
  size_t i = 0;
  while (i < content.size()) {
    size_t j = content.find('\n', i);
    if (j == std::string_view::npos) j = content.size();
    std::string_view line = content.substr(i, j - i);
    i = j + 1;
    // site.py: `line.startswith(("import ", "import\t"))` is executed; no
    // leading blanks are stripped before that test.
    if (!(line.starts_with("import ") || line.starts_with("import\t"))) continue;
    // setuptools' own distutils-precedence.pth (every venv made with pip has
    // it), exactly as setuptools writes it: the default 'local' (setuptools
    // 60+) or 'stdlib'. What it imports is a module of that site-packages,
    // which the sweep does not judge either (ordinary Python code).
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.remove_suffix(1);
    static constexpr std::string_view kSetuptools[] = {
        "import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, 'local') == 'local'; "
        "enabled and __import__('_distutils_hack').add_shim();",
        "import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, 'stdlib') == 'local'; "
        "enabled and __import__('_distutils_hack').add_shim();"};
    if (std::find(std::begin(kSetuptools), std::end(kSetuptools), line) == std::end(kSetuptools)) return false;
  }
  return true;
}

bool benign_git_config(std::string_view content, const std::function<bool(std::string_view)>& worktree_ok) {
  if (content.size() > 4096) return false;
  static const std::map<std::string, std::vector<std::string>> allowed = {
      {"core", {"repositoryformatversion", "filemode", "bare", "logallrefupdates", "ignorecase", "precomposeunicode",
                "symlinks", "sparsecheckout", "sparsecheckoutcone", "autocrlf", "longpaths", "fsmonitor", "untrackedcache",
                "quotepath", "worktree"}},
      {"extensions", {"objectformat", "refstorage", "worktreeconfig"}},
      // What OpenCode sets in its snapshot repositories (its state directory), with the
      // values below: settings of git's own code paths, none names a command.
      {"feature", {"manyfiles"}},
      {"index", {"version", "threads"}},
      // What `git clone` adds: where the objects came from and what each branch tracks.
      {"remote", {"url", "fetch", "pushurl"}},
      {"branch", {"remote", "merge", "rebase"}},
  };
  const std::vector<std::string>* keys = nullptr;
  size_t i = 0;
  while (i <= content.size()) {
    size_t j = content.find('\n', i);
    if (j == std::string_view::npos) j = content.size();
    std::string_view line = content.substr(i, j - i);
    i = j + 1;
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.remove_suffix(1);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[') {
      if (line.back() != ']') return false;
      std::string sec(line.substr(1, line.size() - 2));
      // [remote "origin"] / [branch "main"]: a quoted subsection name, nothing odd in it.
      if (auto sp = sec.find(' '); sp != std::string::npos) {
        std::string sub = sec.substr(sp + 1);
        if (sub.size() < 3 || sub.front() != '"' || sub.back() != '"' ||
            sub.find_first_of("\\\"", 1) != sub.size() - 1)
          return false;
        sec.resize(sp);
        for (auto& ch : sec) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        if (sec != "remote" && sec != "branch") return false;
      }
      for (auto& ch : sec) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      auto it = allowed.find(sec);
      if (it == allowed.end()) return false;  // includes [include], [remote ...], subsections
      keys = &it->second;
      continue;
    }
    if (!keys) return false;
    auto eq = line.find('=');
    std::string key(line.substr(0, eq == std::string_view::npos ? line.size() : eq));
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    for (auto& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (std::find(keys->begin(), keys->end(), key) == keys->end()) return false;
    if (eq != std::string_view::npos && line.find_first_of("\\\"", eq) != std::string_view::npos) return false;
    // core.worktree: where a checkout writes. Only in a git directory git never finds from a work
    // tree (not a .git, not in one: used only where named, with its work tree, as OpenCode's
    // snapshots are), and only pointing into the run's writable trees: a host checkout
    // through it writes wherever it points (~ and its rc files, were it named there).
    if (key == "worktree") {
      std::string val(eq == std::string_view::npos ? "" : line.substr(eq + 1));
      while (!val.empty() && (val.front() == ' ' || val.front() == '\t')) val.erase(0, 1);
      if (!worktree_ok || !worktree_ok(val)) return false;
    }
    // These take only the values listed (core.fsmonitor set to anything but false names a command).
    static const std::map<std::string, std::vector<std::string>> values = {
        {"autocrlf", {"true", "false", "input"}}, {"longpaths", {"true", "false"}}, {"fsmonitor", {"false"}},
        {"untrackedcache", {"true", "false", "keep"}}, {"quotepath", {"true", "false"}},
        {"manyfiles", {"true", "false"}}, {"version", {"2", "3", "4"}}, {"threads", {"true", "false"}}};
    if (auto v = values.find(key); v != values.end()) {
      std::string val(eq == std::string_view::npos ? "" : line.substr(eq + 1));
      while (!val.empty() && (val.front() == ' ' || val.front() == '\t')) val.erase(0, 1);
      for (auto& ch : val) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (std::find(v->second.begin(), v->second.end(), val) == v->second.end()) return false;
    }
    // A remote helper transport runs a command ("ext::sh -c ..."): never benign.
    if (key == "url" || key == "pushurl") {
      std::string v(line.substr(eq == std::string_view::npos ? line.size() : eq + 1));
      if (v.find("::") != std::string::npos) return false;
    }
  }
  return true;
}

bool benign_git_config_in(std::string_view content, const std::string& tree,
                          const plan::ProtectedPaths::Scope& scope, const std::vector<std::string>& roots) {
  // (a git directory reached only by name: no ".git" on its path from the tree's root)
  std::string_view r = scope.rel;
  bool named_only = scope.git_depth == 0 && !r.empty() && r != ".git" && !r.starts_with(".git/") &&
                    !r.ends_with("/.git") && r.find("/.git/") == std::string_view::npos;
  if (!named_only) return benign_git_config(content);
  std::string git_dir = tree + "/" + std::string(r);
  return benign_git_config(content, [&](std::string_view v) { return worktree_within(v, git_dir, roots); });
}

bool worktree_within(std::string_view value, const std::string& git_dir, const std::vector<std::string>& roots) {
  // An inline comment, ~ or an empty value: git reads these otherwise than as written here.
  if (value.empty() || value.front() == '~' || value.find_first_of("#;") != std::string_view::npos) return false;
  std::string abs = value.front() == '/' ? std::string(value) : git_dir + "/" + std::string(value);
  std::string norm = std::filesystem::path(abs).lexically_normal().string();
  while (norm.size() > 1 && norm.back() == '/') norm.pop_back();
  auto real = plan::canonical(abs);
  if (!real) return false;
  for (const auto& root : roots) {
    auto rc = plan::canonical(root);
    if (!rc) continue;
    for (const std::string& base : {root, *rc}) {
      if (!plan::is_within(norm, base)) continue;
      // Below the root, the path as written is the path as resolved: no symlink leads out.
      if (*real == *rc + norm.substr(base == "/" ? 0 : base.size())) return true;
    }
  }
  return false;
}

// ---- quarantine ----

Result<std::string> quarantine_move(int parent_fd, const std::string& src, const std::string& rel,
                                    const std::string& quarantine_dir) {
  auto [parent, name] = split_last(rel);
  auto q = mkdirs_at(quarantine_dir, parent, 0700);
  if (!q) return fail(q.error());
  int qfd = q->get(), sfd = parent_fd;
  auto placed = place_unique(name, [&](const std::string& dst) -> int {
    if (::renameat2(sfd, src.c_str(), qfd, dst.c_str(), RENAME_NOREPLACE) == 0) return 0;
    int e = errno;
    if (e != EXDEV) return e;
    // Another filesystem: copy, then remove the original.
    struct stat st;
    if (::fstatat(qfd, dst.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return EEXIST;
    if (auto r = copy_entry(sfd, src, qfd, dst); !r) return r.error().err ? r.error().err : EIO;
    if (auto r = remove_entry(sfd, src); !r) return r.error().err ? r.error().err : EIO;
    return 0;
  });
  if (!placed) return fail(placed.error());
  return qpath(quarantine_dir, parent, *placed);
}

Result<std::string> quarantine_copy(int src_dirfd, const std::string& name, const std::string& rel,
                                    const std::string& quarantine_dir) {
  auto [parent, last] = split_last(rel);
  auto q = mkdirs_at(quarantine_dir, parent, 0700);
  if (!q) return fail(q.error());
  int qfd = q->get();
  auto placed = place_unique(last, [&](const std::string& dst) -> int {
    struct stat st;
    if (::fstatat(qfd, dst.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return EEXIST;
    if (auto r = copy_entry(src_dirfd, name, qfd, dst); !r) return r.error().err ? r.error().err : EIO;
    return 0;
  });
  if (!placed) return fail(placed.error());
  return qpath(quarantine_dir, parent, *placed);
}

// ---- snapshot ----

namespace {

using Scope = plan::ProtectedPaths::Scope;

struct Listed {
  std::string name;
  unsigned char type;
};

// Lists fd into `out`; git markers on the way.
bool list_all(int fd, std::vector<Listed>& out, plan::GitMarkers& m) {
  return list_dir(fd, [&](std::string_view n, unsigned char t) {
    m.see(n);
    out.push_back({std::string(n), t});
  });
}

bool type_is_dir(int dirfd, const Listed& e, struct stat* st, bool* have_st) {
  if (e.type != DT_UNKNOWN) return e.type == DT_DIR;
  *have_st = ::fstatat(dirfd, e.name.c_str(), st, AT_SYMLINK_NOFOLLOW) == 0;
  return *have_st && S_ISDIR(st->st_mode);
}

// The tree-relative forms of the absolute pointers that lie in root.
std::vector<std::string> anchored_in(const std::string& root, const std::vector<std::string>& pointers) {
  std::vector<std::string> out;
  char buf[PATH_MAX];
  std::string r = ::realpath(root.c_str(), buf) ? std::string(buf) : root;
  for (const auto& p : pointers)
    if (p.size() > r.size() && p.starts_with(r) && p[r.size()] == '/') out.push_back(p.substr(r.size() + 1));
  return out;
}

// One directory to list: opened and stamped by its parent's visit, which also
// made its node (util/parallel_walk.hpp: a big tree is listed by a few threads).
struct SnapTask {
  OpenedDir dir;
  uint32_t node = 0;
  std::string name;     // its name in the parent ("" = the root)
  Scope parent;         // the parent's scope (unused for the root)
  bool is_root = false;
  size_t depth = 0;
};

struct SnapshotWalker {
  Snapshot& s;
  const plan::ProtectedPaths& pp;
  size_t max_depth = max_walk_depth();
  std::mutex m;  // s: its nodes and maps are shared by the threads
  ParallelWalk<SnapTask> walk;

  // A new node under `parent` (its subdirectory `name`); its index.
  uint32_t add_node(uint32_t parent, const std::string& name, const DirStamp& stamp, bool sealed, bool truncated,
                    bool opened) {
    std::lock_guard<std::mutex> l(m);
    uint32_t c = static_cast<uint32_t>(s.nodes.size());
    s.nodes.push_back({join_rel(s.nodes[parent].rel, name), stamp, false, sealed, truncated, {}, {}});
    s.nodes[parent].subdirs.emplace_back(name, c);
    if (opened) s.node_of[{stamp.dev, stamp.ino}] = c;
    return c;
  }

  void visit(SnapTask& t) {
    int fd = t.dir.get();
    std::vector<Listed> es;
    plan::GitMarkers gm;
    list_all(fd, es, gm);
    Scope scope = t.is_root ? pp.root(gm.git_dir(), s.root) : pp.enter(t.parent, t.name, pp.git_dir_here(t.parent, gm));
    bool quiet = pp.quiet(scope);
    // Its protected entries, and which entries are directories.
    std::vector<std::pair<std::string, DirStamp>> here;
    struct Sub {
      const Listed* e;
      bool have;
      struct stat st;
    };
    std::vector<Sub> subs;
    for (const auto& e : es) {
      struct stat cst;
      bool have = false;
      bool is_dir = type_is_dir(fd, e, &cst, &have);
      if (!quiet || pp.first_name(e.name)) {
        if (!have) have = ::fstatat(fd, e.name.c_str(), &cst, AT_SYMLINK_NOFOLLOW) == 0;
        if (!have) continue;
        is_dir = S_ISDIR(cst.st_mode);
        auto match = pp.classify(scope, e.name, is_dir, S_ISREG(cst.st_mode));
        if (match.kind != ProtectMatch::None) here.emplace_back(e.name, stamp_of(cst));
      }
      if (is_dir) subs.push_back({&e, have, cst});
    }
    StagedProtected staged;
    if (scope.git_depth == 0) staged = staged_protected(fd, pp);
    {
      std::lock_guard<std::mutex> l(m);
      DirNode& n = s.nodes[t.node];
      n.git_dir = scope.git_depth == 0;
      if (n.git_dir) s.indexes[n.rel] = std::move(staged);
      for (const auto& [name, d] : here) s.protected_inodes[{d.dev, d.ino}] = d.ctime_ns;
      n.protected_here = std::move(here);
      s.entries_seen += es.size();
    }
    // Its subdirectories: each opened while this one is open (and, if it was
    // ours and unreadable, still widened), then listed by whichever thread.
    for (auto& sub : subs) {
      const std::string& name = sub.e->name;
      bool deep = t.depth + 1 > max_depth;
      OpenedDir d = deep ? OpenedDir() : open_subdir(fd, name.c_str());
      struct stat st;
      if (!d) {  // a leaf the sweep judges by its stamp alone
        if (!sub.have && ::fstatat(fd, name.c_str(), &sub.st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        add_node(t.node, name, stamp_of(sub.st), !deep, deep, false);
        continue;
      }
      if (::fstat(d.get(), &st) != 0) continue;
      SnapTask next{std::move(d), add_node(t.node, name, stamp_of(st), false, false, true), name, scope, false,
                    t.depth + 1};
      if (!walk.offer(next)) visit(next);
    }
  }
};

}  // namespace

Result<Snapshot> snapshot_tree(const std::string& root, const std::vector<std::string>& extra_names,
                               const std::vector<std::string>& pointers, size_t max_threads) {
  Snapshot s;
  s.root = root;
  s.anchored = anchored_in(root, pointers);
  // Remember configs too: allow_git_config only widens what is accepted.
  plan::ProtectedPaths pp(extra_names, false, s.anchored);
  auto fd = open_subdir(AT_FDCWD, root.c_str());
  if (!fd) return fail(Error::sys("workspace " + root, fd.error()));
  struct timespec now;
  ::clock_gettime(CLOCK_REALTIME_COARSE, &now);
  s.taken_ns = ns(now) - 20'000'000;  // > one tick at HZ=100
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return fail(Error::sys("workspace " + root));
  // (not 4096 at once: ~480 KiB, an mmap and munmap on every run, for a
  // workspace that may hold a handful of directories; a big tree grows it)
  s.nodes.reserve(64);
  s.nodes.push_back({"", stamp_of(st), false, false, false, {}, {}});
  s.node_of[{st.st_dev, st.st_ino}] = 0;
  SnapshotWalker w{s, pp};
  w.walk.set_max_threads(max_threads);
  SnapTask top;
  top.dir = std::move(fd);
  top.is_root = true;
  w.walk.run(std::move(top), [&w](SnapTask& t) { w.visit(t); });
  return s;
}

// ---- sweep ----

namespace {

struct Sweeper {
  const std::string& root;
  const Snapshot& before;
  const plan::ProtectedPaths& pp;
  const SweepOptions& opt;
  size_t max_depth = max_walk_depth();
  std::vector<Planted> out;

  bool known(const struct stat& st) const {
    auto it = before.protected_inodes.find({st.st_dev, st.st_ino});
    if (it == before.protected_inodes.end()) return false;
    return S_ISDIR(st.st_mode) || it->second == ns(st.st_ctim);  // a directory's entries are judged one by one
  }

  // A protected file whose content names nothing that runs: a git config as
  // `git init` writes it, a .pth of paths only.
  bool benign_at(int dirfd, const std::string& name, const ProtectMatch& m, const Scope& scope) const {
    bool pth = m.sweep_only && name.ends_with(".pth");
    if (!m.git_config && !pth) return false;
    size_t max = pth ? 65536 : 4096;
    UniqueFd f(::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (!f) return false;
    struct stat st;
    if (::fstat(f.get(), &st) != 0 || !S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) > max) return false;
    std::string buf(static_cast<size_t>(st.st_size), '\0');
    ssize_t n = ::pread(f.get(), buf.data(), buf.size(), 0);
    if (n != st.st_size) return false;
    if (pth) return benign_pth(buf);
    return benign_git_config_in(buf, root, scope, opt.worktree_roots);
  }

  void unchecked(const std::string& rel, const std::string& why) {
    out.push_back({rel.empty() ? "." : rel, why, {}, true});
  }

  // Moves dir/name to the quarantine now (nothing below it is walked).
  void plant(OpenedDir& dir, const std::string& name, const std::string& rel, const std::string& why) {
    Planted p{rel, why, {}, false};
    if (!opt.dry_run) {
      auto to = quarantine_move(dir.get(), name, rel, opt.quarantine_dir);
      // Our own directory without w: give u+w back for the move.
      if (!to && to.error().err == EACCES && dir.widen(0300)) to = quarantine_move(dir.get(), name, rel, opt.quarantine_dir);
      if (to) p.quarantined_to = *to;
      else p.why += " (NOT quarantined: " + to.error().str() + ")";
    }
    out.push_back(std::move(p));
  }

  // One entry of a listed directory: judged; true when it is a directory to descend into.
  bool judge(OpenedDir& dir, const Scope& scope, const Listed& e, const std::string& rel, struct stat& st) {
    if (::fstatat(dir.get(), e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) unchecked(rel, std::string("stat: ") + std::strerror(errno));
      return false;
    }
    bool is_dir = S_ISDIR(st.st_mode);
    auto m = pp.classify(scope, e.name, is_dir, S_ISREG(st.st_mode));
    if (m.kind == ProtectMatch::Protected && !known(st)) {
      if (benign_at(dir.get(), e.name, m, scope)) return false;
      plant(dir, e.name, rel, m.why);
      return false;
    }
    return is_dir;
  }

  // A git directory's index that stages a protected name it did not stage at
  // start (`git update-index --add --cacheinfo ...,.envrc`): no file was
  // written, the host's next `git checkout -- .` writes it. The index is
  // moved to the quarantine (`git reset` rebuilds it from HEAD).
  void check_index(OpenedDir& dir, const std::string& rel) {
    auto now = staged_protected(dir.get(), pp);
    if (!now.present) return;
    auto it = before.indexes.find(rel);
    const StagedProtected* was = it == before.indexes.end() ? nullptr : &it->second;
    if (was && was->present && was->dev == now.dev && was->ino == now.ino && was->ctime_ns == now.ctime_ns) return;
    std::string why;
    if (!now.entries) {
      why = "git index changed during the run and cannot be read whole (a split index?): it may stage code that runs "
            "later; `git reset` rebuilds it from HEAD";
    } else {
      std::vector<std::string> added;
      for (const auto& e : *now.entries)
        if (!was || !was->entries || !was->entries->count(e)) added.push_back(e.substr(e.find(' ', 7) + 1));
      if (added.empty()) return;
      why = "git index stages " + added[0] + (added.size() > 1 ? " (and " + std::to_string(added.size() - 1) + " more)" : "") +
            ", a protected name, with no such file written: the host's next `git checkout -- .` would create it; "
            "`git reset` rebuilds the index from HEAD";
    }
    plant(dir, "index", join_rel(rel, "index"), why);
  }

  // The directory open as `dir`, at rel; node: what the snapshot knew of it
  // (UINT32_MAX: new); list: list it even if its stamp is unchanged (new or
  // moved: its entries' meaning may have changed with its path).
  void walk(OpenedDir& dir, const std::string& rel, std::string_view name, const Scope* parent, uint32_t node,
            bool list, size_t depth) {
    struct stat st;
    if (::fstat(dir.get(), &st) != 0) return unchecked(rel, std::string("stat: ") + std::strerror(errno));
    const DirNode* n = node == UINT32_MAX ? nullptr : &before.nodes[node];
    if (n && (n->stamp.dev != st.st_dev || n->stamp.ino != st.st_ino)) n = nullptr;
    if (n && n->rel != rel) list = true;  // moved
    if (!n) list = true;
    if (n && !list) {
      bool recent = n->stamp.mtime_ns >= before.taken_ns || n->stamp.ctime_ns >= before.taken_ns;
      list = recent || ns(st.st_mtim) != n->stamp.mtime_ns || ns(st.st_ctim) != n->stamp.ctime_ns;
    }
    if (!list) {
      // The same entries as at start: the protected ones may have changed in
      // place (same inode, new ctime); the subdirectories are the snapshot's.
      Scope scope = parent ? pp.enter(*parent, name, n->git_dir) : pp.root(n->git_dir, before.root);
      if (scope.git_depth == 0) check_index(dir, rel);
      for (const auto& [pname, st0] : n->protected_here) {
        struct stat cst;
        if (::fstatat(dir.get(), pname.c_str(), &cst, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (S_ISDIR(cst.st_mode) || cst.st_dev != st0.dev || cst.st_ino != st0.ino || ns(cst.st_ctim) == st0.ctime_ns)
          continue;
        auto m = pp.classify(scope, pname, false, S_ISREG(cst.st_mode));
        if (m.kind != ProtectMatch::Protected) continue;
        if (benign_at(dir.get(), pname, m, scope)) continue;
        plant(dir, pname, join_rel(rel, pname), "changed during the run: " + m.why);
      }
      for (const auto& [cname, cidx] : n->subdirs) descend(dir, scope, cname, join_rel(rel, cname), cidx, false, depth);
      return;
    }
    std::vector<Listed> es;
    plan::GitMarkers gm;
    if (!list_all(dir.get(), es, gm)) return unchecked(rel, std::string("list: ") + std::strerror(errno));
    Scope scope = parent ? pp.enter(*parent, name, pp.git_dir_here(*parent, gm)) : pp.root(gm.git_dir(), before.root);
    if (scope.git_depth == 0) check_index(dir, rel);
    bool quiet = pp.quiet(scope);
    for (const auto& e : es) {
      std::string crel = join_rel(rel, e.name);
      struct stat cst;
      if (quiet && !pp.first_name(e.name) && e.type != DT_DIR && e.type != DT_UNKNOWN) continue;
      if (!judge(dir, scope, e, crel, cst)) continue;
      // A directory: the snapshot's node by name when it is the same one, else by inode (moved here).
      uint32_t cidx = UINT32_MAX;
      if (n)
        for (const auto& [sn, si] : n->subdirs)
          if (sn == e.name) cidx = si;
      if (cidx != UINT32_MAX && (before.nodes[cidx].stamp.ino != cst.st_ino || before.nodes[cidx].stamp.dev != cst.st_dev))
        cidx = UINT32_MAX;
      if (cidx == UINT32_MAX)
        if (auto it = before.node_of.find({cst.st_dev, cst.st_ino}); it != before.node_of.end()) cidx = it->second;
      descend(dir, scope, e.name, crel, cidx, cidx == UINT32_MAX, depth);
    }
  }

  void descend(OpenedDir& dir, const Scope& scope, const std::string& name, const std::string& rel, uint32_t node,
               bool list, size_t depth) {
    if (depth + 1 > max_depth) return unchecked(rel, "deeper than " + std::to_string(max_depth) + " directories");
    auto sub = open_subdir(dir.get(), name.c_str());
    if (!sub) {
      if (sub.error() == ENOENT) return;
      if (sub.error() == ENOTDIR || sub.error() == ELOOP) return;  // replaced by a file or link: its parent changed, judged there
      struct stat st;
      if (node != UINT32_MAX && before.nodes[node].sealed && ::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        const DirStamp& s0 = before.nodes[node].stamp;
        if (st.st_dev == s0.dev && st.st_ino == s0.ino && ns(st.st_mtim) == s0.mtime_ns && ns(st.st_ctim) == s0.ctime_ns)
          return;  // sealed before the run and untouched since
      }
      return unchecked(rel, std::string("cannot open: ") + std::strerror(sub.error()));
    }
    walk(sub, rel, name, &scope, node, list, depth + 1);
  }
};

}  // namespace

Result<std::vector<Planted>> sweep(const std::string& root, const Snapshot& before, const SweepOptions& opt) {
  plan::ProtectedPaths pp(opt.extra_names, opt.allow_git_config, before.anchored);
  auto root_fd = open_subdir(AT_FDCWD, root.c_str());
  if (!root_fd) return fail(Error::sys("workspace " + root, root_fd.error()));
  if (!opt.dry_run) {
    if (opt.quarantine_dir.empty() || opt.quarantine_dir[0] != '/')
      return fail(Error::msg("quarantine", "needs an absolute directory outside the workspace"));
    // Created only when something is moved (through its path's links, mkdirs_at):
    // judged by where it is or would be, the real path of its deepest existing
    // ancestor and the rest (a link on the way into the workspace counts).
    char a[PATH_MAX], b[PATH_MAX];
    if (::realpath(root.c_str(), a)) {
      std::string r = a, head = opt.quarantine_dir, rest;
      while (head.size() > 1 && ::faccessat(AT_FDCWD, head.c_str(), F_OK, AT_EACCESS) != 0) {
        size_t slash = head.rfind('/');
        rest = head.substr(slash) + rest;
        head.resize(slash == 0 ? 1 : slash);
      }
      std::string qd = ::realpath(head.c_str(), b) ? std::string(b) : head;
      qd = qd == "/" && !rest.empty() ? rest : qd + rest;
      if (qd == r || qd.starts_with(r == "/" ? r : r + "/"))
        return fail(Error::msg("quarantine " + qd, "is inside the workspace " + r));
    }
  }
  Sweeper sw{root, before, pp, opt};
  sw.walk(root_fd, "", "", nullptr, before.nodes.empty() ? UINT32_MAX : 0, false, 0);
  std::sort(sw.out.begin(), sw.out.end(), [](const Planted& a, const Planted& b) { return a.relpath < b.relpath; });
  return std::move(sw.out);
}

bool copy_data(int in, int out) {
  for (;;) {
    ssize_t n = ::copy_file_range(in, nullptr, out, nullptr, 1 << 30, 0);
    if (n == 0) return true;
    if (n > 0) continue;
    if (errno == EINTR) continue;
    break;
  }
  // Fallback (EXDEV on old kernels, special filesystems): plain copy from where we are.
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(in, buf, sizeof buf);
    if (n == 0) return true;
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    for (ssize_t w = 0; w < n;) {
      ssize_t k = ::write(out, buf + w, n - w);
      if (k < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      w += k;
    }
  }
}

}  // namespace exg::sandbox
