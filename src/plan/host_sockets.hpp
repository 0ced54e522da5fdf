// The host's bound pathname Unix sockets. connect() to one needs only write
// permission on its inode, which a read-only mount does not take away, and
// Landlock (ABI 7) has no right for it, so the plan masks every one visible in
// the sandbox's view (policy network.allowUnixSockets / allowAllUnixSockets
// are the exceptions). Found in /proc/PID/net/unix of every network namespace
// this process can see (one read per namespace, told apart by the inode of
// /proc/PID/ns/net; as an ordinary user only its own processes' namespaces).
// Not found: sockets bound after start, in a namespace no readable process is
// in, or bound by a relative name (the table holds the name as given).
// The kernel's threads are not read (kernel_thread_pids): on a quiet host they
// are most of /proc (65 of 72 here), and all in the initial namespace.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "util/error.hpp"

namespace exg::plan {

struct HostSockets {
  std::vector<std::string> paths;  // canonical, each a socket now; sorted, unique
  size_t netns = 0;                // network namespaces read
  size_t relative = 0;             // bound by a relative name: not locatable
};

// An error when not even this process's own namespace's table can be read
// (no /proc, or one without net/unix): nothing could be masked, so the plan
// does not start (fail closed; network.allowAllUnixSockets runs without masks).
Result<HostSockets> find_host_sockets();

// The pids of kthreadd (pid 2 of the initial pid namespace, told by its
// PF_KTHREAD flag in /proc/2/stat) and of its children (/proc/2/task/2/
// children): the kernel's threads, and the kernel's user-mode helpers while
// they run; all started in the initial namespaces. Sorted. Empty when pid 2 is
// not kthreadd (in a pid namespace /proc shows no kernel thread) or its
// children are not listed (a kernel without CONFIG_PROC_CHILDREN): then every
// process is read, as before.
std::vector<int> kernel_thread_pids();

// The paths of one /proc/net/unix table (the text), as written there: "/..."
// names only (not abstract, not unnamed); *relative counts the other named ones.
std::vector<std::string> unix_table_paths(const std::string& table, size_t* relative);

}  // namespace exg::plan
