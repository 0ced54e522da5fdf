#include "sandbox/overlay_apply.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <set>

#include "sandbox/git_index.hpp"
#include "util/unique_fd.hpp"

namespace exg::sandbox {

namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

std::string join(const std::string& rel, const std::string& name) { return rel.empty() ? name : rel + "/" + name; }

std::vector<std::string> list_names(int fd) {
  std::vector<std::string> out;
  int d = ::dup(fd);
  if (d < 0) return out;
  DIR* dir = ::fdopendir(d);
  if (!dir) {
    ::close(d);
    return out;
  }
  ::rewinddir(dir);
  while (dirent* e = ::readdir(dir)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(std::move(n));
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

// The sandbox may leave its own entries unreadable to their owner: give u+r(x) back.
int open_upper(int dirfd, const std::string& name, int flags) {
  int fd = ::openat(dirfd, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0 || errno != EACCES) return fd;
  struct stat st;
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != ::geteuid()) return -1;
  mode_t add = S_ISDIR(st.st_mode) ? 0700 : 0600;
  if (::fchmodat(dirfd, name.c_str(), (st.st_mode & 07777) | add, 0) != 0) return -1;
  return ::openat(dirfd, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC);
}

std::string xattr_of(int fd, const char* name) {
  char buf[256];
  ssize_t n = ::fgetxattr(fd, name, buf, sizeof buf);
  return n < 0 ? std::string() : std::string(buf, static_cast<size_t>(n));
}
bool has_xattr(int fd, const char* name) { return ::fgetxattr(fd, name, nullptr, 0) >= 0; }
bool overlay_xattr(int fd, const char* suffix) {
  std::string u = std::string("user.overlay.") + suffix, t = std::string("trusted.overlay.") + suffix;
  return has_xattr(fd, u.c_str()) || has_xattr(fd, t.c_str());
}

bool opaque_dir(int fd) {
  return xattr_of(fd, "user.overlay.opaque") == "y" || xattr_of(fd, "trusted.overlay.opaque") == "y";
}


bool same_content(int a, int b) {
  char x[65536], y[65536];
  for (off_t off = 0;;) {
    ssize_t n = ::pread(a, x, sizeof x, off), m = ::pread(b, y, sizeof y, off);
    if (n < 0 || m < 0 || n != m) return false;
    if (n == 0) return true;
    if (std::memcmp(x, y, n) != 0) return false;
    off += n;
  }
}

std::string read_small(int fd, size_t max) {
  std::string s(max, '\0');
  ssize_t n = ::pread(fd, s.data(), max, 0);
  s.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return s;
}

// Mode an applied file gets: permission bits only (no set-id: apply may run as root).
mode_t file_mode(mode_t m) { return m & 0777; }
mode_t dir_mode(mode_t m) { return m & 03777; }

// Symlink targets: relative ones may climb only with leading ".." (below the
// link's own directory, which is a real directory), never after a normal
// component (a symlinked component could make "x/.." climb further than it
// reads); absolute ones must lie in the workspace and contain no "..".
bool target_inside(const std::string& link_rel, const std::string& target, const std::string& ws,
                   std::string* resolved_rel) {
  if (target.empty()) return false;
  std::vector<std::string_view> out;
  if (target[0] == '/') {
    if (target != ws && !target.starts_with(ws + "/")) return false;
    auto rest = split_path(std::string_view(target).substr(ws.size()));
    for (auto c : rest) {
      if (c == "..") return false;
      if (c != ".") out.push_back(c);
    }
  } else {
    auto base = split_path(link_rel);
    if (!base.empty()) base.pop_back();
    out = base;
    bool normal_seen = false;
    for (auto c : split_path(target)) {
      if (c == ".") continue;
      if (c == "..") {
        if (normal_seen || out.empty()) return false;
        out.pop_back();
        continue;
      }
      normal_seen = true;
      out.push_back(c);
    }
  }
  std::string r;
  for (auto c : out) r = r.empty() ? std::string(c) : r + "/" + std::string(c);
  *resolved_rel = r;
  return true;
}

class Applier {
 public:
  Applier(const ApplyOptions& opt, bool write, int ws_root, std::string ws)
      : opt_(opt), pn_(opt.extra_names, opt.allow_git_config, anchored(opt.pointers, ws)), write_(write), ws_root_(ws_root),
        ws_(std::move(ws)) {}

  ApplyReport report;

  Result<void> dir(int up_fd, const std::string& rel, int ws_fd, bool opaque_parent) {
    ScopeGuard g(*this, rel, up_fd, ws_fd);
    bool opaque = opaque_parent || opaque_dir(up_fd);
    auto names = list_names(up_fd);
    if (opaque && ws_fd >= 0) {
      std::set<std::string> keep(names.begin(), names.end());
      for (const auto& n : list_names(ws_fd))
        if (!keep.count(n) && !n.starts_with(".exg-apply.")) remove(ws_fd, n, join(rel, n), true);
    }
    for (const auto& n : names)
      if (auto r = entry(up_fd, n, join(rel, n), ws_fd, opaque); !r) return r;
    return {};
  }

 private:
  const ApplyOptions& opt_;
  plan::ProtectedPaths pn_;
  std::vector<plan::ProtectedPaths::Scope> scopes_;  // the directories being applied, outermost first

  static std::vector<std::string> anchored(const std::vector<std::string>& pointers, const std::string& ws) {
    std::vector<std::string> out;
    for (const auto& p : pointers)
      if (p.size() > ws.size() && p.starts_with(ws) && p[ws.size()] == '/') out.push_back(p.substr(ws.size() + 1));
    return out;
  }

  // The scope of the directory at rel, pushed while it is applied: a git
  // directory when the merged view (upper or workspace) looks like one.
  struct ScopeGuard {
    Applier& a;
    ScopeGuard(Applier& ap, const std::string& rel, int fd1, int fd2) : a(ap) {
      plan::GitMarkers m;
      for (int fd : {fd1, fd2}) {
        if (fd < 0) continue;
        auto x = plan::git_markers_at(fd);
        m.head |= x.head, m.objects |= x.objects, m.refs |= x.refs, m.commondir |= x.commondir;
      }
      if (a.scopes_.empty()) {
        // (the tree's own path: a tree inside a protected name's first part, ~/.codex,
        // judges its entries as the sweep does, config.toml as .codex/config.toml)
        a.scopes_.push_back(a.pn_.root(m.git_dir(), a.ws_));
      } else {
        std::string name = rel.substr(rel.rfind('/') + 1);
        const auto& parent = a.scopes_.back();
        a.scopes_.push_back(a.pn_.enter(parent, name, a.pn_.git_dir_here(parent, m)));
      }
    }
    ~ScopeGuard() { a.scopes_.pop_back(); }
  };
  bool write_;
  int ws_root_;
  std::string ws_;
  bool as_root_ = ::geteuid() == 0;
  unsigned tmp_counter_ = 0;

  void skip(const std::string& rel, const std::string& why) { report.skipped.push_back(rel + " (" + why + ")"); }

  // rel: an entry of the directory on top of scopes_.
  ProtectMatch classify(const std::string& rel, const struct stat& st) const {
    return pn_.classify(scopes_.back(), rel.substr(rel.rfind('/') + 1), S_ISDIR(st.st_mode), S_ISREG(st.st_mode));
  }

  // A git directory's new index (up_fd/index) that stages a protected name
  // the workspace's index (ws_fd/index) did not: `git update-index --add
  // --cacheinfo ...,.envrc` writes no file, and the host's next `git checkout
  // -- .` would create it. The new index is then quarantined, not applied (the
  // workspace keeps its own), as the sweep does in the other modes
  // (git_index.hpp). "": nothing of the kind.
  std::string index_stages_protected(int up_fd, int ws_fd) const {
    auto now = staged_protected(up_fd, pn_);
    if (!now.present) return "";
    if (!now.entries)
      return "git index changed during the run and cannot be read whole (a split index?): it may stage code that "
             "runs later; not applied, the workspace keeps its own index";
    StagedProtected was;
    if (ws_fd >= 0) was = staged_protected(ws_fd, pn_);
    std::vector<std::string> added;
    for (const auto& e : *now.entries)
      if (!was.entries || !was.entries->count(e)) added.push_back(e.substr(e.find(' ', 7) + 1));
    if (added.empty()) return "";
    return "git index stages " + added[0] +
           (added.size() > 1 ? " (and " + std::to_string(added.size() - 1) + " more)" : "") +
           ", a protected name, with no such file written: the host's next `git checkout -- .` would create it; "
           "not applied, the workspace keeps its own index";
  }

  std::string tmp_name() { return ".exg-apply." + std::to_string(::getpid()) + "." + std::to_string(++tmp_counter_); }

  void owner_for(int ws_fd, const struct stat* existing, uid_t* uid, gid_t* gid) {
    struct stat st;
    if (existing) st = *existing;
    else if (::fstat(ws_fd, &st) != 0) st.st_uid = ::geteuid(), st.st_gid = ::getegid();
    *uid = st.st_uid;
    *gid = st.st_gid;
  }

  // Deletes ws_fd/name (a tree); protected entries stay and are reported.
  // Returns true when the entry is gone (or would be).
  bool remove(int ws_fd, const std::string& name, const std::string& rel, bool top) {
    struct stat st;
    if (::fstatat(ws_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return true;
    if (classify(rel, st).kind == ProtectMatch::Protected) {
      skip(rel, "protected: deletion not applied");
      return false;
    }
    bool gone = true;
    if (S_ISDIR(st.st_mode)) {
      UniqueFd sub(::openat(ws_fd, name.c_str(), kDirFlags));
      if (!sub) {
        skip(rel, std::string("cannot open to delete: ") + std::strerror(errno));
        return false;
      }
      ScopeGuard g(*this, rel, -1, sub.get());
      for (const auto& n : list_names(sub.get())) gone = remove(sub.get(), n, join(rel, n), false) && gone;
      if (gone && write_ && ::unlinkat(ws_fd, name.c_str(), AT_REMOVEDIR) != 0) {
        skip(rel, std::string("rmdir: ") + std::strerror(errno));
        gone = false;
      }
    } else if (write_ && ::unlinkat(ws_fd, name.c_str(), 0) != 0) {
      skip(rel, std::string("unlink: ") + std::strerror(errno));
      gone = false;
    }
    if (top && (gone || S_ISDIR(st.st_mode))) report.deleted.push_back(S_ISDIR(st.st_mode) ? rel + "/" : rel);
    return gone;
  }

  // The workspace already holds exactly what upper has at this name.
  bool unchanged(int up_fd, const std::string& name, const struct stat& ust, int ws_fd, const struct stat& wst) {
    if ((ust.st_mode & S_IFMT) != (wst.st_mode & S_IFMT)) return false;
    if (S_ISLNK(ust.st_mode)) {
      char a[PATH_MAX], b[PATH_MAX];
      ssize_t n = ::readlinkat(up_fd, name.c_str(), a, sizeof a), m = ::readlinkat(ws_fd, name.c_str(), b, sizeof b);
      return n >= 0 && n == m && std::memcmp(a, b, n) == 0;
    }
    if (S_ISDIR(ust.st_mode)) return dir_mode(ust.st_mode) == dir_mode(wst.st_mode);
    if (!S_ISREG(ust.st_mode) || ust.st_size != wst.st_size || file_mode(ust.st_mode) != file_mode(wst.st_mode))
      return false;
    UniqueFd a(open_upper(up_fd, name, O_RDONLY | O_NONBLOCK)), b(::openat(ws_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    return a && b && same_content(a.get(), b.get());
  }

  Result<void> entry(int up_fd, const std::string& name, const std::string& rel, int ws_fd, bool opaque) {
    struct stat ust, wst;
    if (::fstatat(up_fd, name.c_str(), &ust, AT_SYMLINK_NOFOLLOW) != 0) return fail(Error::sys("upper " + rel));
    bool exists = ws_fd >= 0 && ::fstatat(ws_fd, name.c_str(), &wst, AT_SYMLINK_NOFOLLOW) == 0;

    // Whiteouts: the code deleted what the workspace has here.
    bool whiteout = S_ISCHR(ust.st_mode) && ust.st_rdev == makedev(0, 0);
    if (!whiteout && S_ISREG(ust.st_mode) && ust.st_size == 0) {
      UniqueFd f(open_upper(up_fd, name, O_RDONLY | O_NONBLOCK));
      whiteout = f && overlay_xattr(f.get(), "whiteout");
    }
    if (whiteout) {
      if (exists) remove(ws_fd, name, rel, true);
      return {};
    }

    auto m = classify(rel, ust);
    if (m.kind != ProtectMatch::Protected && S_ISREG(ust.st_mode) && name == "index" && scopes_.back().git_depth == 0) {
      if (auto why = index_stages_protected(up_fd, ws_fd); !why.empty()) {
        m.kind = ProtectMatch::Protected;
        m.why = why;
      }
    }
    if (m.kind == ProtectMatch::Protected) {
      if (S_ISDIR(ust.st_mode) && exists && S_ISDIR(wst.st_mode)) return descend(up_fd, name, rel, ws_fd, wst, ust, opaque, true);
      if (exists && unchanged(up_fd, name, ust, ws_fd, wst)) return {};
      bool benign = false;
      if (m.git_config && S_ISREG(ust.st_mode)) {
        UniqueFd f(open_upper(up_fd, name, O_RDONLY | O_NONBLOCK));
        // (the config's git directory: the scope whose entries are being applied)
        benign = f && benign_git_config_in(read_small(f.get(), 8192), ws_, scopes_.back(), opt_.worktree_roots);
      } else if (name.ends_with(".pth") && S_ISREG(ust.st_mode)) {
        UniqueFd f(open_upper(up_fd, name, O_RDONLY | O_NONBLOCK));
        benign = f && benign_pth(read_small(f.get(), 65536));
      }
      if (!benign) {
        Planted p{rel, m.why, {}};
        if (write_) {
          auto to = quarantine_copy(up_fd, name, rel, opt_.quarantine_dir);
          if (to) p.quarantined_to = *to;
          else p.why += " (NOT quarantined: " + to.error().str() + ")";
        }
        report.quarantined.push_back(std::move(p));
        return {};
      }
    }

    if (S_ISDIR(ust.st_mode)) {
      UniqueFd probe(open_upper(up_fd, name, O_RDONLY | O_DIRECTORY));
      if (probe && overlay_xattr(probe.get(), "redirect")) {
        skip(rel, "renamed directory recorded as an overlay redirect: not supported, mount with userxattr or redirect_dir=off");
        return {};
      }
      if (exists && S_ISDIR(wst.st_mode)) return descend(up_fd, name, rel, ws_fd, wst, ust, opaque, false);
      if (exists && !remove(ws_fd, name, rel, false)) return {};
      if (exists) report.modified.push_back(rel + "/");
      else report.created.push_back(rel + "/");
      if (!write_) return descend_new(up_fd, name, rel, -1, ust, opaque);
      if (::mkdirat(ws_fd, name.c_str(), 0700) != 0) {
        skip(rel, std::string("mkdir: ") + std::strerror(errno));
        return {};
      }
      if (as_root_) {
        uid_t u;
        gid_t g;
        owner_for(ws_fd, nullptr, &u, &g);
        ::fchownat(ws_fd, name.c_str(), u, g, AT_SYMLINK_NOFOLLOW);
      }
      UniqueFd sub(open_beneath(ws_root_, rel, O_RDONLY | O_DIRECTORY));
      if (!sub) return fail(Error::sys("open " + rel));
      return descend_new(up_fd, name, rel, sub.get(), ust, opaque);
    }

    if (S_ISREG(ust.st_mode)) {
      UniqueFd in(open_upper(up_fd, name, O_RDONLY | O_NONBLOCK));
      if (!in) return fail(Error::sys("upper " + rel));
      if (overlay_xattr(in.get(), "metacopy")) {
        skip(rel, "metadata-only copy-up (metacopy): not supported, mount with userxattr or metacopy=off");
        return {};
      }
      if (exists && unchanged(up_fd, name, ust, ws_fd, wst)) return {};
      (exists ? report.modified : report.created).push_back(rel);
      if (write_) place_file(in.get(), ust, ws_fd, name, rel, exists ? &wst : nullptr);
      return {};
    }

    if (S_ISLNK(ust.st_mode)) {
      char buf[PATH_MAX];
      ssize_t n = ::readlinkat(up_fd, name.c_str(), buf, sizeof buf);
      if (n < 0) return fail(Error::sys("readlink " + rel));
      std::string target(buf, static_cast<size_t>(n)), resolved;
      if (!target_inside(rel, target, ws_, &resolved)) {
        skip(rel, "symlink pointing outside the workspace: -> " + target);
        return {};
      }
      if (through_link(resolved)) {
        skip(rel, "symlink reaching through another symlink: -> " + target);
        return {};
      }
      if (exists && unchanged(up_fd, name, ust, ws_fd, wst)) return {};
      (exists ? report.modified : report.created).push_back(rel);
      if (write_) place_symlink(target, ws_fd, name, rel, exists ? &wst : nullptr);
      return {};
    }

    const char* kind = S_ISFIFO(ust.st_mode) ? "fifo" : S_ISSOCK(ust.st_mode) ? "socket"
                       : S_ISCHR(ust.st_mode) ? "character device" : S_ISBLK(ust.st_mode) ? "block device" : "special file";
    skip(rel, std::string(kind) + ": not applied");
    return {};
  }

  // A directory both sides have: mode, then its entries.
  Result<void> descend(int up_fd, const std::string& name, const std::string& rel, int ws_fd, const struct stat& wst,
                       const struct stat& ust, bool opaque, bool protected_dir) {
    UniqueFd up(open_upper(up_fd, name, O_RDONLY | O_DIRECTORY));
    if (!up) return fail(Error::sys("upper " + rel));
    UniqueFd ws(open_beneath(ws_root_, rel, O_RDONLY | O_DIRECTORY));
    if (!ws) return fail(Error::sys("open " + rel));
    bool mode_changed = dir_mode(ust.st_mode) != dir_mode(wst.st_mode);
    if (mode_changed && protected_dir) {
      skip(rel, "protected: mode change not applied");
      mode_changed = false;
    }
    // Permissions last, so a read-only directory can still be filled first.
    if (mode_changed && write_ && (wst.st_mode & 0300) != 0300) ::fchmod(ws.get(), dir_mode(wst.st_mode) | 0700);
    auto r = dir(up.get(), rel, ws.get(), opaque);
    if (mode_changed) {
      report.modified.push_back(rel + "/");
      if (write_) ::fchmod(ws.get(), dir_mode(ust.st_mode));
    }
    (void)ws_fd;
    return r;
  }

  Result<void> descend_new(int up_fd, const std::string& name, const std::string& rel, int ws_sub,
                           const struct stat& ust, bool opaque) {
    UniqueFd up(open_upper(up_fd, name, O_RDONLY | O_DIRECTORY));
    if (!up) return fail(Error::sys("upper " + rel));
    auto r = dir(up.get(), rel, ws_sub, opaque);
    if (write_ && ws_sub >= 0) ::fchmod(ws_sub, dir_mode(ust.st_mode));
    return r;
  }

  // True when a component before the last of the resolved target is a symlink
  // in the workspace as it stands (so the link would lead wherever that one does).
  bool through_link(const std::string& resolved) {
    auto slash = resolved.rfind('/');
    if (slash == std::string::npos) return false;
    UniqueFd fd(open_beneath(ws_root_, resolved.substr(0, slash), O_PATH));
    return !fd && (errno == ELOOP || errno == EXDEV);
  }

  // Content to a temporary name beside the target, then renamed over it.
  void place_file(int in, const struct stat& ust, int ws_fd, const std::string& name, const std::string& rel,
                  const struct stat* existing) {
    if (existing && S_ISDIR(existing->st_mode) && !remove(ws_fd, name, rel, false)) return;
    std::string tmp = tmp_name();
    UniqueFd out(::openat(ws_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out) return skip(rel, std::string("create: ") + std::strerror(errno));
    ::lseek(in, 0, SEEK_SET);
    bool ok = copy_data(in, out.get());
    ok = ok && ::fchmod(out.get(), file_mode(ust.st_mode)) == 0;
    if (ok && as_root_) {
      uid_t u;
      gid_t g;
      owner_for(ws_fd, existing && S_ISREG(existing->st_mode) ? existing : nullptr, &u, &g);
      ok = ::fchown(out.get(), u, g) == 0 && ::fchmod(out.get(), file_mode(ust.st_mode)) == 0;
    }
    struct timespec times[2] = {ust.st_atim, ust.st_mtim};
    ::futimens(out.get(), times);
    if (ok) ok = ::renameat(ws_fd, tmp.c_str(), ws_fd, name.c_str()) == 0;
    if (!ok) {
      int e = errno;
      ::unlinkat(ws_fd, tmp.c_str(), 0);
      skip(rel, std::string("write: ") + std::strerror(e));
    }
  }

  void place_symlink(const std::string& target, int ws_fd, const std::string& name, const std::string& rel,
                     const struct stat* existing) {
    if (existing && S_ISDIR(existing->st_mode) && !remove(ws_fd, name, rel, false)) return;
    std::string tmp = tmp_name();
    if (::symlinkat(target.c_str(), ws_fd, tmp.c_str()) != 0) return skip(rel, std::string("symlink: ") + std::strerror(errno));
    if (as_root_) {
      uid_t u;
      gid_t g;
      owner_for(ws_fd, nullptr, &u, &g);
      ::fchownat(ws_fd, tmp.c_str(), u, g, AT_SYMLINK_NOFOLLOW);
    }
    if (::renameat(ws_fd, tmp.c_str(), ws_fd, name.c_str()) != 0) {
      int e = errno;
      ::unlinkat(ws_fd, tmp.c_str(), 0);
      skip(rel, std::string("symlink: ") + std::strerror(e));
    }
  }
};

Result<ApplyReport> run(const std::string& upper, const std::string& workspace, const ApplyOptions& opt, bool write) {
  char buf[PATH_MAX];
  if (!::realpath(workspace.c_str(), buf)) return fail(Error::sys("workspace " + workspace));
  std::string ws = buf;
  UniqueFd ws_root(::open(ws.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!ws_root) return fail(Error::sys("workspace " + ws));
  UniqueFd up(::open(upper.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!up) return fail(Error::sys("upper layer " + upper));
  if (::realpath(upper.c_str(), buf)) {
    std::string u = buf;
    if (u == ws || u.starts_with(ws + "/")) return fail(Error::msg("upper layer " + u, "is inside the workspace " + ws));
  }
  if (write) {
    if (opt.quarantine_dir.empty() || opt.quarantine_dir[0] != '/')
      return fail(Error::msg("quarantine", "needs an absolute directory outside the workspace"));
    std::string q = opt.quarantine_dir;
    if (q == ws || q.starts_with(ws + "/")) return fail(Error::msg("quarantine " + q, "is inside the workspace " + ws));
  }
  Applier a(opt, write, ws_root.get(), ws);
  if (auto r = a.dir(up.get(), "", ws_root.get(), false); !r) return fail(r.error());
  return std::move(a.report);
}

bool plain_path(const std::string& p) { return !p.empty() && p.find_first_of(",:\\=") == std::string::npos; }

Result<void> write_text(const std::string& path, const std::string& text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return fail(Error::sys("create " + path));
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) return fail(Error::sys("write " + path));
  return {};
}

// Removes dirfd/name, giving the owner back rwx on directories it cannot enter.
Result<void> remove_tree(int dirfd, const std::string& name) {
  if (::unlinkat(dirfd, name.c_str(), 0) == 0 || errno == ENOENT) return {};
  if (errno != EISDIR && errno != EPERM) return fail(Error::sys("unlink " + name));
  // An empty directory goes at once, even one we may not open: overlayfs makes
  // its work/work as the mounter (runsc's uid as a user on gVisor), mode 000.
  if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) == 0) return {};
  ::fchmodat(dirfd, name.c_str(), 0700, 0);
  UniqueFd fd(::openat(dirfd, name.c_str(), kDirFlags));
  if (!fd) return fail(Error::sys("open " + name));
  for (const auto& n : list_names(fd.get()))
    if (auto r = remove_tree(fd.get(), n); !r) return r;
  if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0) return fail(Error::sys("rmdir " + name));
  return {};
}

}  // namespace

Result<ApplyReport> apply_upper(const std::string& upper, const std::string& workspace, const ApplyOptions& opt) {
  return run(upper, workspace, opt, !opt.discard);
}

Result<ApplyReport> diff_upper(const std::string& upper, const std::string& workspace, const ApplyOptions& opt) {
  return run(upper, workspace, opt, false);
}

std::vector<std::string> report_lines(const ApplyReport& r) {
  std::vector<std::string> out;
  for (const auto& p : r.created) out.push_back("+ " + p);
  for (const auto& p : r.modified) out.push_back("~ " + p);
  for (const auto& p : r.deleted) out.push_back("- " + p);
  for (const auto& p : r.quarantined)
    out.push_back("! " + p.relpath + " (quarantined: " + p.why + (p.quarantined_to.empty() ? "" : ", in " + p.quarantined_to) + ")");
  for (const auto& p : r.skipped) out.push_back("skip " + p);
  return out;
}

Result<LayerDirs> make_layer_dirs(const std::string& dir, const std::string& workspace) {
  if (dir.empty() || dir[0] != '/') return fail(Error::msg("layer directory " + dir, "must be an absolute path"));
  char buf[PATH_MAX];
  if (!::realpath(workspace.c_str(), buf)) return fail(Error::sys("workspace " + workspace));
  std::string ws = buf;
  std::string cur;
  for (auto part : split_path(dir)) {
    cur += "/";
    cur += part;
    if (::mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST) return fail(Error::sys("mkdir " + cur));
  }
  if (!::realpath(dir.c_str(), buf)) return fail(Error::sys("layer directory " + dir));
  std::string d = buf;
  if (d == ws || d.starts_with(ws + "/") || ws.starts_with(d + "/"))
    return fail(Error::msg("layer directory " + d, "must be outside the workspace " + ws));
  LayerDirs l{d, d + "/upper", d + "/work", ws};
  for (const auto& p : {l.upper, l.work})
    if (::mkdir(p.c_str(), 0700) != 0 && errno != EEXIST) return fail(Error::sys("mkdir " + p));
  if (auto r = write_text(d + "/workspace", ws + "\n"); !r) return fail(r.error());
  return l;
}

Result<LayerDirs> read_layer_dirs(const std::string& dir) {
  char buf[PATH_MAX];
  if (!::realpath(dir.c_str(), buf)) return fail(Error::sys(dir));
  std::string d = buf;
  UniqueFd fd(::open((d + "/workspace").c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return fail(Error::sys(d + "/workspace"));
  std::string ws = read_small(fd.get(), PATH_MAX + 2);
  while (!ws.empty() && (ws.back() == '\n' || ws.back() == '\r')) ws.pop_back();
  if (ws.empty() || ws[0] != '/' || ws.find('\n') != std::string::npos)
    return fail(Error::msg(d + "/workspace", "does not hold one absolute path"));
  struct stat st;
  if (::stat((d + "/upper").c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return fail(Error::msg(d + "/upper", "missing: not a kept overlay layer"));
  return LayerDirs{d, d + "/upper", d + "/work", ws};
}

Result<std::string> overlay_mount_data(const std::string& lower, const std::string& upper, const std::string& work,
                                       bool userxattr) {
  for (const auto& p : {lower, upper, work})
    if (!plain_path(p)) return fail(Error::msg("overlay " + p, "path contains ',', ':', '=' or '\\'"));
  std::string s = "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work;
  if (userxattr) s += ",userxattr";
  return s;
}

Result<void> remove_layer_dirs(const std::string& dir) {
  auto slash = dir.rfind('/');
  if (slash == std::string::npos || slash + 1 == dir.size()) return fail(Error::msg(dir, "not an absolute directory path"));
  std::string parent = slash == 0 ? "/" : dir.substr(0, slash);
  UniqueFd p(::open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!p) return fail(Error::sys(parent));
  return remove_tree(p.get(), dir.substr(slash + 1));
}

}  // namespace exg::sandbox
