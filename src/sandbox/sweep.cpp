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
#include <functional>
#include <map>

#include "plan/plan.hpp"
#include "util/unique_fd.hpp"

namespace exg::sandbox {

namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

struct LinuxDirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

// Calls fn(name, d_type) for every entry but . and ..; false on a read error.
template <typename Fn>
bool list_dir(int fd, Fn&& fn) {
  alignas(8) char buf[32768];
  for (;;) {
    long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) return true;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<LinuxDirent64*>(buf + off);
      off += d->d_reclen;
      const char* name = d->d_name;
      if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
      fn(std::string_view(name), d->d_type);
    }
  }
}

int64_t ns(const struct timespec& t) { return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec; }

DirStamp stamp_of(const struct stat& st) { return {st.st_dev, st.st_ino, ns(st.st_mtim), ns(st.st_ctim)}; }

std::string join(const std::string& rel, std::string_view name) {
  if (rel.empty()) return std::string(name);
  std::string s;
  s.reserve(rel.size() + 1 + name.size());
  s += rel;
  s += '/';
  s += name;
  return s;
}

std::pair<std::string, std::string> split_last(const std::string& rel) {
  auto slash = rel.rfind('/');
  if (slash == std::string::npos) return {"", rel};
  return {rel.substr(0, slash), rel.substr(slash + 1)};
}

// A path whose components may hold a protected name: one starts with '.'.
bool dotted(const std::string& rel) { return !rel.empty() && (rel[0] == '.' || rel.find("/.") != std::string::npos); }

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

