#include "sandbox/stdio_relay.hpp"

#include <fcntl.h>
#include <linux/kcmp.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <utility>

namespace exg::sandbox {

namespace {

constexpr size_t kChunk = 1 << 16;

const char* kind_of(mode_t m) {
  if (S_ISREG(m)) return "regular file";
  if (S_ISDIR(m)) return "directory";
  if (S_ISFIFO(m)) return "pipe";
  if (S_ISCHR(m)) return "character device";
  if (S_ISBLK(m)) return "block device";
  return "file";
}

const char* name_of(int k) { return k == 0 ? "stdin" : k == 1 ? "stdout" : "stderr"; }

// Whether the caller's fds a and b are one open file description (`>log 2>&1`).
bool same_description(int a, int b) {
  pid_t me = ::getpid();
  long r = ::syscall(SYS_kcmp, me, me, KCMP_FILE, a, b);
  if (r >= 0) return r == 0;
  // No kcmp (CONFIG_KCMP off): the same file with the same flags is taken as one.
  struct stat sa, sb;
  if (::fstat(a, &sa) != 0 || ::fstat(b, &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino && ::fcntl(a, F_GETFL) == ::fcntl(b, F_GETFL);
}

}  // namespace

Result<StdioRelay> StdioRelay::make(const bool skip[3]) {
  StdioRelay r;
  int flow_of[3] = {-1, -1, -1};
  for (int k = 0; k < 3; ++k) {
    if (skip[k] || ::fcntl(k, F_GETFL) < 0) continue;  // the pty's, or closed
    struct stat st;
    if (::fstat(k, &st) != 0) return fail(Error::sys(std::string("fstat ") + name_of(k)));
    if (S_ISSOCK(st.st_mode)) continue;                                                       // not reopenable
    if (S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && minor(st.st_rdev) == 3) continue;  // /dev/null
    if (k == 2 && flow_of[1] >= 0 && same_description(1, 2)) {
      flow_of[2] = flow_of[1];
      r.flows_[static_cast<size_t>(flow_of[1])].others = "1,2";
      r.sandbox_fd_[2] = r.sandbox_fd_[1];
      continue;
    }
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return fail(Error::sys(std::string("pipe for ") + name_of(k)));
    UniqueFd rd(p[0]), wr(p[1]);
    Flow f;
    f.caller = k;
    f.input = k == 0;
    f.caller_stream = !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode);
    f.kind = kind_of(st.st_mode);
    f.ours = std::move(f.input ? wr : rd);
    f.theirs = std::move(f.input ? rd : wr);
    // The sandbox's end above 2, so that dup2 onto 0..2 in the child never
    // meets one of the caller's own numbers (a caller with a closed stdin).
    if (f.theirs.get() < 3) {
      int d = ::fcntl(f.theirs.get(), F_DUPFD_CLOEXEC, 3);
      if (d < 0) return fail(Error::sys(std::string("dup the pipe for ") + name_of(k)));
      f.theirs.reset(d);
    }
    if (f.ours.get() < 3) {
      int d = ::fcntl(f.ours.get(), F_DUPFD_CLOEXEC, 3);
      if (d < 0) return fail(Error::sys(std::string("dup the pipe for ") + name_of(k)));
      f.ours.reset(d);
    }
    // Ours never blocks the supervisor's loop (the caller's stays as the caller set it).
    if (::fcntl(f.ours.get(), F_SETFL, O_NONBLOCK) != 0) return fail(Error::sys("O_NONBLOCK on the stdio pipe"));
    // Not value-initialised (a vector's resize would zero all 64 KiB and fault
    // its pages in at every start): read() fills what is used.
    f.buf.reset(new char[kChunk]);
    f.others = std::to_string(k);
    r.sandbox_fd_[k] = f.theirs.get();
    flow_of[k] = static_cast<int>(r.flows_.size());
    r.flows_.push_back(std::move(f));
  }
  return r;
}

std::vector<int> StdioRelay::own_fds() const {
  std::vector<int> v;
  for (const auto& f : flows_)
    if (f.ours) v.push_back(f.ours.get());
  return v;
}

void StdioRelay::sandbox_started() {
  for (auto& f : flows_) f.theirs.reset();
  for (int& fd : sandbox_fd_) fd = -1;
}

void StdioRelay::stop(Flow& f) {
  f.ours.reset();  // input: the command reads its end; output: its next write gets EPIPE
  f.done = true;
  f.off = f.len = 0;
}

// Reads what the source has into the empty buffer: false when nothing came.
bool StdioRelay::pump_in(Flow& f) {
  if (f.len > f.off || f.eof) return false;
  int from = f.input ? f.caller : f.ours.get();
  ssize_t n = ::read(from, f.buf.get(), kChunk);
  if (n > 0) {
    f.off = 0;
    f.len = static_cast<size_t>(n);
    return true;
  }
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
  // The end (or a source that cannot be read: a directory as stdin). The
  // command sees its end of input; an error is said once.
  if (n < 0 && f.input) errors_.push_back(std::string(name_of(f.caller)) + ": read: " + std::strerror(errno));
  f.eof = true;
  return false;
}

// Writes pending bytes to the sink: false when it would block (or stopped).
bool StdioRelay::pump_out(Flow& f, bool blocking) {
  while (f.len > f.off) {
    int to = f.input ? f.ours.get() : f.caller;
    size_t n = f.len - f.off;
    // A pipe's POLLOUT promises PIPE_BUF bytes, not more: a longer write to
    // the caller's blocking pipe could stall the supervisor (and the timeout).
    if (!f.input && f.caller_stream && !blocking) n = std::min<size_t>(n, PIPE_BUF);
    ssize_t w = ::write(to, f.buf.get() + f.off, n);
    if (w > 0) {
      f.off += static_cast<size_t>(w);
      if (!f.input && f.caller_stream && !blocking) break;  // (once per POLLOUT)
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      if (!blocking) return false;
      pollfd p{to, POLLOUT, 0};
      (void)::poll(&p, 1, -1);
      continue;
    }
    // The reader went away (the command closed its stdin; the caller's
    // consumer of our output ended) or the sink refused: this flow ends.
    if (!f.input && !(w < 0 && errno == EPIPE))
      errors_.push_back(std::string(name_of(f.caller)) + ": write: " + (w < 0 ? std::strerror(errno) : "nothing written"));
    stop(f);
    return false;
  }
  if (f.len == f.off) f.off = f.len = 0;
  return f.len == 0;
}

size_t StdioRelay::poll_fds(pollfd* fds, size_t max) {
  polled_.clear();
  size_t n = 0;
  for (size_t i = 0; i < flows_.size() && n < max; ++i) {
    Flow& f = flows_[i];
    if (f.done) continue;
    if (f.len == f.off && f.eof) {
      stop(f);
      continue;
    }
    bool pending = f.len > f.off;
    // Pending bytes wait for the sink; else the source is read.
    bool caller_side = f.input ? !pending : pending;
    int fd = caller_side ? f.caller : f.ours.get();
    short ev = (f.input == caller_side) ? POLLIN : POLLOUT;
    fds[n++] = {fd, ev, 0};
    polled_.emplace_back(i, caller_side ? 0 : 1);
  }
  return n;
}

void StdioRelay::on_ready(const pollfd* fds, size_t n) {
  for (size_t j = 0; j < n && j < polled_.size(); ++j) {
    if (!fds[j].revents) continue;
    Flow& f = flows_[polled_[j].first];
    if (f.done) continue;
    bool source_ready = (f.input && polled_[j].second == 0) || (!f.input && polled_[j].second == 1);
    if (source_ready) {
      if (pump_in(f)) (void)pump_out(f, false);
    } else {
      (void)pump_out(f, false);
    }
    if (!f.done && f.eof && f.len == f.off) stop(f);
  }
  polled_.clear();
}

void StdioRelay::finish() {
  for (auto& f : flows_) {
    if (f.done) continue;
    if (f.input) {
      stop(f);
      continue;
    }
    // What the sandbox wrote is in the pipe: all of it reaches the caller. A
    // process of the sandbox still holding its end (not yet killed) gets no
    // wait: what is there now is delivered.
    while (!f.done) {
      if (f.len > f.off && !pump_out(f, true)) break;
      if (!pump_in(f)) break;
    }
    if (!f.done && f.len > f.off) (void)pump_out(f, true);
    if (!f.done) stop(f);
  }
}

std::string StdioRelay::describe() const {
  std::string s;
  for (const auto& f : flows_) s += (s.empty() ? "" : ", ") + f.others + " (" + f.kind + ")";
  if (s.empty()) return "stdio: passed as it is (sockets, /dev/null or the pty)";
  return "stdio: " + s + " relayed through pipes (a descriptor handed in cannot be opened again with more rights)";
}

std::vector<std::string> StdioRelay::take_errors() { return std::exchange(errors_, {}); }

}  // namespace exg::sandbox
