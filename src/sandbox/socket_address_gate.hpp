// connect(), sendto() with a destination, sendmsg() and sendmmsg(), judged by
// the supervisor.
//
// Why: connect() to a pathname Unix socket needs only write permission on the
// socket's inode; a read-only mount does not take it away and Landlock (ABI 7)
// has no right for it. The plan masks the host's sockets it finds at the start
// (plan/host_sockets.hpp), but a socket bound later (an ssh-agent, a docker
// daemon, `exguardian session --control unix:$PWD/ctl.sock` in the workspace)
// was reachable from inside. Here every such call stops at the supervisor
// (the sandbox's seccomp filter notifies it: walls/seccomp_rules.hpp
// judged_syscalls()), which lets a pathname Unix socket through only when it
// was bound inside the sandbox itself (a socket of the sandbox's own network
// namespace, asked through NETLINK_SOCK_DIAG there: the inode the path names
// now, not the path the table remembers) or the policy lets it through
// (network.allowUnixSockets / allowAllUnixSockets). Abstract and unnamed Unix
// sockets, and every other family, live in the sandbox's own network
// namespace: passed.
//
// No time-of-check gap: the supervisor never lets the caller's call go on
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE would re-read the address and the
// descriptor table, both the caller's to change after the check). It takes
// the caller's socket (pidfd_getfd), resolves the path itself in the caller's
// root and working directory, and performs the call on that socket with the
// inode it judged (through /proc/self/fd), with the caller's uid and groups
// (per thread), so permission checks and SO_PEERCRED see the caller; the
// result is the caller's. A call that may block runs on a thread of its own.
//
// sendmsg() and sendmmsg() carry their destination in a msghdr, out of the
// filter's sight, so each one comes here (a datagram to a host socket bound
// later was the way around a gate that judged connect and sendto only). The
// supervisor reads the messages, gathers their bytes (at most 1 MiB a
// message: a short write on a stream), takes the descriptors SCM_RIGHTS
// passes, judges each destination, and sends them itself; sendmmsg's msg_len
// fields are written back. These calls are rare on hot paths (send(), write()
// and writev() are not judged).
//
// Layers: the process layer, and the container layer under crun and runc (the
// notify fd through listenerPath). gVisor's gofer connects no host socket
// (runsc --host-uds=none) and a microVM's guest reaches none through 9p.
#pragma once
#include <linux/seccomp.h>
#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <map>
#include <string>
#include <vector>

#include "sandbox/audit.hpp"
#include "util/unique_fd.hpp"

namespace exg::sandbox {

class SocketAddressGate {
 public:
  // What the policy lets through besides the sandbox's own sockets: paths as
  // the sandbox sees them (network.allowUnixSockets, resolved), or all.
  struct Allowed {
    bool all = false;
    std::vector<std::string> paths;
    // A sandbox in the host's network (layer::Sandbox::host_network): an IPv4
    // or IPv6 destination is let through only when it is the loopback address
    // on one of these ports (the proxy's); every other one is refused (EACCES).
    bool inet_loopback_only = false;
    std::vector<uint16_t> inet_ports;
  };
  // sock_diag: NETLINK_SOCK_DIAG in the sandbox's network namespace (layer::
  // Sandbox::sock_diag); without one no pathname socket counts as the
  // sandbox's own (fail closed: only the allowed ones are reached).
  SocketAddressGate(UniqueFd sock_diag, Allowed allowed, AuditLog* audit);

  // Whether a notification for syscall `nr` is this gate's to answer.
  static bool judges(int nr);

  // Answers notification `req` (connect, sendto, sendmsg or sendmmsg) on `listener`.
  void answer(int listener, const seccomp_notif& req, size_t resp_size);

  size_t refused() const { return refused_; }
  const std::map<std::string, size_t>& refused_paths() const { return refused_paths_; }
  // "2 refused connections to Unix sockets bound outside the sandbox: /x/ctl.sock (2)"; "" when none.
  std::string summary() const;

  // Whether (dev, ino) is a Unix socket bound in the namespace `sock_diag`
  // belongs to. An error (errno) when the kernel could not be asked.
  static int bound_in_namespace(int sock_diag, dev_t dev, ino_t ino, bool* found);

 private:
  UniqueFd sock_diag_;
  Allowed allowed_;
  AuditLog* audit_;
  size_t refused_ = 0;
  // Calls performed on threads of their own, still running (they may outlive the gate).
  std::shared_ptr<std::atomic<int>> waiting_ = std::make_shared<std::atomic<int>>(0);
  std::map<std::string, size_t> refused_paths_;
  std::map<std::string, size_t> refused_inet_;  // "ADDRESS:PORT" -> times (Allowed::inet_loopback_only)
};

// Allowed::inet_loopback_only's judgement: `addr` (IPv4, IPv6, v4-mapped) is
// 127.0.0.1 or ::1 on one of `ports` (AF_UNSPEC, a disconnect, passes too);
// `where` gets "ADDRESS:PORT" for the refusal's record.
bool inet_destination_allowed(const sockaddr_storage& addr, socklen_t len, const std::vector<uint16_t>& ports,
                              std::string* where);

}  // namespace exg::sandbox
