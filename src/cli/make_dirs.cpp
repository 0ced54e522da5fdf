#include "cli/make_dirs.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "plan/paths.hpp"

namespace exg::cli {

namespace {

bool under(const std::string& p, const std::string& dir) {
  return p == dir || (p.size() > dir.size() && p.compare(0, dir.size(), dir) == 0 && p[dir.size()] == '/');
}

}  // namespace

Result<std::vector<std::string>> make_policy_dirs(const policy::Policy& pol, const std::string& home,
                                                  const std::string& workspace, bool make) {
  std::vector<std::string> notes;
  // Lexical trees (makeDirs entries need not exist, so neither side is resolved; a
  // symlink on the way leads where the allowWrite entry itself leads).
  std::vector<std::string> trees;
  if (!workspace.empty()) trees.push_back(plan::expand_path(workspace, home, "/"));
  for (const auto& w : pol.filesystem.allow_write) trees.push_back(plan::expand_path(w.path, home, w.base_dir));
  for (const auto& e : pol.filesystem.make_dirs) {
    std::string p = plan::expand_path(e.path, home, e.base_dir);
    bool inside = false;
    for (const auto& t : trees) inside = inside || (t != "/" && under(p, t));
    if (!inside)
      return fail(Error::msg("filesystem.makeDirs " + e.path + " (" + e.where.str() + ")",
                             p + " is in no allowWrite path and not in the workspace"));
    struct stat st;
    if (::lstat(p.c_str(), &st) == 0) continue;
    if (!make) {
      notes.push_back("filesystem.makeDirs: " + p + " is missing; a run makes it (empty) first");
      continue;
    }
    if (::mkdir(p.c_str(), 0700) == 0) {
      std::fprintf(stderr, "exguardian: made %s (empty): filesystem.makeDirs (%s)\n", p.c_str(), e.where.str().c_str());
      notes.push_back("filesystem.makeDirs: made " + p + " (empty) before the run");
    } else {
      std::fprintf(stderr, "exguardian: filesystem.makeDirs: cannot make %s: %s\n", p.c_str(), std::strerror(errno));
    }
  }
  return notes;
}

}  // namespace exg::cli
