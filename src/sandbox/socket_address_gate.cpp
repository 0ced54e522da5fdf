#include "sandbox/socket_address_gate.hpp"

#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

#include "util/syscalls.hpp"
#include "util/proc_text.hpp"
#include "util/real_ids_of.hpp"

namespace exg::sandbox {

namespace {

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL  // Linux 6.9: a pidfd for one thread
#endif

// sendto()'s data is copied through the supervisor: at most this much (more
// than a Unix datagram can carry with default buffers; a stream socket takes
// the first part, a short write as the kernel may make one too).
constexpr size_t kMaxData = size_t{1} << 20;
constexpr int kMaxWaiting = 512;
constexpr size_t kMaxPassedPerMessage = 253;  // SCM_MAX_FD: more and the kernel says EINVAL

struct Creds {
  uid_t euid = 0;
  gid_t egid = 0;
  std::vector<gid_t> groups;
};

// The caller's effective ids and groups, as the host sees them (the second
// field of Uid:/Gid: in /proc/TID/status).
bool read_creds(pid_t tid, Creds* out) {
  std::string text = util::read_proc_text(("/proc/" + std::to_string(tid) + "/status").c_str());
  bool uid = false, gid = false;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    unsigned long r = 0, e = 0;
    if (key == "Uid:" && (fields >> r >> e)) out->euid = static_cast<uid_t>(e), uid = true;
    if (key == "Gid:" && (fields >> r >> e)) out->egid = static_cast<gid_t>(e), gid = true;
    if (key == "Groups:")
      for (unsigned long g; fields >> g;) out->groups.push_back(static_cast<gid_t>(g));
  }
  return uid && gid;
}

const char* syscall_name(int nr) {
  switch (nr) {
    case SYS_connect: return "connect";
    case SYS_sendto: return "sendto";
    case SYS_sendmsg: return "sendmsg";
    default: return "sendmmsg";
  }
}

std::string read_comm(pid_t tid) {
  std::string s = util::read_proc_text(("/proc/" + std::to_string(tid) + "/comm").c_str());
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

void respond(int listener, uint64_t id, int64_t val, int err, size_t resp_size) {
  std::vector<unsigned char> buf(std::max(resp_size, sizeof(seccomp_notif_resp)), 0);
  auto* resp = reinterpret_cast<seccomp_notif_resp*>(buf.data());
  resp->id = id;
  resp->val = err ? 0 : val;
  resp->error = err ? -err : 0;
  resp->flags = 0;
  // ENOENT: the caller is gone, or its call was interrupted (it restarts and asks again).
  (void)::ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, resp);
}

// A pidfd for the calling thread (6.9+), else for its process: pidfd_getfd
// reads that task's descriptor table, which a process's threads share unless
// made with clone() without CLONE_FILES.
UniqueFd open_caller(pid_t tid) {
  int fd = sys::pidfd_open(tid, PIDFD_THREAD);
  if (fd < 0) fd = sys::pidfd_open(tid, 0);
  if (fd < 0) {
    std::string text = util::read_proc_text(("/proc/" + std::to_string(tid) + "/status").c_str());
    auto at = text.find("\nTgid:");
    if (at != std::string::npos) fd = sys::pidfd_open(static_cast<pid_t>(std::atol(text.c_str() + at + 6)), 0);
  }
  return UniqueFd(fd);
}

int read_caller(pid_t tid, uint64_t addr, void* out, size_t len) {
  if (len == 0) return 0;
  iovec local{out, len}, remote{reinterpret_cast<void*>(addr), len};
  util::RealIdsOf as_caller(tid);  // root without CAP_SYS_PTRACE (util/real_ids_of.hpp)
  ssize_t n = ::process_vm_readv(tid, &local, 1, &remote, 1, 0);
  if (n == static_cast<ssize_t>(len)) return 0;
  return n < 0 ? errno : EFAULT;
}

// The path a caller named, opened O_PATH the way its own connect() would find
// it: in its root, from its working directory for a relative name. Magic links
// (/proc/self/fd/N) are not followed: a name reaches a socket only through the
// sandbox's own tree. Returns 0 or the errno the caller gets.
int resolve_in_caller(pid_t tid, const std::string& path, UniqueFd* out) {
  const std::string proc = "/proc/" + std::to_string(tid);
  UniqueFd root, cwd;
  ssize_t cwd_len = -1;
  char link[PATH_MAX];
  {
    // (root without CAP_SYS_PTRACE: these links are checked with the filesystem ids)
    util::RealIdsOf as_caller(tid, /*fs_too=*/true);
    root.reset(::open((proc + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root) return errno == ENOENT ? ESRCH : errno;
    if (path[0] != '/') {
      cwd.reset(::open((proc + "/cwd").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
      if (!cwd) return errno;
      cwd_len = ::readlink((proc + "/cwd").c_str(), link, sizeof link - 1);
    }
  }
  constexpr uint64_t kResolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  std::string name = path;
  int base = root.get();
  if (path[0] != '/') {
    // The working directory as a path in the caller's root, when the kernel can
    // say it and it names the same directory there: then ".." and absolute
    // links in the name resolve exactly as for the caller. Otherwise from the
    // directory itself (".." stops there).
    base = cwd.get();
    ssize_t n = cwd_len;
    if (n > 0 && link[0] == '/') {
      std::string dir(link, static_cast<size_t>(n));
      UniqueFd again(sys::openat2(root.get(), dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC, kResolve));
      struct stat a {}, b {};
      if (again && ::fstat(again.get(), &a) == 0 && ::fstat(cwd.get(), &b) == 0 && a.st_dev == b.st_dev &&
          a.st_ino == b.st_ino) {
        name = dir + "/" + path;
        base = root.get();
      }
    }
  }
  int fd = sys::openat2(base, name.c_str(), O_PATH | O_CLOEXEC, kResolve);
  if (fd < 0) return errno == EXDEV ? EACCES : errno;  // EXDEV: a magic link on the way
  out->reset(fd);
  return 0;
}

// The kernel's dev_t (MKDEV: major << 20 | minor), as sock_diag reports it,
// against the one stat() encodes.
bool same_dev(uint32_t kernel_dev, dev_t dev) {
  return (kernel_dev >> 20) == major(dev) && (kernel_dev & 0xfffff) == minor(dev);
}

// One message of a call: where it goes and what it carries.
struct Message {
  sockaddr_storage addr{};
  socklen_t addrlen = 0;
  UniqueFd target;             // the judged inode of a pathname Unix socket (O_PATH)
  std::vector<char> data;      // sendto, sendmsg, sendmmsg: the caller's bytes, gathered
  std::vector<char> control;   // sendmsg, sendmmsg: ancillary data, descriptors replaced by ours
  std::vector<UniqueFd> fds;   // the descriptors SCM_RIGHTS passes (pidfd_getfd), open until sent
  uint64_t len_at = 0;         // sendmmsg: where the caller's msg_len of this message lies

  // The address the call uses: the judged inode itself for a pathname socket.
  const sockaddr* address() {
    if (target) {
      auto* un = reinterpret_cast<sockaddr_un*>(&addr);
      std::memset(un->sun_path, 0, sizeof un->sun_path);
      std::snprintf(un->sun_path, sizeof un->sun_path, "/proc/self/fd/%d", target.get());
      addrlen = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + std::strlen(un->sun_path) + 1);
    }
    return addrlen ? reinterpret_cast<const sockaddr*>(&addr) : nullptr;
  }
};

// One call as the supervisor performs it on the caller's behalf.
struct Call {
  uint64_t id = 0;
  size_t resp_size = 0;
  int nr = 0;
  pid_t tid = 0;
  UniqueFd caller;  // pidfd (SIGPIPE)
  UniqueFd sock;    // the caller's socket (pidfd_getfd)
  std::vector<Message> messages;  // connect and sendto: one
  int flags = 0;                  // the send calls' flags
  bool as_caller = false;         // take the caller's ids first (per thread)
  Creds creds;

  void perform(int listener) {
    if (as_caller) {
      // This thread only (raw syscalls: glibc would change every thread's):
      // connect()'s permission check and the peer's SO_PEERCRED see the caller.
      if (::syscall(SYS_setgroups, creds.groups.size(), creds.groups.data()) != 0 ||
          ::syscall(SYS_setresgid, -1, creds.egid, -1) != 0 || ::syscall(SYS_setresuid, -1, creds.euid, -1) != 0) {
        respond(listener, id, 0, EACCES, resp_size);
        return;
      }
    }
    if (nr == SYS_connect) {
      Message& m = messages.front();
      const sockaddr* sa = m.address();
      int r = ::connect(sock.get(), sa, m.addrlen);
      respond(listener, id, 0, r == 0 ? 0 : errno, resp_size);
      return;
    }
    // sendmmsg: the messages in order, each one's length written back; the
    // count sent, or the first error when none was.
    int64_t sent = 0;
    int err = 0;
    for (size_t i = 0; i < messages.size(); ++i) {
      Message& m = messages[i];
      const sockaddr* sa = m.address();
      iovec iov{m.data.data(), m.data.size()};
      msghdr mh{};
      mh.msg_name = const_cast<sockaddr*>(sa);
      mh.msg_namelen = sa ? m.addrlen : 0;
      mh.msg_iov = &iov;
      mh.msg_iovlen = 1;
      mh.msg_control = m.control.empty() ? nullptr : m.control.data();
      mh.msg_controllen = m.control.size();
      ssize_t r = ::sendmsg(sock.get(), &mh, flags | MSG_NOSIGNAL);
      if (r < 0) {
        err = errno;
        if (err == EPIPE && !(flags & MSG_NOSIGNAL)) sys::pidfd_send_signal(caller.get(), SIGPIPE);
        break;
      }
      if (nr != SYS_sendmmsg) {
        sent = r;
        break;
      }
      unsigned int len = static_cast<unsigned int>(r);
      iovec local{&len, sizeof len}, remote{reinterpret_cast<void*>(m.len_at), sizeof len};
      (void)::process_vm_writev(tid, &local, 1, &remote, 1, 0);
      ++sent;
    }
    if (nr == SYS_sendmmsg && sent > 0) err = 0;
    respond(listener, id, sent, err, resp_size);
  }
};

// The caller's msghdr at `at` read into `m`: its destination, its bytes
// gathered (at most kMaxData: a stream socket takes a short write, a larger
// datagram than a socket can carry fails there anyway), and its ancillary
// data. 0 or the errno the caller gets.
int read_message(pid_t tid, uint64_t at, Message* m) {
  msghdr mh{};
  if (int e = read_caller(tid, at, &mh, sizeof mh)) return e;
  if (mh.msg_namelen > sizeof m->addr) return EINVAL;
  if (mh.msg_name != nullptr && mh.msg_namelen > 0) {
    m->addrlen = mh.msg_namelen;
    if (int e = read_caller(tid, reinterpret_cast<uint64_t>(mh.msg_name), &m->addr, m->addrlen)) return e;
  }
  if (mh.msg_iovlen > UIO_MAXIOV) return EMSGSIZE;
  std::vector<iovec> iov(mh.msg_iovlen);
  if (int e = read_caller(tid, reinterpret_cast<uint64_t>(mh.msg_iov), iov.data(), iov.size() * sizeof(iovec)))
    return e;
  for (const iovec& v : iov) {
    size_t take = std::min(v.iov_len, kMaxData - m->data.size());
    if (take == 0) continue;
    size_t at_data = m->data.size();
    m->data.resize(at_data + take);
    if (int e = read_caller(tid, reinterpret_cast<uint64_t>(v.iov_base), m->data.data() + at_data, take)) return e;
  }
  // Ancillary data: as much as the kernel takes by default (net.core.optmem_max).
  if (mh.msg_controllen > (size_t{1} << 17)) return ENOBUFS;
  if (mh.msg_control == nullptr || mh.msg_controllen == 0) return 0;
  m->control.resize(mh.msg_controllen);
  if (int e = read_caller(tid, reinterpret_cast<uint64_t>(mh.msg_control), m->control.data(), m->control.size()))
    return e;
  return 0;
}

// The descriptors `m`'s SCM_RIGHTS passes, taken from the caller (pidfd) and
// put in their place; the caller's pid in SCM_CREDENTIALS as this process's
// namespace numbers it (it named itself in its own; the kernel checks the rest
// against the sender). 0 or the errno the caller gets.
int take_passed(pid_t tid, int caller, Message* m) {
  if (m->control.empty()) return 0;
  msghdr ours{};
  ours.msg_control = m->control.data();
  ours.msg_controllen = m->control.size();
  for (cmsghdr* c = CMSG_FIRSTHDR(&ours); c != nullptr; c = CMSG_NXTHDR(&ours, c)) {
    // The caller wrote these headers: a length past the buffer is refused, as
    // the kernel refuses it, before anything is read or written through it.
    const size_t offset = static_cast<size_t>(reinterpret_cast<char*>(c) - m->control.data());
    if (c->cmsg_len < CMSG_LEN(0) || c->cmsg_len > m->control.size() - offset) return EINVAL;
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      if (m->fds.size() + n > kMaxPassedPerMessage) return EINVAL;  // the kernel's SCM_MAX_FD
      auto* fds = reinterpret_cast<int*>(CMSG_DATA(c));
      for (size_t i = 0; i < n; ++i) {
        int theirs = 0;
        std::memcpy(&theirs, fds + i, sizeof theirs);
        util::RealIdsOf as_caller(tid);
        UniqueFd mine(static_cast<int>(::syscall(SYS_pidfd_getfd, caller, theirs, 0)));
        if (!mine) return EBADF;
        int ours_fd = mine.get();
        std::memcpy(fds + i, &ours_fd, sizeof ours_fd);
        m->fds.push_back(std::move(mine));
      }
    } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
               c->cmsg_len >= CMSG_LEN(sizeof(ucred))) {
      ucred cr{};
      std::memcpy(&cr, CMSG_DATA(c), sizeof cr);
      std::string text = util::read_proc_text(("/proc/" + std::to_string(tid) + "/status").c_str());
      auto tg = text.find("\nTgid:");
      if (tg != std::string::npos) cr.pid = static_cast<pid_t>(std::atol(text.c_str() + tg + 6));
      std::memcpy(CMSG_DATA(c), &cr, sizeof cr);
    }
  }
  return 0;
}

}  // namespace

SocketAddressGate::SocketAddressGate(UniqueFd sock_diag, Allowed allowed, AuditLog* audit)
    : sock_diag_(std::move(sock_diag)), allowed_(std::move(allowed)), audit_(audit) {}

bool SocketAddressGate::judges(int nr) {
  return nr == SYS_connect || nr == SYS_sendto || nr == SYS_sendmsg || nr == SYS_sendmmsg;
}

int SocketAddressGate::bound_in_namespace(int sock_diag, dev_t dev, ino_t ino, bool* found) {
  *found = false;
  struct {
    nlmsghdr nlh;
    unix_diag_req req;
  } q{};
  q.nlh.nlmsg_len = sizeof q;
  q.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  q.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  q.req.sdiag_family = AF_UNIX;
  q.req.udiag_states = ~0u;
  q.req.udiag_show = UDIAG_SHOW_VFS;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(sock_diag, &q, sizeof q, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) return errno;
  alignas(nlmsghdr) char buf[32768];
  for (;;) {
    ssize_t n = ::recv(sock_diag, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EPROTO;
    size_t left = static_cast<size_t>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
      if (h->nlmsg_type == NLMSG_DONE) return 0;
      if (h->nlmsg_type == NLMSG_ERROR) {
        auto* err = static_cast<nlmsgerr*>(NLMSG_DATA(h));
        return err->error ? -err->error : EPROTO;
      }
      if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(unix_diag_msg))) continue;
      auto* msg = static_cast<unix_diag_msg*>(NLMSG_DATA(h));
      auto* attr = reinterpret_cast<rtattr*>(msg + 1);
      unsigned int attrs_len = h->nlmsg_len - NLMSG_LENGTH(sizeof *msg);
      for (; RTA_OK(attr, attrs_len); attr = RTA_NEXT(attr, attrs_len)) {
        if (attr->rta_type != UNIX_DIAG_VFS || RTA_PAYLOAD(attr) < sizeof(unix_diag_vfs)) continue;
        auto* vfs = static_cast<unix_diag_vfs*>(RTA_DATA(attr));
        // The table holds the inode number's low 32 bits.
        if (vfs->udiag_vfs_ino == static_cast<uint32_t>(ino) && same_dev(vfs->udiag_vfs_dev, dev)) *found = true;
      }
    }
  }
}

