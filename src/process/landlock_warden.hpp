// The landlock layer's warden: without a pid namespace or a cgroup, nothing
// in the kernel ends the sandbox's processes when its supervisor is killed
// (kill -9, the OOM killer): init dies with it (its parent-death signal), and
// what the command started, in whatever session or group it made, is
// reparented to the host. The warden is a small process that outlives both
// only long enough to end them.
//
// It lives in a Landlock domain that only scopes signals; init's own rules
// nest a second domain inside it. So the warden's kill(-1, SIGKILL) reaches
// exactly the sandbox (init and every process it ever started, however
// detached: the domain is inherited and cannot be left), and nothing of the
// sandbox may signal, ptrace or read the warden (an outer domain).
//
// It acts when the supervisor has exited (its pidfd) or init has ended
// without saying so (the pipe's end closes with no byte); then, once the
// supervisor is gone (waited for a bounded time: a killed supervisor's pidfd
// is readable only at the end of its exit), it also removes the run's private
// directory (TMPDIR), unless the supervisor removed it meanwhile. At a normal
// end, init first ends every other process itself, then writes one byte and
// reaps the warden (end_warden); with its supervisor gone, init leaves without
// the byte (leave_warden).
#pragma once
#include <sys/types.h>

namespace exg::process {

struct Warden {
  pid_t pid = -1;
  int fd = -1;  // init's end of the pipe (close-on-exec)
};

// In the sandbox's first process, once it has its final ids and
// no_new_privs, before its own Landlock rules: enters the signal-scoped
// domain, then starts the warden, which watches `supervisor_pidfd`;
// `private_tmp` (may be null, else it must outlive the warden): the run's
// TMPDIR. `share_memory`: the warden is a process of its own on this
// process's memory (CLONE_VM, its own stack), cheaper than a fork; else a
// fork. Shared memory only where init reads nothing the sandbox controls (not
// an agent, which parses the command's output: a bug there would hand over
// the warden, which has no filter and no file rules) and where a cgroup ends
// the sandbox if init dies (the kernel's OOM killer ends every process on the
// victim's memory: init and the warden together). Either way: system calls
// only, no allocation, no lock (the supervisor's locks may be held in this
// copy of its memory). Once per process. 0, or -errno (the sandbox must not start).
int start_warden(int supervisor_pidfd, const char* private_tmp, bool share_memory, Warden* out);

// Init's normal end, once no other process of the sandbox is left: the warden
// leaves without acting (but for the private directory of a supervisor
// already gone), and is reaped.
void end_warden(Warden* w);

// Init's end with its supervisor gone (the agent's channel closed): the pipe
// closes without the byte and the warden is not waited for, so that it ends
// the sandbox and removes TMPDIR once the supervisor has exited (a supervisor
// that closed the channel and lives on removes TMPDIR itself meanwhile).
void leave_warden(Warden* w);

}  // namespace exg::process
