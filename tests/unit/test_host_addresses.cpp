// The host's own addresses followed during a run (issue 39.3): the set's
// bookkeeping from hand-made netlink messages, then the watch on the real
// kernel in a network namespace of the test's own (addresses added and removed
// there, the queue overflowed on purpose).
#include <gtest/gtest.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "egress/host_addresses.hpp"
#include "egress/rules.hpp"
#include "policy/policy.hpp"

using namespace exg::egress;

namespace {

IpAddress ip(std::string_view s) {
  auto a = parse_ip(s);
  EXPECT_TRUE(a.has_value()) << s;
  return a.value_or(IpAddress{});
}

// One RTM_NEWADDR / RTM_DELADDR message as the kernel writes it.
std::string addr_message(uint16_t type, const IpAddress& a, int ifindex, const IpAddress* peer = nullptr) {
  const size_t alen = a.v6 ? 16 : 4;
  std::string attrs;
  auto attr = [&](uint16_t t, const IpAddress& v) {
    rtattr r{};
    r.rta_len = static_cast<unsigned short>(RTA_LENGTH(alen));
    r.rta_type = t;
    std::string one(RTA_SPACE(alen), '\0');
    std::memcpy(one.data(), &r, sizeof r);
    std::memcpy(one.data() + RTA_LENGTH(0), v.bytes, alen);
    attrs += one;
  };
  if (peer) {
    attr(IFA_ADDRESS, *peer);  // point-to-point: IFA_ADDRESS is the other end
    attr(IFA_LOCAL, a);
  } else {
    attr(IFA_ADDRESS, a);
  }
  nlmsghdr h{};
  h.nlmsg_type = type;
  h.nlmsg_len = static_cast<uint32_t>(NLMSG_LENGTH(sizeof(ifaddrmsg)) + attrs.size());
  ifaddrmsg m{};
  m.ifa_family = a.v6 ? AF_INET6 : AF_INET;
  m.ifa_prefixlen = a.v6 ? 128 : 32;
  m.ifa_index = static_cast<uint32_t>(ifindex);
  std::string out(NLMSG_SPACE(sizeof(ifaddrmsg)), '\0');
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + NLMSG_LENGTH(0), &m, sizeof m);
  out += attrs;
  out.resize(NLMSG_ALIGN(out.size()), '\0');
  return out;
}

Rules rules_for(std::vector<std::string> allow, std::vector<std::string> cidrs = {}) {
  exg::policy::Network net;
  for (auto& a : allow) net.allowed_domains.push_back(exg::policy::DomainEntry{a, {}});
  for (auto& c : cidrs) net.allowed_cidrs.push_back(exg::policy::DomainEntry{c, {}});
  auto r = Rules::from_policy(net);
  EXPECT_TRUE(r) << (r ? "" : r.error().str());
  return std::move(*r);
}

}  // namespace

