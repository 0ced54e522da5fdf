#include "sandbox/violations.hpp"

#include <fcntl.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "walls/seccomp.hpp"

namespace exg::sandbox {

namespace {

// Best effort: the process may be gone, or be another by now (checked with
// NOTIF_ID_VALID afterwards).
std::string read_comm(pid_t pid) {
  if (pid <= 0) return "";
  std::string path = "/proc/" + std::to_string(pid) + "/comm";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[64];
  ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n <= 0) return "";
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace

SyscallViolations::SyscallViolations(UniqueFd listener, AuditLog* audit, SocketAddressGate* gate)
    : listener_(std::move(listener)), audit_(audit), gate_(gate) {
  // The kernel's structures may grow: allocate what it says, at least ours.
  seccomp_notif_sizes sizes{};
  if (::syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) == 0) {
    notif_size_ = sizes.seccomp_notif;
    resp_size_ = sizes.seccomp_notif_resp;
  }
  notif_size_ = std::max(notif_size_, sizeof(seccomp_notif));
  resp_size_ = std::max(resp_size_, sizeof(seccomp_notif_resp));
}

void SyscallViolations::on_readable() {
  if (!listener_) return;
  // RECV wants a zeroed buffer (EINVAL otherwise).
  std::vector<unsigned char> req_buf(notif_size_, 0), resp_buf(resp_size_, 0);
  auto* req = reinterpret_cast<seccomp_notif*>(req_buf.data());
  if (::ioctl(listener_.get(), SECCOMP_IOCTL_NOTIF_RECV, req) != 0) {
    // ENOENT: the caller died (or was interrupted) between poll and here;
    // EINTR: poll again.
    return;
  }
  int nr = req->data.nr;
  if (SocketAddressGate::judges(nr)) {
    // Judged, not refused. Without a gate nothing can judge it: refused (fail closed).
    if (gate_) return gate_->answer(listener_.get(), *req, resp_size_);
  }
  int err = walls::refused_errno(nr, reinterpret_cast<const uint64_t*>(req->data.args));
  pid_t pid = static_cast<pid_t>(req->pid);  // in our pid namespace: the host's
  std::string comm = read_comm(pid);
  if (::ioctl(listener_.get(), SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id) != 0) comm.clear();  // pid reused

  auto* resp = reinterpret_cast<seccomp_notif_resp*>(resp_buf.data());
  resp->id = req->id;
  resp->val = 0;
  resp->error = -err;
  resp->flags = 0;
  // ENOENT: the caller died meanwhile; the attempt is still worth recording.
  (void)::ioctl(listener_.get(), SECCOMP_IOCTL_NOTIF_SEND, resp);

  std::string name = walls::syscall_name(nr);
  ++count_;
  ++by_syscall_[name];
  if (audit_) {
    audit_->write({{"event", "syscall_refused"},
                   {"syscall", name},
                   {"nr", nr},
                   {"pid", pid},
                   {"command", comm},
                   {"errno", err}});
  }
}

std::string SyscallViolations::summary() const {
  if (count_ == 0) return "no refused syscalls";
  std::vector<std::pair<std::string, size_t>> v(by_syscall_.begin(), by_syscall_.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string s = std::to_string(count_) + (count_ == 1 ? " refused syscall: " : " refused syscalls: ");
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += v[i].first + " (" + std::to_string(v[i].second) + ")";
  }
  return s;
}

}  // namespace exg::sandbox
