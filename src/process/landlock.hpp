// Landlock: a second, independent wall behind the mount policy. The child
// applies it to itself after pivot_root, just before seccomp and execve.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace exg::process {

// The ABI version the running kernel offers: 0 when Landlock is unavailable
// (not built in, or not enabled at boot).
int landlock_abi();

struct LandlockFeatures {
  int abi = 0;
  bool fs = false;           // ABI 1: filesystem access rights (ABI 2 adds REFER)
  bool truncate = false;     // ABI 3
  bool net = false;          // ABI 4: TCP bind/connect by port
  bool ioctl_dev = false;    // ABI 5: ioctl on device files
  bool scope = false;        // ABI 6: abstract unix sockets and signals scoped to the domain
  bool audit_flags = false;  // ABI 7: landlock_restrict_self logging flags
};
LandlockFeatures landlock_features();

struct LandlockRules {
  std::vector<std::string> read_only;    // read + execute (whole trees): usually just "/"
  std::vector<std::string> read_write;   // full file access in these trees
  std::vector<std::string> write_files;  // only writing (and truncating) existing files, e.g. /dev, /proc
  bool scope_signals = true;             // ABI 6
  bool scope_abstract_unix = true;       // ABI 6
  bool required = false;                 // fail instead of degrading when the kernel lacks the fs part
  // Reads (read, list, execute) are not handled by default: the mounts already
  // decide what is readable (masks), Landlock cannot deny a subtree of an
  // allowed one, and handling them makes every open walk up to "/" (measured:
  // +20% on a file-heavy loop). Writes are what this wall is for.
  bool handle_reads = false;  // also turns on TRUNCATE and IOCTL_DEV (both cost a path walk per open)
  // Network (ABI 4). Off by default: inside the sandbox's own network
  // namespace every TCP port is the sandbox's own loopback, so handling
  // bind/connect would only break the code's own test servers. When on, only
  // the listed ports may be bound / connected to.
  bool handle_net = false;
  std::vector<std::uint16_t> bind_tcp, connect_tcp;
  // ABI 7: also log denials after the execve that follows (kernel audit).
  // Off by default: it goes to the host's kernel log.
  bool log_after_exec = false;
};

// Applies the rules to the calling process and its future children. The
// caller must have set no_new_privs. Paths are opened O_PATH in the current
// mount namespace (the sandbox's, after pivot_root); missing ones are skipped.
// `report` (may be null) receives one line saying what was applied and what
// is missing. Returns 0, or -errno (-EOPNOTSUPP when `required` and the kernel
// has no Landlock).
int apply_landlock(const LandlockRules& rules, std::string* report);

}  // namespace exg::process