TEST(HostAddresses, FollowsNewAndDeletedAddresses) {
  HostAddresses h({ip("203.0.113.5")});
  const IpAddress gained = ip("198.51.100.77"), v6 = ip("2001:db8::77"), peer = ip("192.0.2.9");
  uint64_t before = h.mark();
  std::string msgs = addr_message(RTM_NEWADDR, gained, 1) + addr_message(RTM_NEWADDR, v6, 2) +
                     addr_message(RTM_NEWADDR, ip("192.0.2.1"), 3, &peer);
  ASSERT_TRUE(h.apply(msgs.data(), msgs.size()));
  EXPECT_TRUE(h.contains(gained));
  EXPECT_TRUE(h.contains(ip("::ffff:198.51.100.77")));  // mapped
  EXPECT_TRUE(h.contains(ip("64:ff9b::c633:644d")));    // NAT64 of 198.51.100.77
  EXPECT_TRUE(h.contains(v6));
  EXPECT_TRUE(h.contains(ip("192.0.2.1")));   // this end of a point-to-point link
  EXPECT_FALSE(h.contains(peer));             // not the other end
  EXPECT_TRUE(h.contains(ip("203.0.113.5")));  // the fixed start
  EXPECT_TRUE(h.gained_since(gained, before));

  // On two interfaces, removed from one: still the host's.
  std::string twice = addr_message(RTM_NEWADDR, gained, 4) + addr_message(RTM_DELADDR, gained, 1);
  ASSERT_TRUE(h.apply(twice.data(), twice.size()));
  EXPECT_TRUE(h.contains(gained));
  uint64_t judged = h.mark();
  std::string gone = addr_message(RTM_DELADDR, gained, 4);
  ASSERT_TRUE(h.apply(gone.data(), gone.size()));
  EXPECT_FALSE(h.contains(gained));
  EXPECT_FALSE(h.gained_since(gained, judged));  // gone, and not gained after `judged`
  // Gained and lost again after a connection was judged: that connection may have reached it.
  judged = h.mark();
  std::string flicker = addr_message(RTM_NEWADDR, gained, 1) + addr_message(RTM_DELADDR, gained, 1);
  ASSERT_TRUE(h.apply(flicker.data(), flicker.size()));
  EXPECT_FALSE(h.contains(gained));
  EXPECT_TRUE(h.gained_since(gained, judged));
  EXPECT_FALSE(h.gained_since(ip("198.51.100.78"), judged));
  EXPECT_FALSE(h.gained_since(gained, h.mark()));

  // A truncated buffer is malformed (the watch re-reads the list then).
  std::string cut = addr_message(RTM_NEWADDR, gained, 1);
  EXPECT_FALSE(h.apply(cut.data(), cut.size() - 8));
}

TEST(HostAddresses, OverflowMakesEverythingJudgedBeforeSuspect) {
  HostAddresses h({ip("203.0.113.5")});
  uint64_t judged = h.mark();
  h.replace_after_overflow(HostAddresses({ip("203.0.113.6")}));
  EXPECT_FALSE(h.contains(ip("203.0.113.5")));
  EXPECT_TRUE(h.contains(ip("203.0.113.6")));
  EXPECT_TRUE(h.gained_since(ip("8.8.8.8"), judged));  // what happened in the gap is unknown
  EXPECT_FALSE(h.gained_since(ip("8.8.8.8"), h.mark()));
  h.blind_after_overflow();  // a re-read failed: everything is refused
  EXPECT_TRUE(h.contains(ip("8.8.8.8")));
  Rules r = rules_for({"example.com"});
  auto set = std::make_shared<HostAddresses>(h);
  r.follow_host_addresses(set);
  Decision d = r.check_address(ip("8.8.8.8"));
  EXPECT_FALSE(d.allowed);
  EXPECT_NE(d.rule.find("could not be re-read"), std::string::npos) << d.rule;
}

TEST(HostAddresses, RulesFollowTheSetAndRecheckAfterConnecting) {
  auto set = std::make_shared<HostAddresses>();
  Rules r = rules_for({"example.com"}, {"198.51.100.128/25"});
  r.follow_host_addresses(set);
  const IpAddress gained = ip("198.51.100.77");
  uint64_t judged = r.host_mark();
  EXPECT_TRUE(r.check_address(gained).allowed);
  std::string add = addr_message(RTM_NEWADDR, gained, 1);
  ASSERT_TRUE(set->apply(add.data(), add.size()));
  Decision d = r.check_address(gained);  // the same Rules object sees the new address
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, "198.51.100.77 is an address of this host");
  EXPECT_EQ(d.reason, "resolved address is an address of this host");
  std::string del = addr_message(RTM_DELADDR, gained, 1);
  ASSERT_TRUE(set->apply(del.data(), del.size()));
  EXPECT_TRUE(r.check_address(gained).allowed);  // removed: allowed again, as before
  // The connection judged before the address came and went is refused after connecting.
  d = r.recheck_host_own(gained, judged);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, "resolved address is an address of this host");
  EXPECT_TRUE(r.recheck_host_own(gained, r.host_mark()).allowed);
  // A CIDR rule that holds an address of the host allows it, then as now.
  const IpAddress in_cidr = ip("198.51.100.200");
  judged = r.host_mark();
  std::string own = addr_message(RTM_NEWADDR, in_cidr, 1);
  ASSERT_TRUE(set->apply(own.data(), own.size()));
  EXPECT_TRUE(r.check_address(in_cidr).allowed);
  EXPECT_TRUE(r.recheck_host_own(in_cidr, judged).allowed);
}

