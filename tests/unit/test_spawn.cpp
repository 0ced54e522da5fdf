// process::spawn on the real kernel, without namespaces (clone flags 0; the
// transparent capture's handshake in a user and network namespace), each
// child in a cgroup of its own as root (none as a user): the handshake's
// outcomes, that the child is in its cgroup once told so, and that every
// failure leaves no child behind (the scope guard kills and reaps it).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <string>

#include "process/spawn.hpp"
#include "process/handshake.hpp"
#include "process/netns_setup.hpp"
#include "process/transparent_capture.hpp"
#include "util/fd_passing.hpp"

using namespace exg;

namespace {

// A spec with a cgroup id of its own.
process::SpawnSpec fresh_spec() {
  static int n = 0;
  process::SpawnSpec s;
  s.cgroup_id = "unit-spawn-" + std::to_string(++n);
  return s;
}

// Waits for "go" on the setup socket, then runs `then` (which, as the real
// children do, reads "in cgroup" before it says ready).
process::SpawnSpec spec_with(std::function<void(int sync_fd)> then) {
  process::SpawnSpec s = fresh_spec();
  s.child = [then](const process::SpawnFds& f) {
    char buf[64];
    if (::recv(f.sync_fd, buf, sizeof buf, 0) < 1 || buf[0] != process::kMsgGo) ::_exit(3);
    then(f.sync_fd);
    ::_exit(0);
  };
  return s;
}

// The second message: "in cgroup" (init may start), as the real children take it.
bool wait_in_cgroup(int sync) { return process::await_in_cgroup(sync, nullptr) == 0; }

// Every cgroup directory of the sandbox lists pid.
bool in_its_cgroup(const layer::Sandbox& sb) {
  for (const auto& d : sb.cgroup.dirs()) {
    std::ifstream f(d + "/cgroup.procs");
    bool found = false;
    for (pid_t p; f >> p;) found |= p == sb.pid;
    if (!found) return false;
  }
  return true;
}

bool reaped(pid_t pid) { return ::waitpid(pid, nullptr, WNOHANG) < 0 && errno == ECHILD; }

// Spawns a spec that fails on the parent's side after the clone: the error
// is `want`, and the child, killed by the scope guard, is reaped.
void expect_unwound(process::SpawnSpec s, const std::string& want) {
  pid_t seen = -1;
  s.map_ids = [&seen](pid_t p) -> Result<void> {
    seen = p;
    return {};
  };
  auto r = process::spawn(std::move(s));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().str(), want);
  ASSERT_GT(seen, 0);
  EXPECT_TRUE(reaped(seen));
}

}  // namespace

TEST(Spawn, ReadyHandsBackTheRunningChild) {
  auto s = spec_with([](int sync) {
    if (!wait_in_cgroup(sync)) ::_exit(4);
    char r = process::kMsgReady;
    (void)::send(sync, &r, 1, 0);
    ::pause();  // runs until killed
  });
  auto sb = process::spawn(std::move(s));
  ASSERT_TRUE(sb) << sb.error().str();
  EXPECT_GT(sb->pid, 0);
  EXPECT_TRUE(sb->pidfd);
  EXPECT_FALSE(sb->seccomp_listener);
  EXPECT_EQ(::kill(sb->pid, 0), 0);  // committed: still running
  // Born in it (v2) or moved itself in when told (v1).
  if (::geteuid() == 0) {
    EXPECT_TRUE(sb->cgroup.active());
  }
  EXPECT_TRUE(in_its_cgroup(*sb));
  ::kill(sb->pid, SIGKILL);
  EXPECT_EQ(::waitpid(sb->pid, nullptr, 0), sb->pid);
}

