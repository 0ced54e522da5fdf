// Which signals the runtime's host process hands on to the container as
// `<runtime> kill ID SIG`, and when. Each such kill is a runtime process of its
// own (runsc: a Go binary that talks to the sandbox), so a storm of signals at
// the supervisor once became a storm of runtime processes: SIGTERMs without
// pause kept a gVisor session from ending for over 20 s (CI, stop 36).
//
// At most one kill per signal number runs at a time. A signal that arrives
// while one of its number is still on its way is merged into one more, sent
// when that one ends: what the kernel does itself with a standard signal that
// is already pending, so the container's processes cannot tell the difference.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <map>
#include <set>
#include <vector>

namespace exg::oci {

class KillCoalescer {
 public:
  // True: start a kill for `sig` now and report it with started(). False: one
  // is on its way; this one is merged into the next.
  bool want(int sig);
  void started(int sig, pid_t kill_process);
  // A kill process ended: the signal to send once more now (merged while it
  // ran), or 0. Unknown pids (not a kill of ours) give 0.
  int ended(pid_t kill_process);
  // The kill processes still running (waited for before the host exits).
  std::vector<pid_t> running() const;

 private:
  std::map<int, pid_t> running_;  // signal -> its kill process
  std::set<int> again_;           // merged while their kill ran
};

}  // namespace exg::oci
