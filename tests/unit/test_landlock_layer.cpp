// The landlock layer's pure parts: the read rules around denied paths, the
// Plan's translation (what it refuses), and the socket gate's judgement of
// inet destinations on the host's network. The walls themselves are tested on
// the real kernel in tests/integration/test_landlock_layer.sh.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "process/landlock_view.hpp"
#include "sandbox/socket_address_gate.hpp"
#include "walls/seccomp.hpp"

namespace {

using exg::process::landlock_view;
using exg::process::readable_roots;

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

TEST(LandlockView, ReadRulesLeaveOutTheDeniedPathAndItsAncestors) {
  char tmpl[] = "/var/tmp/exg-ll-unit-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string d = tmpl;
  std::filesystem::create_directories(d + "/a");
  std::filesystem::create_directories(d + "/b/secret");
  std::ofstream(d + "/b/other") << "x";
  std::filesystem::create_symlink(d + "/b/secret", d + "/c");
  auto r = readable_roots({d + "/b/secret"}, 100000);
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_FALSE(has(*r, "/"));
  EXPECT_FALSE(has(*r, d));
  EXPECT_FALSE(has(*r, d + "/b"));
  EXPECT_FALSE(has(*r, d + "/b/secret"));
  EXPECT_FALSE(has(*r, d + "/c")) << "a symlink is never granted (its rule would follow it)";
  EXPECT_TRUE(has(*r, d + "/a"));
  EXPECT_TRUE(has(*r, d + "/b/other"));
  EXPECT_TRUE(has(*r, "/usr"));
  std::filesystem::remove_all(d);
}

TEST(LandlockView, NothingDeniedIsTheWholeTree) {
  auto r = readable_roots({}, 10);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, std::vector<std::string>{"/"});
  EXPECT_FALSE(readable_roots({"/"}, 10)) << "denying / itself is refused";
  EXPECT_FALSE(readable_roots({"/usr/lib"}, 3)) << "more rules than allowed: refused, not truncated";
}

exg::plan::Plan plan_with(std::vector<exg::plan::Step> steps) {
  exg::plan::Plan p;
  p.workspace = "/srv/ws";
  p.steps = std::move(steps);
  return p;
}

TEST(LandlockView, RefusesWhatItCannotKeep) {
  using exg::plan::StepKind;
  exg::plan::Step ws{StepKind::BindRw, "/srv/ws", "/srv/ws"};
  exg::plan::Step mask{StepKind::MaskFile, "", "/srv/ws/.env"};
  mask.is_dir = false;
  auto r = landlock_view(plan_with({ws, mask}), "/tmp/x");
  ASSERT_FALSE(r) << "a denied path inside a writable tree";
  EXPECT_NE(r.error().str().find("inside the writable tree /srv/ws"), std::string::npos) << r.error().str();
  auto o = landlock_view(plan_with({{StepKind::Overlay, "/srv/ws", "/srv/ws"}}), "/tmp/x");
  ASSERT_FALSE(o) << "an overlay workspace";
  auto moved = landlock_view(plan_with({{StepKind::BindRw, "/srv/a", "/srv/b"}}), "/tmp/x");
  ASSERT_FALSE(moved) << "a writable bind placed elsewhere";
  auto root = plan_with({ws});
  root.identity.invoked_as_root = true;
  root.identity.synthetic = true;
  ASSERT_FALSE(landlock_view(root, "/tmp/x")) << "root with a root-owned workspace";
  // A denyWrite entry (inside a writable tree, or it would be no step): refused, not left
  // writable; a protected name (the sweep's) is not.
  exg::plan::Step dw{StepKind::ProtectRo, "", "/srv/ws/config/prod.yaml", "denyWrite (--deny-write)"};
  dw.is_dir = false;
  dw.deny_write = true;
  auto w = landlock_view(plan_with({ws, dw}), "/tmp/x");
  ASSERT_FALSE(w) << "a denyWrite path inside a writable tree";
  EXPECT_NE(w.error().str().find("cannot deny writing /srv/ws/config/prod.yaml"), std::string::npos) << w.error().str();
  exg::plan::Step hook{StepKind::ProtectRo, "", "/srv/ws/.git/hooks", "protected name"};
  EXPECT_TRUE(landlock_view(plan_with({ws, hook}), "/tmp/x")) << "a protected name is the sweep's";
}