void SocketAddressGate::answer(int listener, const seccomp_notif& req, size_t resp_size) {
  const pid_t tid = static_cast<pid_t>(req.pid);  // in the supervisor's pid namespace
  const auto* args = req.data.args;
  const int nr = req.data.nr;
  const bool is_connect = nr == SYS_connect;
  auto reply = [&](int err) { respond(listener, req.id, 0, err, resp_size); };
  auto as_caller_sees = [](int e) { return e == EPERM ? EACCES : e; };

  Call call;
  call.id = req.id;
  call.resp_size = resp_size;
  call.nr = nr;
  call.tid = tid;
  call.caller = open_caller(tid);
  if (!call.caller) return reply(ESRCH);
  if (nr == SYS_connect || nr == SYS_sendto) {
    Message m;
    const uint64_t addr_ptr = is_connect ? args[1] : args[4];
    const int64_t addrlen = static_cast<int>(is_connect ? args[2] : args[5]);
    if (addrlen < 0 || addrlen > static_cast<int64_t>(sizeof m.addr)) return reply(EINVAL);  // as the kernel says
    m.addrlen = static_cast<socklen_t>(addrlen);
    if (int e = read_caller(tid, addr_ptr, &m.addr, m.addrlen)) return reply(as_caller_sees(e));
    if (!is_connect) {
      call.flags = static_cast<int>(args[3]);
      m.data.resize(std::min<uint64_t>(args[2], kMaxData));
      if (int e = read_caller(tid, args[1], m.data.data(), m.data.size())) return reply(as_caller_sees(e));
    }
    call.messages.push_back(std::move(m));
  } else if (nr == SYS_sendmsg) {
    call.flags = static_cast<int>(args[2]);
    Message m;
    if (int e = read_message(tid, args[1], &m)) return reply(as_caller_sees(e));
    call.messages.push_back(std::move(m));
  } else {  // sendmmsg: at most UIO_MAXIOV messages, as the kernel caps them
    call.flags = static_cast<int>(args[3]);
    const unsigned int vlen = std::min<unsigned int>(static_cast<unsigned int>(args[2]), UIO_MAXIOV);
    if (vlen == 0) return respond(listener, req.id, 0, 0, resp_size);
    for (unsigned int i = 0; i < vlen; ++i) {
      const uint64_t at = args[1] + uint64_t{i} * sizeof(mmsghdr);
      Message m;
      m.len_at = at + offsetof(mmsghdr, msg_len);
      if (int e = read_message(tid, at, &m)) {
        if (i == 0) return reply(as_caller_sees(e));
        break;  // the ones before are sent; the caller meets the error when it sends the rest
      }
      call.messages.push_back(std::move(m));
    }
  }
  // The pid could be another process by now: everything read so far is
  // trusted only while the notification is still the caller's.
  uint64_t id = req.id;
  if (::ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) != 0) return;
  {
    util::RealIdsOf as_caller(tid);  // root without CAP_SYS_PTRACE (util/real_ids_of.hpp)
    call.sock.reset(static_cast<int>(::syscall(SYS_pidfd_getfd, call.caller.get(), static_cast<int>(args[0]), 0)));
  }
  if (!call.sock) return reply(errno == EPERM ? EACCES : EBADF);
  int domain = 0;
  socklen_t dlen = sizeof domain;
  if (::getsockopt(call.sock.get(), SOL_SOCKET, SO_DOMAIN, &domain, &dlen) != 0) return reply(ENOTSOCK);
  for (size_t i = 0; i < call.messages.size(); ++i) {
    if (int e = take_passed(tid, call.caller.get(), &call.messages[i])) {
      if (i == 0) return reply(e);
      call.messages.resize(i);
      break;
    }
  }

  // Each message's destination judged; a refused one ends the call there (the
  // ones before it are sent, as the kernel would send them before an error).
  for (size_t i = 0; i < call.messages.size(); ++i) {
    Message& m = call.messages[i];
    const auto* un = reinterpret_cast<const sockaddr_un*>(&m.addr);
    const size_t path_off = offsetof(sockaddr_un, sun_path);
    const bool pathname = domain == AF_UNIX && m.addrlen > path_off && m.addr.ss_family == AF_UNIX &&
                          un->sun_path[0] != '\0';
    if (allowed_.inet_loopback_only && (domain == AF_INET || domain == AF_INET6) && m.addrlen > 0) {
      std::string where;
      if (inet_destination_allowed(m.addr, m.addrlen, allowed_.inet_ports, &where)) continue;
      ++refused_;
      ++refused_inet_[where];
      if (audit_)
        audit_->write({{"event", "inet_refused"},
                       {"syscall", syscall_name(nr)},
                       {"destination", where},
                       {"why", "the sandbox shares the host's network: only the proxy on loopback is reachable"},
                       {"pid", tid},
                       {"command", read_comm(tid)}});
      if (i == 0) return reply(EACCES);
      call.messages.resize(i);
      break;
    }
    // The host's network: an abstract name is the host's namespace, and the
    // call made here, outside the sandbox's Landlock domain, would pass its
    // scoping. Refused (the sandbox's own abstract sockets with them).
    if (allowed_.inet_loopback_only && domain == AF_UNIX && m.addrlen > path_off && m.addr.ss_family == AF_UNIX &&
        !pathname) {
      std::string where = "@" + std::string(un->sun_path + 1, m.addrlen - path_off - 1);
      ++refused_;
      ++refused_paths_[where];
      if (audit_)
        audit_->write({{"event", "unix_socket_refused"},
                       {"syscall", syscall_name(nr)},
                       {"path", where},
                       {"why", "an abstract unix socket, and the sandbox shares the host's network"},
                       {"pid", tid},
                       {"command", read_comm(tid)}});
      if (i == 0) return reply(EPERM);
      call.messages.resize(i);
      break;
    }
    if (!pathname) continue;
    std::string path(un->sun_path, strnlen(un->sun_path, m.addrlen - path_off));
    int err = resolve_in_caller(tid, path, &m.target);
    struct stat st {};
    if (err == 0 && ::fstat(m.target.get(), &st) != 0) err = EACCES;
    if (err == 0 && !S_ISSOCK(st.st_mode)) err = ECONNREFUSED;  // what connect() says of a file that is no socket
    if (err == 0) {
      bool own = false;
      std::string why = "bound outside the sandbox";
      if (sock_diag_) {
        if (int e = bound_in_namespace(sock_diag_.get(), st.st_dev, st.st_ino, &own)) {
          own = false;
          why = std::string("the sandbox's own sockets could not be listed: ") + std::strerror(e);
        }
      } else {
        why = "the layer gave no way to list the sandbox's own sockets";
      }
      bool allowed = own || allowed_.all;
      for (size_t k = 0; !allowed && k < allowed_.paths.size(); ++k) {
        UniqueFd a;
        struct stat ast {};
        allowed = resolve_in_caller(tid, allowed_.paths[k], &a) == 0 && ::fstat(a.get(), &ast) == 0 &&
                  ast.st_dev == st.st_dev && ast.st_ino == st.st_ino;
      }
      if (!allowed && i > 0) {  // sendmmsg: sent up to here; the caller meets the refusal when it sends the rest
        call.messages.resize(i);
        break;
      }
      if (!allowed) {
        err = EACCES;
        ++refused_;
        ++refused_paths_[path];
        if (audit_)
          audit_->write({{"event", "unix_socket_refused"},
                         {"syscall", syscall_name(nr)},
                         {"path", path},
                         {"why", why},
                         {"pid", tid},
                         {"command", read_comm(tid)}});
      }
    }
    if (err == 0) continue;
    if (i == 0) return reply(err);
    call.messages.resize(i);
    break;
  }
  // What may wait (a blocking socket: a full listener's backlog, a TCP
  // handshake) runs on a thread of its own, and so does a call made with the
  // caller's ids: the supervisor's loop neither waits nor changes its own.
  int fl = ::fcntl(call.sock.get(), F_GETFL);
  bool may_block = fl < 0 || !(fl & O_NONBLOCK);
  if (!is_connect && (call.flags & MSG_DONTWAIT)) may_block = false;
  int type = 0;
  socklen_t tlen = sizeof type;
  // A datagram to an address of the sandbox's own netns waits for no peer (a resolver's query).
  if (!is_connect && domain != AF_UNIX && ::getsockopt(call.sock.get(), SOL_SOCKET, SO_TYPE, &type, &tlen) == 0 &&
      type == SOCK_DGRAM)
    may_block = false;
  if (domain == AF_UNIX && ::geteuid() == 0) {
    if (!read_creds(tid, &call.creds)) return reply(ESRCH);
    call.as_caller = call.creds.euid != 0;
  }
  if (!may_block && !call.as_caller) return call.perform(listener);
  // The thread answers on a duplicate of the listener: it may end after the supervisor's loop.
  // At most kMaxWaiting at once (each is a caller blocked in its call, so the
  // sandbox's pids limit bounds them too): past that, EAGAIN.
  if (waiting_->load() >= kMaxWaiting) return reply(EAGAIN);
  UniqueFd own_listener(::fcntl(listener, F_DUPFD_CLOEXEC, 0));
  if (!own_listener) return reply(EAGAIN);
  try {
    ++*waiting_;
    std::thread([c = std::move(call), l = std::move(own_listener), w = waiting_]() mutable {
      c.perform(l.get());
      --*w;
    }).detach();
  } catch (const std::system_error&) {
    --*waiting_;
    reply(EAGAIN);
  }
}

