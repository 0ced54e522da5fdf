// The few lines `exguardian run` prints at the end of a run that refused
// something (issue 40): which hosts the proxy refused and by which rule, which
// syscalls the seccomp filter refused, which planted files were quarantined,
// with counts. What is known to the supervisor only: a write or read Landlock
// or a read-only mount refused is the command's own EACCES/EROFS, never
// reported to it. Off with --quiet; -v and the audit log tell each refusal.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace exg::sandbox {

struct RunRefusals {
  uint64_t egress = 0;                           // connections and lookups the proxy refused
  std::map<std::string, uint64_t> hosts;         // host -> times refused
  std::map<std::string, std::string> host_rules; // host -> the rule that refused it
  std::map<std::string, size_t> syscalls;        // name -> times refused
  std::vector<std::string> planted;              // paths of planted files (quarantined, or found and not moved)
  size_t setid = 0;                              // set-id files written in the run (bits removed) or not checked
  std::map<std::string, size_t> unix_sockets;    // path -> connections refused (bound outside the sandbox)
  bool any() const { return egress || !syscalls.empty() || !planted.empty() || setid || !unix_sockets.empty(); }
};

// Nothing when nothing was refused; else a heading and one line per kind,
// each list cut at a few entries ("and N more").
std::vector<std::string> refusal_summary(const RunRefusals& r);

}  // namespace exg::sandbox