TEST(LandlockView, WritesOnlyInTheWritableTreesAndTheNetworkIsHandled) {
  using exg::plan::StepKind;
  auto r = landlock_view(plan_with({{StepKind::BindRw, "/srv/ws", "/srv/ws"}, {StepKind::Tmpfs, "", "/tmp"}}), "/tmp/own");
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_EQ(r->rules.read_write, (std::vector<std::string>{"/tmp/own", "/srv/ws"}));
  EXPECT_TRUE(r->rules.handle_reads);
  EXPECT_TRUE(r->rules.handle_net);
  EXPECT_TRUE(r->rules.required);
  EXPECT_FALSE(has(r->rules.write_files, "/dev")) << "not every device node";
  EXPECT_FALSE(has(r->rules.write_files, "/proc"));
}

// The host's /tmp, /var/tmp and /dev/shm hold sibling sandboxes' TMPDIRs and
// workspaces: no rule reaches them as trees, only the sandbox's own paths in them.
TEST(LandlockView, HostTempTreesShowOnlyTheSandboxsOwnPaths) {
  using exg::plan::StepKind;
  char tmpl[] = "/var/tmp/exg-ll-unit-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string d = tmpl;
  std::filesystem::create_directories(d + "/home/.ssh");
  std::filesystem::create_directories(d + "/home/notes");
  std::filesystem::create_directories(d + "/sibling");
  std::ofstream(d + "/tool") << "x";
  exg::plan::Step ssh{StepKind::MaskDir, "", d + "/home/.ssh"};
  auto r = landlock_view(plan_with({{StepKind::BindRw, "/srv/ws", "/srv/ws"},
                                    {StepKind::Overlay, d + "/home", d + "/home"},
                                    ssh,
                                    {StepKind::BindRo, d + "/tool", "/run/exguardian/exguardian"}}),
                         "/tmp/own");
  ASSERT_TRUE(r) << r.error().str();
  const auto& ro = r->rules.read_only;
  for (const char* t : {"/", "/tmp", "/var/tmp", "/dev/shm", "/var", "/dev"}) EXPECT_FALSE(has(ro, t)) << t;
  EXPECT_FALSE(has(ro, d));
  EXPECT_FALSE(has(ro, d + "/sibling")) << "another sandbox's directory";
  EXPECT_FALSE(has(ro, d + "/home")) << "HOME holds a denied path: its entries one by one";
  EXPECT_FALSE(has(ro, d + "/home/.ssh"));
  EXPECT_TRUE(has(ro, d + "/home/notes")) << "HOME, as the process layer shows it";
  EXPECT_TRUE(has(ro, d + "/tool")) << "a read-only bind's source (exguardian itself)";
  EXPECT_TRUE(has(ro, "/usr"));
  EXPECT_TRUE(has(ro, "/var/lib") || !std::filesystem::exists("/var/lib"));
  EXPECT_EQ(r->rules.read_write, (std::vector<std::string>{"/tmp/own", "/srv/ws"}));
  // A workspace that is /tmp itself (or holds /var/tmp) would hold the siblings' directories: refused.
  auto w = landlock_view(plan_with({{StepKind::BindRw, "/tmp", "/tmp"}}), "/tmp/own");
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().str().find("holds the host's /tmp"), std::string::npos) << w.error().str();
  EXPECT_FALSE(landlock_view(plan_with({{StepKind::BindRw, "/var", "/var"}}), "/tmp/own"));
  // HOME at /tmp (no HOME of its own in a container): not shown, said.
  auto h = landlock_view(plan_with({{StepKind::BindRw, "/srv/ws", "/srv/ws"}, {StepKind::Overlay, "/tmp", "/tmp"}}),
                         "/tmp/own");
  ASSERT_TRUE(h) << h.error().str();
  EXPECT_FALSE(has(h->rules.read_only, "/tmp"));
  EXPECT_TRUE(std::any_of(h->cautions.begin(), h->cautions.end(),
                          [](const std::string& c) { return c.starts_with("/tmp is unreadable here"); }));
  // The process layer's minimal /dev: its device nodes, not the host's other entries.
  exg::plan::Step null_dev{StepKind::DevNode, "/dev/null", "/dev/null"};
  auto dev = landlock_view(plan_with({{StepKind::BindRw, "/srv/ws", "/srv/ws"}, {StepKind::Tmpfs, "", "/dev"}, null_dev}),
                           "/tmp/own");
  ASSERT_TRUE(dev) << dev.error().str();
  EXPECT_TRUE(has(dev->rules.read_only, "/dev/null"));
  for (const auto& p : dev->rules.read_only)
    EXPECT_TRUE(p == "/dev/null" || !p.starts_with("/dev")) << p;
  std::filesystem::remove_all(d);
}