TEST(Spawn, SetupErrorIsReportedAndTheChildReaped) {
  pid_t seen = -1;
  auto s = spec_with([](int sync) {
    std::string m(1, process::kMsgError);
    m += "mount /x: Permission denied";
    (void)::send(sync, m.data(), m.size(), 0);
    ::pause();  // the guard must kill it
  });
  s.map_ids = [&seen](pid_t p) -> Result<void> {
    seen = p;
    return {};
  };
  s.setup_what = "setup (test)";
  auto sb = process::spawn(std::move(s));
  ASSERT_FALSE(sb);
  EXPECT_EQ(sb.error().str(), "setup (test): mount /x: Permission denied");
  ASSERT_GT(seen, 0);
  EXPECT_TRUE(reaped(seen));
}

// The supervisor's work done while the child sets up (LaunchOptions::meanwhile)
// is done before "in cgroup" (the command could start then); when it fails,
// the launch fails, and the child, never told, is killed and reaped.
TEST(Spawn, MeanwhileRunsBeforeInCgroupAndItsFailureUnwinds) {
  int done[2];
  ASSERT_EQ(::pipe2(done, O_NONBLOCK), 0);
  const int rd = done[0];
  auto s = spec_with([rd](int sync) {
    if (!wait_in_cgroup(sync)) ::_exit(4);
    char b = 0;
    std::string m(1, ::read(rd, &b, 1) == 1 && b == 'm' ? process::kMsgReady : process::kMsgError);
    if (m[0] == process::kMsgError) m += "in cgroup before meanwhile was done";
    (void)::send(sync, m.data(), m.size(), 0);
    ::pause();
  });
  const int wr = done[1];
  s.meanwhile = [wr]() -> Result<void> {
    ::usleep(20000);  // slower than the child: the order must hold anyway
    return ::write(wr, "m", 1) == 1 ? Result<void>{} : fail(Error::sys("write"));
  };
  auto sb = process::spawn(std::move(s));
  ASSERT_TRUE(sb) << sb.error().str();
  ::kill(sb->pid, SIGKILL);
  ::waitpid(sb->pid, nullptr, 0);

  auto failing = spec_with([](int sync) {
    if (wait_in_cgroup(sync)) ::_exit(7);  // must never come
    ::_exit(0);
  });
  failing.meanwhile = []() -> Result<void> { return fail(Error::msg("snapshot /w", "too deep")); };
  expect_unwound(std::move(failing), "snapshot /w: too deep");
  ::close(done[0]);
  ::close(done[1]);
}

// The idmapped mounts' trees are made after "go" and reach the child in
// order, more than one message's worth; failing to make them unwinds.
TEST(Spawn, IdmappedTreesComeAfterGoInOrder) {
  constexpr size_t kTrees = 11;  // two messages
  auto s = spec_with([](int sync) {
    int trees[kTrees];
    if (!process::await_idmapped_trees(sync, trees, kTrees)) ::_exit(8);
    std::string m(1, process::kMsgReady);
    for (size_t k = 0; k < kTrees; ++k) {
      char b = 0;  // each a pipe's read end holding its own index
      if (::read(trees[k], &b, 1) != 1 || b != static_cast<char>('a' + k)) {
        m = std::string(1, process::kMsgError) + "tree " + std::to_string(k) + " out of order";
        break;
      }
    }
    if (m[0] == process::kMsgReady && !wait_in_cgroup(sync)) ::_exit(4);
    (void)::send(sync, m.data(), m.size(), 0);
    ::pause();
  });
  s.idmapped_trees = []() -> Result<std::vector<UniqueFd>> {
    std::vector<UniqueFd> out;
    for (size_t k = 0; k < kTrees; ++k) {
      int p[2];
      if (::pipe2(p, O_CLOEXEC) != 0) return fail(Error::sys("pipe"));
      char b = static_cast<char>('a' + k);
      (void)::write(p[1], &b, 1);
      ::close(p[1]);
      out.emplace_back(p[0]);
    }
    return out;
  };
  auto sb = process::spawn(std::move(s));
  ASSERT_TRUE(sb) << sb.error().str();
  ::kill(sb->pid, SIGKILL);
  ::waitpid(sb->pid, nullptr, 0);

  auto failing = spec_with([](int sync) {
    int t[1];
    ::_exit(process::await_idmapped_trees(sync, t, 1) ? 7 : 0);  // nothing must come
  });
  failing.idmapped_trees = []() -> Result<std::vector<UniqueFd>> {
    return fail(Error::msg("idmap /w", "the filesystem must support idmapped mounts"));
  };
  expect_unwound(std::move(failing), "idmap /w: the filesystem must support idmapped mounts");
}

