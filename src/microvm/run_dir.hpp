// The directory of a microVM's channel sockets (agent, egress, QMP) in /tmp:
// private to one launch and removed once qemu has connected. A launcher
// killed before that (SIGKILL during a cold boot) cannot remove it, so the
// name carries the launcher's pid and start time, and every launch first
// removes the directories of launchers that are gone.
#pragma once

#include <string>
#include <vector>

#include "util/error.hpp"

namespace exg::microvm {

struct RunDir {
  std::string dir;
  std::vector<std::string> socks;
  // Right after qemu connected: a kill of exguardian during the guest's boot leaves nothing.
  void remove();
  ~RunDir() { remove(); }
};

// A fresh /tmp/exguardian-microvm-<pid>-<starttime>-XXXXXX, after removing
// those whose launcher has ended (reap_stale_run_dirs).
Result<void> make_run_dir(RunDir& run);

// Removes /tmp/exguardian-microvm-<pid>-<starttime>-* whose process is gone
// (no such pid, or a pid reused since: another start time) and that this
// process may remove: a directory (not a link) holding sockets only.
// Returns how many went. Under another pid namespace a live launcher's
// directory looks stale; /tmp is that namespace's own in every layer here.
int reap_stale_run_dirs(const std::string& tmp = "/tmp");

// This process's start time in clock ticks since boot (/proc/<pid>/stat field 22); 0 if unreadable.
unsigned long long process_start_ticks(int pid);

}  // namespace exg::microvm