sockaddr_storage v4(const char* a, uint16_t port) {
  sockaddr_storage ss{};
  auto* in = reinterpret_cast<sockaddr_in*>(&ss);
  in->sin_family = AF_INET;
  in->sin_port = htons(port);
  ::inet_pton(AF_INET, a, &in->sin_addr);
  return ss;
}
sockaddr_storage v6(const char* a, uint16_t port) {
  sockaddr_storage ss{};
  auto* in = reinterpret_cast<sockaddr_in6*>(&ss);
  in->sin6_family = AF_INET6;
  in->sin6_port = htons(port);
  ::inet_pton(AF_INET6, a, &in->sin6_addr);
  return ss;
}

TEST(SocketGate, HostNetworkLetsOnlyTheProxyOnLoopbackThrough) {
  using exg::sandbox::inet_destination_allowed;
  const std::vector<uint16_t> ports{40000, 40001};
  std::string where;
  EXPECT_TRUE(inet_destination_allowed(v4("127.0.0.1", 40000), sizeof(sockaddr_in), ports, &where));
  EXPECT_TRUE(inet_destination_allowed(v6("::1", 40001), sizeof(sockaddr_in6), ports, &where));
  EXPECT_TRUE(inet_destination_allowed(v6("::ffff:127.0.0.1", 40000), sizeof(sockaddr_in6), ports, &where));
  EXPECT_FALSE(inet_destination_allowed(v4("127.0.0.1", 18080), sizeof(sockaddr_in), ports, &where));
  EXPECT_FALSE(inet_destination_allowed(v4("127.0.0.2", 40000), sizeof(sockaddr_in), ports, &where));
  EXPECT_FALSE(inet_destination_allowed(v4("203.0.113.10", 40000), sizeof(sockaddr_in), ports, &where));
  EXPECT_EQ(where, "203.0.113.10:40000");
  EXPECT_FALSE(inet_destination_allowed(v6("::", 40000), sizeof(sockaddr_in6), ports, &where));
  EXPECT_FALSE(inet_destination_allowed(v4("127.0.0.1", 40000), 4, ports, &where)) << "a short address";
}

// A filter answering every socket() and sendto() with EXDEV: standing in for
// the main filter's refusal through the supervisor.
const std::vector<sock_filter> kBelow = {
    {BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(seccomp_data, nr)},
    {BPF_JMP | BPF_JEQ | BPF_K, 1, 0, __NR_socket},
    {BPF_JMP | BPF_JEQ | BPF_K, 0, 1, __NR_sendto},
    {BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ERRNO | EXDEV},
    {BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW},
};

// How the host-network filter meets the filter below: stacked on it (its own
// program), or as one program with it (walls::with_host_network, what the
// landlock layer installs).
enum class HostFilter { Stacked, StackedRefusingRaw, Merged };

// The errno `call` meets in a child under kBelow and the host-network filter:
// EXDEV when the host-network filter let the call through to the filter below,
// EPERM when it refused it itself (the later filter's answer wins between two errnos).
template <typename Call>
int errno_under_host_filter(HostFilter how, Call call) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(100);
    if (how == HostFilter::Merged) {
      if (exg::walls::install_seccomp_errno(exg::walls::with_host_network(kBelow)) != 0) ::_exit(101);
    } else {
      if (exg::walls::install_seccomp_errno(kBelow) != 0) ::_exit(100);
      if (exg::walls::install_seccomp_errno(exg::walls::host_network_seccomp_program(how == HostFilter::Stacked)) != 0)
        ::_exit(101);
    }
    ::_exit(call() >= 0 ? 0 : errno);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int socket_errno_under_host_filter(HostFilter how, int family, int type) {
  return errno_under_host_filter(how, [&] { return ::socket(family, type, 0); });
}
int socket_errno_under_host_filter(bool raw_to_main_filter, int family, int type) {
  return socket_errno_under_host_filter(raw_to_main_filter ? HostFilter::Stacked : HostFilter::StackedRefusingRaw,
                                        family, type);
}

