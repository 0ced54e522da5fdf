#include "sandbox/setid_sweep.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/unique_fd.hpp"

namespace exg::sandbox {

namespace {

constexpr mode_t kSetId = S_ISUID | S_ISGID;

int64_t ns_of(const timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; }

struct Walker {
  int64_t since;
  SetIdSweep& out;

  void error(const std::string& path, const std::string& what, int e) {
    out.errors.push_back(path + ": " + what + ": " + std::strerror(e));
  }

  // A regular file (st from fstatat on dfd/name) that must lose its bits.
  void check(int dfd, const char* name, const std::string& path, const struct stat& st) {
    ++out.files_checked;
    if (!S_ISREG(st.st_mode) || !(st.st_mode & kSetId) || ns_of(st.st_ctim) < since) return;
    SetIdFound f{path, st.st_mode & 07777, st.st_mode & 07777 & ~kSetId, false, {}};
    // The sandbox is gone: nothing swaps the entry between the fstatat and this.
    if (::fchmodat(dfd, name, f.after, 0) == 0) f.removed = true;
    else f.error = std::strerror(errno);
    out.found.push_back(std::move(f));
  }

  // Opens dfd/name as a directory, never through a symlink. A directory its
  // owner made unreadable gets u+rx for the walk; *restore is then its mode.
  int open_dir(int dfd, const char* name, const std::string& path, mode_t* restore) {
    *restore = 0;
    int fd = ::openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 || errno != EACCES) {
      if (fd < 0) error(path, "open", errno);
      return fd;
    }
    struct stat st;
    if (::fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
        ::fchmodat(dfd, name, (st.st_mode & 07777) | S_IRUSR | S_IXUSR, 0) != 0) {
      error(path, "open", EACCES);
      return -1;
    }
    // Searchable while its entries are walked; the caller puts the mode back.
    fd = ::openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      error(path, "open", errno);
      ::fchmodat(dfd, name, st.st_mode & 07777, 0);
    } else {
      *restore = (st.st_mode & 07777) | S_IFDIR;
    }
    return fd;
  }

  void descend(int dfd, const char* name, const std::string& path) {
    mode_t restore;
    UniqueFd sub(open_dir(dfd, name, path, &restore));
    if (!sub) return;
    walk(sub.get(), path);
    if (restore) ::fchmod(sub.get(), restore & 07777);
  }

  void walk(int dir_fd, const std::string& path) {
    int dup = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
    DIR* d = dup < 0 ? nullptr : ::fdopendir(dup);
    if (!d) {
      if (dup >= 0) ::close(dup);
      return error(path, "list", errno);
    }
    errno = 0;
    while (dirent* e = ::readdir(d)) {
      const char* n = e->d_name;
      if (!std::strcmp(n, ".") || !std::strcmp(n, "..")) continue;
      std::string p = path + "/" + n;
      if (e->d_type == DT_DIR) {
        descend(dir_fd, n, p);
      } else if (e->d_type == DT_REG || e->d_type == DT_UNKNOWN) {
        struct stat st;
        if (::fstatat(dir_fd, n, &st, AT_SYMLINK_NOFOLLOW) != 0) error(p, "stat", errno);
        else if (S_ISDIR(st.st_mode)) descend(dir_fd, n, p);  // DT_UNKNOWN: a directory after all
        else check(dir_fd, n, p, st);
      }
      errno = 0;
    }
    if (errno != 0) error(path, "list", errno);
    ::closedir(d);
  }
};

}  // namespace

int64_t setid_sweep_start() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME_COARSE, &now);
  return ns_of(now);
}

void sweep_setid(const std::string& root, int64_t since_ns, SetIdSweep& out) {
  Walker w{since_ns, out};
  struct stat st;
  if (::lstat(root.c_str(), &st) != 0) {
    if (errno != ENOENT) w.error(root, "stat", errno);
    return;
  }
  if (!S_ISDIR(st.st_mode)) {
    auto slash = root.rfind('/');
    std::string parent = slash == 0 ? "/" : root.substr(0, slash);
    UniqueFd p(::open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!p) return w.error(parent, "open", errno);
    return w.check(p.get(), root.c_str() + slash + 1, root, st);
  }
  UniqueFd r(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!r) return w.error(root, "open", errno);
  w.walk(r.get(), root);
}

}  // namespace exg::sandbox
