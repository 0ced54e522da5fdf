// The host's bound pathname Unix sockets. connect() to one needs only write
// permission on its inode, which a read-only mount does not take away, and
// Landlock (ABI 7) has no right for it, so the plan masks every one visible in
// the sandbox's view (policy network.allowUnixSockets / allowAllUnixSockets
// are the exceptions). Found in /proc/PID/net/unix of every network namespace
// this process can see (one read per namespace, told apart by the inode of
// /proc/PID/ns/net; as an ordinary user only its own processes' namespaces).
// Not found: sockets bound after start, in a namespace no readable process is
// in, or bound by a relative name (the table holds the name as given).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace exg::plan {

struct HostSockets {
  std::vector<std::string> paths;  // canonical, each a socket now; sorted, unique
  size_t netns = 0;                // network namespaces read
  size_t relative = 0;             // bound by a relative name: not locatable
};

HostSockets find_host_sockets();

// The paths of one /proc/net/unix table (the text), as written there: "/..."
// names only (not abstract, not unnamed); *relative counts the other named ones.
std::vector<std::string> unix_table_paths(const std::string& table, size_t* relative);

}  // namespace exg::plan