TEST(HostNetworkFilter, RawAndPacketInetSocketsGoToTheMainFilterOnlyWhenThereIsOne) {
  for (int family : {AF_INET, AF_INET6}) {
    for (int type : {int{SOCK_RAW}, int{SOCK_PACKET}, SOCK_RAW | SOCK_CLOEXEC}) {
      // With the main filter below: left to it (it refuses through the supervisor, which audits).
      EXPECT_EQ(socket_errno_under_host_filter(true, family, type), EXDEV) << family << " " << type;
      // Without it (--unsafe-no-seccomp): refused here.
      EXPECT_EQ(socket_errno_under_host_filter(false, family, type), EPERM) << family << " " << type;
    }
    // UDP stays refused by the host-network filter either way; TCP goes on.
    EXPECT_EQ(socket_errno_under_host_filter(true, family, SOCK_DGRAM), EPERM);
    EXPECT_EQ(socket_errno_under_host_filter(false, family, SOCK_DGRAM), EPERM);
    EXPECT_EQ(socket_errno_under_host_filter(true, family, SOCK_STREAM), EXDEV);
  }
  // Other families are the main filter's.
  EXPECT_EQ(socket_errno_under_host_filter(false, AF_PACKET, SOCK_RAW), EXDEV);
  EXPECT_EQ(socket_errno_under_host_filter(true, AF_UNIX, SOCK_STREAM), EXDEV);
}

// The one program the landlock layer installs answers as the two stacked
// filters did: for each socket() the host-network filter judges, each send
// flag it looks at, and what it leaves alone.
TEST(HostNetworkFilter, AsOneProgramWithTheMainFilterItAnswersAsStacked) {
  for (int family : {AF_INET, AF_INET6, AF_UNIX, AF_PACKET, AF_NETLINK})
    for (int type : {int{SOCK_STREAM}, int{SOCK_DGRAM}, int{SOCK_RAW}, int{SOCK_PACKET}, SOCK_DGRAM | SOCK_NONBLOCK,
                     SOCK_RAW | SOCK_CLOEXEC, int{SOCK_SEQPACKET}})
      EXPECT_EQ(socket_errno_under_host_filter(HostFilter::Merged, family, type),
                socket_errno_under_host_filter(HostFilter::Stacked, family, type))
          << family << " " << type;
  EXPECT_EQ(socket_errno_under_host_filter(HostFilter::Merged, AF_INET, SOCK_DGRAM), EPERM);
  EXPECT_EQ(socket_errno_under_host_filter(HostFilter::Merged, AF_INET6, SOCK_RAW), EXDEV);
  EXPECT_EQ(socket_errno_under_host_filter(HostFilter::Merged, AF_INET, SOCK_STREAM), EXDEV);
  // A TCP connect inside a send: refused by the host-network part (EPERM, not
  // the bad descriptor's EBADF); a plain send goes on to the main part.
  for (HostFilter how : {HostFilter::Merged, HostFilter::Stacked}) {
    EXPECT_EQ(errno_under_host_filter(how, [] { return ::sendto(-1, "x", 1, MSG_FASTOPEN, nullptr, 0); }), EPERM);
    EXPECT_EQ(errno_under_host_filter(how, [] { return ::sendto(-1, "x", 1, 0, nullptr, 0); }), EXDEV);
    EXPECT_EQ(errno_under_host_filter(how, [] {
                msghdr m{};
                return ::sendmsg(-1, &m, MSG_FASTOPEN);
              }), EPERM);
    EXPECT_EQ(errno_under_host_filter(how, [] {
                msghdr m{};
                return ::sendmsg(-1, &m, 0);
              }), EBADF);
    EXPECT_EQ(errno_under_host_filter(how, [] { return ::getppid() > 0 ? 0 : -1; }), 0);
  }
  // The prebuilt one is that program over the prebuilt main filter.
  EXPECT_EQ(exg::walls::prebuilt_seccomp_program_host_network().size(),
            exg::walls::with_host_network(exg::walls::prebuilt_seccomp_program()).size());
  EXPECT_EQ(std::memcmp(exg::walls::prebuilt_seccomp_program_host_network().data(),
                        exg::walls::with_host_network(exg::walls::prebuilt_seccomp_program()).data(),
                        exg::walls::prebuilt_seccomp_program_host_network().size() * sizeof(sock_filter)),
            0);
}

}  // namespace