TEST(Spawn, ExitBeforeReadyAndMissingListenerFail) {
  auto early = spec_with([](int) { ::_exit(1); });
  early.exited_early = "the test child exited before it was set up";
  auto r = process::spawn(std::move(early));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().str(), "setup: the test child exited before it was set up");

  pid_t seen = -1;
  auto nolistener = spec_with([](int sync) {
    if (!wait_in_cgroup(sync)) ::_exit(4);
    char m = process::kMsgReady;
    (void)::send(sync, &m, 1, 0);
    ::pause();
  });
  nolistener.need_seccomp_listener = true;
  nolistener.map_ids = [&seen](pid_t p) -> Result<void> {
    seen = p;
    return {};
  };
  r = process::spawn(std::move(nolistener));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().str(), "setup: the sandbox did not hand over its seccomp listener");
  EXPECT_TRUE(reaped(seen));
}

// The child writes its own copy of what the layer gave it (the landlock
// layer's Plan): spawn refuses to clone it onto the supervisor's memory.
TEST(Spawn, SharedMemoryClonesAreRefusedBeforeAnyChild) {
  for (uint64_t flag : {uint64_t{CLONE_VM}, uint64_t{CLONE_VFORK}, uint64_t{CLONE_VM | CLONE_THREAD}}) {
    bool ran = false;
    auto s = spec_with([](int) { ::_exit(0); });
    s.clone_flags = flag;
    s.map_ids = [&ran](pid_t) -> Result<void> {
      ran = true;
      return {};
    };
    auto r = process::spawn(std::move(s));
    ASSERT_FALSE(r) << flag;
    EXPECT_EQ(r.error().str(), "spawn: the sandbox's first process must not share the supervisor's memory");
    EXPECT_FALSE(ran) << "a child was cloned";
  }
}

TEST(Spawn, FailingIdMapsAndTrustAnchorUnwind) {
  pid_t seen = -1;
  auto s = spec_with([](int) { ::pause(); });
  s.map_ids = [&seen](pid_t p) -> Result<void> {
    seen = p;
    return fail(Error::msg("uid_map", "refused"));
  };
  auto r = process::spawn(std::move(s));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().str(), "uid_map: refused");
  EXPECT_TRUE(reaped(seen));

  auto t = spec_with([](int) { ::pause(); });
  t.map_ids = [&seen](pid_t p) -> Result<void> {
    seen = p;
    return {};
  };
  t.trust_anchor = []() -> Result<std::string> { return std::string(20000, 'x'); };
  r = process::spawn(std::move(t));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().str(), "trust anchor: empty or larger than 16 KiB");
  EXPECT_TRUE(reaped(seen));
}

TEST(Spawn, TheChildGetsTheTrustAnchorAfterGo) {
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  process::SpawnSpec s = fresh_spec();
  const int wr = out[1];
  s.child = [wr](const process::SpawnFds& f) {
    char buf[256];
    ssize_t n = ::recv(f.sync_fd, buf, sizeof buf, 0);
    if (n > 0) (void)::write(wr, buf, static_cast<size_t>(n));
    if (!wait_in_cgroup(f.sync_fd)) ::_exit(4);
    char r = process::kMsgReady;
    (void)::send(f.sync_fd, &r, 1, 0);
    ::_exit(0);
  };
  s.trust_anchor = []() -> Result<std::string> { return std::string("PEM"); };
  auto sb = process::spawn(std::move(s));
  ASSERT_TRUE(sb) << sb.error().str();
  ::close(out[1]);
  char buf[16] = {};
  ASSERT_EQ(::read(out[0], buf, sizeof buf), 4);
  EXPECT_EQ(std::string(buf, 4), std::string(1, process::kMsgGo) + "PEM");
  ::close(out[0]);
  ::waitpid(sb->pid, nullptr, 0);
}


