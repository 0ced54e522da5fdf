// The caller's stdio as the sandbox gets it: through pipes the supervisor owns.
//
// Why: a descriptor handed in as fd 0..2 names a file, and the kernel lets
// whoever holds it open that file again through /proc/self/fd/N, /dev/stdin,
// /dev/fd/N or /proc/PID/fd/N (a "magic link"), with whatever rights the
// file's mode and the walls allow, not the rights of the descriptor: `run ...
// < setup.sh` could rewrite setup.sh on the host, an appended log could be
// read back and truncated (issue 39). The walls cannot hold this on every
// layer: Landlock judges paths (a log in the workspace is readable and
// writable by its path; the grant to write it was never the question), and the
// container and gVisor layers have no Landlock around the command at all. A
// pipe of ours carries the bytes and nothing else: opened again through
// /proc it is the same pipe, never the caller's file, on every layer alike.
//
// Relayed: regular files, directories, named and anonymous pipes (a pipe the
// caller shares with other processes, opened again for reading, would hand out
// what they wrote into it), devices other than /dev/null. Passed as they are:
// sockets (a socket cannot be opened through /proc: ENXIO), /dev/null
// (opening it again gives nothing), closed descriptors, and the ones the
// sandbox's pty replaces (a terminal stays a terminal).
//
// What the command sees changes as with any pipe: stdin cannot be seeked or
// mapped, and a stdin file's offset moves by what the relay read ahead (at
// most 64 KiB more than the command took). Output keeps the caller's
// descriptor (O_APPEND and a shared offset stay as they were); stdout and
// stderr that are one open file share one pipe, so their order is kept. A
// reader of the caller's output that goes away ends the relay, and the
// command's next write gets EPIPE/SIGPIPE, as it would have directly.
#pragma once
#include <poll.h>

#include <memory>
#include <string>
#include <vector>

#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace exg::sandbox {

class StdioRelay {
 public:
  StdioRelay() = default;
  StdioRelay(StdioRelay&&) = default;
  StdioRelay& operator=(StdioRelay&&) = default;

  // Looks at the caller's 0..2 (but those in `skip`: the pty's) and makes a
  // pipe for each that must not reach the sandbox as it is.
  static Result<StdioRelay> make(const bool skip[3]);

  // What the sandbox gets as fd k: the pipe's end, or -1 (the caller's own).
  int sandbox_fd(int k) const { return sandbox_fd_[k]; }
  // This side's ends, which the sandbox's first process closes right after
  // the clone (else the command's stdin would never see its end).
  std::vector<int> own_fds() const;
  // The sandbox holds its ends now: ours of them are closed.
  void sandbox_started();

  // Poll set while the sandbox runs (at most 3 entries), and their results.
  size_t poll_fds(pollfd* fds, size_t max);
  void on_ready(const pollfd* fds, size_t n);
  // The sandbox is gone: what it wrote reaches the caller, its stdin ends.
  void finish();

  // "-v": which descriptors go through the relay, and how.
  std::string describe() const;
  // Output the caller's descriptor refused (ENOSPC, ...), once: "stdout: write: ...".
  std::vector<std::string> take_errors();

 private:
  struct Flow {
    int caller = -1;            // the caller's descriptor (0, 1 or 2)
    UniqueFd ours;              // the pipe's end this side reads or writes (non-blocking)
    UniqueFd theirs;            // the sandbox's end, until it holds it
    bool input = false;         // caller -> sandbox (fd 0)
    bool caller_stream = false;  // a pipe or device: write at most PIPE_BUF after POLLOUT
    std::string kind;           // "regular file", "pipe", ... (for -v)
    std::unique_ptr<char[]> buf;  // kChunk bytes
    size_t off = 0, len = 0;    // pending bytes buf[off, len)
    bool eof = false;           // nothing more to read from the source
    bool done = false;
    std::string others;         // "1,2" when stdout and stderr share it
  };
  void step(Flow& f, short caller_revents, short ours_revents);
  bool pump_in(Flow& f);
  bool pump_out(Flow& f, bool blocking);
  void stop(Flow& f);

  std::vector<Flow> flows_;
  int sandbox_fd_[3] = {-1, -1, -1};
  std::vector<std::pair<size_t, int>> polled_;  // (flow, which: 0 caller, 1 ours) per poll entry handed out
  std::vector<std::string> errors_;
};

}  // namespace exg::sandbox
