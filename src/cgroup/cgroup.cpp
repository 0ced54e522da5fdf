#include "cgroup/cgroup.hpp"

#include "cgroup/files.hpp"
#include "cgroup/freezer.hpp"
#include "util/clock.hpp"
#include "util/dir_fd.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <cstdio>

namespace exg::cgroup {
namespace {

using util::now_ms;
using util::sleep_ms;

constexpr int kFreezeWaitMs = 200;  // kill_all's wait for FROZEN before it kills anyway

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

// Removes the empty cgroups "exg-<pid>-*" of dead supervisors in one base
// (an "exguardian" parent; nothing to do where it does not exist): only those
// whose liveness lock (flock on the directory, held by the Cgroup while it
// exists) is free and whose pid is not alive here.
void sweep_base(const std::string& base) {
  // A cgroup directory's link count is 2 + its subdirectories (kernfs, v1 and
  // v2): at 2 there is no cgroup in it, stale or not, and its listing (every
  // control file of the hierarchy's controllers: 34 entries in a v1 memory
  // one) is not read. A count other than 2 is listed, as is one that cannot be read.
  struct stat st;
  if (::stat(base.c_str(), &st) != 0) {
    if (errno == ENOENT) return;  // no parent: nothing to sweep
  } else if (S_ISDIR(st.st_mode) && st.st_nlink == 2) {
    return;
  }
  // Listed by getdents64 on the fd (list_dir), not opendir: no fstat and no
  // 32 KiB DIR buffer on the heap.
  UniqueFd dir(::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return;
  std::vector<std::string> candidates;
  list_dir(dir.get(), [&](std::string_view name, unsigned char type) {
    if (type != DT_DIR && type != DT_UNKNOWN) return;
    auto pid = stale_pid_of(name);
    // A live pid keeps its cgroups (also those of an older exguardian, which
    // held no lock); a dead one proves nothing alone (pid namespaces): the lock decides.
    if (!pid || pid_alive(*pid)) return;
    candidates.emplace_back(name);
  });
  dir.reset();
  for (const auto& n : candidates) {
    std::string path = base + "/" + n;
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

// ---- Cgroup ----

Result<Cgroup> Cgroup::create(const std::string& sandbox_id, const plan::Limits& limits) {
  return create_in(plan_layout(), sandbox_id, limits);
}

Result<Cgroup> Cgroup::create_in(const Layout& L, const std::string& sandbox_id,
                                 const plan::Limits& limits, bool freezer) {
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
  const std::string name = sandbox_dir_name(::getpid(), sandbox_id);

  std::vector<std::string> v2_have;  // v2: the controllers the sandbox's cgroup has
  // Make the directories. The cgroups of supervisors killed with SIGKILL are
  // swept on the way, in every base of this same layout (read once a run): in
  // a parent found there already (one made now holds nothing yet).
  for (const auto& b : L.bases) {
    // v1: a hierarchy of the cpu controller alone (cpuacct elsewhere: no usage
    // to read there either) holds nothing for a sandbox without a cpus limit,
    // only a mkdir, an attach and an rmdir on every run: not made.
    if (!L.v2 && !limits.cpus && contains(b.controllers, "cpu") && !contains(b.controllers, "cpuacct") &&
        !contains(b.controllers, "memory") && !contains(b.controllers, "pids") && !contains(b.controllers, "freezer")) {
      sweep_base(b.dir);
      ::rmdir(b.dir.c_str());  // an empty parent left by other runs goes (below: parents_)
      continue;
    }
    // v1: a hierarchy of the freezer alone, for a sandbox no one pauses, once
    // the pids hierarchy is made (layout_v1 lists it before): kill_all stops
    // forks there (pids.max 0) as the freezer would.
    if (!L.v2 && !freezer && !cg.pids_dir_.empty() && b.controllers == std::vector<std::string>{"freezer"}) {
      sweep_base(b.dir);
      ::rmdir(b.dir.c_str());  // (as above)
      continue;
    }
    std::string dir = b.dir + "/" + name;
    int err = 0;
    bool swept = false;
    for (int attempt = 0; attempt < 3; ++attempt) {
      bool made_parent = false;
      if (::mkdir(b.dir.c_str(), 0755) == 0) made_parent = true;
      else if (errno != EEXIST) {
        err = errno;
        break;
      } else if (!swept) {
        swept = true;
        sweep_base(b.dir);
      }
      // The parent goes with the last cgroup in it, whichever run made it: one
      // left by a run that ended beside another (its rmdir refused then) would
      // otherwise stay for good, its counters (peak memory, refused forks)
      // summing up every later sandbox for any process of the host to read.
      if (!contains(cg.parents_, b.dir)) cg.parents_.push_back(b.dir);
      if (L.v2) {
        // The parent has no processes, so it may hand its controllers on.
        if (b.enable_in_parent) {
          std::string up = parent_dir(b.dir);
          for (const auto& c : b.controllers) write_text(up + "/cgroup.subtree_control", "+" + c);
        }
        // (A parent made now hands on nothing yet: not read.)
        auto have = made_parent ? std::vector<std::string>{} : words(read_text(b.dir + "/cgroup.subtree_control").value_or(""));
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
      // What the parent handed on (read once: every limit below asks).
      v2_have = words(read_text(dir + "/cgroup.controllers").value_or(""));
      if (contains(v2_have, "memory")) cg.memory_dir_ = dir;
      if (contains(v2_have, "pids")) cg.pids_dir_ = dir;
    } else {
      if (contains(b.controllers, "freezer")) cg.freezer_dir_ = dir;
      if (contains(b.controllers, "memory")) cg.memory_dir_ = dir;
      if (contains(b.controllers, "pids")) cg.pids_dir_ = dir;
    }
  }

  // Find the directory of a controller, or "" (v2: only when delegated).
  auto dir_of = [&](std::string_view ctrl) -> std::string {
    if (L.v2) return !cg.dirs_.empty() && contains(v2_have, ctrl) ? cg.dirs_[0] : std::string();
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
    const int dfd = cg.dir_fd(dir);
    for (const auto& [file, value] : writes) {
      std::string path = dir + "/" + file;
      int err = dfd == AT_FDCWD ? write_text(path, value) : write_text_at(dfd, file.c_str(), value);
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
                                  {{"cpu.max", cpu_max_value(*limits.cpus)}})
                          : apply(limits.explicit_cpus, "cpus", "cpu",
                                  {{"cpu.cfs_period_us", "100000"},
                                   {"cpu.cfs_quota_us", std::to_string(cpu_quota_us(*limits.cpus))}});
    if (!r) return fail(r.error());
  }
  if (!L.v2 && cg.active() && cg.freezer_dir_.empty() && cg.pids_dir_.empty())
    cg.notes_.push_back("no freezer or pids hierarchy: kill_all kills without stopping forks first");
  return cg;
}

Cgroup::Cgroup(Cgroup&& o) noexcept
    : v2_(o.v2_),
      dirs_(std::move(o.dirs_)),
      parents_(std::move(o.parents_)),
      freezer_dir_(std::move(o.freezer_dir_)),
      memory_dir_(std::move(o.memory_dir_)),
      pids_dir_(std::move(o.pids_dir_)),
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
    const int dfd = dir_fd(d);
    UniqueFd fd(dfd == AT_FDCWD ? ::open(path.c_str(), O_WRONLY | O_CLOEXEC) : ::openat(dfd, "tasks", O_WRONLY | O_CLOEXEC));
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

int Cgroup::dir_fd(const std::string& dir) const {
  if (locks_.size() != dirs_.size()) return AT_FDCWD;
  for (size_t i = 0; i < dirs_.size(); ++i)
    if (dirs_[i] == dir) return locks_[i].get();
  return AT_FDCWD;
}

Cgroup::Outcome Cgroup::outcome() const {
  Outcome o;
  // (the files opened in the directories held open: no walk of their paths again)
  auto read = [this](const std::string& dir, const char* name) {
    const int dfd = dir_fd(dir);
    return dfd == AT_FDCWD ? read_text(dir + "/" + name) : read_text_at(dfd, name);
  };
  if (!memory_dir_.empty())
    if (auto t = read(memory_dir_, v2_ ? "memory.events" : "memory.oom_control"))
      o.oom_kills = parse_keyed(*t, "oom_kill").value_or(0);
  if (!pids_dir_.empty())
    if (auto t = read(pids_dir_, "pids.events"))
      o.pids_max_hits = parse_keyed(*t, "max").value_or(0);
  return o;
}

uint64_t Cgroup::memory_peak() const {
  if (memory_dir_.empty()) return 0;
  auto t = read_text(memory_dir_ + (v2_ ? "/memory.peak" : "/memory.max_usage_in_bytes"));
  return t ? parse_number(*t).value_or(0) : 0;
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
  // Without a freezer: no fork succeeds once pids.max is 0, so the processes
  // left can only be fewer while they are killed (the limit's work is done).
  if (freezer_dir_.empty() && !pids_dir_.empty()) write_text(pids_dir_ + "/pids.max", "0");
  while (!empty() && now_ms() < deadline) {
    // Frozen first (briefly waited for), so none can fork while the others are killed.
    const bool frozen = !freezer_dir_.empty() && freeze_v1(freezer_dir_, kFreezeWaitMs);
    for (const auto& d : dirs_)
      for (pid_t p : cgroup_procs(d)) ::kill(p, SIGKILL);
    if (frozen) write_text(freezer_dir_ + "/freezer.state", "THAWED");
    for (int i = 0; i < 20 && !empty(); ++i) sleep_ms(1);
  }
}

void Cgroup::end() {
  size_t removed = 0;
  while (removed < dirs_.size() && (::rmdir(dirs_[removed].c_str()) == 0 || errno == ENOENT)) ++removed;
  if (removed == dirs_.size()) {
    dirs_.clear();
    destroy();  // nothing left but the locks and the parents
    return;
  }
  // Those removed are gone from every list (kill_all reads the others).
  for (size_t i = 0; i < removed; ++i)
    for (std::string* d : {&freezer_dir_, &memory_dir_, &pids_dir_})
      if (*d == dirs_[i]) d->clear();
  dirs_.erase(dirs_.begin(), dirs_.begin() + static_cast<std::ptrdiff_t>(removed));
  locks_.erase(locks_.begin(), locks_.begin() + static_cast<std::ptrdiff_t>(std::min(removed, locks_.size())));
  kill_all();
}

void Cgroup::destroy() noexcept {
  try {
    // rmdir refuses (EBUSY) a cgroup that still holds a process: then, once,
    // everything inside is killed, and the removal retried. (Not a read of
    // every cgroup.procs first: after a run's kill_all they are empty, and
    // rmdir says so itself.)
    bool killed = false;
    for (const auto& d : dirs_) {
      for (int i = 0; i < 200; ++i) {  // up to ~1 s: exiting tasks may still be charged
        if (::rmdir(d.c_str()) == 0 || errno == ENOENT) break;
        if (errno != EBUSY) break;
        if (!killed) {
          killed = true;
          kill_all();
          continue;
        }
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
  auto L = plan_layout();
  if (!L.usable) return;
  for (const auto& b : L.bases) sweep_base(b.dir);
}

}  // namespace exg::cgroup
