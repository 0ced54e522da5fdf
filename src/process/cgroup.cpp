#include "process/cgroup.hpp"

#include "util/clock.hpp"
#include "util/mountinfo.hpp"
#include "util/proc_cgroup.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>

namespace exg::process {
namespace {

constexpr const char* kParent = "exguardian";
// Controllers a sandbox cgroup uses (v1 also: freezer, for the kill).
constexpr const char* kWanted[] = {"memory", "pids", "cpu"};

std::optional<std::string> read_text(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// 0 or errno.
int write_text(const std::string& path, std::string_view value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  int rc = 0;
  ssize_t n = ::write(fd, value.data(), value.size());
  if (n < 0) rc = errno;
  else if (static_cast<size_t>(n) != value.size()) rc = EIO;
  ::close(fd);
  return rc;
}

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

std::vector<std::string> words(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t')) ++i;
    size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\n' && s[j] != '\t') ++j;
    if (j > i) out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

bool contains(const std::vector<std::string>& v, std::string_view x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

bool writable(const std::string& path) { return ::access(path.c_str(), W_OK) == 0; }
bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

using util::now_ms;
using util::sleep_ms;

constexpr int kFreezeWaitMs = 200;  // kill_all's wait for FROZEN before it kills anyway

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

std::string parent_dir(const std::string& p) {
  auto pos = p.find_last_of('/');
  if (pos == std::string::npos || pos == 0) return "/";
  return p.substr(0, pos);
}

// A v2 mount's directory for the process's own cgroup.
std::string own_dir_v2(const Mount& m) {
  auto self = read_text("/proc/self/cgroup");
  std::string path = self ? cgroup_detail::own_cgroup_path(*self, "").value_or("/") : "/";
  std::string rel;
  if (m.root == "/") rel = path;
  else if (path == m.root || path.starts_with(m.root + "/")) rel = path.substr(m.root.size());
  else rel = "/";  // outside the mounted subtree (e.g. "/.." in a cgroup namespace)
  if (rel.find("/..") != std::string::npos) rel = "/";
  std::string dir = m.mountpoint;
  if (rel != "/" && !rel.empty()) dir += rel;
  return dir;
}

cgroup_detail::Layout layout_v2(const Mount& m) {
  cgroup_detail::Layout L;
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
  cgroup_detail::Base best_base;
  for (const auto& d : cands) {
    if (!writable(d) || !writable(d + "/cgroup.procs")) continue;
    std::string parent = d + "/" + kParent;
    cgroup_detail::Base b;
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

cgroup_detail::Layout layout_v1(const std::vector<Mount>& v1) {
  cgroup_detail::Layout L;
  std::set<std::string> seen;
  std::vector<std::string> refused;
  for (const char* want : {"memory", "pids", "cpu", "freezer"}) {
    for (const auto& m : v1) {
      if (!contains(m.controllers, want)) continue;
      if (seen.count(m.mountpoint)) break;
      seen.insert(m.mountpoint);
      std::string parent = m.mountpoint + "/" + kParent;
      if (writable(m.mountpoint) || (exists(parent) && writable(parent))) {
        cgroup_detail::Base b;
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

bool pid_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

// The liveness marker of a sandbox cgroup: its supervisor holds flock(LOCK_EX)
// on the directory itself for as long as the Cgroup exists (the lock goes with
// the supervisor, however it dies). The sweep removes a directory only while it
// holds that lock itself, so a live sandbox's cgroup is never taken, even one
// made by a supervisor in another pid namespace (whose pid in the name means
// nothing here) or one that is still empty, mid-launch.
//
// Makes `dir` and returns its locked fd, or -errno. The gap between mkdir and
// flock is closed from this side: a sweep that took the lock first removed the
// directory, and the fd then refers to a removed cgroup (openat of its files
// fails with ENOENT): make it again.
int make_locked_dir(const std::string& dir) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (::mkdir(dir.c_str(), 0755) != 0) return -errno;
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
      int e = errno;
      if (e == ENOENT) continue;  // swept between mkdir and open
      ::rmdir(dir.c_str());
      return -e;
    }
    while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
    }
    if (::faccessat(fd, "cgroup.procs", F_OK, 0) == 0) return fd;
    ::close(fd);  // swept while we waited for the lock
  }
  return -EAGAIN;
}

}  // namespace

std::vector<pid_t> cgroup_procs(const std::string& dir) {
  std::vector<pid_t> out;
  auto text = read_text(dir + "/cgroup.procs");
  if (!text) return out;
  for (auto& w : words(*text)) {
    pid_t p = 0;
    auto r = std::from_chars(w.data(), w.data() + w.size(), p);
    if (r.ec == std::errc() && p > 0) out.push_back(p);
  }
  return out;
}

bool freeze_v1(const std::string& dir, int timeout_ms) {
  const std::string state = dir + "/freezer.state";
  if (write_text(state, "FROZEN") != 0) return false;
  // v1 tries each task once per write of FROZEN. A vfork parent that enters
  // its wait after that try, its child frozen before exec, stays unfrozen
  // (FREEZING for ever): so FROZEN is written again while it reads FREEZING,
  // and the next try finds the parent asleep and freezes it.
  const uint64_t deadline = now_ms() + static_cast<uint64_t>(timeout_ms);
  while (now_ms() < deadline) {
    if (read_text(state).value_or("").starts_with("FROZEN")) break;
    sleep_ms(1);
    write_text(state, "FROZEN");
  }
  return true;
}

// ---- parsing helpers ----
namespace cgroup_detail {

std::optional<uint64_t> parse_number(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  if (text == "max") return UINT64_MAX;
  uint64_t v = 0;
  auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

std::optional<uint64_t> parse_keyed(std::string_view text, std::string_view key) {
  for (auto line : split(text, '\n')) {
    auto sp = line.find(' ');
    if (sp == std::string_view::npos || line.substr(0, sp) != key) continue;
    return parse_number(line.substr(sp + 1));
  }
  return std::nullopt;
}

std::optional<std::string> own_cgroup_path(std::string_view text, std::string_view ctrl) {
  return util::cgroup_path_of(util::parse_proc_cgroup(text), ctrl);
}


int64_t cpu_quota_us(double cpus) {
  // Rounded by hand (libm is not linked: see CMakeLists.txt); capped far above
  // any machine (10^7 CPUs) so that the conversion to an integer is defined.
  double q = std::min(cpus * 100000.0, 1e12) + 0.5;
  return std::max<int64_t>(static_cast<int64_t>(q), 1000);  // the kernel's minimum quota is 1 ms
}

std::string cpu_max_value(double cpus) { return std::to_string(cpu_quota_us(cpus)) + " 100000"; }

std::optional<pid_t> stale_pid_of(std::string_view name) {
  if (!name.starts_with("exg-")) return std::nullopt;
  name.remove_prefix(4);
  auto dash = name.find('-');
  if (dash == std::string_view::npos || dash == 0) return std::nullopt;
  pid_t p = 0;
  auto r = std::from_chars(name.data(), name.data() + dash, p);
  if (r.ec != std::errc() || r.ptr != name.data() + dash || p <= 0) return std::nullopt;
  return p;
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

}  // namespace cgroup_detail

CgroupSupport detect_cgroups() {
  auto L = cgroup_detail::plan_layout();
  CgroupSupport s;
  s.v2 = L.v2;
  s.usable = L.usable;
  s.why = L.why;
  for (const auto& b : L.bases)
    for (const auto& c : b.controllers)
      if (!contains(s.controllers, c)) s.controllers.push_back(c);
  return s;
}

// ---- Cgroup ----

Result<Cgroup> Cgroup::create(const std::string& sandbox_id, const Limits& limits) {
  return create_in(cgroup_detail::plan_layout(), sandbox_id, limits);
}

Result<Cgroup> Cgroup::create_in(const cgroup_detail::Layout& L, const std::string& sandbox_id,
                                 const Limits& limits) {
  Cgroup cg;
  cg.v2_ = L.v2;
  const bool any_explicit = (limits.explicit_memory && limits.memory_bytes) ||
                            (limits.explicit_pids && limits.pids) || (limits.explicit_cpus && limits.cpus);
  if (!L.usable) {
    if (any_explicit) return fail(Error::msg("cgroup limits", "cannot be enforced: " + L.why));
    cg.notes_.push_back("no cgroup for the sandbox (" + L.why + "): default limits not applied");
    return cg;
  }
  if (sandbox_id.empty() || sandbox_id.find('/') != std::string::npos || sandbox_id == "." ||
      sandbox_id == "..")
    return fail(Error::msg("cgroup", "bad sandbox id '" + sandbox_id + "'"));
  const std::string name = "exg-" + std::to_string(::getpid()) + "-" + sandbox_id;

  // Make the directories.
  for (const auto& b : L.bases) {
    std::string dir = b.dir + "/" + name;
    int err = 0;
    for (int attempt = 0; attempt < 3; ++attempt) {
      bool made_parent = false;
      if (::mkdir(b.dir.c_str(), 0755) == 0) made_parent = true;
      else if (errno != EEXIST) {
        err = errno;
        break;
      }
      if (made_parent && !contains(cg.parents_, b.dir)) cg.parents_.push_back(b.dir);
      if (L.v2) {
        // The parent has no processes, so it may hand its controllers on.
        if (b.enable_in_parent) {
          std::string up = parent_dir(b.dir);
          for (const auto& c : b.controllers) write_text(up + "/cgroup.subtree_control", "+" + c);
        }
        auto have = words(read_text(b.dir + "/cgroup.subtree_control").value_or(""));
        for (const auto& c : b.controllers)
          if (!contains(have, c)) write_text(b.dir + "/cgroup.subtree_control", "+" + c);
      } else if (made_parent && contains(b.controllers, "cpuset")) {
        // (not used: cpuset is never asked for)
      }
      int fd = make_locked_dir(dir);
      if (fd >= 0) {
        cg.locks_.emplace_back(fd);
        err = 0;
        break;
      }
      err = -fd;
      if (err != ENOENT) break;  // ENOENT: another supervisor removed the empty parent; retry
    }
    if (err != 0) {
      Error e = Error::sys("mkdir " + dir, err);
      if (any_explicit) return fail(e);
      cg.notes_.push_back("no cgroup in " + b.dir + ": " + e.why);
      continue;
    }
    cg.dirs_.push_back(dir);
    if (L.v2) {
      cg.memory_dir_ = cg.pids_dir_ = dir;
      cg.dirfd_.reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    } else {
      if (contains(b.controllers, "freezer")) cg.freezer_dir_ = dir;
      if (contains(b.controllers, "memory")) cg.memory_dir_ = dir;
      if (contains(b.controllers, "pids")) cg.pids_dir_ = dir;
    }
  }

  // Find the directory of a controller, or "" (v2: only when delegated).
  auto dir_of = [&](std::string_view ctrl) -> std::string {
    if (L.v2) {
      if (cg.dirs_.empty()) return {};
      auto have = words(read_text(cg.dirs_[0] + "/cgroup.controllers").value_or(""));
      return contains(have, ctrl) ? cg.dirs_[0] : std::string();
    }
    for (size_t i = 0; i < L.bases.size(); ++i) {
      if (!contains(L.bases[i].controllers, ctrl)) continue;
      std::string want = L.bases[i].dir + "/" + name;
      if (contains(cg.dirs_, want)) return want;
    }
    return {};
  };
  // Applies one limit; an explicit one must hold, a default one may be skipped.
  auto apply = [&](bool is_explicit, std::string_view what, std::string_view ctrl,
                   const std::vector<std::pair<std::string, std::string>>& writes) -> Result<void> {
    std::string dir = dir_of(ctrl);
    if (dir.empty()) {
      std::string why = std::string(what) + ": no usable " + std::string(ctrl) + " controller (" + L.why + ")";
      if (is_explicit) return fail(Error::msg(std::string(what) + " limit", "cannot be enforced on this host: " + why));
      cg.notes_.push_back("default " + why + ": not applied");
      return {};
    }
    for (const auto& [file, value] : writes) {
      std::string path = dir + "/" + file;
      int err = write_text(path, value);
      if (err == ENOENT && (file == "memory.memsw.limit_in_bytes" || file == "memory.swap.max"))
        continue;  // no swap accounting on this kernel: nothing more to bound
      if (err != 0) {
        if (is_explicit) return fail(Error::sys("write " + value + " to " + path, err));
        cg.notes_.push_back("default " + std::string(what) + " limit not applied: write " + path + ": " +
                            std::strerror(err));
        return {};
      }
    }
    return {};
  };

  if (limits.memory_bytes) {
    std::string v = std::to_string(*limits.memory_bytes);
    Result<void> r = L.v2 ? apply(limits.explicit_memory, "memory", "memory",
                                  {{"memory.max", v}, {"memory.swap.max", "0"}})
                          : apply(limits.explicit_memory, "memory", "memory",
                                  {{"memory.limit_in_bytes", v}, {"memory.memsw.limit_in_bytes", v}});
    if (!r) return fail(r.error());
  }
  if (limits.pids) {
    auto r = apply(limits.explicit_pids, "pids", "pids", {{"pids.max", std::to_string(*limits.pids)}});
    if (!r) return fail(r.error());
  }
  if (limits.cpus) {
    if (!(*limits.cpus > 0)) return fail(Error::msg("cpus limit", "must be > 0"));
    Result<void> r = L.v2 ? apply(limits.explicit_cpus, "cpus", "cpu",
                                  {{"cpu.max", cgroup_detail::cpu_max_value(*limits.cpus)}})
                          : apply(limits.explicit_cpus, "cpus", "cpu",
                                  {{"cpu.cfs_period_us", "100000"},
                                   {"cpu.cfs_quota_us", std::to_string(cgroup_detail::cpu_quota_us(*limits.cpus))}});
    if (!r) return fail(r.error());
  }
  if (!L.v2 && cg.active() && cg.freezer_dir_.empty())
    cg.notes_.push_back("no freezer hierarchy: kill_all kills without freezing first");
  return cg;
}

Cgroup::Cgroup(Cgroup&& o) noexcept
    : v2_(o.v2_),
      dirs_(std::move(o.dirs_)),
      parents_(std::move(o.parents_)),
      freezer_dir_(std::move(o.freezer_dir_)),
      memory_dir_(std::move(o.memory_dir_)),
      pids_dir_(std::move(o.pids_dir_)),
      dirfd_(std::move(o.dirfd_)),
      locks_(std::move(o.locks_)),
      notes_(std::move(o.notes_)) {
  o.dirs_.clear();
  o.parents_.clear();
}

Cgroup& Cgroup::operator=(Cgroup&& o) noexcept {
  if (this != &o) {
    destroy();
    v2_ = o.v2_;
    dirs_ = std::move(o.dirs_);
    parents_ = std::move(o.parents_);
    freezer_dir_ = std::move(o.freezer_dir_);
    memory_dir_ = std::move(o.memory_dir_);
    pids_dir_ = std::move(o.pids_dir_);
    dirfd_ = std::move(o.dirfd_);
    locks_ = std::move(o.locks_);
    notes_ = std::move(o.notes_);
    o.dirs_.clear();
    o.parents_.clear();
  }
  return *this;
}

Cgroup::~Cgroup() { destroy(); }

Result<void> Cgroup::attach(pid_t pid) {
  std::string s = std::to_string(pid);
  for (const auto& d : dirs_) {
    int err = write_text(d + "/cgroup.procs", s);
    if (err != 0) return fail(Error::sys("attach " + s + " to " + d, err));
  }
  return {};
}

Result<std::vector<UniqueFd>> Cgroup::open_self_attach() const {
  std::vector<UniqueFd> out;
  if (v2_) return out;
  for (const auto& d : dirs_) {
    std::string path = d + "/tasks";
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd) return fail(Error::sys("open " + path));
    out.push_back(std::move(fd));
  }
  return out;
}

int Cgroup::attach_self(const int* fds, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (::write(fds[i], "0", 1) != 1) return errno ? errno : EIO;
  return 0;
}

Cgroup::Outcome Cgroup::outcome() const {
  Outcome o;
  if (!memory_dir_.empty()) {
    if (v2_) {
      if (auto t = read_text(memory_dir_ + "/memory.events"))
        o.oom_kills = cgroup_detail::parse_keyed(*t, "oom_kill").value_or(0);
      if (auto t = read_text(memory_dir_ + "/memory.peak"))
        o.memory_peak = cgroup_detail::parse_number(*t).value_or(0);
    } else {
      if (auto t = read_text(memory_dir_ + "/memory.oom_control"))
        o.oom_kills = cgroup_detail::parse_keyed(*t, "oom_kill").value_or(0);
      if (auto t = read_text(memory_dir_ + "/memory.max_usage_in_bytes"))
        o.memory_peak = cgroup_detail::parse_number(*t).value_or(0);
    }
  }
  if (!pids_dir_.empty())
    if (auto t = read_text(pids_dir_ + "/pids.events"))
      o.pids_max_hits = cgroup_detail::parse_keyed(*t, "max").value_or(0);
  return o;
}

bool Cgroup::empty() const {
  for (const auto& d : dirs_)
    if (!cgroup_procs(d).empty()) return false;
  return true;
}

void Cgroup::kill_all() {
  if (dirs_.empty()) return;
  const uint64_t deadline = now_ms() + 5000;
  if (v2_) {
    if (write_text(dirs_[0] + "/cgroup.kill", "1") == 0) {
      while (!empty() && now_ms() < deadline) sleep_ms(2);
      return;
    }
    // No cgroup.kill (before 5.14): kill what is listed, below.
  }
  while (!empty() && now_ms() < deadline) {
    // Frozen first (briefly waited for), so none can fork while the others are killed.
    const bool frozen = !freezer_dir_.empty() && freeze_v1(freezer_dir_, kFreezeWaitMs);
    for (const auto& d : dirs_)
      for (pid_t p : cgroup_procs(d)) ::kill(p, SIGKILL);
    if (frozen) write_text(freezer_dir_ + "/freezer.state", "THAWED");
    for (int i = 0; i < 20 && !empty(); ++i) sleep_ms(1);
  }
}

void Cgroup::destroy() noexcept {
  try {
    if (!dirs_.empty() && !empty()) kill_all();
    dirfd_.reset();
    for (const auto& d : dirs_) {
      for (int i = 0; i < 200; ++i) {  // up to ~1 s: exiting tasks may still be charged
        if (::rmdir(d.c_str()) == 0 || errno == ENOENT) break;
        if (errno != EBUSY) break;
        sleep_ms(5);
      }
    }
    locks_.clear();  // after the rmdir: until then the directories are live
    // The shared parents go too when nobody else uses them (ENOTEMPTY/EBUSY otherwise).
    for (const auto& p : parents_) ::rmdir(p.c_str());
  } catch (...) {
  }
  locks_.clear();
  dirs_.clear();
  parents_.clear();
}

void Cgroup::sweep_stale() {
  auto L = cgroup_detail::plan_layout();
  if (!L.usable) return;
  for (const auto& b : L.bases) {
    DIR* dir = ::opendir(b.dir.c_str());
    if (!dir) continue;
    std::vector<std::string> candidates;
    while (struct dirent* e = ::readdir(dir)) {
      if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN) continue;
      auto pid = cgroup_detail::stale_pid_of(e->d_name);
      // A live pid keeps its cgroups (also those of an older exguardian, which
      // held no lock); a dead one proves nothing alone (pid namespaces): the lock decides.
      if (!pid || pid_alive(*pid)) continue;
      candidates.emplace_back(e->d_name);
    }
    ::closedir(dir);
    for (const auto& n : candidates) {
      std::string path = b.dir + "/" + n;
      UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (!fd || ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // gone, or its supervisor lives
      // Still the directory we locked (not one made again under the same name
      // after another sweep removed ours)?
      struct stat a, p;
      if (::fstat(fd.get(), &a) != 0 || ::stat(path.c_str(), &p) != 0 || a.st_ino != p.st_ino || a.st_dev != p.st_dev)
        continue;
      ::rmdir(path.c_str());  // fails (and stays) if not empty
    }
  }
}

}  // namespace exg::process
