// The escape test's network world: built by the calling process inside its own
// network and mount namespaces (and, for an ordinary user, its own user
// namespace mapping the user's uid to itself), so nothing in it can reach a
// real address. Layout as in tests/integration/egress_world.sh:
//
//   client side (the caller): veth 198.51.100.1/24, default route via .2,
//     an HTTP server on 127.0.0.1:80 of its own loopback;
//   server side (a forked child in a second netns): veth 198.51.100.2/24; on lo
//     203.0.113.10 (allowed.test, the control), 169.254.169.254 (meta.test),
//     10.0.0.5 (private.test); HTTP on port 80 of each, UDP on 203.0.113.10:53.
//   /etc/hosts (bind-mounted in the caller's private mount namespace) maps
//     allowed.test, meta.test, rebind.test (127.0.0.1), private.test;
//     /etc/resolv.conf points at 127.0.0.53, where nothing listens.
//
// Every request a server receives is one line in log_path():
//   "<server addr> <METHOD> <path> host=<Host header>"  or  "<addr> UDP <n> bytes".
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace exg::evidence {

class TestWorld {
 public:
  TestWorld() = default;
  TestWorld(const TestWorld&) = delete;
  TestWorld& operator=(const TestWorld&) = delete;
  ~TestWorld();

  // Enters new namespaces (the calling process: call it in a forked child of
  // its own) and builds the world; files go under dir. false with why set when
  // it cannot be built (the caller may then be left in half-built namespaces:
  // network probes must be skipped).
  bool build(const std::string& dir, std::string& why);

  bool up() const { return up_; }
  const std::string& log_path() const { return log_; }
  // The servers' process (for a test that holds it still: SIGSTOP, then SIGCONT).
  pid_t server_pid() const { return server_pid_; }
  // The domains the escape test's sandboxes are allowed to name (refusals must
  // then come from the proxy's address checks).
  static std::vector<std::string> allowed_names();

 private:
  bool up_ = false;
  pid_t server_pid_ = -1;
  std::string log_;
};

// A host listener on the pathname Unix socket `path` (mode 0777: only the
// sandbox may stop a connect), in a forked child that dies with the caller.
// Every connection it accepts is one line in `log`: "unix PATH: N bytes
// received". Returns the child's pid, or -1 with why set.
pid_t start_unix_listener(const std::string& path, const std::string& log, std::string& why);

// A host listener that binds only when asked, after the sandbox that asks has
// started (so no start-time scan can know it): each time the file `trigger`
// appears, it is removed, and `path` (a stream listener) and `dgram_path` (a
// datagram socket) are bound afresh (mode 0777; a "bound" line each in `log`)
// for ten seconds, each connection or datagram a line in `log` ("a
// connection", "a datagram"), then unlinked again. Once both are bound, the
// regular file late_bound_marker(trigger) is made beside them (and removed with
// them): a sandbox that does not show the host's socket files (gVisor's gofer)
// still sees that file, so its probe need not wait out its whole bound for a
// socket that will never appear there. In a forked child that dies with the
// caller. Returns its pid, or -1 with why set.
std::string late_bound_marker(const std::string& trigger);
pid_t start_late_unix_listener(const std::string& path, const std::string& dgram_path, const std::string& trigger,
                               const std::string& log, std::string& why);

// The control for that listener: connects from here, sends a few bytes, waits
// for the log line, then empties the log. True when the line came.
bool host_unix_connect(const std::string& path, const std::string& log);

// Sends the escape test's mark number n to the world's UDP server (from the client side,
// the way a probe's datagram goes) and waits until its line is in the log: every datagram
// that reached the server's socket before it is then logged too (the probe's, sent before
// its process exited). Returns the offset of the mark's line in the log (what precedes it
// is what the servers had received by then), or npos when it did not come within
// deadline_ms (the world's server is gone).
size_t world_mark(const std::string& log_path, unsigned n, int deadline_ms = 5000);

// Runs `ip ARGS...` (iproute2); with ambient CAP_NET_ADMIN when not root, so the
// capabilities held in a user namespace survive the exec. 0 on success; err
// gets ip's stderr otherwise.
int run_ip(const std::vector<std::string>& args, std::string& err);

}  // namespace exg::evidence
