#include "cgroup/layout.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "cgroup/files.hpp"
#include "util/mountinfo.hpp"
#include "util/proc_cgroup.hpp"

namespace exg::cgroup {
namespace {

constexpr const char* kParent = "exguardian";
// Controllers a sandbox cgroup uses (v1 also: freezer, for the kill).
constexpr const char* kWanted[] = {"memory", "pids", "cpu"};

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) break;
    start = p + 1;
  }
  return out;
}

bool writable(const std::string& path) { return ::access(path.c_str(), W_OK) == 0; }
bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

struct Mount {
  bool v2 = false;
  std::string root;        // the hierarchy path mounted here
  std::string mountpoint;
  std::vector<std::string> controllers;  // v1 super options that name controllers
};

std::vector<Mount> cgroup_mounts() {
  std::vector<Mount> out;
  for (const auto& e : util::read_mountinfo()) {
    Mount m;
    if (e.fstype == "cgroup2") m.v2 = true;
    else if (e.fstype != "cgroup") continue;
    m.root = e.root;
    m.mountpoint = e.mount_point;
    if (!m.v2) {
      for (auto opt : split(e.super_options, ',')) {
        if (opt.empty() || opt == "rw" || opt == "ro" || opt.starts_with("name=") || opt.starts_with("release_agent") ||
            opt == "clone_children" || opt == "noprefix" || opt == "xattr" || opt == "cpuset_v2_mode")
          continue;
        m.controllers.emplace_back(opt);
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

// A v2 mount's directory for the process's own cgroup.
std::string own_dir_v2(const Mount& m) {
  auto self = read_text("/proc/self/cgroup");
  std::string path = self ? own_cgroup_path(*self, "").value_or("/") : "/";
  std::string rel;
  if (m.root == "/") rel = path;
  else if (path == m.root || path.starts_with(m.root + "/")) rel = path.substr(m.root.size());
  else rel = "/";  // outside the mounted subtree (e.g. "/.." in a cgroup namespace)
  if (rel.find("/..") != std::string::npos) rel = "/";
  std::string dir = m.mountpoint;
  if (rel != "/" && !rel.empty()) dir += rel;
  return dir;
}

Layout layout_v2(const Mount& m) {
  Layout L;
  L.v2 = true;
  const bool root = ::geteuid() == 0;
  std::string own = own_dir_v2(m);
  // Candidates: the own cgroup and, for an ordinary user, its ancestors inside
  // the delegated (writable) subtree; for root, the own cgroup then the mount root.
  std::vector<std::string> cands;
  for (std::string d = own;; d = parent_dir(d)) {
    if (d.size() < m.mountpoint.size()) break;
    cands.push_back(d);
    if (d == m.mountpoint) break;
    if (root) {
      cands.push_back(m.mountpoint);
      break;
    }
  }
  int best = -1;
  Base best_base;
  for (const auto& d : cands) {
    if (!writable(d) || !writable(d + "/cgroup.procs")) continue;
    std::string parent = d + "/" + kParent;
    Base b;
    b.dir = parent;
    std::vector<std::string> avail;
    if (exists(parent)) {
      avail = words(read_text(parent + "/cgroup.controllers").value_or(""));
    } else {
      avail = words(read_text(d + "/cgroup.subtree_control").value_or(""));
      if (d == m.mountpoint && writable(d + "/cgroup.subtree_control")) {
        // The (namespace's) root may enable controllers for its children.
        for (auto& c : words(read_text(d + "/cgroup.controllers").value_or("")))
          if (!contains(avail, c)) {
            avail.push_back(c);
            b.enable_in_parent = true;
          }
      }
    }
    for (const char* w : kWanted)
      if (contains(avail, w)) b.controllers.emplace_back(w);
    int score = static_cast<int>(b.controllers.size());
    if (score > best) {
      best = score;
      best_base = b;
    }
  }
  if (best < 0) {
    L.why = "cgroup v2: no writable cgroup for this user (own cgroup " + own +
            "); run under a delegated scope (systemd-run --user --scope -p Delegate=yes) or as root";
    return L;
  }
  L.usable = true;
  L.bases.push_back(best_base);
  L.why = "cgroup v2 under " + best_base.dir;
  if (best_base.controllers.empty()) L.why += " (no controllers delegated: kill only, no limits)";
  return L;
}

Layout layout_v1(const std::vector<Mount>& v1) {
  Layout L;
  std::set<std::string> seen;
  std::vector<std::string> refused;
  for (const char* want : {"memory", "pids", "cpu", "freezer"}) {
    for (const auto& m : v1) {
      if (!contains(m.controllers, want)) continue;
      if (seen.count(m.mountpoint)) break;
      seen.insert(m.mountpoint);
      std::string parent = m.mountpoint + "/" + kParent;
      if (writable(m.mountpoint) || (exists(parent) && writable(parent))) {
        Base b;
        b.dir = parent;
        b.controllers = m.controllers;
        L.bases.push_back(std::move(b));
      } else {
        refused.push_back(want);
      }
      break;
    }
  }
  L.usable = !L.bases.empty();
  if (L.usable) {
    L.why = "cgroup v1";
    if (!refused.empty()) {
      L.why += " (not writable:";
      for (auto& r : refused) L.why += " " + r;
      L.why += ")";
    }
  } else {
    L.why = "cgroup v1: hierarchies not writable by this user (root, or a pre-made writable "
            "<hierarchy>/exguardian directory, is needed)";
  }
  return L;
}

}  // namespace

std::optional<std::string> own_cgroup_path(std::string_view text, std::string_view ctrl) {
  return util::cgroup_path_of(util::parse_proc_cgroup(text), ctrl);
}

Layout plan_layout() {
  auto mounts = cgroup_mounts();
  std::vector<Mount> v1;
  const Mount* v2 = nullptr;
  for (const auto& m : mounts) {
    if (m.v2) {
      // Prefer /sys/fs/cgroup, then any other (e.g. /sys/fs/cgroup/unified).
      if (!v2 || m.mountpoint == "/sys/fs/cgroup") v2 = &m;
    } else {
      bool useful = false;
      for (const char* c : {"memory", "pids", "cpu", "freezer"}) useful |= contains(m.controllers, c);
      if (useful) v1.push_back(m);
    }
  }
  if (!v1.empty()) {
    // Hybrid or pure v1: the controllers are on v1.
    return layout_v1(v1);
  }
  if (v2) return layout_v2(*v2);
  Layout L;
  L.why = "no cgroup filesystem mounted";
  return L;
}

CgroupSupport detect_cgroups() {
  auto L = plan_layout();
  CgroupSupport s;
  s.v2 = L.v2;
  s.usable = L.usable;
  s.why = L.why;
  for (const auto& b : L.bases)
    for (const auto& c : b.controllers)
      if (!contains(s.controllers, c)) s.controllers.push_back(c);
  return s;
}

std::string sandbox_dir_name(pid_t supervisor, std::string_view sandbox_id) {
  return "exg-" + std::to_string(supervisor) + "-" + std::string(sandbox_id);
}

std::vector<std::string> sandbox_dirs(const Layout& layout, pid_t supervisor, std::string_view sandbox_id) {
  const std::string name = sandbox_dir_name(supervisor, sandbox_id);
  std::vector<std::string> out;
  for (const auto& b : layout.bases) {
    struct stat st;
    std::string d = b.dir + "/" + name;
    if (::stat(d.c_str(), &st) == 0) out.push_back(d);
  }
  return out;
}

}  // namespace exg::cgroup
