// Landlock rules as plain data of the Plan (the second wall behind the
// mounts); walls/landlock.cpp applies them in the child.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace exg::walls {

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

}  // namespace exg::walls
