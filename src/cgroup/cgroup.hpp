// One cgroup per sandbox: limits (memory+swap, pids, cpu), what happened
// (oom kills, pids limit hits, peak memory), and a kill that reaches every
// process in the sandbox. cgroup v2 (pure or delegated to the user) and
// cgroup v1 (including hybrid hosts: v1 controllers plus an empty v2 mount):
// where it goes is layout.hpp's. Below the layers (docs/architecture.md):
// nothing in cgroup/ includes layer/, process/, sandbox/, serve/ or oci/.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cgroup/layout.hpp"
#include "plan/limits.hpp"
#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace exg::cgroup {

// The processes a cgroup directory lists (cgroup.procs; empty when unreadable).
std::vector<pid_t> cgroup_procs(const std::string& dir);

// The values written for a CPU limit (pure; unit tested).
// v2 "cpu.max" value for a number of CPUs, e.g. 0.5 -> "50000 100000".
std::string cpu_max_value(double cpus);
// v1 quota in microseconds for period 100000.
int64_t cpu_quota_us(double cpus);
// "exg-<pid>-<id>" (layout.hpp's sandbox_dir_name) -> pid, or nullopt for other names.
std::optional<pid_t> stale_pid_of(std::string_view name);

class Cgroup {
 public:
  // The limits are plan data (plan/limits.hpp); this class enforces them.
  static Result<Cgroup> create(const std::string& sandbox_id, const plan::Limits& limits);
  // create() with a given layout (tests; create() uses plan_layout()).
  // freezer: v1, the freezer hierarchy too, for a sandbox serve may pause
  // (a session's). Without it, where the pids hierarchy is made, kill_all()
  // stops forks with pids.max 0 instead of freezing (the same guarantee: the
  // processes left can only be fewer while they are killed).
  static Result<Cgroup> create_in(const Layout& layout, const std::string& sandbox_id, const plan::Limits& limits,
                                  bool freezer = true);

  Cgroup() = default;
  Cgroup(Cgroup&&) noexcept;
  Cgroup& operator=(Cgroup&&) noexcept;
  Cgroup(const Cgroup&) = delete;
  Cgroup& operator=(const Cgroup&) = delete;
  ~Cgroup();

  bool active() const { return !dirs_.empty(); }
  bool v2() const { return v2_; }
  const std::vector<std::string>& notes() const { return notes_; }
  // The sandbox's cgroup directories (v1: one per hierarchy; v2: one).
  const std::vector<std::string>& dirs() const { return dirs_; }

  // v2: an O_DIRECTORY fd of the cgroup for clone3(CLONE_INTO_CGROUP) (the
  // one its lock is held on); -1 on v1.
  int clone_into_fd() const { return v2_ && !locks_.empty() ? locks_[0].get() : -1; }
  // Moves pid in (cgroup.procs of every hierarchy).
  Result<void> attach(pid_t pid);
  // v1: the `tasks` file of every hierarchy, opened for writing by this
  // process, for a child to move itself in with attach_self() (empty on v2,
  // which has CLONE_INTO_CGROUP). Why: a write of another task's pid takes the
  // kernel's threadgroup lock, which waits for an RCU grace period (1-20 ms on
  // a busy host); a thread moving itself ("0" to tasks) does not. The kernel
  // checks the credentials the file was opened with, so the child may have
  // changed its own. Close them in the parent after the clone, in the child
  // after attach_self().
  Result<std::vector<UniqueFd>> open_self_attach() const;
  // In a single-threaded child: writes "0" to each fd (see open_self_attach).
  // 0 or the errno of the first write that failed. Async-signal-safe.
  static int attach_self(const int* fds, size_t n);

  // What the limits did (read at a run's end).
  struct Outcome {
    uint64_t oom_kills = 0;
    uint64_t pids_max_hits = 0;
  };
  Outcome outcome() const;
  // The memory high-water mark in bytes (0 without a memory cgroup). Not part
  // of outcome(): no run reports it, so a run's end does not read it.
  uint64_t memory_peak() const;

  // True when no process is left in any of the sandbox's cgroups.
  bool empty() const;
  // Kills every process inside, bounded: v2 cgroup.kill; otherwise SIGKILL to
  // each listed until none is left, forks stopped first (freezer: frozen,
  // thawed after; else pids.max 0: the run is over).
  void kill_all();
  // The end of a run: nothing of the sandbox is left inside afterwards. Each
  // directory is removed first (rmdir refuses one that still holds a process
  // or a cgroup below it, so a run whose processes have all gone is ended
  // without reading any cgroup.procs); at the first refusal, kill_all() on
  // what is left, which then goes with the destructor (after the layer's own
  // cleanup: runc's cgroups below ours). Inactive once all are removed.
  void end();

  // Removes empty cgroups "exg-<pid>-*" of supervisors that no longer exist:
  // only those whose liveness lock (flock on the directory, held by the
  // Cgroup while it exists) is free and whose pid is not alive here.
  // create_in() does the same in its layout's bases, before it makes its own.
  static void sweep_stale();

 private:
  void destroy() noexcept;
  // The open (locked) directory of dirs_[i] == dir, for openat of its files, or AT_FDCWD.
  int dir_fd(const std::string& dir) const;
  bool v2_ = false;
  std::vector<std::string> dirs_;     // the sandbox cgroups
  std::vector<std::string> parents_;  // "exguardian" parents, removed when empty
  std::string freezer_dir_;           // v1
  std::string memory_dir_, pids_dir_;
  std::vector<UniqueFd> locks_;       // one per dir: flock(LOCK_EX) held while the sandbox lives
  std::vector<std::string> notes_;
};

}  // namespace exg::cgroup