// Transparent egress: the child hands its netns's sockets over, this side
// puts the capture's route and rules in on them, and "in cgroup" comes only
// after that. The child checks both took effect before it says ready: a UDP
// socket to an outside address connects (the route through lo) and its
// datagram is refused (the nftables drop). Needs a user and a network
// namespace of its own (no host privilege).
TEST(Spawn, TransparentCaptureIsInBeforeInCgroup) {
  auto s = spec_with([](int sync) {
    if (!process::bring_loopback_up().empty()) ::_exit(5);
    plan::ProxyPlan p;
    p.transparent = true;
    if (!process::hand_over_transparent_capture(p, sync).empty()) ::_exit(6);
    if (!wait_in_cgroup(sync)) ::_exit(4);
    int u = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in out{};
    out.sin_family = AF_INET;
    out.sin_port = htons(9);
    out.sin_addr.s_addr = htonl(0x0a010203);  // 10.1.2.3, never sent anywhere
    std::string m(1, process::kMsgError);
    if (::connect(u, reinterpret_cast<sockaddr*>(&out), sizeof out) != 0) m += "no route out";
    else if (::send(u, "x", 1, 0) >= 0 || errno != EPERM) m += "datagram not refused";
    else m[0] = process::kMsgReady;
    (void)::send(sync, m.data(), m.size(), 0);
    ::pause();
  });
  s.clone_flags = CLONE_NEWUSER | CLONE_NEWNET;
  s.capture_port = plan::ProxyPlan{}.transparent_port;
  auto sb = process::spawn(std::move(s));
  ASSERT_TRUE(sb) << sb.error().str();
  EXPECT_TRUE(sb->transparent_listener);
  ::kill(sb->pid, SIGKILL);
  EXPECT_EQ(::waitpid(sb->pid, nullptr, 0), sb->pid);
}

// Sockets the spawn did not ask for are a failure, not ignored.
TEST(Spawn, UnexpectedCaptureSocketsFail) {
  pid_t seen = -1;
  auto s = spec_with([](int sync) {
    int fds[3] = {::dup(sync), ::dup(sync), ::dup(sync)};
    (void)send_fds(sync, process::kMsgTransparent, fds, 3);
    ::pause();
  });
  s.map_ids = [&seen](pid_t p) -> Result<void> {
    seen = p;
    return {};
  };
  auto sb = process::spawn(std::move(s));
  ASSERT_FALSE(sb);
  EXPECT_EQ(sb.error().str(), "setup: unexpected transparent egress sockets");
  EXPECT_TRUE(reaped(seen));
}

// Rules that cannot be put in fail the spawn (fail closed): here the child
// hands over sockets the kernel's netlink does not answer on.
TEST(Spawn, CaptureThatCannotBeSetUpFails) {
  pid_t seen = -1;
  auto s = spec_with([](int sync) {
    int fds[3];
    for (int& fd : fds) fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    (void)send_fds(sync, process::kMsgTransparent, fds, 3);
    if (wait_in_cgroup(sync)) ::_exit(7);  // must never come
    ::pause();
  });
  s.capture_port = plan::ProxyPlan{}.transparent_port;
  s.map_ids = [&seen](pid_t p) -> Result<void> {
    seen = p;
    return {};
  };
  auto sb = process::spawn(std::move(s));
  ASSERT_FALSE(sb);
  EXPECT_NE(sb.error().str().find("transparent egress: a default route through lo"), std::string::npos) << sb.error().str();
  EXPECT_NE(sb.error().str().find("fail closed"), std::string::npos);
  EXPECT_TRUE(reaped(seen));
}
