#include "runtime/rootfs_path.hpp"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <vector>

#include "util/syscalls.hpp"

namespace exg::runtime {

namespace {

// The kernel's own bound on links in one lookup (MAXSYMLINKS).
constexpr int kMaxLinks = 40;

std::deque<std::string> components(const std::string& path) {
  std::deque<std::string> out;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) out.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

}  // namespace

Result<RootfsPaths> RootfsPaths::open(const std::string& rootfs) {
  RootfsPaths p;
  p.root_.reset(::open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!p.root_) return fail(Error::sys("the container's root " + rootfs, errno));
  return p;
}

std::string RootfsPaths::resolve(const std::string& path) const {
  std::vector<std::string> done;  // resolved, each one no link (when it was looked at)
  std::deque<std::string> todo = components(path);
  int links = 0;
  bool exists = static_cast<bool>(root_);  // past a missing part nothing more is looked up
  while (!todo.empty()) {
    std::string c = std::move(todo.front());
    todo.pop_front();
    if (c == ".") continue;
    if (c == "..") {
      if (!done.empty()) done.pop_back();
      continue;
    }
    if (!exists) {
      done.push_back(c);
      continue;
    }
    const std::string dir = joined(done);
    UniqueFd d(sys::openat2(root_.get(), dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC,
                            RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS));
    char buf[PATH_MAX];
    ssize_t n = d ? ::readlinkat(d.get(), c.c_str(), buf, sizeof buf - 1) : -1;
    if (n < 0) {
      // EINVAL: there and no link. Anything else (missing, not a directory on
      // the way): the runtime creates or refuses it; the rest is as written.
      if (!d || errno != EINVAL) exists = false;
      done.push_back(c);
      continue;
    }
    if (++links > kMaxLinks) {  // the runtime's lookup ends in ELOOP: keep the name as written
      exists = false;
      done.push_back(c);
      continue;
    }
    std::string target(buf, static_cast<size_t>(n));
    if (!target.empty() && target[0] == '/') done.clear();
    auto more = components(target);
    todo.insert(todo.begin(), more.begin(), more.end());
  }
  return joined(done);
}

}  // namespace exg::runtime
