#include "util/dir_fd.hpp"

#include <fcntl.h>
#include <sys/resource.h>

#include <algorithm>

#include <utility>

namespace exg {

namespace {
constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
}

OpenedDir::OpenedDir(OpenedDir&& o) noexcept
    : fd_(std::move(o.fd_)), err_(o.err_), widened_(std::exchange(o.widened_, false)), mode_(o.mode_) {}

OpenedDir& OpenedDir::operator=(OpenedDir&& o) noexcept {
  if (this != &o) {
    restore();
    fd_ = std::move(o.fd_);
    err_ = o.err_;
    widened_ = std::exchange(o.widened_, false);
    mode_ = o.mode_;
  }
  return *this;
}

OpenedDir::~OpenedDir() { restore(); }

void OpenedDir::restore() {
  if (widened_ && fd_) ::fchmod(fd_.get(), mode_);
  widened_ = false;
}

bool OpenedDir::widen(mode_t need) {
  struct stat st;
  if (!fd_ || ::fstat(fd_.get(), &st) != 0) return false;
  if ((st.st_mode & need) == need) return true;
  if (st.st_uid != ::geteuid()) return false;
  if (!widened_) mode_ = st.st_mode & 07777;
  if (::fchmod(fd_.get(), (st.st_mode & 07777) | need) != 0) return false;
  widened_ = true;
  return true;
}

OpenedDir open_subdir(int dirfd, const char* name) {
  OpenedDir d;
  d.fd_.reset(::openat(dirfd, name, kDirFlags));
  if (d.fd_) {
    // Listable, but entries cannot be reached without x (mode 0600 of our own).
    struct stat st;
    if (::fstat(d.fd_.get(), &st) == 0 && !(st.st_mode & S_IXUSR) && st.st_uid == ::geteuid() && ::geteuid() != 0)
      d.widen(0500);
    return d;
  }
  d.err_ = errno;
  if (d.err_ != EACCES) return d;
  struct stat st;
  if (::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid())
    return d;
  if (::fchmodat(dirfd, name, (st.st_mode & 07777) | 0500, 0) != 0) return d;
  d.fd_.reset(::openat(dirfd, name, kDirFlags));
  if (!d.fd_) {
    d.err_ = errno;
    ::fchmodat(dirfd, name, st.st_mode & 07777, 0);
    return d;
  }
  d.err_ = 0;
  d.widened_ = true;
  d.mode_ = st.st_mode & 07777;
  return d;
}

size_t max_walk_depth() {
  static const size_t depth = [] {
    struct rlimit rl;
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return size_t(200);
    if (rl.rlim_cur < rl.rlim_max) {
      rlim_t want = std::min<rlim_t>(rl.rlim_max, 8192);
      if (want > rl.rlim_cur) {
        struct rlimit n = rl;
        n.rlim_cur = want;
        if (::setrlimit(RLIMIT_NOFILE, &n) == 0) rl = n;
      }
    }
    size_t fds = rl.rlim_cur == RLIM_INFINITY ? 100000 : static_cast<size_t>(rl.rlim_cur);
    return std::min<size_t>(2000, fds > 300 ? fds - 200 : 100);
  }();
  return depth;
}

}  // namespace exg
