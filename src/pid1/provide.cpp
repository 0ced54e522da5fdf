// The sandbox's pid-1 program: the installed copy or a private one (provide.hpp).
#include "pid1/provide.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "pid1/image.hpp"

namespace exg::pid1 {

std::optional<std::string> installed_copy(const std::string& exe_dir) {
  if (exe_dir.empty()) return std::nullopt;
  std::string path = exe_dir + "/" + std::string(installed_relpath());
  auto image = embedded();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st;
  bool same = false;
  // Only a file nobody else could change between this check and the
  // runtime's bind (root's or the caller's, not group/world-writable).
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) == 0111 && (st.st_mode & 022) == 0 &&
      (st.st_uid == 0 || st.st_uid == ::geteuid()) && !image.empty() && static_cast<size_t>(st.st_size) == image.size()) {
    void* m = ::mmap(nullptr, image.size(), PROT_READ, MAP_PRIVATE, fd, 0);
    if (m != MAP_FAILED) {
      same = std::memcmp(m, image.data(), image.size()) == 0;
      ::munmap(m, image.size());
    }
  }
  ::close(fd);
  if (!same) return std::nullopt;
  return path;
}

std::string exe_dir() {
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "";
  std::string p(self, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

bool write_private_copy(const char* path) {
  auto image = embedded();
  if (image.empty()) {
    errno = ENOEXEC;
    return false;
  }
  int fd = ::open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0555);
  if (fd < 0) return false;
  size_t off = 0;
  while (off < image.size()) {
    ssize_t w = ::write(fd, image.data() + off, image.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = w < 0 ? errno : ENOSPC;
      ::close(fd);
      ::unlink(path);
      errno = e;
      return false;
    }
    off += static_cast<size_t>(w);
  }
  if (::close(fd) != 0) {
    int e = errno;
    ::unlink(path);
    errno = e;
    return false;
  }
  return true;
}

}  // namespace exg::pid1
