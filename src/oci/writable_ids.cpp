#include "oci/writable_ids.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace exg::oci {

namespace {

struct Walk {
  gid_t gid;
  size_t budget;
  size_t seen = 0;
  std::optional<std::string> found;

  // fd: an open directory (taken over); path: its host path, for the message.
  void dir(int fd, const std::string& path) {
    DIR* d = ::fdopendir(fd);
    if (!d) {
      ::close(fd);
      found = path + " (unreadable)";
      return;
    }
    while (!found) {
      dirent* e = ::readdir(d);
      if (!e) break;
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      if (++seen > budget) {
        found = "more than " + std::to_string(budget) + " entries under " + path + " (not all checked)";
        break;
      }
      struct stat st;
      if (::fstatat(::dirfd(d), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISLNK(st.st_mode)) continue;  // a link's own group is never used for access
      if (st.st_gid != gid) {
        found = path + "/" + n + " (group " + std::to_string(st.st_gid) + ")";
        break;
      }
      if (S_ISDIR(st.st_mode)) {
        int cfd = ::openat(::dirfd(d), n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (cfd >= 0) dir(cfd, path + "/" + n);
      }
    }
    ::closedir(d);
  }
};

}  // namespace

std::optional<std::string> entry_of_other_group(const std::vector<std::string>& roots, gid_t gid, size_t budget) {
  Walk w{gid, budget};
  for (const auto& r : roots) {
    struct stat st;
    if (::lstat(r.c_str(), &st) != 0) continue;
    if (st.st_gid != gid) return r + " (group " + std::to_string(st.st_gid) + ")";
    if (!S_ISDIR(st.st_mode)) continue;
    int fd = ::open(r.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return r + " (unreadable)";
    w.dir(fd, r);
    if (w.found) return w.found;
  }
  return std::nullopt;
}

}  // namespace exg::oci