std::vector<std::string_view> split_path(std::string_view rel) {
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

// ---- protected names ----

ProtectedNames::ProtectedNames(const std::vector<std::string>& extra_names, bool allow_git_config)
    : allow_git_config_(allow_git_config) {
  auto add = [&](const std::string& n) {
    if (n.empty() || n.starts_with(".git/")) return;  // .git is judged by the git-directory rules
    auto slash = n.find('/');
    if (slash == std::string::npos) names_.push_back(n);
    else nested_.emplace_back(n.substr(0, slash), n.substr(slash + 1));
    if (n[0] != '.') all_dotted_ = false;
  };
  for (const auto& n : plan::kProtectedNames) add(n);
  for (const auto& n : extra_names) add(n);
}

namespace {

ProtectMatch git_rules(const std::vector<std::string_view>& c, size_t j, bool is_dir, bool is_reg, bool allow_cfg) {
  size_t n = c.size();
  if (j >= n) return {};
  bool last = j == n - 1;
  std::string_view name = c[j];
  if (name == "hooks") {
    if (last) {
      if (is_dir) return {ProtectMatch::HooksDir, "git hooks directory", false};
      return {ProtectMatch::Protected, "git hooks directory replaced by a file or link: hooks run later, outside the sandbox", false};
    }
    if (j + 1 == n - 1 && is_reg && c[j + 1].ends_with(".sample")) return {};  // git never runs these
    return {ProtectMatch::Protected, "git hook: runs later, outside the sandbox", false};
  }
  if (name == "config" && last) {
    if (allow_cfg) return {};
    return {ProtectMatch::Protected, "git config: can name hooks and commands (core.hooksPath, core.fsmonitor, ...)", true};
  }
  if (name == "commondir" && last) return {ProtectMatch::Protected, "git metadata that chooses the hooks and config", false};
  if (name == "info" && j + 1 < n && c[j + 1] == "attributes")
    return {ProtectMatch::Protected, "git attributes: choose filters that run commands", false};
  if (name == "modules") {  // submodule git directories: modules/<name with slashes>/{hooks,config,...}
    for (size_t k = j + 1; k < n; ++k) {
      if (c[k] == "hooks" || c[k] == "config" || c[k] == "commondir" || c[k] == "info") {
        auto m = git_rules(c, k, is_dir, is_reg, allow_cfg);
        if (m.kind != ProtectMatch::None) return m;
      }
    }
  }
  return {};
}

}  // namespace

ProtectMatch ProtectedNames::classify(const std::vector<std::string_view>& c, bool is_dir, bool is_reg) const {
  for (size_t i = 0; i < c.size(); ++i) {
    std::string_view name = c[i];
    bool last = i + 1 == c.size();
    if (name == ".git") {
      if (last) {
        if (is_dir) return {};
        return {ProtectMatch::Protected, "a .git file or link chooses the git directory (and so its hooks)", false};
      }
      return git_rules(c, i + 1, is_dir, is_reg, allow_git_config_);
    }
    for (const auto& n : names_)
      if (name == n) return {ProtectMatch::Protected, std::string(n) + ": runs later, outside the sandbox", false};
    if (!last)
      for (const auto& [p, ch] : nested_)
        if (name == p && c[i + 1] == ch)
          return {ProtectMatch::Protected, p + "/" + ch + ": agent or editor settings that run commands later", false};
  }
  return {};
}

bool benign_git_config(std::string_view content) {
  if (content.size() > 4096) return false;
  static const std::map<std::string, std::vector<std::string>> allowed = {
      {"core", {"repositoryformatversion", "filemode", "bare", "logallrefupdates", "ignorecase", "precomposeunicode",
                "symlinks"}},
      {"extensions", {"objectformat", "refstorage"}},
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
    // A remote helper transport runs a command ("ext::sh -c ..."): never benign.
    if (key == "url" || key == "pushurl") {
      std::string v(line.substr(eq == std::string_view::npos ? line.size() : eq + 1));
      if (v.find("::") != std::string::npos) return false;
    }
  }
  return true;
}

// ---- quarantine ----

Result<std::string> quarantine_move(int root_fd, const std::string& rel, const std::string& quarantine_dir) {
  auto [parent, name] = split_last(rel);
  UniqueFd pfd(open_beneath(root_fd, parent, O_PATH | O_DIRECTORY));
  if (!pfd) return fail(Error::sys("open " + (parent.empty() ? std::string(".") : parent)));
  auto q = mkdirs_at(quarantine_dir, parent, 0700);
  if (!q) return fail(q.error());
  int qfd = q->get(), sfd = pfd.get();
  const std::string& src = name;
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

struct SnapshotWalker {
  Snapshot& s;
  const ProtectedNames& pn;

  void remember(const std::string& rel, const struct stat& st) {
    DirStamp d = stamp_of(st);
    s.protected_entries[rel] = d;
    s.protected_inodes[{d.dev, d.ino}] = d.ctime_ns;
  }

  void walk(int fd, const std::string& rel, bool special, bool in_protected) {
    struct stat st;
    if (::fstat(fd, &st) != 0) return;
    s.dirs.emplace(rel, stamp_of(st));
    struct Sub {
      std::string name;
      bool special, prot;
    };
    std::vector<Sub> subs;
    list_dir(fd, [&](std::string_view name, unsigned char type) {
      ++s.entries_seen;
      bool check = in_protected || special || name[0] == '.' || !pn.all_dotted();
      if (!check) {
        if (type == DT_DIR) subs.push_back({std::string(name), false, false});
        else if (type == DT_UNKNOWN) {
          struct stat cst;
          std::string n(name);
          if (::fstatat(fd, n.c_str(), &cst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(cst.st_mode))
            subs.push_back({n, false, false});
        }
        return;
      }
      std::string n(name);
      struct stat cst;
      if (::fstatat(fd, n.c_str(), &cst, AT_SYMLINK_NOFOLLOW) != 0) return;
      std::string crel = join(rel, name);
      auto m = pn.classify(split_path(crel), S_ISDIR(cst.st_mode), S_ISREG(cst.st_mode));
      bool prot = in_protected || m.kind != ProtectMatch::None;
      if (prot) remember(crel, cst);
      if (S_ISDIR(cst.st_mode)) subs.push_back({n, special || name[0] == '.' || !pn.all_dotted(), prot});
    });
    for (const auto& sub : subs) {
      UniqueFd cfd(::openat(fd, sub.name.c_str(), kDirFlags));
      if (cfd) walk(cfd.get(), join(rel, sub.name), sub.special, sub.prot);
    }
  }
};

}  // namespace

Result<Snapshot> snapshot_tree(const std::string& root, const std::vector<std::string>& extra_names) {
  ProtectedNames pn(extra_names, false);  // remember configs too: allow_git_config only widens what is accepted
  Snapshot s;
  s.root = root;
  UniqueFd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return fail(Error::sys("workspace " + root));
  struct timespec now;
  ::clock_gettime(CLOCK_REALTIME_COARSE, &now);
  s.taken_ns = ns(now) - 20'000'000;  // > one tick at HZ=100
  s.dirs.reserve(4096);
  SnapshotWalker w{s, pn};
  w.walk(fd.get(), "", false, false);
  return s;
}

// ---- sweep ----

namespace {

struct Sweeper {
  const Snapshot& before;
  const ProtectedNames& pn;
  int root_fd;
  std::map<std::string, std::string> found;  // rel -> why

  bool known(const struct stat& st) const {
    auto it = before.protected_inodes.find({st.st_dev, st.st_ino});
    if (it == before.protected_inodes.end()) return false;
    return S_ISDIR(st.st_mode) || it->second == ns(st.st_ctim);  // a directory's entries are judged one by one
  }

  bool benign_config_at(int dirfd, const std::string& name) const {
    UniqueFd f(::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (!f) return false;
    struct stat st;
    if (::fstat(f.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > 4096) return false;
    std::string buf(static_cast<size_t>(st.st_size), '\0');
    ssize_t n = ::pread(f.get(), buf.data(), buf.size(), 0);
    if (n != st.st_size) return false;
    return benign_git_config(buf);
  }

  // One entry of a directory: judged, and walked when it is a directory nobody knew.
  void visit(int dirfd, const std::string& name, const std::string& rel, bool walk_dirs, bool check) {
    struct stat st;
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;
    bool is_dir = S_ISDIR(st.st_mode);
    if (is_dir && !walk_dirs) {
      auto it = before.dirs.find(rel);
      if (it != before.dirs.end() && it->second.dev == st.st_dev && it->second.ino == st.st_ino) return;  // checked on its own
    }
    ProtectMatch m;
    if (check) m = pn.classify(split_path(rel), is_dir, S_ISREG(st.st_mode));
    if (m.kind == ProtectMatch::Protected && !known(st)) {
      if (m.git_config && benign_config_at(dirfd, name)) return;
      found.emplace(rel, m.why);
      return;
    }
    if (is_dir) walk_new(dirfd, name, rel);
  }

  void walk_new(int dirfd, const std::string& name, const std::string& rel) {
    UniqueFd fd(::openat(dirfd, name.c_str(), kDirFlags));
    if (!fd) return;
    list_entries(fd.get(), rel, true);
  }

  void list_entries(int fd, const std::string& rel, bool walk_dirs) {
    std::vector<std::string> names;
    list_dir(fd, [&](std::string_view n, unsigned char) { names.emplace_back(n); });
    bool special = dotted(rel) || !pn.all_dotted();
    for (const auto& n : names) visit(fd, n, join(rel, n), walk_dirs, special || n[0] == '.');
  }
};

}  // namespace

Result<std::vector<Planted>> sweep(const std::string& root, const Snapshot& before, const SweepOptions& opt) {
  ProtectedNames pn(opt.extra_names, opt.allow_git_config);
  UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd) return fail(Error::sys("workspace " + root));
  if (!opt.dry_run) {
    if (opt.quarantine_dir.empty() || opt.quarantine_dir[0] != '/')
      return fail(Error::msg("quarantine", "needs an absolute directory outside the workspace"));
    // Created only when something is moved; judged by its real path when it exists.
    char a[PATH_MAX], b[PATH_MAX];
    if (::realpath(root.c_str(), a)) {
      std::string r = a, qd = ::realpath(opt.quarantine_dir.c_str(), b) ? std::string(b) : opt.quarantine_dir;
      if (qd == r || qd.starts_with(r == "/" ? r : r + "/"))
        return fail(Error::msg("quarantine " + qd, "is inside the workspace " + r));
    }
  }
  Sweeper sw{before, pn, root_fd.get(), {}};

  // Protected files present at start, changed in place (same inode, new ctime).
  for (const auto& [rel, st0] : before.protected_entries) {
    struct stat st;
    if (::fstatat(root_fd.get(), rel.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode) || st.st_dev != st0.dev || st.st_ino != st0.ino || ns(st.st_ctim) == st0.ctime_ns) continue;
    auto m = pn.classify(split_path(rel), false, S_ISREG(st.st_mode));
    if (m.kind != ProtectMatch::Protected) continue;
    auto [parent, name] = split_last(rel);
    if (m.git_config) {
      UniqueFd pfd(open_beneath(root_fd.get(), parent, O_PATH | O_DIRECTORY));
      if (pfd && sw.benign_config_at(pfd.get(), name)) continue;
    }
    sw.found.emplace(rel, "changed during the run: " + m.why);
  }

  // Directories whose entries changed: listed; new subdirectories walked whole.
  for (const auto& [rel, st0] : before.dirs) {
    struct stat st;
    if (::fstatat(root_fd.get(), rel.empty() ? "." : rel.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISDIR(st.st_mode) || st.st_dev != st0.dev || st.st_ino != st0.ino) continue;  // its parent changed
    bool recent = st0.mtime_ns >= before.taken_ns || st0.ctime_ns >= before.taken_ns;
    if (!recent && ns(st.st_mtim) == st0.mtime_ns && ns(st.st_ctim) == st0.ctime_ns) continue;
    UniqueFd fd(open_beneath(root_fd.get(), rel, O_RDONLY | O_DIRECTORY));
    if (!fd) continue;  // reached through a link now: the new path is walked from its own parent
    sw.list_entries(fd.get(), rel, false);
  }

  // Keep only the topmost of nested findings (a quarantined directory takes its contents along).
  std::vector<Planted> out;
  for (const auto& [rel, why] : sw.found) {
    bool nested = false;
    for (size_t s = rel.find('/'); s != std::string::npos && !nested; s = rel.find('/', s + 1))
      nested = sw.found.count(rel.substr(0, s)) > 0;
    if (!nested) out.push_back({rel, why, {}});
  }
  if (opt.dry_run) return out;
  // A move that fails is reported (why says so) and the rest still move.
  for (auto& p : out) {
    auto to = quarantine_move(root_fd.get(), p.relpath, opt.quarantine_dir);
    if (to) p.quarantined_to = *to;
    else p.why += " (NOT quarantined: " + to.error().str() + ")";
  }
  return out;
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
