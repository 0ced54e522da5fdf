#include "plan/protect.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "plan/paths.hpp"
#include "plan/plan.hpp"

namespace exg::plan {

namespace {

struct Walker {
  const ProtectOptions& opt;
  std::string root;
  std::set<std::string> names;                  // single-component names
  std::vector<std::pair<std::string, std::string>> nested;  // ".claude" -> "commands"
  std::vector<ProtectedPath> out;

  void add(const std::string& path, bool is_dir, const std::string& why, bool pin = false) {
    out.push_back({path, is_dir, pin, why});
  }

  // A protected name that is a symlink cannot be mounted over; protect what it
  // points at when that lies in the writable tree.
  void add_entry(const std::string& path, unsigned char type, const std::string& why) {
    if (type == DT_LNK) {
      auto target = canonical(path);
      if (target && is_within(*target, root)) {
        struct stat st;
        if (::stat(target->c_str(), &st) == 0) add(*target, S_ISDIR(st.st_mode), why + " (symlink target)");
      }
      return;
    }
    add(path, type == DT_DIR, why);
  }

  static unsigned char type_of(int dirfd, const char* name, unsigned char d_type) {
    if (d_type != DT_UNKNOWN) return d_type;
    struct stat st;
    if (::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return DT_UNKNOWN;
    if (S_ISDIR(st.st_mode)) return DT_DIR;
    if (S_ISLNK(st.st_mode)) return DT_LNK;
    if (S_ISREG(st.st_mode)) return DT_REG;
    return DT_UNKNOWN;
  }

  static unsigned char type_at(const std::string& path) {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) return DT_UNKNOWN;
    if (S_ISDIR(st.st_mode)) return DT_DIR;
    if (S_ISLNK(st.st_mode)) return DT_LNK;
    return DT_REG;
  }

  // A git directory: its hooks and config, and those of submodules kept in
  // .git/modules/<name>/ (recursively).
  void git_dir(const std::string& gd, bool top) {
    add(gd, true, top ? "git directory (pinned: cannot be renamed or replaced)"
                      : "submodule git directory (pinned: cannot be renamed or replaced)",
        true);
    std::string hooks = gd + "/hooks";
    if (auto t = type_at(hooks); t != DT_UNKNOWN) add_entry(hooks, t, "git hooks run later, outside the sandbox");
    if (!opt.allow_git_config) {
      std::string cfg = gd + "/config";
      if (auto t = type_at(cfg); t != DT_UNKNOWN) add_entry(cfg, t, "git config can name hooks and commands");
    }
    for (const char* extra : {"info/attributes", "commondir"}) {
      std::string p = gd + "/" + extra;
      if (auto t = type_at(p); t == DT_REG) add_entry(p, t, "git metadata that changes what runs");
    }
    std::string modules = gd + "/modules";
    walk_modules(modules);
  }

  void walk_modules(const std::string& dir) {
    DIR* d = ::opendir(dir.c_str());
    if (!d) return;
    std::vector<std::string> subs;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      if (type_of(::dirfd(d), e->d_name, e->d_type) == DT_DIR) subs.push_back(dir + "/" + n);
    }
    ::closedir(d);
    for (const auto& s : subs) {
      if (type_at(s + "/HEAD") == DT_REG) git_dir(s, false);
      else walk_modules(s);  // module names may contain slashes
    }
  }

  void walk(const std::string& dir) {
    DIR* d = ::opendir(dir.c_str());
    if (!d) return;
    std::vector<std::string> subdirs;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      unsigned char t = type_of(::dirfd(d), e->d_name, e->d_type);
      std::string p = dir + "/" + n;
      if (n == ".git") {
        if (t == DT_DIR) git_dir(p, true);
        else add_entry(p, t, "a .git file chooses the git directory (and so its hooks)");
        continue;
      }
      if (names.count(n)) {
        add_entry(p, t, "runs later, outside the sandbox");
        continue;
      }
      for (const auto& [parent, child] : nested) {
        if (n != parent) continue;
        std::string base = p;
        if (t == DT_LNK) {  // tools read <parent>/<child> through the link: protect what it reaches
          auto target = canonical(p);
          if (!target || !is_within(*target, root) || type_at(*target) != DT_DIR) continue;
          base = *target;
        } else if (t != DT_DIR) {
          continue;
        }
        std::string c = base + "/" + child;
        if (auto ct = type_at(c); ct != DT_UNKNOWN) add_entry(c, ct, "agent settings that run commands later");
      }
      if (t == DT_DIR) subdirs.push_back(p);
    }
    ::closedir(d);
    for (const auto& s : subdirs) walk(s);
  }
};

}  // namespace

std::vector<ProtectedPath> find_protected(const std::string& root, const ProtectOptions& opt) {
  Walker w{opt, root, {}, {}, {}};
  auto add_name = [&](const std::string& name) {
    auto slash = name.find('/');
    if (slash == std::string::npos) w.names.insert(name);
    else if (!name.starts_with(".git/")) w.nested.emplace_back(name.substr(0, slash), name.substr(slash + 1));
  };
  for (const auto& n : kProtectedNames) add_name(n);
  for (const auto& n : opt.extra_names) add_name(n);
  w.walk(root);
  std::sort(w.out.begin(), w.out.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  w.out.erase(std::unique(w.out.begin(), w.out.end(),
                          [](const auto& a, const auto& b) { return a.path == b.path; }),
              w.out.end());
  return w.out;
}

}  // namespace exg::plan
