// Refused syscalls, as the supervisor sees them: the seccomp listener of the
// sandbox (walls/seccomp.hpp) reports each one; the supervisor answers it
// with an errno, writes it to the audit log and counts it for `run -v`.
// Allowed syscalls never come here.
#pragma once
#include <cstddef>
#include <map>
#include <string>

#include "sandbox/audit.hpp"
#include "sandbox/socket_address_gate.hpp"
#include "util/unique_fd.hpp"

namespace exg::sandbox {

class SyscallViolations {
 public:
  // listener: the fd install_seccomp() returned in the child, passed over
  // SCM_RIGHTS. audit may be a disabled AuditLog, or null.
  // gate: answers what the filter sends to be judged rather than refused
  // (connect, sendto with an address); may be null when the filter sends none.
  SyscallViolations(UniqueFd listener, AuditLog* audit, SocketAddressGate* gate = nullptr);

  // Poll it for POLLIN (a refused syscall waits for its answer). POLLHUP: no
  // process uses the filter any more; stop polling it.
  int fd() const { return listener_.get(); }

  // Receives one notification, answers it, records it. Never blocks after
  // poll() reported POLLIN (the supervisor is the only reader).
  void on_readable();

  size_t count() const { return count_; }
  const std::map<std::string, size_t>& by_syscall() const { return by_syscall_; }
  // "3 refused syscalls: ptrace (2), bpf (1)"; "no refused syscalls".
  std::string summary() const;

 private:
  UniqueFd listener_;
  AuditLog* audit_;
  SocketAddressGate* gate_;
  size_t notif_size_ = 0;
  size_t resp_size_ = 0;
  size_t count_ = 0;
  std::map<std::string, size_t> by_syscall_;
};

}  // namespace exg::sandbox
