// Directories walked by fd: each one opened from its parent's fd with one
// name (openat), never by a path from the root, so depth is not limited by
// PATH_MAX. A directory its owner made unreadable (chmod 000) is opened by
// giving the owner u+rx back for the walk and restoring the mode after.
#pragma once
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string_view>

#include "util/unique_fd.hpp"

namespace exg {

// Calls fn(name, d_type) for every entry but . and ..; false on a read error (errno set).
template <typename Fn>
bool list_dir(int fd, Fn&& fn) {
  struct LinuxDirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
  };
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

// A directory opened for listing (O_RDONLY|O_DIRECTORY|O_NOFOLLOW). When the
// caller owns it and could not read or search it, its mode was widened by
// `need` (u+rx) to open it, and is put back when this goes away.
class OpenedDir {
 public:
  OpenedDir() = default;
  OpenedDir(OpenedDir&&) noexcept;
  OpenedDir& operator=(OpenedDir&&) noexcept;
  ~OpenedDir();
  int get() const { return fd_.get(); }
  explicit operator bool() const { return bool(fd_); }
  int error() const { return err_; }  // errno of the failed open
  bool widened() const { return widened_; }
  // Makes the directory writable and searchable by its owner until this goes
  // away (to move an entry out of it); false when it is not ours.
  bool widen(mode_t need);

 private:
  friend OpenedDir open_subdir(int dirfd, const char* name);

  UniqueFd fd_;
  int err_ = 0;
  bool widened_ = false;
  mode_t mode_ = 0;
  void restore();
};

OpenedDir open_subdir(int dirfd, const char* name);

// How deep a walk goes (each level holds one fd and one stack frame); what
// lies deeper is reported as not checked. Raises the soft fd limit toward
// the hard one once so that the walk's fds fit.
size_t max_walk_depth();

}  // namespace exg
