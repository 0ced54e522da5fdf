// What the host probes share (doctor, recommend, `--layer auto`: doctor/host_caps.hpp,
// and each layer's own probe of this host: process/, oci/ and microvm/host_probe.hpp):
// a capability as a probe answers it, a probe run in a forked child and bounded
// in time, a tool's version line. Measured, not guessed: a probe that changes
// anything does so in its child's own namespaces and leaves nothing behind.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace exg::util {

struct Capability {
  std::string name;    // e.g. "user namespaces"
  bool ok = false;
  std::string detail;  // one line: why, and what the sandbox uses it for
};

// A file's whole text; empty when it cannot be read.
std::string read_text(const std::string& path);
// Without trailing newlines, spaces and carriage returns.
std::string trim(std::string s);
// "ENOENT (No such file or directory)".
std::string err_name(int e);

// Waits for `pid` at most `timeout`; kills it (and reaps) when it overstays.
// Returns the wait status, or -1 after a timeout.
int wait_bounded(pid_t pid, std::chrono::milliseconds timeout);

struct ChildResult {
  int code = -1;     // exit code, -1 when it died or timed out
  std::string text;  // what it wrote to its pipe
};
// Runs fn in a forked child; fn writes its explanation to the fd it gets and
// returns the exit code. The child never returns into the caller's code.
ChildResult in_child(const std::function<int(int)>& fn,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
// Writes `s` on `fd` (a probe child's explanation).
void say(int fd, const std::string& s);

// The executable `name` in PATH (or the usual directories), empty when none.
std::string find_in_path(const std::string& name);
// The first non-empty line `exe --version` prints, bounded in time; `answered`
// is false when the tool could not be run or did not finish in time.
std::string version_line(const std::string& exe, bool* answered, const char* flag = "--version");
// The tool `name` from PATH and its version line; `use`: what it is for.
void probe_tool(std::vector<Capability>& out, const std::string& name, const std::string& use);

}  // namespace exg::util
