#include "plan/protect.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "plan/command_pointers.hpp"
#include "plan/git_pointers.hpp"
#include "plan/paths.hpp"
#include "plan/protected_names.hpp"
#include "util/dir_fd.hpp"
#include "util/parallel_walk.hpp"
#include "util/proc_text.hpp"

namespace exg::plan {

namespace {

struct Entry {
  std::string name;
  unsigned char type;
};

unsigned char type_at(int dirfd, const char* name, unsigned char d_type) {
  if (d_type != DT_UNKNOWN) return d_type;
  struct stat st;
  if (::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return DT_UNKNOWN;
  if (S_ISDIR(st.st_mode)) return DT_DIR;
  if (S_ISLNK(st.st_mode)) return DT_LNK;
  if (S_ISREG(st.st_mode)) return DT_REG;
  return DT_UNKNOWN;
}

// A directory the walk widened (u+rx) to open: kept open, and so widened,
// until every directory below it is walked (the walk reaches entries below it
// by path too: symlink targets, git configs), with the one above it.
struct Held {
  OpenedDir dir;
  std::shared_ptr<Held> up;
};

// One directory to walk (util/parallel_walk.hpp: a big tree is walked by a few
// threads; the findings are sorted at the end, so their order does not matter).
struct DirTask {
  OpenedDir dir;    // opened from its parent (root: `root_fd`)
  UniqueFd root_fd;
  std::string path;
  ProtectedPaths::Scope scope;  // root: set; others: derived from `parent` once listed (visit)
  ProtectedPaths::Scope parent;
  std::string name;  // in the parent
  bool is_root = false;
  bool scoped = false;
  size_t depth = 0;
  std::shared_ptr<Held> held;  // the nearest widened directory above it
};

struct Walker {
  const ProtectOptions& opt;
  const ProtectedPaths& pp;
  std::string root;
  size_t max_depth = max_walk_depth();
  ProtectFindings out;
  std::mutex m;  // out
  ParallelWalk<DirTask> walk;

  void add(const std::string& path, bool is_dir, const std::string& why, bool pin = false) {
    std::lock_guard<std::mutex> l(m);
    out.paths.push_back({path, is_dir, pin, why});
  }

  // A protected name that is a symlink cannot be mounted over: protect what it
  // points at (compile() keeps only targets inside a writable tree).
  // A target is kept when it lies in this tree or another writable one (the
  // rest is read-only already, and binding it could uncover a masked path).
  bool writable(const std::string& p) const {
    if (is_within(p, root)) return true;
    return std::any_of(opt.writable.begin(), opt.writable.end(), [&](const auto& w) { return is_within(p, w); });
  }

  void add_entry(const std::string& path, unsigned char type, const std::string& why) {
    if (type == DT_LNK) {
      if (auto target = canonical(path); target && writable(*target)) {
        struct stat st;
        if (::stat(target->c_str(), &st) == 0) add(*target, S_ISDIR(st.st_mode), why + " (symlink target)");
      }
      return;
    }
    add(path, type == DT_DIR, why);
  }

  // A pointer (absolute): remembered for the sweep, and bound read-only when
  // it exists in a writable tree.
  void pointer(const std::string& p, const std::string& why) {
    {
      std::lock_guard<std::mutex> l(m);
      out.pointers.push_back(p);
    }
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) return;
    unsigned char t = S_ISLNK(st.st_mode) ? DT_LNK : S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
    auto c = canonical(p);
    if (!c || (t != DT_LNK && !writable(*c))) return;
    add_entry(t == DT_LNK ? p : *c, t, why);
  }

  // What a protected file names that runs with it (command_pointers.hpp),
  // resolved against its directory and the two above it, within the tree.
  void named_in(const std::string& file) {
    std::vector<std::string> bases;
    std::string d = file.substr(0, file.rfind('/'));
    for (int k = 0; k < 3 && is_within(d, root); ++k) {
      bases.push_back(d);
      if (d == root) break;
      d = d.substr(0, d.rfind('/'));
    }
    std::string shown = is_within(file, root) && file.size() > root.size() ? file.substr(root.size() + 1) : file;
    for (const auto& p : protected_file_pointers(file, bases, opt.home))
      if (p != file) pointer(p, "named by the protected " + shown + ": runs with it, outside the sandbox");
  }

  // Links inside a protected directory lead the tool that reads it elsewhere:
  // protect their targets too (.vscode/tasks.json -> ../tools/tasks.json);
  // its files: what they name.
  void links_in(int fd, const std::string& path, size_t depth, size_t* files) {
    if (depth > 16) return;
    std::vector<Entry> es;
    list_dir(fd, [&](std::string_view n, unsigned char t) { es.push_back({std::string(n), t}); });
    for (auto& e : es) {
      unsigned char t = type_at(fd, e.name.c_str(), e.type);
      std::string p = path + "/" + e.name;
      if (t == DT_LNK) add_entry(p, t, "linked from a protected directory");
      else if (t == DT_REG && ++*files <= 256) named_in(p);
      else if (t == DT_DIR)
        if (auto sub = open_subdir(fd, e.name.c_str())) links_in(sub.get(), p, depth + 1, files);
    }
  }
  void links_in(int fd, const std::string& path) {
    size_t files = 0;
    links_in(fd, path, 0, &files);
  }

  void git_dir(const std::string& path, bool is_root) {
    if (!is_root) add(path, true, "git directory (pinned: cannot be renamed or replaced)", true);
    for (const auto& p : git_dir_pointers(path, opt.home)) {
      {
        std::lock_guard<std::mutex> l(m);
        out.pointers.push_back(p);
      }
      struct stat st;
      if (::lstat(p.c_str(), &st) != 0) continue;
      unsigned char t = S_ISLNK(st.st_mode) ? DT_LNK : S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
      auto c = canonical(p);
      if (!c || (t != DT_LNK && !writable(*c))) continue;
      add_entry(t == DT_LNK ? p : *c, t, "named by a git config or a symlinked hook: runs later, outside the sandbox");
      if (t == DT_DIR)
        if (UniqueFd fd(::open(c->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)); fd) links_in(fd.get(), *c);
    }
  }

  // One directory: its protected entries, and its subdirectories offered to
  // the walk (or, when its queue is full, walked here).
  void visit(DirTask& task) {
    std::shared_ptr<Held> held = std::move(task.held);
    int fd = task.dir ? task.dir.get() : task.root_fd.get();
    if (task.dir.widened()) {
      held = std::make_shared<Held>(Held{std::move(task.dir), std::move(held)});
      fd = held->dir.get();
    }
    const std::string& path = task.path;
    const size_t depth = task.depth;
    std::vector<Entry> es;
    GitMarkers gm;
    bool listed = list_dir(fd, [&](std::string_view n, unsigned char t) {
      gm.see(n);
      es.push_back({std::string(n), t});
    });
    // Whether it is a git directory, from its own listing (not four stats per
    // directory, the root's included; a listing that failed part-way: asked by name).
    if (!task.scoped) {
      if (!listed) gm = git_markers_at(fd);
      task.scope = task.is_root ? pp.root(gm.git_dir(), root) : pp.enter(task.parent, task.name, pp.git_dir_here(task.parent, gm));
      task.scoped = true;
    }
    const ProtectedPaths::Scope& scope = task.scope;
    if (scope.git_depth == 0) git_dir(path, path == root);
    for (auto& e : es) {
      if (pp.quiet(scope) && !pp.first_name(e.name) && e.type != DT_DIR && e.type != DT_UNKNOWN) continue;
      unsigned char t = type_at(fd, e.name.c_str(), e.type);
      std::string p = path + "/" + e.name;
      auto m = pp.classify(scope, e.name, t == DT_DIR, t == DT_REG);
      if (m.kind == ProtectMatch::Protected && m.sweep_only) continue;  // judged by the sweep at the end
      if (m.kind == ProtectMatch::Protected) {
        add_entry(p, t, m.why);
        if (t == DT_DIR)
          if (auto sub = open_subdir(fd, e.name.c_str())) links_in(sub.get(), p);
        if (t == DT_REG) named_in(p);
        continue;
      }
      if (m.kind == ProtectMatch::HooksDir) {
        add(p, true, "git hooks run later, outside the sandbox");
        continue;  // its links: git_dir_pointers
      }
      if (t == DT_LNK) {
        // Tools read <link>/<entry> through the link: protect what it reaches.
        for (const auto& tail : pp.tails(e.name)) {
          struct stat st;
          if (::fstatat(fd, (e.name + "/" + tail).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
          unsigned char tt = S_ISLNK(st.st_mode) ? DT_LNK : S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
          auto c = tt == DT_LNK ? std::optional<std::string>(p + "/" + tail) : canonical(p + "/" + tail);
          if (c && (tt == DT_LNK || writable(*c)))
            add_entry(*c, tt, e.name + "/" + tail + ": runs later, outside the sandbox (through a link)");
        }
        continue;
      }
      if (t != DT_DIR || depth + 1 > max_depth) continue;
      // In a git directory only what can hold more git directories is walked
      // (not objects/, refs/, logs/).
      if (scope.git_depth == 0 && e.name != "modules" && e.name != "worktrees" && e.name != "info") continue;
      DirTask sub;
      sub.dir = open_subdir(fd, e.name.c_str());
      if (!sub.dir) continue;  // unreadable and not ours: the sandbox cannot enter it either
      sub.parent = scope;
      sub.name = e.name;
      sub.path = std::move(p);
      sub.depth = depth + 1;
      sub.held = held;
      if (!walk.offer(sub)) visit(sub);
    }
  }
};

}  // namespace

ProtectFindings find_protected_all(const std::string& root, const ProtectOptions& opt) {
  ProtectedPaths pp(opt.extra_names, opt.allow_git_config);
  Walker w{opt, pp, root};
  w.walk.set_max_threads(opt.max_threads);
  DirTask top;
  top.root_fd.reset(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (top.root_fd) {
    top.is_root = true;  // (its scope from its listing, in visit)
    top.path = root;
    w.walk.run(std::move(top), [&w](DirTask& t) { w.visit(t); });
  }
  auto& v = w.out.paths;
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  v.erase(std::unique(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.path == b.path; }), v.end());
  auto& q = w.out.pointers;
  std::sort(q.begin(), q.end());
  q.erase(std::unique(q.begin(), q.end()), q.end());
  return std::move(w.out);
}

std::vector<ProtectedPath> find_protected(const std::string& root, const ProtectOptions& opt) {
  return find_protected_all(root, opt).paths;
}

// The policy's extra protected names, plus `.env` when the host's direnv
// loads it into the shell (load_dotenv = true): then its values (PROMPT_COMMAND,
// BASH_ENV, ...) are code.
std::vector<std::string> protected_extra_names(std::vector<std::string> names, const std::string& home) {
  // What the user's and the system's git configs name relative to a
  // repository (a relative core.hooksPath, core.fsmonitor = tools/fsmon.sh):
  // a path inside every repository, those made during the run included.
  for (auto& n : user_git_relative_names(home)) names.push_back(std::move(n));
  std::vector<std::string> dirs;
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x == '/') dirs.push_back(std::string(x) + "/direnv");
  if (!home.empty()) dirs.push_back(home + "/.config/direnv");
  for (const auto& d : dirs)
    for (const char* f : {"/direnv.toml", "/config.toml"}) {
      // read(2), not a stream: most runs have no such file, and a stream's set-up cost more than the rest.
      std::string text = util::read_proc_text((d + f).c_str());
      for (size_t at = 0; at < text.size();) {
        size_t end = std::min(text.find('\n', at), text.size());
        std::string l;
        for (size_t i = at; i < end; ++i)
          if (text[i] != ' ' && text[i] != '\t') l += text[i];
        at = end + 1;
        if (l.starts_with("load_dotenv=true")) {
          names.push_back(".env");
          return names;
        }
      }
    }
  return names;
}

}  // namespace exg::plan