std::string SocketAddressGate::summary() const {
  auto list = [](const std::map<std::string, size_t>& m) {
    size_t total = 0;
    std::string s;
    for (const auto& [p, n] : m) {
      s += (total ? ", " : "") + p + " (" + std::to_string(n) + ")";
      total += n;
    }
    return std::make_pair(total, s);
  };
  std::string out;
  if (auto [n, s] = list(refused_paths_); n > 0)
    out = std::to_string(n) + (n == 1 ? " refused connection" : " refused connections") +
          " to Unix sockets bound outside the sandbox: " + s;
  if (auto [n, s] = list(refused_inet_); n > 0)
    out += (out.empty() ? "" : "; ") + std::to_string(n) + (n == 1 ? " refused connection" : " refused connections") +
           " to network addresses (host network: only the proxy on loopback): " + s;
  return out;
}

bool inet_destination_allowed(const sockaddr_storage& addr, socklen_t len, const std::vector<uint16_t>& ports,
                              std::string* where) {
  char text[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  bool loopback = false;
  if (addr.ss_family == AF_UNSPEC) return true;  // connect(AF_UNSPEC): dissolves an association, reaches no one
  if (addr.ss_family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    port = ntohs(in->sin_port);
    loopback = in->sin_addr.s_addr == htonl(INADDR_LOOPBACK);
  } else if (addr.ss_family == AF_INET6 && len >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    port = ntohs(in6->sin6_port);
    static const uint8_t kMapped127[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
    loopback = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) || std::memcmp(&in6->sin6_addr, kMapped127, 16) == 0;
  }
  if (where) *where = std::string(text) + ":" + std::to_string(port);
  return loopback && port != 0 && std::find(ports.begin(), ports.end(), port) != ports.end();
}

}  // namespace exg::sandbox