// ---- the real kernel, in a network namespace of this test's own ----

namespace {

// Adds or removes addr/32 (/128) on ifindex through rtnetlink, waiting for the ack.
bool change_address(bool add, const IpAddress& a, int ifindex) {
  int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return false;
  std::string msg = addr_message(add ? RTM_NEWADDR : RTM_DELADDR, a, ifindex);
  // IFA_LOCAL too (the kernel wants it for IPv4).
  auto* h = reinterpret_cast<nlmsghdr*>(msg.data());
  h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | (add ? NLM_F_CREATE | NLM_F_EXCL : 0);
  std::string local(RTA_SPACE(a.v6 ? 16 : 4), '\0');
  rtattr r{};
  r.rta_len = static_cast<unsigned short>(RTA_LENGTH(a.v6 ? 16 : 4));
  r.rta_type = IFA_LOCAL;
  std::memcpy(local.data(), &r, sizeof r);
  std::memcpy(local.data() + RTA_LENGTH(0), a.bytes, a.v6 ? 16 : 4);
  msg += local;
  reinterpret_cast<nlmsghdr*>(msg.data())->nlmsg_len = static_cast<uint32_t>(msg.size());
  sockaddr_nl k{};
  k.nl_family = AF_NETLINK;
  bool ok = ::sendto(fd, msg.data(), msg.size(), 0, reinterpret_cast<sockaddr*>(&k), sizeof k) ==
            static_cast<ssize_t>(msg.size());
  alignas(nlmsghdr) char buf[4096];
  ssize_t n = ok ? ::recv(fd, buf, sizeof buf, 0) : -1;
  ::close(fd);
  if (n < static_cast<ssize_t>(NLMSG_LENGTH(sizeof(nlmsgerr)))) return false;
  auto* ack = reinterpret_cast<nlmsghdr*>(buf);
  return ack->nlmsg_type == NLMSG_ERROR && reinterpret_cast<nlmsgerr*>(NLMSG_DATA(ack))->error == 0;
}

// In the child: a user namespace (when not root) and a network namespace of its own.
int enter_private_netns() {
  uid_t uid = ::geteuid();
  gid_t gid = ::getegid();
  if (uid == 0) return ::unshare(CLONE_NEWNET) == 0 ? 0 : 77;
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) return 77;  // no user namespaces here: skipped
  std::ofstream("/proc/self/setgroups") << "deny";
  std::ofstream("/proc/self/uid_map") << "0 " << uid << " 1";
  std::ofstream("/proc/self/gid_map") << "0 " << gid << " 1";
  return 0;
}

int run_in_child(int (*body)()) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int e = enter_private_netns();
    ::_exit(e ? e : body());
  }
  int st = 0;
  if (pid < 0 || ::waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
  return WEXITSTATUS(st);
}

}  // namespace

