#include "sandbox/setid_sweep.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "util/dir_fd.hpp"
#include "util/parallel_walk.hpp"
#include "util/unique_fd.hpp"

namespace exg::sandbox {

namespace {

constexpr mode_t kSetId = S_ISUID | S_ISGID;

int64_t ns_of(const timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; }

// A directory to list: open (never through a symlink), with its host path,
// and the mode to put back once it is listed (0: none was changed).
struct DirTask {
  UniqueFd fd;
  std::string path;
  mode_t restore = 0;
};

// The walk's findings, shared by its threads (util/parallel_walk.hpp: a big
// tree is listed by a few at once; every file is stat()ed, so a monorepo's
// files are most of a run's end).
struct Walker {
  int64_t since;
  SetIdSweep& out;
  std::mutex m;  // out
  std::atomic<size_t> checked{0};
  ParallelWalk<DirTask> walk;

  void error(const std::string& path, const std::string& what, int e) {
    std::lock_guard<std::mutex> l(m);
    out.errors.push_back(path + ": " + what + ": " + std::strerror(e));
  }

  // A regular file (st from fstatat on dfd/name) that must lose its bits.
  void check(int dfd, const char* name, const std::string& path, const struct stat& st) {
    checked.fetch_add(1, std::memory_order_relaxed);
    if (!S_ISREG(st.st_mode) || !(st.st_mode & kSetId) || ns_of(st.st_ctim) < since) return;
    SetIdFound f{path, st.st_mode & 07777, st.st_mode & 07777 & ~kSetId, false, {}};
    // The sandbox is gone: nothing swaps the entry between the fstatat and this.
    if (::fchmodat(dfd, name, f.after, 0) == 0) f.removed = true;
    else f.error = std::strerror(errno);
    std::lock_guard<std::mutex> l(m);
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
    // Readable and searchable while it is listed and its entries opened; its
    // mode is put back then (its subdirectories are open by then).
    fd = ::openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      error(path, "open", errno);
      ::fchmodat(dfd, name, st.st_mode & 07777, 0);
    } else {
      *restore = (st.st_mode & 07777) | S_IFDIR;
    }
    return fd;
  }

  // dfd/name, a directory: queued for any thread, or (queue full) listed now.
  void descend(int dfd, const char* name, std::string path) {
    DirTask t;
    t.fd.reset(open_dir(dfd, name, path, &t.restore));
    t.path = std::move(path);
    if (t.fd && !walk.offer(t)) list(t);
  }

  void list(DirTask& t) {
    // Listed whole first with getdents on the directory's own descriptor (no
    // duplicate, DIR stream, fstat and fcntls per directory: five system calls
    // fewer each), then judged (no 32 KiB listing buffer held while descending).
    std::vector<std::pair<std::string, unsigned char>> entries;
    if (!list_dir(t.fd.get(), [&](std::string_view n, unsigned char type) {
          if (type == DT_DIR || type == DT_REG || type == DT_UNKNOWN) entries.emplace_back(n, type);
        }))
      error(t.path, "list", errno);
    for (const auto& [name, type] : entries) {
      const char* n = name.c_str();
      if (type == DT_DIR) {
        descend(t.fd.get(), n, t.path + "/" + name);
      } else {
        struct stat st;
        if (::fstatat(t.fd.get(), n, &st, AT_SYMLINK_NOFOLLOW) != 0) error(t.path + "/" + name, "stat", errno);
        else if (S_ISDIR(st.st_mode)) descend(t.fd.get(), n, t.path + "/" + name);  // DT_UNKNOWN: a directory
        else check(t.fd.get(), n, t.path + "/" + name, st);
      }
    }
    if (t.restore) ::fchmod(t.fd.get(), t.restore & 07777);
  }

  void run(UniqueFd root, const std::string& path) {
    walk.run(DirTask{std::move(root), path, 0}, [this](DirTask& t) { list(t); });
    out.files_checked += checked.load();
    // The threads' order is the scheduler's: reported in path order.
    std::sort(out.found.begin(), out.found.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
    std::sort(out.errors.begin(), out.errors.end());
  }
};

}  // namespace

int64_t setid_sweep_start() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME_COARSE, &now);
  return ns_of(now);
}

void sweep_setid(const std::string& root, int64_t since_ns, SetIdSweep& out, size_t max_threads) {
  Walker w{since_ns, out};
  w.walk.set_max_threads(max_threads);
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
    w.check(p.get(), root.c_str() + slash + 1, root, st);
    out.files_checked += w.checked.load();
    return;
  }
  UniqueFd r(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!r) return w.error(root, "open", errno);
  w.run(std::move(r), root);
}

}  // namespace exg::sandbox
