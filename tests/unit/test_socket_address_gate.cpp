// The supervisor's judgement of connect() (sandbox/socket_address_gate.hpp):
// which pathname Unix sockets count as bound inside a network namespace, asked
// of the real kernel through NETLINK_SOCK_DIAG. The calls it performs for a
// sandbox are tried for real by it.test_unix_sockets and it.test_session.
#include <gtest/gtest.h>
#include <linux/netlink.h>
#include <sched.h>
#include <fcntl.h>
#include <poll.h>
#include <csignal>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "walls/seccomp.hpp"
#include "walls/seccomp_rules.hpp"
#include "sandbox/socket_address_gate.hpp"
#include "sandbox/violations.hpp"
#include "listener_handover.hpp"
#include "temp_dir.hpp"

namespace exg {
namespace {

UniqueFd bound_listener(const std::string& path, int type = SOCK_STREAM) {
  UniqueFd s(::socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  if (!s || ::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return UniqueFd();
  if (type == SOCK_STREAM && ::listen(s.get(), 1) != 0) return UniqueFd();
  return s;
}

// A listener on `path` bound in a network namespace of its own, in a child
// that exits 9 if it ever accepts a connection or receives a datagram
// (SIGKILLed otherwise at the end). up() is false where no network namespace
// can be made.
class ListenerInAnotherNetns {
 public:
  explicit ListenerInAnotherNetns(const std::string& path, int type = SOCK_STREAM) {
    int ready[2];
    if (::pipe(ready) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      if (::unshare(CLONE_NEWNET) != 0 && ::unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) ::_exit(2);
      auto s = bound_listener(path, type);
      if (!s) ::_exit(3);
      ::chmod(path.c_str(), 0777);
      (void)::write(ready[1], "x", 1);
      char b[16];
      for (;;)
        if (type == SOCK_STREAM ? ::accept(s.get(), nullptr, nullptr) >= 0 : ::recv(s.get(), b, sizeof b, 0) >= 0)
          ::_exit(9);
    }
    ::close(ready[1]);
    char c;
    up_ = pid_ > 0 && ::read(ready[0], &c, 1) == 1;
    ::close(ready[0]);
  }
  bool up() const { return up_; }
  // Ends it: true when it never accepted a connection.
  bool received_nothing() {
    if (pid_ <= 0) return true;
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
    return WIFSIGNALED(st);
  }
  ~ListenerInAnotherNetns() { (void)received_nothing(); }

 private:
  pid_t pid_ = -1;
  bool up_ = false;
};

bool found_in(int diag, const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  bool found = false;
  EXPECT_EQ(sandbox::SocketAddressGate::bound_in_namespace(diag, st.st_dev, st.st_ino, &found), 0);
  return found;
}

TEST(SocketAddressGate, SocketsBoundInTheNamespaceAreFoundByInode) {
  test_support::TempDir dir("exg-gate");
  UniqueFd diag(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  ASSERT_TRUE(diag);
  auto stream = bound_listener(dir.path() + "/s.sock");
  auto dgram = bound_listener(dir.path() + "/d.sock", SOCK_DGRAM);
  ASSERT_TRUE(stream && dgram);
  EXPECT_TRUE(found_in(diag.get(), dir.path() + "/s.sock"));
  EXPECT_TRUE(found_in(diag.get(), dir.path() + "/d.sock"));
  // A plain file, and the socket file of a listener that has gone: nothing bound there.
  ASSERT_EQ(::close(::creat((dir.path() + "/plain").c_str(), 0600)), 0);
  EXPECT_FALSE(found_in(diag.get(), dir.path() + "/plain"));
  stream.reset();
  EXPECT_FALSE(found_in(diag.get(), dir.path() + "/s.sock"));
}

// The inode a name reaches, not the name: a socket renamed onto the name of
// one bound in the namespace is judged by its own inode.
TEST(SocketAddressGate, ARenamedSocketIsJudgedByItsInode) {
  test_support::TempDir dir("exg-gate");
  UniqueFd diag(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  ASSERT_TRUE(diag);
  auto mine = bound_listener(dir.path() + "/mine.sock");
  ASSERT_TRUE(mine);
  // "Another namespace's" socket: a socket file whose listener is gone stands in (its
  // inode is bound by no socket of this namespace).
  { auto other = bound_listener(dir.path() + "/other.sock"); }
  ASSERT_EQ(::rename((dir.path() + "/other.sock").c_str(), (dir.path() + "/mine.sock").c_str()), 0);
  EXPECT_FALSE(found_in(diag.get(), dir.path() + "/mine.sock"));
}

// A socket bound in another network namespace is not this namespace's own.
TEST(SocketAddressGate, ASocketOfAnotherNamespaceIsNotOwn) {
  test_support::TempDir dir("exg-gate");
  UniqueFd diag(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  ASSERT_TRUE(diag);
  ListenerInAnotherNetns other(dir.path() + "/netns.sock");
  if (!other.up()) GTEST_SKIP() << "no network namespace could be made here";
  EXPECT_FALSE(found_in(diag.get(), dir.path() + "/netns.sock"));
}

// Serves a child's judged calls (this process its supervisor) until it ends;
// its wait status. Once the filter has no user (POLLHUP) the child is exiting:
// waited for without polling (under ASan its exit, the teardown of a huge
// address space, outlasts a short poll loop). Stuck for 10 s: killed.
int serve_until_exit(sandbox::SyscallViolations& violations, pid_t child) {
  int status = -1;
  bool reaped = false;
  bool filter_unused = false;
  for (int i = 0; i < 1000 && !filter_unused && !reaped; ++i) {
    pollfd pf{violations.fd(), POLLIN, 0};
    if (::poll(&pf, 1, 10) > 0) {
      if (pf.revents & POLLIN)
        violations.on_readable();
      else if (pf.revents & (POLLHUP | POLLERR | POLLNVAL))
        filter_unused = true;
    }
    reaped = ::waitpid(child, &status, WNOHANG) == child;
  }
  if (!reaped && !filter_unused) ::kill(child, SIGKILL);
  if (!reaped) ::waitpid(child, &status, 0);
  return status;
}

// The child's half: under the sandbox's notify program (no_new_privs first),
// its listener handed to the test on `sock`. False when a step failed.
bool enter_filter(int sock) {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  int listener = walls::install_seccomp(walls::prebuilt_seccomp_program());
  if (listener < 0) return false;
  bool handed = test_support::hand_over_listener(sock, listener);
  ::close(listener);
  return handed;
}

// This process as the supervisor of `child` through `gate`: takes the child's
// listener (sent on `sock`) and serves it until the child ends; its exit code
// (-1, with a test failure, when the listener could not be taken or the child
// did not end by exit).
int supervise(int sock, pid_t child, sandbox::SocketAddressGate& gate) {
  UniqueFd listener = test_support::take_listener(sock, child);
  if (!listener) {
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    ADD_FAILURE() << "the child's listener could not be taken";
    return -1;
  }
  sandbox::SyscallViolations violations(std::move(listener), nullptr, &gate);
  int status = serve_until_exit(violations, child);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  ADD_FAILURE() << "the child did not end by exit (wait status " << status << ", signal "
                << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << ")";
  return -1;
}

// The whole judgement on the real kernel: a child under the sandbox's notify
// program, this process its supervisor through the gate. The child reaches a
// socket bound in its own network namespace (by absolute and relative name,
// and abstract), not one bound in another namespace (that namespace's listener
// sees nothing), and a sendto() with an address is judged the same way.
TEST(SocketAddressGate, AChildUnderTheFilterReachesOnlyItsNamespacesSockets) {
  test_support::TempDir dir("exg-gate");
  const std::string other = dir.path() + "/other.sock";
  // "The host": a listener in another network namespace.
  ListenerInAnotherNetns host(other);
  if (!host.up()) GTEST_SKIP() << "no network namespace could be made here";

  int sp[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(sp[0]);
    auto mine = bound_listener(dir.path() + "/mine.sock");
    if (!mine || ::chdir(dir.path().c_str()) != 0) ::_exit(20);
    if (!enter_filter(sp[1])) ::_exit(21);
    auto try_connect = [](const char* name, size_t len) {
      int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      std::memcpy(a.sun_path, name, len);
      int r = ::connect(s, reinterpret_cast<sockaddr*>(&a), static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len));
      int e = errno;
      ::close(s);
      return r == 0 ? 0 : e;
    };
    std::string abs_mine = dir.path() + "/mine.sock";
    if (try_connect(abs_mine.c_str(), abs_mine.size() + 1) != 0) ::_exit(30);
    if (try_connect("mine.sock", 10) != 0) ::_exit(31);
    if (try_connect(other.c_str(), other.size() + 1) != EACCES) ::_exit(32);
    if (try_connect("other.sock", 11) != EACCES) ::_exit(33);
    int abstract = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un an{};
    an.sun_family = AF_UNIX;
    std::memcpy(an.sun_path, "\0exg-gate-test", 14);
    socklen_t alen = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 14);
    if (::bind(abstract, reinterpret_cast<sockaddr*>(&an), alen) != 0 || ::listen(abstract, 1) != 0) ::_exit(34);
    if (try_connect("\0exg-gate-test", 14) != 0) ::_exit(35);
    if (try_connect("/nonexistent-exg/x.sock", 24) != ENOENT) ::_exit(36);
    int d = ::socket(AF_UNIX, SOCK_DGRAM, 0);
    sockaddr_un od{};
    od.sun_family = AF_UNIX;
    std::memcpy(od.sun_path, other.c_str(), other.size());
    if (::sendto(d, "EXG", 3, 0, reinterpret_cast<sockaddr*>(&od), sizeof od) >= 0 || errno != EACCES) ::_exit(37);
    ::_exit(0);
  }
  ::close(sp[1]);
  // This process: the supervisor.
  sandbox::SocketAddressGate gate(UniqueFd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG)), {},
                                  nullptr);
  EXPECT_EQ(supervise(sp[0], child, gate), 0) << "the step that failed (see the child's _exit codes)";
  EXPECT_TRUE(host.received_nothing()) << "the other namespace's listener accepted a connection";
  EXPECT_EQ(gate.refused(), 3u);
  EXPECT_NE(gate.summary().find(other), std::string::npos) << gate.summary();
}


// sendmsg() and sendmmsg() carry their destination where the filter cannot
// read it: each comes to the supervisor, which judges every message's
// destination and sends it itself. A datagram reaches a socket bound in the
// child's own namespace, not one bound in another (that listener receives
// nothing); sendmmsg sends up to the refused message and says how many;
// descriptors passed with SCM_RIGHTS arrive as the same files.
TEST(SocketAddressGate, SendmsgAndSendmmsgAreJudgedPerMessage) {
  test_support::TempDir dir("exg-gate");
  const std::string other = dir.path() + "/other.dgram";
  ListenerInAnotherNetns host(other, SOCK_DGRAM);
  if (!host.up()) GTEST_SKIP() << "no network namespace could be made here";

  int sp[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(sp[0]);
    const std::string mine_path = dir.path() + "/mine.dgram";
    auto mine = bound_listener(mine_path, SOCK_DGRAM);
    if (!mine) ::_exit(20);
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_DGRAM, 0, pair) != 0) ::_exit(21);
    if (!enter_filter(sp[1])) ::_exit(22);
    auto address = [](const std::string& path) {
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
      return a;
    };
    sockaddr_un to_mine = address(mine_path), to_other = address(other);
    int d = ::socket(AF_UNIX, SOCK_DGRAM, 0);
    char payload[] = "EXG-judged";
    iovec iov{payload, sizeof payload};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    // One message to each.
    mh.msg_name = &to_mine;
    mh.msg_namelen = sizeof to_mine;
    if (::sendmsg(d, &mh, 0) != static_cast<ssize_t>(sizeof payload)) ::_exit(30);
    char got[64] = {};
    if (::recv(mine.get(), got, sizeof got, MSG_DONTWAIT) != static_cast<ssize_t>(sizeof payload) ||
        std::strcmp(got, payload) != 0)
      ::_exit(31);
    mh.msg_name = &to_other;
    mh.msg_namelen = sizeof to_other;
    if (::sendmsg(d, &mh, 0) >= 0 || errno != EACCES) ::_exit(32);
    // sendmmsg: mine, other, mine: the first sent, the second refused, so 1.
    mmsghdr batch[3]{};
    sockaddr_un* dests[3] = {&to_mine, &to_other, &to_mine};
    for (int i = 0; i < 3; ++i) {
      batch[i].msg_hdr.msg_iov = &iov;
      batch[i].msg_hdr.msg_iovlen = 1;
      batch[i].msg_hdr.msg_name = dests[i];
      batch[i].msg_hdr.msg_namelen = sizeof(sockaddr_un);
    }
    if (::sendmmsg(d, batch, 3, 0) != 1) ::_exit(33);
    if (batch[0].msg_len != sizeof payload) ::_exit(34);
    if (::recv(mine.get(), got, sizeof got, MSG_DONTWAIT) != static_cast<ssize_t>(sizeof payload)) ::_exit(35);
    if (::sendmmsg(d, batch + 1, 2, 0) >= 0 || errno != EACCES) ::_exit(36);
    // A descriptor passed with SCM_RIGHTS on a connected pair arrives as the same file.
    int passed = ::open("/dev/null", O_RDONLY);
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr with_fd{};
    with_fd.msg_iov = &iov;
    with_fd.msg_iovlen = 1;
    with_fd.msg_control = control;
    with_fd.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&with_fd);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &passed, sizeof passed);
    if (::sendmsg(pair[0], &with_fd, 0) != static_cast<ssize_t>(sizeof payload)) ::_exit(40);
    alignas(cmsghdr) char in_control[CMSG_SPACE(sizeof(int))] = {};
    iovec in_iov{got, sizeof got};
    msghdr in{};
    in.msg_iov = &in_iov;
    in.msg_iovlen = 1;
    in.msg_control = in_control;
    in.msg_controllen = sizeof in_control;
    if (::recvmsg(pair[1], &in, MSG_DONTWAIT) != static_cast<ssize_t>(sizeof payload)) ::_exit(41);
    cmsghdr* ic = CMSG_FIRSTHDR(&in);
    if (ic == nullptr || ic->cmsg_type != SCM_RIGHTS) ::_exit(42);
    int arrived = -1;
    std::memcpy(&arrived, CMSG_DATA(ic), sizeof arrived);
    struct stat a {}, b {};
    if (::fstat(arrived, &a) != 0 || ::fstat(passed, &b) != 0 || a.st_ino != b.st_ino || a.st_dev != b.st_dev)
      ::_exit(43);
    // Ancillary data whose header claims more than the buffer holds: EINVAL, as
    // the kernel answers, and the supervisor reads nothing past the buffer.
    c->cmsg_len = 4096;
    if (::sendmsg(pair[0], &with_fd, 0) >= 0 || errno != EINVAL) ::_exit(44);
    ::_exit(0);
  }
  ::close(sp[1]);
  sandbox::SocketAddressGate gate(UniqueFd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG)), {},
                                  nullptr);
  EXPECT_EQ(supervise(sp[0], child, gate), 0) << "the step that failed (see the child's _exit codes)";
  EXPECT_TRUE(host.received_nothing()) << "the other namespace's socket received a datagram";
  EXPECT_EQ(gate.refused(), 2u) << "the sendmsg and the second sendmmsg (the first stops before its refused message)";
}

}  // namespace
}  // namespace exg