// The watch sees an address the namespace gains and loses while it runs; the
// proxy's rules refuse it from then on, and a connection judged before it came
// and went is refused after connecting.
TEST(HostAddressWatch, FollowsTheKernel) {
  int rc = run_in_child(+[]() -> int {
    auto watch = HostAddressWatch::open();
    if (!watch) return 10;
    const int lo = static_cast<int>(if_nametoindex("lo"));
    const IpAddress gained = ip("198.51.100.77"), v6 = ip("2001:db8::77");
    Rules r = rules_for({"gained.test"});
    r.follow_host_addresses((*watch)->addresses());
    if (!r.check_address(gained).allowed) return 11;
    uint64_t judged = r.host_mark();
    if (!change_address(true, gained, lo) || !change_address(true, v6, lo)) return 12;
    (*watch)->sync();
    Decision d = r.check_address(gained);
    if (d.allowed || d.reason != "resolved address is an address of this host") return 13;
    if (r.check_address(v6).allowed) return 14;
    if (!change_address(false, gained, lo)) return 15;
    (*watch)->sync();
    if (!r.check_address(gained).allowed) return 16;        // gone: allowed again
    if (r.recheck_host_own(gained, judged).allowed) return 17;  // but not for what was judged before
    // Gained and lost between one connection's decision and its check: still refused.
    judged = r.host_mark();
    if (!change_address(true, gained, lo) || !change_address(false, gained, lo)) return 18;
    (*watch)->sync();
    if (r.recheck_host_own(gained, judged).allowed) return 19;
    // On the loop: the notification is read as it comes (a ready handler).
    boost::asio::io_context io(1);
    (*watch)->start(io);
    if (!change_address(true, gained, lo)) return 20;
    io.poll();
    if (r.check_address(gained).allowed) return 21;
    (*watch)->stop();
    return 0;
  });
  if (rc == 77) GTEST_SKIP() << "no network namespace of the test's own";
  EXPECT_EQ(rc, 0) << "10: open; 11: allowed before; 12: add; 13-14: not refused after the add; 15-16: remove; "
                      "17-19: recheck; 20-21: the loop";
}

// A queue that overflows (ENOBUFS) is followed by a re-read of the whole list:
// what is the host's then is refused, and every connection judged before the
// overflow is refused at its check (what happened in the gap is unknown).
TEST(HostAddressWatch, OverflowReReadsEverything) {
  int rc = run_in_child(+[]() -> int {
    auto watch = HostAddressWatch::open();
    if (!watch) return 10;
    int small = 1;  // the kernel's minimum
    if (::setsockopt((*watch)->fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small) != 0) return 11;
    Rules r = rules_for({"gained.test"});
    r.follow_host_addresses((*watch)->addresses());
    uint64_t judged = r.host_mark();
    const int lo = static_cast<int>(if_nametoindex("lo"));
    for (int i = 1; i <= 200; ++i)
      if (!change_address(true, ip("198.51.100." + std::to_string(i)), lo)) return 12;
    // The queue cannot have held 200 notifications: this read meets ENOBUFS.
    (*watch)->sync();
    for (int i = 1; i <= 200; ++i)
      if (r.check_address(ip("198.51.100." + std::to_string(i))).allowed) return 13;
    if (r.recheck_host_own(ip("203.0.113.9"), judged).allowed) return 14;  // judged blind
    if (!r.recheck_host_own(ip("203.0.113.9"), r.host_mark()).allowed) return 15;
    return 0;
  });
  if (rc == 77) GTEST_SKIP() << "no network namespace of the test's own";
  EXPECT_EQ(rc, 0) << "10-11: set-up; 12: add; 13: an address missed after the overflow; 14-15: recheck";
}

// No netlink socket, no watch: an error, so that the callers do not start.
// The kernel refuses the socket here as a container engine's seccomp profile
// would (EACCES for AF_NETLINK). Exhausting the descriptors instead misleads the
// sanitizers, which need a descriptor to check memory (their false report exits 1).
TEST(HostAddressWatch, UnopenableIsAnError) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == nullptr) ::_exit(10);
    if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, AF_NETLINK)) != 0 ||
        seccomp_load(ctx) != 0)
      ::_exit(11);
    if (::socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE) >= 0) ::_exit(12);  // the refusal is in place
    auto w = HostAddressWatch::open();
    if (w) ::_exit(20);
    if (w.error().str().find("netlink") == std::string::npos) ::_exit(21);
    ::_exit(0);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "10-12: set-up; 20: opened though netlink is refused; 21: the error does not say netlink";
}
